/**
 * Errors that cross module boundaries. Each carries a stable `code`; the API
 * maps codes to HTTP statuses in one place (api/error-handler.ts), and the CLI
 * prints `message` and exits non-zero.
 */

export type ErrorCode =
  | 'config_invalid'
  | 'validation_failed'
  | 'not_found'
  | 'conflict'
  | 'invalid_state'
  | 'result_too_large'
  | 'unauthorized'
  | 'forbidden'
  | 'quota_exceeded'
  | 'busy'

/** Base class of every error pgsched raises on purpose. */
export class SchedulerError extends Error {
  readonly code: ErrorCode
  readonly details: readonly ErrorDetail[] | undefined

  constructor(code: ErrorCode, message: string, details?: readonly ErrorDetail[]) {
    super(message)
    this.name = new.target.name
    this.code = code
    this.details = details
  }
}

/** One problem with one field of an input. `path` is a JSON pointer-like dotted path. */
export interface ErrorDetail {
  path: string
  message: string
}

/** Bad configuration: the message names every variable or flag that is wrong. */
export class ConfigError extends SchedulerError {
  constructor(message: string, details?: readonly ErrorDetail[]) {
    super('config_invalid', message, details)
  }
}

/** A request (submit, list, …) that cannot be accepted as given. */
export class ValidationError extends SchedulerError {
  constructor(message: string, details?: readonly ErrorDetail[]) {
    super('validation_failed', message, details)
  }
}

export class NotFoundError extends SchedulerError {
  constructor(message: string) {
    super('not_found', message)
  }
}

/** The request conflicts with what exists: the same idempotency key with a different request, a webhook subscribed twice. */
export class ConflictError extends SchedulerError {
  constructor(message: string) {
    super('conflict', message)
  }
}

/**
 * A webhook subscription refused because another of the tenant's already sends to its URL in its
 * queue (every event would be delivered twice): `existingId` is that one, whose event types an
 * update changes. Over REST, 409 with `Location: /v1/webhooks/<existingId>`.
 */
export class WebhookExistsError extends ConflictError {
  readonly existingId: string

  constructor(message: string, existingId: string) {
    super(message)
    this.existingId = existingId
  }
}

/** The caller may not do this (e.g. change a queue's settings without an operator key). */
export class ForbiddenError extends SchedulerError {
  constructor(message: string) {
    super('forbidden', message)
  }
}

/**
 * The admission quotas of a tenant (pgsched.tenants), and `maxStreams`: the event streams and output
 * follows one tenant may hold open on one API process (SCHEDULER_MAX_STREAMS_PER_TENANT).
 */
export type QuotaName = 'maxPending' | 'maxSubmitsPerSecond' | 'maxStreams'

/**
 * A submit refused by one of its tenant's admission quotas; nothing was written. Retry after
 * `retryAfterMs` (the REST API answers 429 with Retry-After).
 */
export class QuotaExceededError extends SchedulerError {
  readonly quota: QuotaName
  readonly limit: number
  readonly retryAfterMs: number

  constructor(message: string, quota: QuotaName, limit: number, retryAfterMs: number) {
    super('quota_exceeded', message)
    this.quota = quota
    this.limit = limit
    this.retryAfterMs = retryAfterMs
  }
}

/** A resource the operation needs is held by another transaction for now; retry (HTTP 503). */
export class BusyError extends SchedulerError {
  constructor(message: string) {
    super('busy', message)
  }
}

/**
 * A write that the database committed without a synchronous standby (its synchronous_standby_names
 * empty: a primary alone, or in pg_auto_failover's wait_primary), refused where acknowledgements
 * must be replicated (requireSyncStandby). It may have been written; retry with the same
 * idempotency key (HTTP 503).
 */
export class UnreplicatedError extends BusyError {}

/** The operation is not allowed in the current state (e.g. pausing a one-time job). */
export class InvalidStateError extends SchedulerError {
  constructor(message: string) {
    super('invalid_state', message)
  }
}

/**
 * Thrown by a handler to fail the execution at once, without retrying.
 * Any other error thrown by a handler is retriable.
 */
export class FatalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'FatalError'
  }
}

/**
 * Whether `err` is a FatalError: of the class, or of a subclass with a name of its own
 * (`class InvalidRecipient extends FatalError`), also when the handler's module loaded another copy
 * of the package (the class is then another object, found by its name in the prototype chain).
 */
export function isFatal(err: Error): boolean {
  if (err instanceof FatalError || err.name === 'FatalError') return true
  for (let p: unknown = Object.getPrototypeOf(err); p !== null && p !== Error.prototype && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    if ((p as { constructor?: { name?: unknown } }).constructor?.name === 'FatalError') return true
  }
  return false
}

/**
 * Normalises anything thrown into an Error: a string is its message; any other value its JSON, or,
 * when it has none (undefined, a symbol, a function, a BigInt, a structure that refers to itself, a
 * `toJSON` that throws), its `String()` form, or its tag (`[object Object]`) when even that throws.
 * Never throws itself: what a handler throws must always become an attempt's error.
 */
export function toError(err: unknown): Error {
  if (err instanceof Error) return err
  return new Error(thrownText(err))
}

/**
 * Most characters of a handler error's message that are kept: stored with the attempt (its `error`
 * and attempt log), logged and served. A longer one (an upstream answer's body put in the message)
 * is cut, saying how much was left out.
 */
export const ERROR_MESSAGE_MAX_CHARS = 16_384

/**
 * What a handler threw (or its promise rejected with), as the Error its attempt fails with: toError's,
 * whose message and name can be read and stored. One whose message or name cannot be read (a getter
 * that throws, a proxy) becomes an Error saying so; a message longer than ERROR_MESSAGE_MAX_CHARS is
 * cut, in an Error of the same name (a FatalError stays fatal) and the same stack frames. Never throws.
 */
export function handlerError(thrown: unknown): Error {
  let err: Error
  let message: string
  let name: string
  let fatal: boolean
  try {
    err = toError(thrown)
    message = thrownText(err.message)
    name = thrownText(err.name)
    fatal = isFatal(err)
  } catch (readErr: unknown) {
    return new Error(`the handler threw an error whose message or name cannot be read: ${thrownText(readErr instanceof Error ? readErr.message : readErr)}`)
  }
  if (message.length <= ERROR_MESSAGE_MAX_CHARS) return err
  const cut = `${message.slice(0, ERROR_MESSAGE_MAX_CHARS)}… (${message.length - ERROR_MESSAGE_MAX_CHARS} more characters cut)`
  const short = fatal ? new FatalError(cut) : new Error(cut)
  short.name = name
  try {
    // V8's stack: the name and message, then the frames
    const stack = String(err.stack)
    const head = `${name}: ${message}`
    if (stack.startsWith(head)) short.stack = `${name}: ${cut}${stack.slice(head.length)}`
  } catch {
    // the new error's own stack
  }
  return short
}

/** The text of a thrown value: a string as it is, else its JSON, else its `String()` form. Never throws. */
export function thrownText(err: unknown): string {
  if (typeof err === 'string') return err
  try {
    const json = JSON.stringify(err)
    if (json !== undefined) return json
  } catch {
    // no JSON form: its String() form below
  }
  try {
    return String(err)
  } catch {
    return Object.prototype.toString.call(err)
  }
}
