/**
 * Building blocks shared by the route schemas: ids, instants, nullable
 * values, pagination parameters. `x-expected` is an annotation read by
 * api/validation.ts: it words the error message for a value that fails
 * ("priority must be an integer from -1000 to 1000").
 */
import { Type, type TSchema } from '@fastify/type-provider-typebox'
import { TENANT_PATTERN, TENANT_RULE } from '../../core/names.ts'

/** A UUID (jobs and executions have UUIDv7 ids). */
export function Uuid(description: string) {
  return Type.String({ format: 'uuid', 'x-expected': 'a UUID', description })
}

/** An ISO-8601 instant as the API returns it (UTC, milliseconds). */
export function DateTime(description: string) {
  return Type.String({ format: 'date-time', description })
}

/** An ISO-8601 instant a client sends: `format: date-time` (core/formats.ts; seconds may be left out). */
export function Instant(description: string) {
  return Type.String({ format: 'date-time', description, examples: ['2030-01-31T09:00:00Z'] })
}

/** `T` or null. */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()])
}

/** Path parameters of routes addressing one job or execution. */
export const IdParams = Type.Object({ id: Uuid('Job or execution id') }, { additionalProperties: false })

/** `limit` of paginated lists. */
export const Limit = Type.Integer({
  minimum: 1,
  maximum: 500,
  default: 50,
  'x-expected': 'an integer from 1 to 500',
  description: 'Page size, 1-500 (default 50).',
})

/** `cursor` of paginated lists (opaque). */
export const Cursor = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: '^[A-Za-z0-9_-]+$',
  'x-expected': 'the nextCursor of the previous page',
  description: '`nextCursor` of the previous page; absent for the first page.',
})

/** Query string of paginated history. */
export const PageQuery = Type.Object({ limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }, { additionalProperties: false })

/** An operator's `tenant` filter of a list (`what`: "jobs", "subscriptions"): a name no tenant can have is refused, not a filter matching nothing. */
export function TenantFilter(what: string) {
  return Type.String({
    minLength: 1,
    maxLength: 128,
    pattern: TENANT_PATTERN,
    'x-expected': `a tenant name: ${TENANT_RULE}`,
    description: `Operator keys only: only this tenant's ${what} (a tenant key may name only its own tenant; another is a 403).`,
  })
}
