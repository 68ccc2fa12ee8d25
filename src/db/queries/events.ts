/**
 * Reading and keeping events (migration 0022): listeners (who makes the writers capture), the
 * sequencer (numbers committed events, one process at a time), pages of a stream, and pruning.
 * The writes themselves are in event-capture.ts, spliced into the statements that change state.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import type { EventFilter, EventType, JobEvent } from '../../core/events.ts'

/** Advisory lock key (per database) held by the one sequencer pass at a time. */
const SEQUENCER_LOCK_KEY = 7_411_730_296_012_556_022n

export interface EventListenerOpenParams {
  /** null: every tenant (an operator's stream). */
  tenant: string | null
  /** Capture lasts this long unless renewed (the event retention). */
  keepMs: number
}

/**
 * Registers a stream as a listener (capture starts when this commits); returns its id. The streams
 * of one tenant (or of every tenant) share one row, renewed to the later end, so the table every
 * state change checks stays as small as the number of tenants listened to.
 */
export async function eventListenerOpen(db: Kysely<DB>, params: EventListenerOpenParams): Promise<string> {
  const { rows } = await sql<{ id: string }>`
    insert into pgsched.event_listeners (tenant, kind, until)
    values (${params.tenant}::text, 'stream', now() + ${params.keepMs}::bigint * interval '1 millisecond')
    on conflict (coalesce(tenant, ''), kind) where kind = 'stream'
    do update set until = greatest(pgsched.event_listeners.until, excluded.until)
    returning id`.execute(db)
  return (rows[0] as { id: string }).id
}

/** Keeps streams' capture going for another `keepMs` (while they are connected). */
export async function eventListenerRenewMany(db: Kysely<DB>, params: { ids: readonly string[]; keepMs: number }): Promise<void> {
  if (params.ids.length === 0) return
  await sql`
    update pgsched.event_listeners
       set until = greatest(until, now() + ${params.keepMs}::bigint * interval '1 millisecond')
     where id = any(${params.ids}::uuid[]) and kind = 'stream'`.execute(db)
}

/**
 * One sequencer pass: numbers up to `limit` committed unnumbered events, in insertion order, unless
 * another pass holds the sequencer lock. Returns how many it numbered (0 also when the lock was taken).
 */
export async function eventSequence(db: Kysely<DB>, params: { limit: number }): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    with turn as (
      select pg_try_advisory_xact_lock(${SEQUENCER_LOCK_KEY.toString()}::bigint) as mine
    ),
    numbered as (
      -- nextval in the order of the ordered subquery: numbers follow insertion order
      select p.id, nextval('pgsched.event_seq') as seq
        from (select id from pgsched.events
               where seq is null and (select mine from turn)
               order by id
               limit ${params.limit}::int) p
    ),
    done as (
      update pgsched.events e set seq = n.seq from numbered n
       where e.id = n.id
         and e.seq is null   -- rechecked on the latest row: a pass that took the lock after ours committed skips our rows
      returning 1
    )
    select count(*)::int as n from done`.execute(db)
  return rows[0]?.n ?? 0
}

/** The number of the latest event (0 when none): a stream without Last-Event-ID starts after it. */
export async function eventLatestSeq(db: Kysely<DB>): Promise<string> {
  const { rows } = await sql<{ seq: string }>`
    select coalesce(max(seq), 0)::text as seq from pgsched.events where seq is not null`.execute(db)
  return rows[0]?.seq ?? '0'
}

export interface EventListAfterParams {
  /** Events numbered after this one. */
  after: string
  /** Only this tenant's (null: every tenant's). */
  tenant: string | null
  filter: EventFilter
  limit: number
}

/** An event row as the queries here and in webhooks.ts select it (seq as text). */
export interface EventRow {
  seq: string
  at: Date
  type: EventType
  tenant: string
  job_id: string
  execution_id: string | null
  queue: string
  job_type: string
  attempt: number | null
}

/** The columns of an EventRow, from pgsched.events aliased `e`. */
export const EVENT_COLUMNS = sql`e.seq::text as seq, e.at, e.type, e.tenant, e.job_id, e.execution_id, e.queue, e.job_type, e.attempt`

export function toEvent(r: EventRow): JobEvent {
  return {
    id: r.seq,
    type: r.type,
    at: r.at,
    tenant: r.tenant,
    jobId: r.job_id,
    executionId: r.execution_id,
    queue: r.queue,
    jobType: r.job_type,
    attempt: r.attempt,
  }
}

export interface EventPage {
  /** Matching events, in number order. */
  events: JobEvent[]
  /**
   * Where the reader may go on from: the last event's number when the page is full, else the
   * highest number visible to the query (matching or not). Safe because the sequencer numbers
   * only committed events, and one pass at a time (its transaction-scoped advisory lock is released
   * at commit, so a later pass's nextval comes after every number already visible): no event
   * numbered at or below a number a reader has seen becomes visible later.
   */
  upTo: string
}

/** The next page of a stream: numbered events after `after` that match, in number order, and where to go on from. */
export async function eventPageAfter(db: Kysely<DB>, params: EventListAfterParams): Promise<EventPage> {
  const f = params.filter
  const events = f.events && f.events.length > 0 ? [...f.events] : null
  const { rows } = await sql<EventRow & { top: string }>`
    with top as (
      -- in the same snapshot as the page (one statement), through events_seq_idx
      select coalesce(max(seq), 0) as seq from pgsched.events where seq is not null
    )
    select greatest(top.seq, ${params.after}::bigint)::text as top, page.*
      from top
      left join lateral (
        select ${EVENT_COLUMNS}
          from pgsched.events e
         where e.seq is not null and e.seq > ${params.after}::bigint and e.seq <= top.seq
           and (${params.tenant}::text is null or tenant = ${params.tenant}::text)
           and (${f.jobId ?? null}::uuid is null or job_id = ${f.jobId ?? null}::uuid)
           and (${f.type ?? null}::text is null or job_type = ${f.type ?? null}::text)
           and (${f.queue ?? null}::text is null or queue = ${f.queue ?? null}::text)
           and (${events}::text[] is null or type = any(${events}::text[]))
         order by e.seq   -- the number, not the text it is returned as
         limit ${params.limit}::int
      ) page on true
     order by page.seq::bigint`.execute(db)
  const page = rows.filter((r) => r.seq !== null).map(toEvent)
  const last = page.at(-1)?.id
  const upTo = page.length >= params.limit && last !== undefined ? last : (rows[0]?.top ?? params.after)
  return { events: page, upTo }
}

/** The next page of a stream: numbered events after `after` that match, in number order. */
export async function eventListAfter(db: Kysely<DB>, params: EventListAfterParams): Promise<JobEvent[]> {
  return (await eventPageAfter(db, params)).events
}

/** The oldest event still kept (its number), or null: a Last-Event-ID before it may have missed events. */
export async function eventOldestSeq(db: Kysely<DB>): Promise<string | null> {
  const { rows } = await sql<{ seq: string | null }>`
    select min(seq)::text as seq from pgsched.events where seq is not null`.execute(db)
  return rows[0]?.seq ?? null
}

/** While a webhook subscription exists, events the dispatcher has not read are kept this long at most (a week). */
export const EVENTS_UNDISPATCHED_MAX_MS = 604_800_000

/**
 * Retention: deletes up to `limit` events older than `olderThanMs` (numbered or not), and the
 * stream listeners whose capture ended. While a webhook subscription exists, events the webhook
 * dispatcher has not read yet (unnumbered, or after the webhooks cursor) are kept, so none is
 * pruned before it is handed to its subscriptions, unless older than `undispatchedMaxMs` (a
 * dispatcher that never runs must not grow the table for ever). Returns how many events.
 */
export async function eventPruneOld(db: Kysely<DB>, params: { olderThanMs: number; limit: number; undispatchedMaxMs?: number }): Promise<number> {
  const holdMs = Math.max(params.olderThanMs, params.undispatchedMaxMs ?? EVENTS_UNDISPATCHED_MAX_MS)
  const { rows } = await sql<{ n: number }>`
    with cutoff as (
      select now() - ${params.olderThanMs}::bigint * interval '1 millisecond' as at,
             now() - ${holdMs}::bigint * interval '1 millisecond' as hold_at,
             -- null: nothing held (no webhook subscription)
             case when exists (select 1 from pgsched.webhook_subscriptions)
                  then coalesce((select seq from pgsched.event_cursors where name = 'webhooks'), 0) end as dispatched
    ),
    doomed as (
      -- the oldest by number, then the never numbered, each through its own index; kept when recent
      (select id, seq, at from pgsched.events where seq is not null order by seq limit ${params.limit}::int)
      union all
      (select id, seq, at from pgsched.events where seq is null order by id limit ${params.limit}::int)
    ),
    deleted as (
      delete from pgsched.events e
       where e.id in (select d.id from doomed d, cutoff c
                       where d.at < c.at
                         and (c.dispatched is null or d.seq <= c.dispatched or d.at < c.hold_at))
      returning 1
    ),
    listeners as (
      delete from pgsched.event_listeners where kind = 'stream' and until < now()
    )
    select count(*)::int as n from deleted`.execute(db)
  return rows[0]?.n ?? 0
}
