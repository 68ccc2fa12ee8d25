/**
 * Reading and keeping events (migrations 0022, 0024): listeners (who makes the writers capture), the
 * sequencer (numbers committed event batches, one process at a time), pages of a stream (the
 * batches read by the database, their events picked and written here, ids `<batch>-<index>`), and
 * pruning.
 * The writes themselves are in event-capture.ts, spliced into the statements that change state.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { ANSWERED_WITHIN, PREPARE } from '../pool.ts'
import { eventErrorOf, parseEventPosition, type EventFilter, type EventPosition, type EventType, type JobEvent } from '../../core/events.ts'
import { ValidationError } from '../../errors.ts'

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
  await sql`${sql.raw(ANSWERED_WITHIN)}
    update pgsched.event_listeners
       set until = greatest(until, now() + ${params.keepMs}::bigint * interval '1 millisecond')
     where id = any(${params.ids}::uuid[]) and kind = 'stream'`.execute(db)
}

/**
 * One sequencer pass: numbers up to `limit` committed unnumbered event batches, in insertion order,
 * unless another pass holds the sequencer lock. Returns how many batches it numbered (0 also when
 * the lock was taken). One update per batch (a statement's changes), not per event.
 */
export async function eventSequence(db: Kysely<DB>, params: { limit: number }): Promise<number> {
  const { rows } = await sql<{ n: number }>`${sql.raw(PREPARE)}${sql.raw(ANSWERED_WITHIN)}
    with turn as (
      select pg_try_advisory_xact_lock(${SEQUENCER_LOCK_KEY.toString()}::bigint) as mine
    ),
    numbered as (
      -- nextval in the order of the ordered subquery: numbers follow insertion order
      select p.id, nextval('pgsched.event_seq') as seq
        from (select id from pgsched.event_batches
               where seq is null and (select mine from turn)
               order by id
               limit ${params.limit}::int) p
    ),
    done as (
      update pgsched.event_batches e set seq = n.seq from numbered n
       where e.id = n.id
         and e.seq is null   -- rechecked on the latest row: a pass that took the lock after ours committed skips our rows
      returning 1
    )
    select count(*)::int as n from done`.execute(db)
  return rows[0]?.n ?? 0
}

/**
 * The highest batch number the stream has given (0 when none), kept or pruned: a position after it
 * is not one of this database's stream.
 */
export async function eventSeqGiven(db: Kysely<DB>): Promise<string> {
  const { rows } = await sql<{ seq: string }>`select coalesce(pg_sequence_last_value('pgsched.event_seq'), 0)::text as seq`.execute(db)
  return rows[0]?.seq ?? '0'
}

/** The number of the latest batch (0 when none): a stream without Last-Event-ID starts after it. */
export async function eventLatestSeq(db: Kysely<DB>): Promise<string> {
  const { rows } = await sql<{ seq: string }>`
    select coalesce(max(seq), 0)::text as seq from pgsched.event_batches where seq is not null`.execute(db)
  return rows[0]?.seq ?? '0'
}

export interface EventListAfterParams {
  /** Events after this one: an event id `<batch>-<index>`, or a batch number (after all of it). */
  after: string
  /** Only this tenant's (null: every tenant's). */
  tenant: string | null
  filter: EventFilter
  limit: number
}

/** An event row as the queries here and in webhooks.ts select it (seq as text). */
export interface EventRow {
  seq: string
  index: number
  at: Date
  type: EventType
  tenant: string
  job_id: string
  execution_id: string | null
  queue: string
  job_type: string
  attempt: number | null
  /** The event's error as stored (jsonb, parsed), or null. */
  error: unknown
}

/** The events of the batches aliased `b`, one row each, aliased `e` (`e.n`: the place in the batch, from 1). */
export const EVENTS_OF_BATCH = sql`unnest(b.types, b.tenants, b.job_ids, b.execution_ids, b.queues, b.job_types, b.attempts, b.errors)
       with ordinality as e (type, tenant, job_id, execution_id, queue, job_type, attempt, error, n)`

/** The columns of an EventRow, from pgsched.event_batches aliased `b` and EVENTS_OF_BATCH. */
export const EVENT_COLUMNS = sql`b.seq::text as seq, (e.n - 1)::int as index, b.at, e.type, e.tenant, e.job_id, e.execution_id, e.queue, e.job_type, e.attempt, e.error`

export function toEvent(r: EventRow): JobEvent {
  return {
    id: `${r.seq}-${r.index}`,
    type: r.type,
    at: r.at,
    tenant: r.tenant,
    jobId: r.job_id,
    executionId: r.execution_id,
    queue: r.queue,
    jobType: r.job_type,
    attempt: r.attempt,
    error: eventErrorOf(r.error),
  }
}

export interface EventPage {
  /** Matching events, in id order. */
  events: JobEvent[]
  /**
   * Where the reader may go on from: the last event's id when the page is full, or when it read only
   * part of its last batch (the last event it read of it), else the number of the last batch read
   * (all of it), which is the highest number visible to the query when it read every batch up to it. Safe because the sequencer numbers only committed batches, and one pass at
   * a time (its transaction-scoped advisory lock is released at commit, so a later pass's nextval
   * comes after every number already visible): no batch numbered at or below a number a reader has
   * seen becomes visible later.
   */
  upTo: string
  /** Batches after upTo were there for this page (it stopped at its size): read on without waiting. */
  more: boolean
}

/**
 * Batches looked at per page at most: bounds a page's work when it holds many small batches. Of
 * these, a page reads only the first batches that hold up to its size in events, of every tenant.
 */
const PAGE_BATCHES = 200
/** A batch's index after all of its events (the index of a bare batch number). */
const AFTER_ALL = 2_147_483_647

/**
 * The batches a page reads, from the CTEs `top` (the highest batch number visible), `candidates`
 * (batches after the position) and `chosen` (the first of them holding up to a page of events):
 * one row per chosen batch holding events of the tenant, with its arrays from the position and at
 * most a page of them (BatchRow), in number order,
 * each row also carrying where the page ends (PageEnd; a single row of nulls but those when no batch
 * is returned). The batches are chosen by their size alone and only the chosen ones are looked into
 * for the tenant: a tenant's page that looked into every batch after the position for it read (and
 * decompressed) the tenants of the whole backlog, 38 ms a page behind a busy burn-down. A page of a
 * tenant whose events are rare among those chosen is short, and says there is more (PageEnd.more),
 * so the stream reads the next one at once. The events are picked and formatted by the caller
 * (pickEvents): unnesting and formatting them in the database cost it about 10 µs per event, on the
 * server the workers share.
 */
async function batchesAfter(db: Kysely<DB>, params: EventListAfterParams, at: EventPosition): Promise<BatchRow[]> {
  const afterIndex = at.index ?? AFTER_ALL
  // where the batch of the position is read from (1-based; a bare number's batch is not chosen)
  const firstFrom = at.index === null ? 1 : at.index + 2
  const { rows } = await sql<RawBatchRow>`${sql.raw(PREPARE)}${sql.raw(ANSWERED_WITHIN)}
    with top as materialized (
      -- in the same snapshot as the page (one statement), through event_batches_seq_idx
      select coalesce(max(seq), 0) as seq from pgsched.event_batches where seq is not null
    ),
    candidates as (
      select b.id, b.seq, b.size
        from pgsched.event_batches b
       where b.seq is not null and b.seq >= ${at.batch}::bigint and b.seq <= (select seq from top)
         and (b.seq > ${at.batch}::bigint or b.size - 1 > ${afterIndex}::int)   -- a batch read to its end is past
       order by b.seq
       limit ${PAGE_BATCHES}::int
    ),
    chosen as (
      -- batches while their sizes add up to at most a page of events (the first one in any case)
      select c.id, c.seq
        from (select c.*, sum(c.size) over (order by c.seq) as running from candidates c) c
       where c.running - c.size < ${params.limit}::int
    )
    -- the arrays whose elements cannot hold a comma (uuids, numbers, event types, and job types and
    -- queues by the jobs table's checks) as comma-separated text, split by the caller: cheaper to
    -- read than array literals; the tenants, which can, as an array. Each from where the page reads
    -- it, and no more than a page of it (a batch of a 10,000-job submit is read in five pages)
    select ${PAGE_END}, b.seq::text as seq, b.at, r.lo - 1 as "from", b.size,
           array_to_string(b.types[r.lo:r.hi], ',') as types, b.tenants[r.lo:r.hi] as tenants,
           array_to_string(b.job_ids[r.lo:r.hi], ',') as job_ids, array_to_string(b.execution_ids[r.lo:r.hi], ',', '') as execution_ids,
           array_to_string(b.queues[r.lo:r.hi], ',') as queues, array_to_string(b.job_types[r.lo:r.hi], ',') as job_types,
           array_to_string(b.attempts[r.lo:r.hi], ',', '') as attempts,
           b.errors[r.lo:r.hi]::text[] as errors   -- null for a batch without one (most)
      from top
      left join (chosen c
                 join pgsched.event_batches b
                   on b.id = c.id
                  and (${params.tenant}::text is null or ${params.tenant}::text = any(b.tenants))   -- whole batches of other tenants skipped
                 cross join lateral (
                   select f.lo, f.lo + ${params.limit}::int - 1 as hi
                     from (select case when b.seq = ${at.batch}::bigint then ${firstFrom}::int else 1 end as lo) f
                 ) r
                ) on true
     order by b.seq`.execute(db)
  return rows.map((r) => ({
    ...r,
    from: r.from ?? 0,
    size: r.size ?? 0,
    types: split(r.types) as EventType[],
    job_ids: split(r.job_ids),
    execution_ids: split(r.execution_ids).map((id) => (id === '' ? null : id)),
    queues: split(r.queues),
    job_types: split(r.job_types),
    attempts: split(r.attempts).map((n) => (n === '' ? null : Number(n))),
  }))
}

/** The elements of a comma-separated list (none for null or ''). */
const split = (list: string | null): string[] => (list ? list.split(',') : [])

/** A chosen batch as batchesAfter reads it: the comma-free arrays as comma-separated text. */
interface RawBatchRow extends PageEnd {
  seq: string | null
  at: Date
  /** The index in the batch of the arrays' first element (they hold part of it: see BatchRow). */
  from: number | null
  /** Events in the whole batch. */
  size: number | null
  types: string | null
  tenants: string[]
  job_ids: string | null
  execution_ids: string | null
  queues: string | null
  job_types: string | null
  attempts: string | null
  /** Each event's error as JSON text (null: none); null when no event of the batch has one. */
  errors: Array<string | null> | null
}

/**
 * A chosen batch (batchesAfter): its number, time and the events the page may read as parallel
 * arrays, from the one after the page's position (in the position's batch) and at most a page of
 * them: element i is the event of index from + i.
 */
interface BatchRow extends PageEnd {
  seq: string | null
  at: Date
  from: number
  size: number
  types: EventType[]
  tenants: string[]
  job_ids: string[]
  execution_ids: Array<string | null>
  queues: string[]
  job_types: string[]
  attempts: Array<number | null>
  errors: Array<string | null> | null
}

/**
 * The matching events of the chosen batches (all after the position), in id order, at most `limit`:
 * each passed to `take` with its batch and its element i (the event of index b.from + i). Returns how many.
 */
function pickEvents(params: EventListAfterParams, batches: readonly BatchRow[], take: (b: BatchRow, i: number) => void): number {
  const f = params.filter
  const events = f.events && f.events.length > 0 ? f.events : null
  // a uuid in any case, as the database compared it (the lists hold it lower case)
  const jobId = f.jobId == null ? null : f.jobId.toLowerCase()
  let count = 0
  for (const b of batches) {
    if (b.seq === null) continue
    for (let i = 0; i < b.types.length; i++) {
      if (params.tenant !== null && b.tenants[i] !== params.tenant) continue
      if (jobId !== null && b.job_ids[i] !== jobId) continue
      if (f.type != null && b.job_types[i] !== f.type) continue
      if (f.queue != null && b.queues[i] !== f.queue) continue
      if (events !== null && !events.includes(b.types[i] as EventType)) continue
      take(b, i)
      if (++count >= params.limit) return count
    }
  }
  return count
}

/** The largest batch number (event_batches.seq is a bigint). */
const MAX_BATCH = 9_223_372_036_854_775_807n

/** The position a page reads after (ValidationError naming `after` when no page can read it). */
export function eventPositionOf(after: string): EventPosition {
  const at = parseEventPosition(after)
  if (!at) throw new ValidationError(`after: not an event id: ${JSON.stringify(after)}`)
  const batch = BigInt(at.batch)
  if (batch > MAX_BATCH) throw new ValidationError(`after: batch number ${at.batch} is beyond the largest there can be (${MAX_BATCH})`)
  // the batch number as the database writes it ('07' is batch 7), compared with each batch's as text
  return { ...at, batch: batch.toString() }
}

const positionOf = (params: EventListAfterParams): EventPosition => eventPositionOf(params.after)

/** The event of element `i` of batch `b`. */
function eventOf(b: BatchRow, i: number): JobEvent {
  return {
    id: `${b.seq}-${b.from + i}`,
    type: b.types[i] as EventType,
    at: b.at,
    tenant: b.tenants[i] as string,
    jobId: b.job_ids[i] as string,
    executionId: b.execution_ids[i] ?? null,
    queue: b.queues[i] as string,
    jobType: b.job_types[i] as string,
    attempt: b.attempts[i] ?? null,
    error: eventErrorOf(b.errors?.[i] ?? null),
  }
}

/** Where a page leaves its reader (EventPage.upTo), from the page's own figures. */
interface PageEnd {
  top: string
  last_batch: string | null
  more: boolean
}
const PAGE_END = sql`(select seq from top)::text as top, (select max(seq) from chosen)::text as last_batch,
       (select count(*) from chosen) < (select count(*) from candidates) or (select count(*) from candidates) >= ${PAGE_BATCHES}::int as more`

/**
 * The last event read of a batch the page read only part of (a batch of more events after the
 * position than a page holds, the last one chosen), as an id: a page short of its size stops there.
 */
function cutAt(batches: readonly BatchRow[]): string | undefined {
  const last = batches.at(-1)
  if (last === undefined || last.seq === null || last.from + last.types.length >= last.size) return undefined
  return `${last.seq}-${last.from + last.types.length - 1}`
}

/** Where a page of `count` events, the last `lastId`, leaves its reader (upTo), and whether more is there already. */
function pageEnd(params: EventListAfterParams, batches: readonly BatchRow[], count: number, lastId: string | undefined): { upTo: string; more: boolean } {
  const cut = cutAt(batches)
  return { upTo: pageUpTo(params, count, lastId, batches[0], cut), more: batches[0]?.more === true || cut !== undefined }
}

function pageUpTo(params: EventListAfterParams, count: number, lastId: string | undefined, end: PageEnd | undefined, cut: string | undefined): string {
  if (count >= params.limit && lastId !== undefined) return lastId
  // not full, having read part of its last batch: on from the last event read of it
  if (cut !== undefined) return cut
  // not full: every matching event of the batches read is in the page
  if (end?.more && end.last_batch !== null) return end.last_batch
  // every batch up to the top was read whole, the position's own included (a bare number: after all of it)
  const at = parseEventPosition(params.after)
  if (end && at && BigInt(end.top) >= BigInt(at.batch)) return end.top
  return params.after
}

/** The next page of a stream: numbered events after `after` that match, in id order, and where to go on from. */
export async function eventPageAfter(db: Kysely<DB>, params: EventListAfterParams): Promise<EventPage> {
  const at = positionOf(params)
  const batches = await batchesAfter(db, params, at)
  const page: JobEvent[] = []
  pickEvents(params, batches, (b, i) => page.push(eventOf(b, i)))
  return { events: page, ...pageEnd(params, batches, page.length, page.at(-1)?.id) }
}

/** A page's SSE text is cut into texts of about this many characters (see eventMessagePageAfter). */
export const MESSAGE_CHUNK_CHARS = 32_768

/** A page of a stream as Server-Sent Events text (GET /v1/events). */
export interface EventMessagePage {
  /**
   * `id: <id>\ndata: <Event JSON>\n\n` for each matching event, in id order, cut between messages
   * into texts of about MESSAGE_CHUNK_CHARS (none when no event matched).
   */
  chunks: string[]
  count: number
  upTo: string
  /** As EventPage.more. */
  more: boolean
}

/**
 * The next page as eventPageAfter finds it, as SSE messages: each event's JSON as eventToJson
 * (core/events.ts) makes it (the same keys, in the same order, `at` in ISO 8601 UTC with
 * milliseconds), written straight from the batch's arrays.
 *
 * What this costs the API process is mostly its garbage (a page is 2,000 events, about 460 kB):
 * each message is put together from few parts, the parts around the ids made again only when what
 * they hold changes (a batch's events mostly share their type, tenant, queue, job type and
 * attempt), and the page is cut into texts of about 32 kB, which stay in the young generation
 * (one text of the whole page is allocated, and copied, in the large-object space). Together,
 * about a third of the CPU per event of one text built of every field (docs/performance.md,
 * "Events and webhooks").
 */
export async function eventMessagePageAfter(db: Kysely<DB>, params: EventListAfterParams): Promise<EventMessagePage> {
  const at = positionOf(params)
  const batches = await batchesAfter(db, params, at)
  const chunks: string[] = []
  let text = ''
  let of: BatchRow | undefined
  let lastIndex = 0
  let idHead = ''
  let dataHead = ''
  // `","type":…,"jobId":"` and `,"queue":…,"attempt":…,"error":null}\n\n` (tailOpen: up to "error":), with what each was made for
  let mid = ''
  let midFor: { b: BatchRow; type: string; tenant: string } | undefined
  let tail = ''
  let tailOpen = ''
  let tailFor: { queue: string; jobType: string; attempt: number | null } | undefined
  const count = pickEvents(params, batches, (b, i) => {
    if (of !== b) {
      of = b
      idHead = `id: ${b.seq}-`
      dataHead = `\ndata: {"id":"${b.seq}-`
    }
    const type = b.types[i] as string
    const tenant = b.tenants[i] as string
    if (midFor === undefined || midFor.b !== b || midFor.type !== type || midFor.tenant !== tenant) {
      midFor = { b, type, tenant }
      mid = `","type":"${type}","at":${JSON.stringify(b.at.toISOString())},"tenant":${JSON.stringify(tenant)},"jobId":"`
    }
    const queue = b.queues[i] as string
    const jobType = b.job_types[i] as string
    const attempt = b.attempts[i] ?? null
    if (tailFor === undefined || tailFor.queue !== queue || tailFor.jobType !== jobType || tailFor.attempt !== attempt) {
      tailFor = { queue, jobType, attempt }
      tailOpen = `,"queue":${JSON.stringify(queue)},"jobType":${JSON.stringify(jobType)},"attempt":${attempt === null ? 'null' : attempt},"error":`
      tail = `${tailOpen}null}\n\n`
    }
    const executionId = b.execution_ids[i]
    const n = b.from + i
    const error = b.errors?.[i] ?? null
    text +=
      idHead +
      n +
      dataHead +
      n +
      mid +
      b.job_ids[i] +
      (executionId == null ? '","executionId":null' : `","executionId":"${executionId}"`) +
      (error === null ? tail : `${tailOpen}${JSON.stringify(eventErrorOf(error))}}\n\n`)
    lastIndex = n
    if (text.length >= MESSAGE_CHUNK_CHARS) {
      chunks.push(text)
      text = ''
    }
  })
  if (text !== '') chunks.push(text)
  const lastId = of === undefined ? undefined : `${of.seq}-${lastIndex}`
  return { chunks, count, ...pageEnd(params, batches, count, lastId) }
}

/** The next page of a stream: numbered events after `after` that match, in id order. */
export async function eventListAfter(db: Kysely<DB>, params: EventListAfterParams): Promise<JobEvent[]> {
  return (await eventPageAfter(db, params)).events
}

/** The oldest batch still kept (its number), or null: a Last-Event-ID before it may have missed events. */
export async function eventOldestSeq(db: Kysely<DB>): Promise<string | null> {
  const { rows } = await sql<{ seq: string | null }>`
    select min(seq)::text as seq from pgsched.event_batches where seq is not null`.execute(db)
  return rows[0]?.seq ?? null
}

/** While a webhook subscription exists, events the dispatcher has not read are kept this long at most (a week). */
export const EVENTS_UNDISPATCHED_MAX_MS = 604_800_000

/**
 * Retention: deletes up to `limit` event batches older than `olderThanMs` (numbered or not), and the
 * stream listeners whose capture ended. While an enabled webhook subscription exists, events the webhook
 * dispatcher has not read yet (unnumbered, or after the webhooks cursor) are kept, so none is
 * pruned before it is handed to its subscriptions, unless older than `undispatchedMaxMs` (a
 * dispatcher that never runs must not grow the table for ever). Returns how many events (not batches).
 */
export async function eventPruneOld(db: Kysely<DB>, params: { olderThanMs: number; limit: number; undispatchedMaxMs?: number }): Promise<number> {
  const holdMs = Math.max(params.olderThanMs, params.undispatchedMaxMs ?? EVENTS_UNDISPATCHED_MAX_MS)
  const { rows } = await sql<{ n: number }>`
    with cutoff as (
      select now() - ${params.olderThanMs}::bigint * interval '1 millisecond' as at,
             now() - ${holdMs}::bigint * interval '1 millisecond' as hold_at,
             -- null: nothing held (no enabled webhook subscription: a disabled one is sent no event
             -- of the time it was disabled)
             case when exists (select 1 from pgsched.webhook_subscriptions where disabled_at is null)
                  then coalesce((select seq from pgsched.event_cursors where name = 'webhooks'), 0) end as dispatched
    ),
    doomed as (
      -- the oldest by number, then the never numbered, each through its own index; kept when recent
      (select id, seq, at from pgsched.event_batches where seq is not null order by seq limit ${params.limit}::int)
      union all
      (select id, seq, at from pgsched.event_batches where seq is null order by id limit ${params.limit}::int)
    ),
    deleted as (
      delete from pgsched.event_batches e
       where e.id in (select d.id from doomed d, cutoff c
                       where d.at < c.at
                         and (c.dispatched is null or d.seq <= c.dispatched or d.at < c.hold_at))
      returning e.size as n
    ),
    listeners as (
      delete from pgsched.event_listeners where kind = 'stream' and until < now()
    )
    select coalesce(sum(n), 0)::int as n from deleted`.execute(db)
  return rows[0]?.n ?? 0
}
