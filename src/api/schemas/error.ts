/**
 * The one error body of the API, used by every route and by the error
 * handler: `{statusCode, error, message, details?}`. `error` is the HTTP
 * reason phrase; `details` names each bad field of a rejected request.
 */
import { Type, type Static } from '@fastify/type-provider-typebox'

export const ErrorDetailSchema = Type.Object({
  path: Type.String({ description: 'The field, dotted (`schedule.cron`); empty for the request as a whole.' }),
  message: Type.String(),
})

export const ErrorSchema = Type.Object(
  {
    statusCode: Type.Integer({ description: 'The HTTP status, repeated.' }),
    error: Type.String({ description: 'HTTP reason phrase, such as `Bad Request`.' }),
    message: Type.String({ description: 'What is wrong, naming the field or value.' }),
    details: Type.Optional(Type.Array(ErrorDetailSchema, { description: 'One entry per problem (validation errors).' })),
  },
  { $id: 'Error', description: 'An error.' },
)

export type ErrorBody = Static<typeof ErrorSchema>

/** Reference to the shared `Error` schema (registered by app.ts, a component in the OpenAPI document). */
export const ErrorRef = Type.Unsafe<ErrorBody>(Type.Ref('Error'))

/** Error responses every authenticated route can return. */
export const CommonErrors = {
  400: ErrorRef,
  401: ErrorRef,
  404: ErrorRef,
  503: ErrorRef,
}
