/**
 * Job and execution events: the types a stream or a webhook carries and their shape. An event's
 * `id` is `<batch>-<index>`: the number of the batch that holds it (pgsched.event_batches.seq, one
 * batch per statement that changed state; it may pass 2^53, so it stays text) and its place in the
 * batch. Ids increase along the stream, batch by batch in the order the changes committed and in
 * order within a batch; per execution, in the order they happened. A bare `<batch>` (an id given
 * before migration 0024, or where a stream may resume) stands for "after every event of that batch".
 */
import { ValidationError } from '../errors.ts'

export const EVENT_TYPES = ['submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed'] as const

export type EventType = (typeof EVENT_TYPES)[number]

/** The type of webhook delivery jobs (built-in handler; events of `pgsched.*` jobs are never sent to webhooks). */
export const WEBHOOK_JOB_TYPE = 'pgsched.webhook'

/**
 * When a subscription whose deliveries keep failing is disabled (SCHEDULER_WEBHOOK_DISABLE_AFTER_MS
 * and _FAILURES): its delivery attempts failing, none succeeding, for an hour, at least 20 of them.
 * An hour is over twice the retry window of one delivery (27 minutes), so one undeliverable event
 * never disables it, nor a receiver down for a deploy; 20 failed attempts are more than one event's
 * 12, so a subscription that sees an event now and then is not disabled by the failures of one or
 * two. A busy tenant's receiver that stays down is disabled after an hour: its pending deliveries
 * are bounded by an hour of its events rather than growing for as long as the receiver is down.
 */
export const WEBHOOK_DISABLE_DEFAULT = { afterMs: 3_600_000, afterFailures: 20 } as const

/**
 * Most webhook subscriptions one tenant may have (SCHEDULER_WEBHOOK_MAX_PER_TENANT, createClient's
 * webhookMaxPerTenant): each subscription multiplies the tenant's events into delivery jobs, and 100
 * receivers per tenant is far more than an application wires up by hand.
 */
export const WEBHOOK_MAX_PER_TENANT_DEFAULT = 100

export interface JobEvent {
  /** The event's id in the stream, `<batch>-<index>` (SSE `id`, `Last-Event-ID`). */
  id: string
  type: EventType
  /** When the change was written (database clock). */
  at: Date
  tenant: string
  jobId: string
  /** null: a change of the job alone (submitted recurring job, paused, resumed, cancelled with nothing running). */
  executionId: string | null
  queue: string
  /** The job's type (handler name). */
  jobType: string
  /** The execution's attempt after the change (0: not started); null for a change of the job alone. */
  attempt: number | null
  /** Why the attempt ended, on `retrying`, `failed` and `expired` events (null on the others, and on events written before migration 0052). */
  error: EventError | null
}

/** Longest error message an event carries (the execution's error keeps it whole). */
export const EVENT_ERROR_MESSAGE_MAX = 1000

/**
 * The error of a `retrying`, `failed` or `expired` event: the attempt's error (the execution's
 * `error`), its message cut to EVENT_ERROR_MESSAGE_MAX characters so that an event stays small.
 */
export interface EventError {
  message: string
  /** The error's class name (the handler's own, or FatalError, TimeoutError, LeaseExpiredError, StartDeadlineError). */
  name: string
  /** No retry follows it. Absent when false. */
  fatal?: true
  /** The attempt ran out of its timeout. Absent when false. */
  timedOut?: true
}

/**
 * An event's error from what the database stored for it (the jsonb the capture wrote, parsed, or its
 * text), in the key order of EventError; null for none. The stream's SSE text and the client's
 * events are written from it, so both carry the same JSON.
 */
export function eventErrorOf(stored: unknown): EventError | null {
  const o = typeof stored === 'string' ? (JSON.parse(stored) as unknown) : stored
  if (o === null || typeof o !== 'object') return null
  const r = o as Record<string, unknown>
  const e: EventError = { message: typeof r.message === 'string' ? r.message : '', name: typeof r.name === 'string' ? r.name : 'Error' }
  if (r.fatal === true) e.fatal = true
  if (r.timedOut === true) e.timedOut = true
  return e
}

/** What a stream or a webhook selects; every field narrows, none set: everything. */
export interface EventFilter {
  jobId?: string
  /** The job's type. */
  type?: string
  queue?: string
  /** Event types; empty or absent: all. */
  events?: readonly EventType[]
}

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value)
}

/** An event as JSON (the SSE `data:` and a webhook's body). */
export function eventToJson(e: JobEvent): Record<string, unknown> {
  return {
    id: e.id,
    type: e.type,
    at: e.at.toISOString(),
    tenant: e.tenant,
    jobId: e.jobId,
    executionId: e.executionId,
    queue: e.queue,
    jobType: e.jobType,
    attempt: e.attempt,
    error: e.error,
  }
}

/** An event id (`<batch>-<index>`) or a batch number (`<batch>`): what a stream resumes after. */
export const EVENT_ID_PATTERN = '^[0-9]{1,19}(-[0-9]{1,9})?$'

/** Where a stream resumes: after event `index` of batch `batch`, or after the whole batch when index is null. */
export interface EventPosition {
  batch: string
  index: number | null
}

/** Parses an event id or a batch number (EVENT_ID_PATTERN); null when it is neither. */
export function parseEventPosition(id: string): EventPosition | null {
  const m = /^([0-9]{1,19})(?:-([0-9]{1,9}))?$/.exec(id)
  if (!m) return null
  return { batch: m[1] as string, index: m[2] === undefined ? null : Number(m[2]) }
}

/** Orders event ids (or batch numbers, which come after every event of their batch) as the stream does: negative when `a` comes first. */
export function compareEventIds(a: string, b: string): number {
  const [x, y] = [parseEventPosition(a), parseEventPosition(b)]
  if (!x || !y) throw new ValidationError(`not an event id: ${JSON.stringify(x ? b : a)} (ids look like 42-0: <batch>-<index>)`)
  const [bx, by] = [BigInt(x.batch), BigInt(y.batch)]
  if (bx !== by) return bx < by ? -1 : 1
  return (x.index ?? Number.MAX_SAFE_INTEGER) - (y.index ?? Number.MAX_SAFE_INTEGER)
}
