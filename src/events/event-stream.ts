/**
 * The event stream as an async iterator (client.events(), and GET /v1/events over it). Opening a
 * stream registers a listener (so the statements that change state start writing events of its
 * tenant), then polls: a sequencer pass (numbers what committed; one process at a time, the others
 * skip) and the next page after the last event it gave. Closing leaves the listener to expire after
 * the retention, so a stream reopened with `after` (the SSE Last-Event-ID) within that window gets
 * every event it missed, once, in order.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import type { EventFilter, JobEvent } from '../core/events.ts'
import { eventLatestSeq, eventPageAfter, eventListenerOpen, eventListenerRenewMany, eventSequence } from '../db/queries/events.ts'

/** How long events are kept, and captured after a stream leaves, unless configured (SCHEDULER_EVENTS_RETENTION_MS). */
export const EVENTS_RETENTION_MS_DEFAULT = 3_600_000
/** How often an idle stream looks for new events: the latency of the stream when nothing else wakes it. */
export const EVENTS_POLL_MS_DEFAULT = 100
/** Events read per page; a busy stream reads page after page without waiting. */
const PAGE_SIZE = 2_000
/** Events numbered per sequencer statement (the pass runs statements until one comes back short). */
const SEQUENCE_BATCH = 10_000

export interface StreamEventsParams extends EventFilter {
  /** Resume after this event id (SSE Last-Event-ID); absent: events from the stream's opening on. */
  after?: string
  /** Ends the iteration (also `return()` / `break`). */
  signal?: AbortSignal
  /** How long events are captured after the stream closes (a reconnect within it misses nothing). */
  retentionMs?: number
  pollIntervalMs?: number
}

/** Numbers every committed event not yet numbered, unless another process is doing it. */
export async function sequenceEvents(db: Kysely<DB>): Promise<number> {
  let total = 0
  for (;;) {
    const n = await eventSequence(db, { limit: SEQUENCE_BATCH })
    total += n
    if (n < SEQUENCE_BATCH) return total
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}

/**
 * Opens a stream of the events of `tenant` (null: every tenant) matching `params`: once this
 * resolves, capture has started, and the iterator yields every matching event from then on (or
 * after `after`), as they happen, until `signal` aborts or the loop breaks.
 */
export async function streamEvents(db: Kysely<DB>, tenant: string | null, params: StreamEventsParams = {}): Promise<AsyncGenerator<JobEvent, void, undefined>> {
  const keepMs = params.retentionMs ?? EVENTS_RETENTION_MS_DEFAULT
  // The latest number before the listener exists: every event captured for this stream is numbered after it.
  const cursor = params.after ?? (await eventLatestSeq(db))
  const listener = await eventListenerOpen(db, { tenant, keepMs })
  return follow(db, tenant, params, cursor, listener, keepMs)
}

async function* follow(
  db: Kysely<DB>,
  tenant: string | null,
  params: StreamEventsParams,
  after: string,
  listener: string,
  keepMs: number,
): AsyncGenerator<JobEvent, void, undefined> {
  const pollMs = params.pollIntervalMs ?? EVENTS_POLL_MS_DEFAULT
  const { signal } = params
  let cursor = after
  const renewEveryMs = Math.min(60_000, Math.max(1_000, Math.floor(keepMs / 4)))
  let renewedAt = Date.now()
  const filter: EventFilter = { jobId: params.jobId, type: params.type, queue: params.queue, events: params.events }
  try {
    while (!signal?.aborted) {
      if (Date.now() - renewedAt >= renewEveryMs) {
        await eventListenerRenewMany(db, { ids: [listener], keepMs })
        renewedAt = Date.now()
      }
      await sequenceEvents(db)
      const page = await eventPageAfter(db, { after: cursor, tenant, filter, limit: PAGE_SIZE })
      for (const event of page.events) {
        cursor = event.id
        yield event
        if (signal?.aborted) return
      }
      // past what did not match too: a rarely matching filter does not rescan the retention each poll
      cursor = page.upTo
      if (page.events.length < PAGE_SIZE) await pause(pollMs, signal)
    }
  } finally {
    // capture goes on for the whole retention from now: a reconnect within it misses nothing
    await eventListenerRenewMany(db, { ids: [listener], keepMs }).catch(() => {})
  }
}
