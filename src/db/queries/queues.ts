/**
 * SQL for queue settings and figures (migration 0012): the listing every queue with work or
 * settings appears in, and the pause, resume and concurrency-limit changes, each through the
 * migration's functions (pause_queue waits for claims in flight; resume and a new limit wake
 * the workers).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { perDbCache } from './per-db-cache.ts'

/** A queue as operators see it: its settings and live figures. */
export interface QueueView {
  name: string
  paused: boolean
  pausedAt: Date | null
  /** Most executions running at once across all workers; null: no limit. */
  concurrencyLimit: number | null
  /** Most executions of one concurrency key running at once; null: no limit per key. */
  keyConcurrencyLimit: number | null
  /** Most starts per ratePeriodMs across all workers; null: no rate limit. */
  rateLimit: number | null
  ratePeriodMs: number | null
  /** Most starts of one concurrency key per keyRatePeriodMs across all workers; null: no rate limit per key. */
  keyRateLimit: number | null
  keyRatePeriodMs: number | null
  /** Claims take turns between tenants (weighted, within each priority). */
  fairShare: boolean
  /** Pending executions that are due now. */
  due: number
  /** Pending executions due later (scheduled, or waiting for a retry's backoff). */
  scheduled: number
  running: number
  /** How long the oldest due execution has waited (ms); null when nothing is due. */
  oldestDueLagMs: number | null
  /** Pending executions whose type no live worker serves in this queue (none live: pgsched.worker_live). */
  unserved: number
  /** Their types, by name. */
  unservedTypes: string[]
  /** Live workers (pgsched.worker_live) serving this queue, whatever types they take. */
  liveWorkers: number
}

interface QueueRow {
  name: string
  paused: boolean
  paused_at: Date | null
  concurrency_limit: number | null
  key_concurrency_limit: number | null
  rate_limit: number | null
  rate_period_ms: number | null
  key_rate_limit: number | null
  key_rate_period_ms: number | null
  fair_share: boolean
  due: number
  scheduled: number
  running: number
  lag_ms: number | null
  unserved: number
  unserved_types: string[] | null
  live_workers: number
}

const toView = (r: QueueRow): QueueView => ({
  name: r.name,
  paused: r.paused,
  pausedAt: r.paused_at,
  concurrencyLimit: r.concurrency_limit,
  keyConcurrencyLimit: r.key_concurrency_limit,
  rateLimit: r.rate_limit,
  ratePeriodMs: r.rate_period_ms,
  keyRateLimit: r.key_rate_limit,
  keyRatePeriodMs: r.key_rate_period_ms,
  fairShare: r.fair_share,
  due: r.due,
  scheduled: r.scheduled,
  running: r.running,
  oldestDueLagMs: r.lag_ms,
  unserved: r.unserved,
  unservedTypes: r.unserved_types ?? [],
  liveWorkers: r.live_workers,
})

/** Whether a live worker serves executions of `g.type` in `g.queue` (SQL, for a row alias `g`). */
export const servedSql = (g: string) =>
  sql.raw(`exists (select 1 from pgsched.workers w
                    where pgsched.worker_live(w.stopped_at, w.last_seen_at, w.lease_ms)
                      and ${g}.queue = any(w.queues) and ${g}.type = any(w.types))`)

/** The live workers (pgsched.worker_live) serving the queue `queue` names, as a float8 (SQL). */
const liveWorkersSql = (queue: RawBuilder<unknown>) => sql`(select count(*) from pgsched.workers w
   where pgsched.worker_live(w.stopped_at, w.last_seen_at, w.lease_ms) and ${queue} = any(w.queues))::float8`

/**
 * Queues with settings or with pending or running executions (or just `only`), by name. With
 * `tenant`, the figures count that tenant's executions only (and queues without settings appear
 * when it has work in them).
 */
export async function queueList(db: Kysely<DB>, params: { only?: string; tenant?: string } = {}): Promise<QueueView[]> {
  const only = params.only ?? null
  const tenant = params.tenant ?? null
  const { rows } = await sql<QueueRow>`
    with by_type as (
      select queue, type,
             count(*) filter (where state = 'pending' and run_at <= now())::float8 as due,
             count(*) filter (where state = 'pending' and run_at > now())::float8 as scheduled,
             count(*) filter (where state = 'running')::float8 as running,
             min(run_at) filter (where state = 'pending' and run_at <= now()) as oldest_due
        from pgsched.executions
       where state in ('pending', 'running')
         and (${only}::text is null or queue = ${only}::text)
         and (${tenant}::text is null or tenant = ${tenant}::text)
       group by queue, type
    ),
    live as (
      -- a type is looked up among the workers once per queue, not per execution
      select g.queue, sum(g.due)::float8 as due, sum(g.scheduled)::float8 as scheduled, sum(g.running)::float8 as running,
             min(g.oldest_due) as oldest_due,
             coalesce(sum(g.due + g.scheduled) filter (where g.due + g.scheduled > 0 and not ${servedSql('g')}), 0)::float8 as unserved,
             array_agg(g.type order by g.type) filter (where g.due + g.scheduled > 0 and not ${servedSql('g')}) as unserved_types
        from by_type g
       group by g.queue
    )
    select coalesce(q.name, l.queue) as name, coalesce(q.paused, false) as paused, q.paused_at, q.concurrency_limit, q.key_concurrency_limit, q.rate_limit, q.rate_period_ms,
           q.key_rate_limit, q.key_rate_period_ms,
           coalesce(q.fair_share, false) as fair_share,
           coalesce(l.due, 0) as due, coalesce(l.scheduled, 0) as scheduled, coalesce(l.running, 0) as running,
           floor(extract(epoch from now() - l.oldest_due) * 1000)::float8 as lag_ms,
           coalesce(l.unserved, 0) as unserved, l.unserved_types,
           ${liveWorkersSql(sql`coalesce(q.name, l.queue)`)} as live_workers
      from (select * from pgsched.queues where ${only}::text is null or name = ${only}::text) q
      full join live l on l.queue = q.name
     order by 1
  `.execute(db)
  return rows.map(toView)
}

/** One queue's view (a queue with neither settings nor work has zero figures). */
export async function queueGet(db: Kysely<DB>, name: string): Promise<QueueView> {
  const [view] = await queueList(db, { only: name })
  if (view) return view
  return {
    name,
    paused: false,
    pausedAt: null,
    concurrencyLimit: null,
    keyConcurrencyLimit: null,
    rateLimit: null,
    ratePeriodMs: null,
    keyRateLimit: null,
    keyRatePeriodMs: null,
    fairShare: false,
    due: 0,
    scheduled: 0,
    running: 0,
    oldestDueLagMs: null,
    unserved: 0,
    unservedTypes: [],
    liveWorkers: await liveWorkersOf(db, name),
  }
}

/** Live workers (pgsched.worker_live) serving `queue`. */
async function liveWorkersOf(db: Kysely<DB>, queue: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select ${liveWorkersSql(sql`${queue}::text`)} as n`.execute(db)
  return rows[0]?.n ?? 0
}

/** Longest a pause, or the sweep after a cancel, waits for the claims that were in flight when it committed. */
const IN_FLIGHT_WAIT_MS = 10_000

/** A write transaction's lock on pgsched.runs (a claim, an outcome write), of pg_locks `l`. */
const RUNS_WRITE_LOCK = sql`l.locktype = 'relation' and l.mode = 'RowExclusiveLock' and l.granted and l.relation = 'pgsched.runs'::regclass`

/**
 * Waits, blocking no one, until the write transactions on pgsched.runs (claims, outcome writes) that
 * started before now have ended, or IN_FLIGHT_WAIT_MS passed: what a change just committed (a pause,
 * a cancel) could not see of the work in flight.
 */
export async function claimsInFlightEnded(db: Kysely<DB>): Promise<void> {
  // The write transactions on pgsched.runs open now, by their virtual transaction ids: pg_locks shows
  // them to every role, where pg_stat_activity hides another role's transaction start (the workers
  // may run as a role of their own). Those that began after the change are waited for too: each is
  // a short statement.
  const { rows } = await sql<{ open: string[] | null }>`
    select array_agg(distinct l.virtualtransaction) as open from pg_locks l
     where ${RUNS_WRITE_LOCK} and l.pid <> pg_backend_pid()`.execute(db)
  const open = rows[0]?.open ?? []
  if (open.length === 0) return
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS
  for (;;) {
    const { rows: left } = await sql<{ n: number }>`
      select count(*)::int as n from pg_locks l where ${RUNS_WRITE_LOCK} and l.virtualtransaction = any(${open}::text[])`.execute(db)
    if ((left[0]?.n ?? 0) === 0 || Date.now() > deadline) return
    await new Promise((r) => setTimeout(r, 5))
  }
}

/**
 * Pauses a queue: once this returns, workers claim nothing from it. The pause commits first (claims
 * that start later see it), then this waits for the claims in flight that missed it.
 */
export async function queuePause(db: Kysely<DB>, name: string): Promise<void> {
  await sql`select pgsched.pause_queue(${name}::text)`.execute(db)
  pausedQueues.forget(db)
  await claimsInFlightEnded(db)
}

/** Resumes a queue and wakes the workers that serve it. */
export async function queueResume(db: Kysely<DB>, name: string): Promise<void> {
  await sql`select pgsched.resume_queue(${name}::text)`.execute(db)
  pausedQueues.forget(db)
}

/** How long the paused queues are used for submit replies (as the served pairs are: workers.ts). */
const PAUSED_QUEUES_TTL_MS = 1_000

/** The paused queues, each with when it was paused (null: a pause without a time). */
const pausedQueues = perDbCache(PAUSED_QUEUES_TTL_MS, async (db) => {
  const { rows } = await sql<{ name: string; paused_at: Date | null }>`${sql.raw(PREPARE)}
      select name, paused_at from pgsched.queues where paused`.execute(db)
  return new Map(rows.map((r) => [r.name, r.paused_at]))
})

/** A queue's pause for a submit reply: whether it is paused and since when, as read in the last second through `db`. */
export async function queuePauseOf(db: Kysely<DB>, name: string): Promise<{ paused: boolean; pausedAt: Date | null }> {
  const paused = await pausedQueues.get(db)
  return { paused: paused.has(name), pausedAt: paused.get(name) ?? null }
}

/*
 * Each limit below applies to the claims that start after its change commits; claims already in
 * flight were planned without it. Like a pause, each setter then waits for those, so that once it
 * returns every claim follows the new setting.
 */

/** The default period of a rate limit (ms): what a limit set without a period on a queue that has none gets. */
const RATE_PERIOD_MS_DEFAULT = 1000

/**
 * The period to set with `limit`: none when the limit is removed; else `periodMs`, or, when null, the
 * queue's current period in `column` (a new limit keeps the period it had), or the default.
 */
function keptPeriod(column: RawBuilder<unknown>, name: string, limit: number | null, periodMs: number | null): RawBuilder<unknown> {
  if (limit === null) return sql`null::int`
  if (periodMs !== null) return sql`${periodMs}::int`
  return sql`coalesce((select q.${column} from pgsched.queues q where q.name = ${name}::text), ${RATE_PERIOD_MS_DEFAULT}::int)`
}

/**
 * Sets (or, with nulls, clears) a queue's rate limit: at most `limit` starts per `periodMs` (null with
 * a limit: the period it has, or 1000 ms).
 */
export async function queueSetRateLimit(db: Kysely<DB>, name: string, limit: number | null, periodMs: number | null): Promise<void> {
  await sql`select pgsched.set_queue_rate_limit(${name}::text, ${limit}::int,
                                               ${keptPeriod(sql`rate_period_ms`, name, limit, periodMs)})`.execute(db)
  await claimsInFlightEnded(db)
}

/** Sets (or, with nulls, clears) a queue's rate limit per concurrency key: at most `limit` starts of one key per `periodMs` (as queueSetRateLimit). */
export async function queueSetKeyRateLimit(db: Kysely<DB>, name: string, limit: number | null, periodMs: number | null): Promise<void> {
  await sql`select pgsched.set_queue_key_rate_limit(${name}::text, ${limit}::int,
                                                   ${keptPeriod(sql`key_rate_period_ms`, name, limit, periodMs)})`.execute(db)
  await claimsInFlightEnded(db)
}

/** Sets (or, with null, clears) a queue's limit per concurrency key. */
export async function queueSetKeyConcurrencyLimit(db: Kysely<DB>, name: string, limit: number | null): Promise<void> {
  await sql`select pgsched.set_queue_key_concurrency_limit(${name}::text, ${limit}::int)`.execute(db)
  await claimsInFlightEnded(db)
}

/**
 * Turns fair share between tenants on or off, then marks the queue's due executions for it
 * (migration 0031: waiting for their key in the fair order, or no key), in a transaction of its own.
 * A transaction open at the change may have written executions for the setting before: once those
 * have ended (or IN_FLIGHT_WAIT_MS passed; the reaper marks them then), the marking runs again, and
 * the change is recorded as settled (fair_waiting_for, fair_settled_at) so that the reaper does not
 * mark the queue again; after the deadline it is left to the reaper (fairShareSettle).
 */
export async function queueSetFairShare(db: Kysely<DB>, name: string, on: boolean): Promise<void> {
  await sql`select pgsched.set_queue_fair_share(${name}::text, ${on}::boolean)`.execute(db)
  const { rows } = await sql<{ open: string[]; changedAt: string }>`
    select pgsched.open_transactions() as open,
           (select fair_changed_at::text from pgsched.queues where name = ${name}::text) as "changedAt"`.execute(db)
  const mark = () => sql`select pgsched.fair_share_mark(${name}::text)`.execute(db)
  await mark()
  await claimsInFlightEnded(db)
  const open = rows[0]?.open ?? []
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS
  let ended = open.length === 0
  while (!ended && Date.now() < deadline) {
    const { rows: still } = await sql<{ any: boolean }>`select pgsched.any_open(${open}::text[]) as any`.execute(db)
    ended = !still[0]?.any
    if (!ended) await new Promise((r) => setTimeout(r, 5))
  }
  await mark()
  // Every transaction open at the change has ended and the queue was marked after: the reaper's two
  // marks (fairShareSettle) would find nothing more, so the change is recorded as settled, unless
  // another change has come since.
  if (ended && rows[0]?.changedAt) {
    await sql`update pgsched.queues set fair_waiting_for = coalesce(fair_waiting_for, ${open}::text[]), fair_settled_at = now()
               where name = ${name}::text and fair_changed_at = ${rows[0].changedAt}::timestamptz and fair_settled_at is null`.execute(db)
  }
}

/**
 * The reaper's part of a change of fair share (migration 0031): marks the due executions of each queue
 * whose fair share changed when it first sees the change, noting the transactions open then (any may
 * have written executions for the setting before), and again once those have all ended. A change the
 * setter (queueSetFairShare) recorded as settled is not marked again. Each step is
 * a statement of its own: marking locks due rows, and a claim locks due rows and then the settings
 * row, so no transaction here holds both. Returns how many executions it changed.
 */
export async function fairShareSettle(db: Kysely<DB>): Promise<number> {
  let n = 0
  const mark = async (queue: string) => {
    const { rows } = await sql<{ n: number }>`select pgsched.fair_share_mark(${queue}::text) as n`.execute(db)
    n += rows[0]?.n ?? 0
  }
  const { rows: seen } = await sql<{ name: string }>`
    update pgsched.queues set fair_waiting_for = pgsched.open_transactions()
     where fair_changed_at is not null and fair_waiting_for is null
    returning name`.execute(db)
  for (const q of seen) await mark(q.name)
  const { rows: settled } = await sql<{ name: string; changedAt: string }>`
    select name, fair_changed_at::text as "changedAt" from pgsched.queues
     where fair_waiting_for is not null and fair_settled_at is null and not pgsched.any_open(fair_waiting_for)`.execute(db)
  for (const q of settled) {
    await mark(q.name)
    await sql`update pgsched.queues set fair_settled_at = now()
               where name = ${q.name}::text and fair_changed_at = ${q.changedAt}::timestamptz`.execute(db)
  }
  return n
}

/** How many executions of one tenant a fair queue's key assignment takes at most (see fairKeysAssign). */
export const FAIR_KEYS_PER_TENANT = 1000

/**
 * Gives the due executions of fair queue `queue` that wait for their place in the fair order their
 * keys (pgsched.fair_keys_assign, migration 0031): up to FAIR_KEYS_PER_TENANT per tenant. Workers
 * call it before a claim of the queue when their last claim there said some wait or took nothing,
 * and after a claim that came back short (queue-claims.ts); when none waits it reads one index entry.
 * Returns how many got a key.
 */
export async function fairKeysAssign(db: Kysely<DB>, queue: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`${sql.raw(PREPARE)}
    select pgsched.fair_keys_assign(${queue}::text, ${FAIR_KEYS_PER_TENANT}::int) as n`.execute(db)
  return rows[0]?.n ?? 0
}

/**
 * Sets (or, with null, clears) a queue's concurrency limit. An admitted claim that counted the
 * running executions before the claims in flight committed left a bound (queues.running_bound)
 * without theirs: once they ended, the bound is cleared, and the next claim counts them.
 */
export async function queueSetConcurrencyLimit(db: Kysely<DB>, name: string, limit: number | null): Promise<void> {
  await sql`select pgsched.set_queue_concurrency_limit(${name}::text, ${limit}::int)`.execute(db)
  await claimsInFlightEnded(db)
  await sql`update pgsched.queues set running_bound = null where name = ${name}::text and running_bound is not null`.execute(db)
}
