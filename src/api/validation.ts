/**
 * Request validation against the route schemas. Bodies are checked as sent
 * (no type coercion, no defaults); query strings, path parameters and
 * headers arrive as text and are coerced. Unknown properties are rejected,
 * never silently dropped (Fastify's default Ajv setup removes them).
 * `validationDetails` turns Ajv errors into one ErrorDetail per problem,
 * each naming its field; error-handler.ts sends them as a 400.
 */
import { Ajv, type ErrorObject } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'
import { FORMAT_PROBLEMS, intervalProblem, type FormatName } from '../core/formats.ts'
import type { ErrorDetail } from '../errors.ts'
import { misplacedSubmitField } from '../core/job.ts'
import { NO_NUL_PATTERN, textProblem } from '../core/names.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function createAjv(coerce: boolean, shared: readonly object[]): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    // Errors carry their schema, so a message can use its `x-expected` wording.
    verbose: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: coerce,
    removeAdditional: false,
    allowUnionTypes: true,
  })
  ajv.addFormat('uuid', UUID)
  // The formats of core/formats.ts, checked by the functions normalizeSubmit uses.
  for (const [name, problem] of Object.entries(FORMAT_PROBLEMS)) ajv.addFormat(name, (value: string) => problem(value, '') === undefined)
  // Annotations only: how to word the error for a value that fails this schema; response docs.
  ajv.addKeyword({ keyword: 'x-expected', schemaType: 'string' })
  for (const schema of shared) ajv.addSchema(schema)
  return ajv
}

/**
 * A Fastify validator compiler: strict bodies, coerced text parts. `shared`: the schemas routes
 * reference by `$id` (the components of the OpenAPI document).
 */
export function createValidatorCompiler(shared: readonly object[] = []): FastifySchemaCompiler<unknown> {
  const bodies = createAjv(false, shared)
  const texts = createAjv(true, shared)
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return bodies.compile(schema as object)
    const validate = texts.compile(schema as object)
    const numeric = numericProperties(schema)
    if (httpPart === 'headers' || numeric.length === 0) return validate
    // Ajv's coercion reads any text JavaScript takes for a number ("0x10" as 16, "1e2", " 5"): a
    // number in a query string or path is written in decimal digits, or it is refused
    const decimalOnly = (data: unknown): boolean => {
      if (data !== null && typeof data === 'object') {
        const record = data as Record<string, unknown>
        for (const name of numeric) {
          const value = record[name]
          if (typeof value === 'string' && !DECIMAL.test(value)) record[name] = ''
        }
      }
      const valid = validate(data)
      decimalOnly.errors = validate.errors
      return valid
    }
    decimalOnly.errors = null as typeof validate.errors
    return decimalOnly
  }
}

/** A number as a query string or a path may give it. */
const DECIMAL = /^-?\d+(\.\d+)?$/

/** The top-level properties of `schema` that are numbers only (type integer or number). */
function numericProperties(schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | null)?.properties
  if (!properties) return []
  return Object.entries(properties)
    .filter(([, s]) => s.type === 'integer' || s.type === 'number')
    .map(([name]) => name)
}

/** Keywords that rule a union branch out when they fail at the union's own value. */
const SHAPE_KEYWORDS = new Set(['required', 'type', 'const', 'enum'])

/**
 * Keeps the errors worth reporting. For a failed `anyOf` (a union such as
 * `schedule`), the branch the value was evidently meant for — the only one
 * whose shape matches — reports its own errors (`schedule.cron must be a
 * string`); when no single branch fits, the union reports one error.
 */
function selectErrors(errors: readonly ErrorObject[]): ErrorObject[] {
  const unions = errors.filter((e) => e.keyword === 'anyOf')
  const inside = (e: ErrorObject, union: ErrorObject) => e.schemaPath.startsWith(`${union.schemaPath}/`)
  const outer = unions.filter((u) => !unions.some((other) => other !== u && inside(u, other)))
  const kept = errors.filter((e) => !outer.some((u) => e === u || inside(e, u)))
  for (const union of outer) {
    const branches = new Map<string, ErrorObject[]>()
    for (const e of errors) {
      if (!inside(e, union)) continue
      const branch = e.schemaPath.slice(union.schemaPath.length + 1).split('/')[0] ?? ''
      branches.set(branch, [...(branches.get(branch) ?? []), e])
    }
    const branchCount = Array.isArray(union.schema) ? union.schema.length : branches.size
    const viable: ErrorObject[][] = []
    for (let i = 0; i < branchCount; i++) {
      const errs = branches.get(String(i)) ?? []
      if (!errs.some((e) => e.instancePath === union.instancePath && SHAPE_KEYWORDS.has(e.keyword))) viable.push(errs)
    }
    const only = viable.length === 1 ? viable[0] : undefined
    if (only && only.length > 0) kept.push(...selectErrors(only))
    else kept.push(union)
  }
  return kept
}

function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    .join('.')
}

const join = (path: string, name: string) => (path ? `${path}.${name}` : name)

const TYPE_WORDS: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean (true or false)',
  null: 'null',
}

const FORMAT_WORDS: Record<string, string> = {
  uuid: 'a UUID',
  'date-time': 'an ISO-8601 date-time with a time zone',
}

/** What a union (anyOf) accepts, in words: its branches' `x-expected`, or their types. */
function unionWords(branches: unknown): string {
  const list = Array.isArray(branches) ? (branches as Array<Record<string, unknown>>) : []
  const expected = list.map((b) => b['x-expected']).filter((x): x is string => typeof x === 'string')
  // a branch's own words name the others too ("…, or null for no quota")
  if (expected.length > 0) return expected.join(', or ')
  const types = list.map((b) => (typeof b.type === 'string' ? (TYPE_WORDS[b.type] ?? b.type) : 'a value of another shape'))
  return types.length > 0 ? [...new Set(types)].join(' or ') : 'one of the accepted shapes'
}

/** How a request part is named in messages. */
const PART = {
  body: { root: 'request body', unknown: 'field', label: (p: string) => p },
  querystring: { root: 'query string', unknown: 'query parameter', label: (p: string) => p },
  params: { root: 'path', unknown: 'path parameter', label: (p: string) => p },
  headers: { root: 'headers', unknown: 'header', label: (p: string) => `${p} header` },
} as const

/**
 * One detail per problem, naming the field (`priority must be an integer
 * from -1000 to 1000`, `unknown field "colour"`).
 * @param part Fastify's validation context: body, querystring, params or headers.
 */
export function validationDetails(errors: readonly ErrorObject[], part: string): ErrorDetail[] {
  const words = PART[part as keyof typeof PART] ?? PART.body
  const details: ErrorDetail[] = []
  for (const e of selectErrors(errors)) {
    const path = pointerToPath(e.instancePath)
    const label = path ? words.label(path) : words.root
    const expected = (e.parentSchema as Record<string, unknown> | undefined)?.['x-expected']
    const format = (e.parentSchema as Record<string, unknown> | undefined)?.format
    const formatProblem = typeof format === 'string' && Object.hasOwn(FORMAT_PROBLEMS, format) ? FORMAT_PROBLEMS[format as FormatName] : undefined
    const params = e.params as Record<string, unknown>
    let detail: ErrorDetail
    // a string failing the pattern or the format of a core format: worded by its check, as normalizeSubmit words it
    const formatMessage =
      formatProblem &&
      typeof e.data === 'string' &&
      (e.keyword === 'format' || e.keyword === 'pattern' || e.keyword === 'maxLength' || e.keyword === 'minLength')
        ? formatProblem(e.data, label)
        : // a number with a fraction given for a duration (whose type is integer): worded by the same
          // check, which names a fraction of a millisecond (intervals are whole milliseconds)
          format === 'pgsched-duration' && e.keyword === 'type' && typeof e.data === 'number'
          ? intervalProblem(e.data, label)
          : undefined
    if (formatMessage) {
      detail = { path, message: formatMessage }
    } else if (e.keyword === 'pattern' && params.pattern === NO_NUL_PATTERN && typeof e.data === 'string') {
      // the pattern of a text that takes anything but NUL: worded as the checks of a body word it
      detail = { path, message: `${label} ${textProblem(e.data) ?? `must be ${String(expected)}`}` }
    } else if (e.keyword === 'required') {
      const field = join(path, String(params.missingProperty))
      detail = { path: field, message: `${words.label(field)} is required` }
    } else if (e.keyword === 'additionalProperties') {
      const field = join(path, String(params.additionalProperty))
      // a known field in the wrong place says where it belongs (submits only have such fields)
      const misplaced = part === 'body' ? misplacedSubmitField(field) : undefined
      detail = { path: field, message: `unknown ${words.unknown} "${field}"${misplaced ? ` (${misplaced})` : ''}` }
    } else if (typeof expected === 'string' && !(e.keyword === 'type' && params.type === 'string')) {
      detail = { path, message: `${label} must be ${expected}` }
    } else if (e.keyword === 'type') {
      const types = String(params.type).split(',')
      detail = { path, message: `${label} must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(' or ')}` }
    } else if (e.keyword === 'enum') {
      const allowed = (params.allowedValues as unknown[]).map(String)
      detail = { path, message: `${label} must be one of ${allowed.join(', ')}` }
    } else if (e.keyword === 'format') {
      detail = { path, message: `${label} must be ${FORMAT_WORDS[String(params.format)] ?? `in format ${String(params.format)}`}` }
    } else if (e.keyword === 'anyOf') {
      // no branch fits (a value that is not `null` nor what the other branch wants): the branches' own words
      detail = { path, message: `${label} must be ${unionWords(e.schema)}` }
    } else if (e.keyword === 'minProperties') {
      const names = Object.keys(((e.parentSchema as Record<string, unknown> | undefined)?.properties as object | undefined) ?? {})
      const n = Number(params.limit)
      detail = { path, message: `${label} must give at least ${n} of its fields${names.length > 0 ? ` (${names.join(', ')})` : ''}` }
    } else if (e.keyword === 'minimum' || e.keyword === 'maximum') {
      detail = { path, message: `${label} must be at ${e.keyword === 'minimum' ? 'least' : 'most'} ${String(params.limit)}` }
    } else if (e.keyword === 'minLength' || e.keyword === 'maxLength') {
      const n = Number(params.limit)
      detail = { path, message: `${label} must be at ${e.keyword === 'minLength' ? 'least' : 'most'} ${n} character${n === 1 ? '' : 's'} long` }
    } else {
      detail = { path, message: `${label} ${e.message ?? 'is invalid'}` }
    }
    if (!details.some((d) => d.message === detail.message)) details.push(detail)
  }
  return details
}
