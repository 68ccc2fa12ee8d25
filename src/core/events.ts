/**
 * Job and execution events: the types a stream or a webhook carries and their shape. An event's
 * `id` is its number in the stream (pgsched.events.seq, as a string: it may pass 2^53), increasing
 * in the order the changes committed; per execution, in the order they happened.
 */

export const EVENT_TYPES = ['submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed'] as const

export type EventType = (typeof EVENT_TYPES)[number]

/** The type of webhook delivery jobs (built-in handler; events of `pgsched.*` jobs are never sent to webhooks). */
export const WEBHOOK_JOB_TYPE = 'pgsched.webhook'

export interface JobEvent {
  /** The event's number in the stream (SSE `id`, `Last-Event-ID`). */
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
  }
}
