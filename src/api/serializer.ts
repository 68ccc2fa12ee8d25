/**
 * Response serializers: fast-json-stringify, as Fastify's own, except that each nullable value
 * (schemas/common.ts Nullable: `anyOf: [T, {type: 'null'}]`) is compiled as T with `nullable: true`.
 *
 * fast-json-stringify writes an `anyOf` by validating the value against each branch with Ajv, at
 * every response: a date-time pattern for each nullable timestamp, the whole object for a nullable
 * nested one (a job's last execution). For `nullable: true` it writes `null` or T, with no
 * validation. The route schemas themselves, and so the OpenAPI document (3.1, where `nullable` is
 * not a keyword), keep the `anyOf`.
 */
import fastJsonStringify from 'fast-json-stringify'

type Schema = Record<string, unknown>

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `{type: 'null'}` and nothing else. */
const isNullType = (v: unknown): boolean => isObject(v) && v.type === 'null' && Object.keys(v).length === 1

/**
 * `schema` with every `anyOf: [T, {type: 'null'}]` (either order; T not itself a combinator)
 * replaced by T with `nullable: true` and the anyOf's other keywords (annotations). Objects already
 * rewritten are shared through `seen`, so a schema used in many places is rewritten once.
 */
export function nullableForSerializer(schema: unknown, seen = new Map<object, unknown>()): unknown {
  if (Array.isArray(schema)) return schema.map((s) => nullableForSerializer(s, seen))
  if (!isObject(schema)) return schema
  const done = seen.get(schema)
  if (done !== undefined) return done
  const anyOf = schema.anyOf
  if (Array.isArray(anyOf) && anyOf.length === 2 && anyOf.some(isNullType) && !anyOf.every(isNullType)) {
    const { anyOf: _, ...siblings } = schema
    const other = anyOf.find((s) => !isNullType(s))
    // fast-json-stringify reads a combinator before `nullable`: a union or null stays a union
    const combinator = isObject(other) && ['anyOf', 'oneOf', 'allOf', 'if'].some((k) => k in other)
    if (isObject(other) && !combinator) {
      const out = { ...(nullableForSerializer(other, seen) as Schema), ...siblings, nullable: true }
      seen.set(schema, out)
      return out
    }
  }
  const out: Schema = {}
  seen.set(schema, out)
  for (const [k, v] of Object.entries(schema)) out[k] = nullableForSerializer(v, seen)
  return out
}

/**
 * Fastify's `schemaController.compilersFactory.buildSerializer`: given the shared schemas (by $id),
 * a compiler of one route's response schema.
 */
export function buildNullableSerializer(externalSchemas?: unknown, serializerOpts?: fastJsonStringify.Options) {
  const seen = new Map<object, unknown>()
  const shared = nullableForSerializer(externalSchemas ?? {}, seen) as Record<string, unknown>
  return ({ schema }: { schema?: unknown }): ((data: unknown) => string) => {
    const own = nullableForSerializer(schema, seen) as Schema
    // a route schema that is itself a shared one is not given twice (as Fastify's compiler does)
    const id = typeof own.$id === 'string' ? own.$id : undefined
    const others = id !== undefined && id in shared ? Object.fromEntries(Object.entries(shared).filter(([k]) => k !== id)) : shared
    return fastJsonStringify(own, { ...serializerOpts, schema: others as fastJsonStringify.Options['schema'] })
  }
}
