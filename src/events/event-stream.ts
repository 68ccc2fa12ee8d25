/**
 * The event stream as an async iterator: of events (client.events()), or of pages of Server-Sent
 * Events text (GET /v1/events). Opening a
 * stream registers a listener (so the statements that change state start writing events of its
 * tenant), then polls: a sequencer pass (numbers what committed; one process at a time, the others
 * skip) and the next page after the last event it gave. Closing leaves the listener to expire after
 * the retention, so a stream reopened with `after` (the SSE Last-Event-ID) within that window gets
 * every event it missed, once, in order.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { ValidationError } from '../errors.ts'
import { EVENT_TYPES, isEventType, type EventFilter, type JobEvent } from '../core/events.ts'
import { QUEUE_RULE, TYPE_RULE, isQueueName, isTypeName } from '../core/names.ts'
import { assertUuid } from '../paging.ts'
import {
  eventLatestSeq,
  eventSeqGiven,
  eventPositionOf,
  eventMessagePageAfter,
  eventPageAfter,
  eventListenerOpen,
  eventListenerRenewMany,
  eventSequence,
} from '../db/queries/events.ts'

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

/** One page as a stream reads it: what it yields, how many events, and where to go on from. */
interface FollowedPage<P> {
  page: P
  count: number
  upTo: string
  /** Batches after upTo were there already: no wait before the next page. */
  more: boolean
}

/** Reads one page after a position (the filter and tenant bound in). */
type PageReader<P> = (after: string) => Promise<FollowedPage<P>>

/**
 * Opens a stream of the events of `tenant` (null: every tenant) matching `params`: once this
 * resolves, capture has started, and the iterator yields every matching event from then on (or
 * after `after`), as they happen, until `signal` aborts or the loop breaks.
 */
export async function streamEvents(db: Kysely<DB>, tenant: string | null, params: StreamEventsParams = {}): Promise<AsyncGenerator<JobEvent, void, undefined>> {
  const pages = await openPages(db, tenant, params, async (after) => {
    const p = await eventPageAfter(db, { after, tenant, filter: filterOf(params), limit: PAGE_SIZE })
    return { page: p.events, count: p.events.length, upTo: p.upTo, more: p.more }
  })
  return (async function* () {
    for await (const page of pages) yield* page
  })()
}

/**
 * The same stream as Server-Sent Events text, page by page (GET /v1/events): each page is the
 * `id:`/`data:` messages of its events in texts of about 32 kB (eventMessagePageAfter), written
 * straight from the batches' arrays (no event object).
 */
export async function streamEventMessages(
  db: Kysely<DB>,
  tenant: string | null,
  params: StreamEventsParams = {},
): Promise<AsyncGenerator<string[], void, undefined>> {
  return openPages(db, tenant, params, async (after) => {
    const p = await eventMessagePageAfter(db, { after, tenant, filter: filterOf(params), limit: PAGE_SIZE })
    return { page: p.chunks, count: p.count, upTo: p.upTo, more: p.more }
  })
}

/**
 * Refuses a filter no event can match, as GET /v1/events does (400): a job id that is not a UUID, a
 * job type or queue no job can have, an event type that does not exist. A stream opened with one
 * would wait for ever for nothing.
 */
function assertEventFilter(f: EventFilter): void {
  if (f.jobId !== undefined) assertUuid(f.jobId, 'jobId')
  const bad = (path: string, message: string) => {
    throw new ValidationError(message, [{ path, message }])
  }
  if (f.type !== undefined && !isTypeName(f.type)) bad('type', `type must be a job type: ${TYPE_RULE}, got ${JSON.stringify(f.type)}`)
  if (f.queue !== undefined && !isQueueName(f.queue)) bad('queue', `queue must be a queue name: ${QUEUE_RULE}, got ${JSON.stringify(f.queue)}`)
  if (f.events !== undefined) {
    if (!Array.isArray(f.events)) bad('events', `events must be an array of event types (${EVENT_TYPES.join(', ')})`)
    f.events.forEach((e, i) => {
      if (!isEventType(e)) bad(`events.${i}`, `events.${i} must be one of ${EVENT_TYPES.join(', ')}, got ${JSON.stringify(e)}`)
    })
  }
}

function filterOf(params: StreamEventsParams): EventFilter {
  return { jobId: params.jobId, type: params.type, queue: params.queue, events: params.events }
}

async function openPages<P>(
  db: Kysely<DB>,
  tenant: string | null,
  params: StreamEventsParams,
  read: PageReader<P>,
): Promise<AsyncGenerator<P, void, undefined>> {
  assertEventFilter(params)
  const keepMs = params.retentionMs ?? EVENTS_RETENTION_MS_DEFAULT
  // a position no page can read is refused before the stream opens: GET /v1/events answers 400 rather
  // than ending the stream after `: open`, which an EventSource client would reopen for ever
  // The latest number before the listener exists: every event captured for this stream is numbered after it.
  // What committed before the opening is numbered first (capture may already be on, for another
  // stream or a webhook): a stream without a position starts after it, not with it.
  if (params.after === undefined) await sequenceEvents(db)
  const latest = await eventLatestSeq(db)
  if (params.after !== undefined) {
    // ... and one after the newest batch the stream has numbered, kept or pruned, which no page would
    // ever pass (an id from before a restore of the database, or from another one), the same; one
    // whose batches the retention pruned since (a reconnect after a quiet spell) resumes
    const at = eventPositionOf(params.after)
    const given = await eventSeqGiven(db)
    if (BigInt(at.batch) > BigInt(given)) {
      throw new ValidationError(`after: event ${params.after} comes after the newest event (batch ${given}); it is not an id of this database's stream`)
    }
  }
  const cursor = params.after ?? latest
  const listener = await eventListenerOpen(db, { tenant, keepMs })
  return follow(db, params, cursor, listener, keepMs, read)
}

async function* follow<P>(
  db: Kysely<DB>,
  params: StreamEventsParams,
  after: string,
  listener: string,
  keepMs: number,
  read: PageReader<P>,
): AsyncGenerator<P, void, undefined> {
  const pollMs = params.pollIntervalMs ?? EVENTS_POLL_MS_DEFAULT
  const { signal } = params
  let cursor = after
  const renewEveryMs = Math.min(60_000, Math.max(1_000, Math.floor(keepMs / 4)))
  let renewedAt = Date.now()
  try {
    while (!signal?.aborted) {
      if (Date.now() - renewedAt >= renewEveryMs) {
        await eventListenerRenewMany(db, { ids: [listener], keepMs })
        renewedAt = Date.now()
      }
      await sequenceEvents(db)
      const page = await read(cursor)
      if (page.count > 0) {
        yield page.page
        if (signal?.aborted) return
      }
      // past what did not match too: a rarely matching filter does not rescan the retention each poll
      cursor = page.upTo
      if (page.count < PAGE_SIZE && !page.more) await pause(pollMs, signal)
    }
  } finally {
    // capture goes on for the whole retention from now: a reconnect within it misses nothing
    await eventListenerRenewMany(db, { ids: [listener], keepMs }).catch(() => {})
  }
}
