/**
 * The one error body of the API, used by every route and by the error
 * handler: `{statusCode, error, message, details?}`. `error` is the HTTP
 * reason phrase; `details` names each bad field of a rejected request.
 */
import { Type, type Static, type TSchema } from '@fastify/type-provider-typebox'

export const ErrorDetailSchema = Type.Object(
  {
    path: Type.String({ description: 'The field, dotted (`schedule.cron`); empty for the request as a whole.' }),
    message: Type.String(),
  },
  { $id: 'ErrorDetail', description: 'One problem of a rejected request.' },
)

export const ErrorSchema = Type.Object(
  {
    statusCode: Type.Integer({ minimum: 400, maximum: 599, description: 'The HTTP status, repeated.' }),
    error: Type.String({ description: 'HTTP reason phrase, such as `Bad Request`.' }),
    message: Type.String({ description: 'What is wrong, naming the field or value.' }),
    details: Type.Optional(
      Type.Array(Type.Unsafe<Static<typeof ErrorDetailSchema>>(Type.Ref('ErrorDetail')), { description: 'One entry per problem (validation errors).' }),
    ),
  },
  { $id: 'Error', description: 'An error.' },
)

export type ErrorBody = Static<typeof ErrorSchema>

/** Reference to the shared `Error` schema (registered by app.ts, a component in the OpenAPI document). */
export const ErrorRef = Type.Unsafe<ErrorBody>(Type.Ref('Error'))

/** A header of a response, for the OpenAPI document. */
export interface HeaderDoc {
  type: 'string' | 'integer'
  description: string
  format?: string
}

/** `X-Request-Id`: sent with every response. */
export const REQUEST_ID_HEADER: Record<string, HeaderDoc> = {
  'X-Request-Id': {
    type: 'string',
    description: "The request's id, in every log line of the request: the client's own X-Request-Id when it is 1-128 of A-Z a-z 0-9 . _ : -, else a new UUID.",
  },
}

/**
 * A documented response: `schema` (a component reference or an inline schema), its description
 * (the OpenAPI response description, instead of "Default Response") and its headers. Fastify
 * serializes with `schema` and ignores the annotations.
 */
export function documented<T extends TSchema>(schema: T, description: string, headers: Record<string, HeaderDoc> = {}): T {
  return { ...schema, description, headers: { ...REQUEST_ID_HEADER, ...headers } }
}

export const retryAfter = (description: string): Record<string, HeaderDoc> => ({ 'Retry-After': { type: 'integer', description } })

/** The documented error responses, by status. */
export const ErrorResponses = {
  400: documented(ErrorRef, 'The request is invalid: `details` names each bad field.'),
  401: documented(ErrorRef, 'No API key, or an unknown or revoked one.', {
    'WWW-Authenticate': { type: 'string', description: 'Always `Bearer realm="pgsched"`.' },
  }),
  403: documented(ErrorRef, 'The API key may not do this (the queue and tenant routes need an operator key).'),
  404: documented(ErrorRef, "No such resource for this tenant (other tenants' resources answer 404 too)."),
  409: documented(ErrorRef, 'The request conflicts with the state of the resource.'),
  413: documented(
    ErrorRef,
    'The request body is larger than the limit (1 MiB and 64 KiB by default: room for a payload at its 1 MiB limit); refused before it is read, without 100 Continue.',
  ),
  415: documented(ErrorRef, 'The body is not `application/json`, or has a Content-Encoding other than identity.'),
  429: documented(ErrorRef, "Over one of the tenant's admission quotas; nothing was written.", retryAfter('Seconds until a retry can pass the quota.')),
  503: documented(
    ErrorRef,
    'The database is unreachable, read-only or busy; retry.',
    retryAfter('Seconds to wait before retrying (1 when busy, 5 otherwise).'),
  ),
}

/** The 429 of a long-lived response (an event stream, an output follow). */
export const StreamLimitResponse = documented(
  ErrorRef,
  'The tenant already holds as many event streams and output follows open on this API process as SCHEDULER_MAX_STREAMS_PER_TENANT allows (default 20; operator keys are not counted).',
  retryAfter('Seconds until a retry may find a stream ended.'),
)

/** Error responses every authenticated route can return. Routes that address a resource add 404. */
export const CommonErrors = {
  400: ErrorResponses[400],
  401: ErrorResponses[401],
  503: ErrorResponses[503],
}
