/**
 * The claim: the hot path. One statement takes up to `limit` due executions
 * (pgsched.due) of the worker's queues and types, highest priority first, locks
 * them with SKIP LOCKED (so concurrent workers never take the same row and
 * never wait on each other), moves them to pgsched.runs leased to the worker and
 * returns what the handler needs. Served by due_claim_idx. Paused and
 * limited queues are skipped; a limited queue is claimed by queueClaimLimited.
 * While someone listens to events, the same statement records a `started` event per row.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { eventsCaptured, eventsUnheard } from './event-capture.ts'
import { withPlainForm, type PlainForm } from './plain-forms.ts'
import { executionErrorSql, historyUpsert } from './fragments.ts'

export interface ExecutionClaimBatchParams {
  workerId: string
  queues: readonly string[]
  types: readonly string[]
  limit: number
  leaseMs: number
  /** An injected time instead of the database's now() (null: now()); tests pin time with it. */
  now?: Date | null
  /**
   * The claim of one limited queue (`queues` holds just it), under the lock of its settings row
   * (taken before this statement, so its snapshot sees every claim that held the lock before):
   * `capacity`, its concurrency limit (the statement takes at most the limit minus the executions of
   * the queue running now); `keyLimit`, its limit per concurrency key (null: no such limit); `fair`:
   * take turns between tenants (migrations/0031: in the order of due.fair_key).
   */
  limited?: { capacity: number | null; keyLimit: number | null; fair?: boolean; keyRate?: KeyRate }
  /**
   * The claim of one limited queue whose limits should not bind (`queues` holds just it), without its
   * settings row lock: the rows are taken as by the ordinary claim (or by the fair order, `fair`), then
   * pgsched.queue_claim_admit (migrations/0027) checks them against the limits under the lock, takes
   * their rate-limit start slots, or undoes the claim (SQLSTATE PGS01). See claim-admitted.ts.
   */
  admit?: { fair: boolean; horizonMs: number; rateSpacing: number }
  /** Also return each job's traceparent (only asked for while a tracer records: it costs a second probe of jobs per row). */
  withTraceparent?: boolean
  /**
   * The claim of one queue with fair share and no limit (`queues` holds just it): as the ordinary
   * claim, in the fair order, and only while the queue is fair, not paused and without limits (a
   * change of its settings after this statement began is seen by the claims after it: the setters
   * wait for this one, as for any claim in flight).
   */
  fairOnly?: boolean
  /**
   * A fair claim: whether it may move the queue's clock (pgsched.fair_clocks, the highest turn taken;
   * default true). A worker asks for it at most every FAIR_CLOCK_EVERY_MS per queue, the statement
   * writes it at most about that often (90 % of it, so that a worker asking on time is not refused
   * by a few milliseconds) whoever asks: the claims in between skip its three steps.
   */
  fairClock?: boolean
  /** The statement's form (plain-forms.ts); default the full form. */
  form?: PlainForm
  /**
   * How many of the rows the worker starts at once (its free slots; default all of them): the first
   * that many in the claim's order are marked begun (pgsched.runs.began), the rest wait in its local
   * queue and are marked by the heartbeat once they start. The reaper requeues an expired lease
   * that had not begun without counting an attempt (migration 0072).
   */
  startsNow?: number
}

/** How often a fair queue's clock moves at most (the claims' own check, and each worker's asking). */
export const FAIR_CLOCK_EVERY_MS = 200

/**
 * A rate limit per concurrency key in a limited claim: each key takes only as many executions as it
 * has start slots (`spacingMs` apart, from its row in queue_key_slots or now) within `horizonMs`.
 */
export interface KeyRate {
  spacingMs: number
  horizonMs: number
}

export interface ClaimedExecution {
  id: string
  jobId: string
  type: string
  queue: string
  priority: number
  attempt: number
  maxAttempts: number
  timeoutMs: number
  /** The fire time (epoch ms): sent as a number, which costs less to read than a timestamp. */
  scheduledForMs: number
  /**
   * A claim of a fair queue: whether executions of the queue are due that wait for their key
   * (fair_key 'infinity'; see fairKeysAssign). The same on every row.
   */
  keysWaiting?: boolean
  /** A fair queue's claim: the execution's turn (due.fair_key); read by inClaimOrder, which removes it. */
  fairKey?: number
  /** When it became due (epoch ms; the claim takes due executions by priority, then this). */
  runAtMs: number
  /**
   * When the claim took it (epoch ms): the started_at the claim wrote, read back from the row, so
   * `startedAtMs - runAtMs` is the database's own schedule lag for this attempt.
   */
  startedAtMs: number
  /** The W3C traceparent of the submit, when the claim asked for it (withTraceparent) and the job has one. */
  traceparent?: string | null
  payload: unknown
  /** The payload's size as stored (PostgreSQL's pg_column_size: after compression): bounds the worker's prefetch. */
  payloadBytes?: number
  /**
   * Set by the worker on every claimed execution: where it goes in the worker's buffer instead of
   * runAtMs (the claim's time, so that each claim's choice is kept: a fair-share tenant's work taken
   * by a claim is not put behind older work of a busy tenant, or another queue, taken by later claims).
   */
  orderMs?: number
  /** A rate-limited queue's execution: start the handler this many ms after the claim returns (its slot). */
  startDelayMs?: number
  /** The execution's concurrency key: returned only by a claim with a rate limit per key (`limited.keyRate`). */
  concurrencyKey?: string | null
  /** The tenant of `concurrencyKey` (keys are counted per tenant): returned with it. */
  keyTenant?: string
  /** An admitted claim (`admit`): what pgsched.queue_claim_admit returned (on the first row only). */
  admitted?: { firstSlotMs: number; spacingMs: number | null; running: number | null }
}

/**
 * A concurrency key as the per-key limits count it: the tenant's and the key (migration 0041), as
 * one text (the unit separator cannot be in a tenant name) for a jsonb object's keys. `at`: the
 * columns' qualifier (`c.`) or none.
 */
const TENANT_KEY = (at: RawBuilder<unknown>) => sql`(${at}tenant || chr(31) || ${at}concurrency_key)`

/** How many due executions a claim with a per-key limit looks at, per execution it may take (at least KEY_SCAN_MIN). */
const KEY_SCAN_FACTOR = 20
const KEY_SCAN_MIN = 500

/** The claim statement itself, unexecuted (for EXPLAIN in `scheduler bench`). */
export function executionClaimBatchQuery(params: ExecutionClaimBatchParams) {
  const now = params.now ?? null
  const admit = params.admit
  const limited = params.limited ?? (admit ? { capacity: null, keyLimit: null, fair: admit.fair } : undefined)
  const queue = params.queues[0]
  // One queue: `queue = $1` lets due_claim_idx return rows already in priority order (then LIMIT).
  // Several: each queue's rows are read the same way in a lateral subquery (`q.name`), and the
  // first `limit` of their union taken (`queue = any(...)` would read and sort every due row).
  const one = params.queues.length === 1 || limited !== undefined || params.fairOnly === true
  const queueMatch = one ? sql`queue = ${queue}::text` : sql`queue = q.name`
  // Paused and limited queues are not this statement's (see migrations/0012): one probe of
  // pgsched.queues per statement (a one-time filter, or an array computed once).
  const held = sql`(s.paused or s.fair_share or s.concurrency_limit is not null or s.key_concurrency_limit is not null or s.rate_limit is not null
                     or s.key_rate_limit is not null)`
  const fairOnly = params.fairOnly === true && limited === undefined
  const settingsMatch =
    limited !== undefined
      ? sql``
      : fairOnly
        ? sql`and exists (select 1 from pgsched.queues s where s.name = ${queue}::text and s.fair_share and not s.paused and s.concurrency_limit is null
                           and s.key_concurrency_limit is null and s.rate_limit is null and s.key_rate_limit is null)`
        : one
          ? sql`and not exists (select 1 from pgsched.queues s where s.name = ${queue}::text and ${held})`
          : sql`` // the several-queue claim leaves them out of its list of queues (below)
  const limit =
    limited?.capacity == null
      ? sql`${params.limit}::int`
      : sql`least(${params.limit}::int, greatest(0, ${limited.capacity}::int - (select count(*)::int from pgsched.runs r
                                                                          where r.queue = ${queue}::text)))`
  // Fair share (migration 0031): the due work of the queue in its fair order, from due_fair_idx
  // (executions still waiting for their key are not claimed before they have it).
  const fair = limited?.fair === true || fairOnly
  const order = fair ? sql`priority desc, fair_key, run_at, execution_id` : sql`priority desc, run_at, execution_id`
  // begun: the rows the worker starts at once, the first `startsNow` in the claim's order (the order
  // its local queue takes them in: inClaimOrder); numbered only when the claim takes more than that
  const startsNow = params.startsNow ?? params.limit
  const began = startsNow >= params.limit ? sql`true` : startsNow <= 0 ? sql`false` : sql`row_number() over (order by ${order}) <= ${startsNow}::int`
  const due = (columns: RawBuilder<unknown>, lock: RawBuilder<unknown>, rowLimit: RawBuilder<unknown>, extra: RawBuilder<unknown> = sql``) => sql`
      select ${columns}
        from pgsched.due
       where ${queueMatch}
         ${settingsMatch}
         ${fair ? sql`and fair_key < 'infinity'` : sql``}
         ${extra}
         and type = any(${params.types}::text[])              -- only types this worker can run
         and run_at <= coalesce(${now}::timestamptz, now())
         and (start_deadline is null or attempt > 0 or start_deadline > coalesce(${now}::timestamptz, now()))   -- not expired
       order by ${order}
       limit ${rowLimit}
         ${lock}`
  const keyLimit = limited?.keyLimit ?? null
  const keyRate = limited?.keyRate ?? null
  const keyed = keyLimit !== null || keyRate !== null
  // A per-key limit: leave out keys already at their limit (counted in pgsched.runs), and
  // with a rate limit per key those whose next slot is past the horizon, so one key's backlog cannot
  // fill the window.
  const keyFilter = sql`${
    keyLimit === null
      ? sql``
      : sql`and (concurrency_key is null or (tenant, concurrency_key) not in (
                  select r.tenant, r.concurrency_key from pgsched.runs r
                   where r.queue = ${queue}::text and r.concurrency_key is not null
                   group by r.tenant, r.concurrency_key having count(*) >= ${keyLimit}::int))`
  }${
    keyRate === null
      ? sql``
      : sql`
         and (concurrency_key is null or (tenant, concurrency_key) not in (
                  select k.tenant, k.concurrency_key from pgsched.queue_key_slots k
                   where k.queue = ${queue}::text and k.next_start_at > clock_timestamp() + ${keyRate.horizonMs}::float8 * interval '1 millisecond'))`
  }`
  const scan = !keyed ? sql`${params.limit}::int` : sql`${Math.max(KEY_SCAN_MIN, params.limit * KEY_SCAN_FACTOR)}::int`
  const candidateColumns = sql`execution_id as id, job_id, tenant, concurrency_key, priority, ${fair ? sql`fair_key` : sql`null::float8 as fair_key`}, run_at`
  const dueCte = !keyed
    ? // rows other workers hold are skipped, not waited on
      one
      ? sql`due as materialized (${due(sql`execution_id as id, job_id, ctid as rid`, sql`for update skip locked`, limit)}
    )`
      : // each queue's first `limit` due rows, locked (those beyond the first `limit` of all are
        // unlocked again at commit), from the queues that are not paused or limited
        sql`due as materialized (
      select id, job_id, rid from (
        select c.* from unnest(${params.queues}::text[]) as q(name)
         cross join lateral (${due(sql`execution_id as id, job_id, ctid as rid, priority, run_at`, sql`for update skip locked`, limit)}) c
         where q.name <> all(array(select s.name from pgsched.queues s where ${held}))
      ) x
      order by priority desc, run_at, id
      limit ${limit}
    )`
    : // The per-key forms lock no row to skip: the claims of this queue take turns on its settings row.
      // Numbered within their key in claim order; a key takes no more than its limit minus what of
      // it runs now, and no more than its start slots within the horizon.
      sql`offered as (${due(candidateColumns, sql``, scan, keyFilter)}),
    head as (
      select o.*, row_number() over (order by o.priority desc, o.fair_key, o.run_at, o.id) as pos from offered o
    ),
    numbered as (
      select h.*, row_number() over (partition by h.tenant, h.concurrency_key order by h.pos) as nth from head h
    ),
    -- what of each key runs now, counted once into one jsonb object read by key (a join to every
    -- numbered row would compare each with every running key: no hash join in the hot-path pool)
    key_running as (
      select coalesce(jsonb_object_agg(${TENANT_KEY(sql``)}, n), '{}'::jsonb) as by_key
        from (select tenant, concurrency_key, count(*)::int as n
                from pgsched.runs
               where ${keyLimit === null ? sql`false and ` : sql``}queue = ${queue}::text and concurrency_key is not null
               group by tenant, concurrency_key) r
    ),
    eligible as (
      select c.id, c.job_id, c.pos
        from numbered c
        ${keyRate === null ? sql`` : sql`left join pgsched.queue_key_slots ks on ks.queue = ${queue}::text and ks.tenant = c.tenant and ks.concurrency_key = c.concurrency_key`}
       where c.concurrency_key is null
          or (${keyLimit === null ? sql`true` : sql`c.nth <= ${keyLimit}::int - coalesce(((select by_key from key_running) ->> ${TENANT_KEY(sql`c.`)})::int, 0)`}
              and ${
                keyRate === null
                  ? sql`true`
                  : sql`c.nth <= floor((${keyRate.horizonMs}::float8 - greatest(0, extract(epoch from coalesce(ks.next_start_at, clock_timestamp()) - clock_timestamp()) * 1000))
                                       / ${keyRate.spacingMs}::float8) + 1`
              })
    ),
    due as materialized (
      select id, job_id from eligible order by pos limit ${limit}
    )`
  return sql<ClaimedExecution>`${sql.raw(PREPARE)}
    with ${dueCte},
    -- the due rows leave pgsched.due: the locked ones by their ctids (no index descent; a row changed
    -- after this statement's snapshot is locked but not seen, so not taken: it is claimed later), the
    -- per-key forms' by key (they lock no row before this: a row another claim or a cancel took since
    -- is not there to delete, and its ctid could be another row's by then) ...
    taken as (
      delete from pgsched.due d
       where ${keyed ? sql`d.execution_id = any(array(select id from due))` : sql`d.ctid = any(array(select rid from due))`}
      returning d.*
    ),
    -- each with its job (one probe of the job's partition per row: \`offset 0\` keeps it a nested
    -- loop); the payload for the handler, and the state: a job cancelled before this statement
    -- started gets no run (jobCancelSweep relies on it), its execution is cancelled instead
    withjob as (
      select t.*, j.payload, j.state as job_state ${params.withTraceparent ? sql`, j.traceparent` : sql``}
        from taken t
        cross join lateral (select payload, state ${params.withTraceparent ? sql`, traceparent` : sql``}
                              from pgsched.jobs where id = t.job_id offset 0) j
    ),
    dropped as (
      ${historyUpsert(sql`select execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, null::timestamptz,
                                 concurrency_key, tenant, start_deadline, created_at, 'cancelled', now(), null::jsonb,
                                 ${executionErrorSql({ message: sql`'cancelled'`, name: sql`'CancelledError'`, attempt: sql`attempt` })},
                                 null::text, null::jsonb, null::uuid
                            from withjob where job_state = 'cancelled'`)}
    ),
    -- ... and become leases
    claimed as (
      insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                                scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at,
                                began, unstarted_requeues)
      select execution_id, job_id, ${params.workerId}::uuid, attempt + 1,
             coalesce(${now}::timestamptz, now()) + ${params.leaseMs}::int * interval '1 millisecond',
             -- when the rows were taken (one instant for the batch, read once its rows are locked), not
             -- the statement's start: a claim that waited or was starved must not date its rows before
             -- those of claims that ran in the meantime
             coalesce(${now}::timestamptz, (select clock_timestamp())),
             queue, type, priority, run_at, scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at,
             ${began}, unstarted_requeues
        from withjob
       where job_state <> 'cancelled'
      returning execution_id as id, job_id, type, queue, attempt, tenant, started_at
    ),
    ${
      fair && params.fairClock !== false
        ? sql`-- where the fair queue's claims are (pgsched.fair_head): the highest key taken, moved at most
    -- every 200 ms (a clock moved since is left alone)
    clock_taken as (
      -- (a row whose key a concurrent change of the setting cleared or reset comes back with it)
      select priority, max(fair_key) as fair_key from taken where fair_key < 'infinity' group by priority
    ),
    clock_moved as (
      update pgsched.fair_clocks c set fair_key = m.fair_key, updated_at = now()
        from clock_taken m
       where c.queue = ${queue}::text and c.priority = m.priority and c.fair_key < m.fair_key
         and c.updated_at < now() - ${FAIR_CLOCK_EVERY_MS * 0.9}::float8 * interval '1 millisecond'
    ),
    clock_started as (
      insert into pgsched.fair_clocks (queue, priority, fair_key)
      select ${queue}::text, m.priority, m.fair_key from clock_taken m
       where not exists (select 1 from pgsched.fair_clocks c where c.queue = ${queue}::text and c.priority = m.priority)
      on conflict do nothing
    ),`
        : sql``
    }
    ${
      params.form?.events === true
        ? eventsUnheard()
        : eventsCaptured(sql`select 'started', tenant, job_id, id, queue, type, attempt from claimed
                           union all select 'cancelled', tenant, job_id, id, queue, type, attempt from dropped`)
    }${
      admit
        ? sql`,
    -- after every row is taken (it reads their count): the check under the settings row lock
    admitted as (
      select json_build_object('firstSlotMs', a.first_slot_ms, 'spacingMs', a.spacing_ms, 'running', a.running) as a
        from pgsched.queue_claim_admit(${queue}::text, (select count(*)::int from claimed), ${params.workerId}::uuid,
                                       (select started_at from claimed limit 1), ${admit.fair}::boolean,
                                       ${admit.horizonMs}::float8, ${admit.rateSpacing}::float8) a
    )`
        : sql``
    }
    -- the rows claimed, read from withjob (what claimed inserted, with the payload; the same filter):
    -- a join of the two CTEs would compare every row with every other (CTE scans have no index)
    select w.execution_id as id, w.job_id as "jobId", w.type, w.queue, w.priority, w.attempt + 1 as attempt, w.max_attempts as "maxAttempts",
           w.timeout_ms as "timeoutMs", (extract(epoch from w.scheduled_for) * 1000)::float8 as "scheduledForMs",
           (extract(epoch from w.run_at) * 1000)::float8 as "runAtMs",
           (extract(epoch from c.started_at) * 1000)::float8 as "startedAtMs",
           w.payload, pg_column_size(w.payload) as "payloadBytes" ${params.withTraceparent ? sql`, w.traceparent` : sql``}
           ${
             // on the first row only: read once, not parsed again for every row
             admit ? sql`, case when row_number() over () = 1 then (select a from admitted) end as "admitted"` : sql``
           }
           ${
             fair
               ? sql`, exists (select 1 from pgsched.due k where k.queue = ${queue}::text and k.fair_key = 'infinity'
                                 and k.run_at <= coalesce(${now}::timestamptz, now())) as "keysWaiting"`
               : sql``
           }
           ${keyRate ? sql`, w.concurrency_key as "concurrencyKey", w.tenant as "keyTenant"` : sql``}
           ${fair ? sql`, w.fair_key as "fairKey"` : sql``}
      from withjob w
      -- one started_at for the batch (claimed's rows all have it); no row when nothing was claimed
      cross join (select started_at from claimed limit 1) c
     where w.job_state <> 'cancelled'
  `
}

/** Claims, in the plain form (without event capture) while nobody listens (plain-forms.ts). */
export async function executionClaimBatch(db: Kysely<DB>, params: ExecutionClaimBatchParams): Promise<ClaimedExecution[]> {
  const { rows } = await withPlainForm(db, [], (form) => executionClaimBatchQuery({ ...params, form }).execute(db))
  return inClaimOrder(rows)
}

/**
 * The rows of one claim statement in the claim's own order (RETURNING gives none): by priority, then
 * in a fair queue by turn (fairKey, then dropped), then by due time. The start slots of a rate limit
 * and the worker's buffer follow it, so a fair claim's turns are kept: by due time alone, a tenant's
 * work taken beside an older backlog would start after the whole of that backlog the claim took.
 */
export function inClaimOrder(rows: ClaimedExecution[]): ClaimedExecution[] {
  rows.sort((a, b) => b.priority - a.priority || (a.fairKey ?? 0) - (b.fairKey ?? 0) || a.runAtMs - b.runAtMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  for (const r of rows) delete r.fairKey
  return rows
}

export interface QueueSetting {
  name: string
  paused: boolean
  concurrencyLimit: number | null
  keyConcurrencyLimit: number | null
  rateLimit: number | null
  ratePeriodMs: number | null
  keyRateLimit: number | null
  keyRatePeriodMs: number | null
  fairShare: boolean
}

/** The settings of `queues` that have any (a queue without a row is active and unlimited). */
export async function queueSettingsOf(db: Kysely<DB>, queues: readonly string[]): Promise<QueueSetting[]> {
  const { rows } = await sql<QueueSetting>`${sql.raw(PREPARE)}
    select name, paused, concurrency_limit as "concurrencyLimit", key_concurrency_limit as "keyConcurrencyLimit", rate_limit as "rateLimit",
           rate_period_ms as "ratePeriodMs", key_rate_limit as "keyRateLimit", key_rate_period_ms as "keyRatePeriodMs",
           fair_share as "fairShare"
      from pgsched.queues where name = any(${queues}::text[])`.execute(db)
  return rows
}
