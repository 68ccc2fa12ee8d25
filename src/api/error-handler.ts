/**
 * The only place that turns errors into HTTP replies. Every error body has
 * one shape, `{statusCode, error, message, details?}` (schemas/error.ts):
 *   SchedulerError          → its code's status (validation_failed 400, not_found 404, quota_exceeded 429 with Retry-After,
 *                             conflict 409, with Location for a webhook subscribed twice, …)
 *   schema validation       → 400, one detail per bad field
 *   Fastify request errors  → their 4xx (415 content type, 413 body size, bad URL, …)
 *   no route                → 405 with Allow when the path has routes for other methods, else 404
 *   database unreachable    → 503, so a client retries (also BusyError, with Retry-After)
 *   database read-only      → 503 (a standby, or a failover in progress)
 *   (both logged once per outage, by OutageLog, not per request)
 *   anything else           → 500 with a generic message, logged with the request id
 * Bad input never reaches the last case: it is rejected by a schema or by
 * normalizeSubmit first, and database data errors still map to a 4xx.
 */
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { BusyError, QuotaExceededError, SchedulerError, UnreplicatedError, WebhookExistsError, type ErrorCode, type ErrorDetail } from '../errors.ts'
import type { ErrorObject } from 'ajv'
import type { ErrorBody } from './schemas/error.ts'
import { isDatabaseUnreachable, isSchemaMissing, READ_ONLY_CODE, SCHEMA_MISSING_MESSAGE } from '../db/outage.ts'
import type { RouteMethods } from './http-conventions.ts'
import type { OutageLog } from './outage.ts'
import { validationDetails } from './validation.ts'

const STATUS_OF_CODE: Record<ErrorCode, number> = {
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  invalid_state: 409,
  result_too_large: 413,
  quota_exceeded: 429,
  busy: 503,
  config_invalid: 500,
}

/** Why a read-only database answers 503 (also /readyz's reason). */
export const READ_ONLY_MESSAGE = 'the database is read-only (a standby, or a failover in progress); retry later'

/** The error body for `statusCode`. */
export function errorBody(statusCode: number, message: string, details?: readonly ErrorDetail[]): ErrorBody {
  const body: ErrorBody = { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message }
  if (details && details.length > 0) body.details = details.map((d) => ({ path: d.path, message: d.message }))
  return body
}

/** Sends an error body (for routes that answer an error without throwing, such as /readyz). */
export function sendError(reply: FastifyReply, statusCode: number, message: string, details?: readonly ErrorDetail[]): FastifyReply {
  return reply
    .code(statusCode)
    .type('application/json; charset=utf-8')
    .send(errorBody(statusCode, message, details))
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/** A PostgreSQL error caused by the data sent (class 22 data exception, 23 integrity violation). */
function isDatabaseDataError(err: Error): boolean {
  const code = codeOf(err)
  return code !== undefined && /^2[23][0-9A-Z]{3}$/.test(code) && 'severity' in err
}

interface ErrorReply {
  body: ErrorBody
  /** Unexpected: log it with its stack. */
  unexpected: boolean
  /** The database is unreachable or read-only: an outage, logged once (OutageLog), not per request. */
  outage?: boolean
  /** A submit refused for want of a synchronous standby (UnreplicatedError): logged once too. */
  refusal?: boolean
}

/** Maps anything thrown while handling `request` to the reply. */
export function errorReply(err: unknown, request: FastifyRequest, bodyLimitBytes: number): ErrorReply {
  if (err instanceof SchedulerError) {
    // submits refused for want of a synchronous standby: logged once, as the outages are, not per request
    const refusal = err instanceof UnreplicatedError
    return { body: errorBody(STATUS_OF_CODE[err.code], err.message, err.details), unexpected: err.code === 'config_invalid', refusal }
  }
  if (!(err instanceof Error)) return { body: errorBody(500, 'internal server error'), unexpected: true }
  const fe = err as FastifyError
  if (Array.isArray(fe.validation)) {
    const details = validationDetails(fe.validation as unknown as ErrorObject[], fe.validationContext ?? 'body')
    const message = details.map((d) => d.message).join('; ') || 'request is invalid'
    return { body: errorBody(400, message, details), unexpected: false }
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': {
      const type = request.headers['content-type']
      const message = type ? `Content-Type "${type}" is not supported; send application/json` : 'a request body needs Content-Type: application/json'
      return { body: errorBody(415, message), unexpected: false }
    }
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { body: errorBody(413, `request body is larger than the limit of ${bodyLimitBytes} bytes`), unexpected: false }
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { body: errorBody(400, 'request body is not valid JSON'), unexpected: false }
    case 'FST_ERR_BAD_URL':
      return { body: errorBody(400, `URL is malformed: ${request.url}`), unexpected: false }
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { body: errorBody(fe.statusCode, fe.message), unexpected: false }
  }
  if (isDatabaseUnreachable(err)) {
    return { body: errorBody(503, 'the database is not reachable; retry later'), unexpected: false, outage: true }
  }
  if (codeOf(err) === READ_ONLY_CODE) return { body: errorBody(503, READ_ONLY_MESSAGE), unexpected: false, outage: true }
  // an unmigrated (or older) database: what to do about it, once in the log as an outage is
  if (isSchemaMissing(err)) return { body: errorBody(503, SCHEMA_MISSING_MESSAGE), unexpected: false, outage: true }
  if (isDatabaseDataError(err)) {
    const status = codeOf(err) === '23505' ? 409 : 400
    return { body: errorBody(status, `the database rejected a value: ${err.message}`), unexpected: false }
  }
  return { body: errorBody(500, 'internal server error'), unexpected: true }
}

/**
 * Installs the error handler, the not-found handler and (through
 * `frameworkErrorHandler`, passed to Fastify's `frameworkErrors` option) the
 * handler for requests Fastify rejects before routing.
 */
export function registerErrorHandling(
  app: FastifyInstance,
  options: { bodyLimitBytes: number; outages: OutageLog; refusals?: OutageLog; routeMethods?: RouteMethods },
): void {
  app.setErrorHandler((err, request, reply) => {
    const { body, unexpected, outage, refusal } = errorReply(err, request, options.bodyLimitBytes)
    if (unexpected) request.log.error({ err }, 'request failed')
    if (outage) options.outages.failed(body.message, err)
    if (refusal) options.refusals?.failed(body.message, err)
    if (body.statusCode === 401) reply.header('www-authenticate', 'Bearer realm="pgsched"')
    if (body.statusCode === 503) reply.header('retry-after', err instanceof BusyError ? '1' : '5')
    if (err instanceof QuotaExceededError) reply.header('retry-after', String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))))
    if (err instanceof WebhookExistsError) reply.header('location', `/v1/webhooks/${err.existingId}`)
    return reply.code(body.statusCode).type('application/json; charset=utf-8').send(body)
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? request.url
    const allowed = options.routeMethods?.(path) ?? []
    // a route of this method that found nothing (a file the dashboard's /ui/* does not have) is a 404
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('allow', allowed.join(', '))
      return sendError(reply, 405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`)
    }
    return sendError(reply, 404, `no route ${request.method} ${path}`)
  })
}

/** For Fastify's `frameworkErrors` option: errors raised before a route runs (bad URL, …). */
export function frameworkErrorHandler(bodyLimitBytes: number) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const { body } = errorReply(err, request, bodyLimitBytes)
    void reply.code(body.statusCode).type('application/json; charset=utf-8').send(body)
  }
}
