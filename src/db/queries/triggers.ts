/**
 * The dispatcher's statements. One pass is one transaction:
 *   triggerClaimDue                        the dispatch lock (one dispatcher works at a time, the
 *                                          others stand by), the due triggers (FOR UPDATE SKIP
 *                                          LOCKED) and the next fire time not due yet
 *   triggerClaimQueued                     queue slots to release (once per interval)
 *   triggerJobActivityMany                 fresh read of job state and "busy" (overlap skip/queue)
 *   triggerFireAndAdvance                  insert the due executions (ON CONFLICT (job_id, scheduled_for) DO NOTHING)
 *                                          and move next_fire_at / last_fire_at / queued_fire_at on
 * Each write is one statement for the whole batch (unnest of arrays). Exactly
 * one execution per fire time holds twice over: a trigger row is handled by
 * one transaction at a time (its lock), and the unique key (job_id,
 * scheduled_for) rejects a second execution for the same fire time.
 */
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely'
import type { DB } from '../schema.ts'
import type { MisfirePolicy, OverlapPolicy } from '../../core/job.ts'
import type { TriggerSchedule } from '../../core/fire-times.ts'
import { uuidV7 } from '../../lib/uuid-v7.ts'
import { PREPARE } from '../pool.ts'
import { claimedTriggerColumns, fairKeyWaiting } from './fragments.ts'
import { keyArray, timeArray } from './array-literal.ts'

/** A locked trigger, as the dispatcher needs it: its schedule, and where it stands. */
export interface ClaimedTrigger extends TriggerSchedule {
  jobId: string
  /** null when next_fire_at is '-infinity' (not computed yet: submitted from SQL). */
  nextFireAt: Date | null
  /** When it was submitted, for a trigger whose next_fire_at is not computed yet ('-infinity'); else null. */
  submittedAt: Date | null
  /** next_fire_at exactly as stored (text), for the guard of triggerFireAndAdvance. */
  nextFireAtKey: string | null
  queuedFireAt: Date | null
  queuedFireAtKey: string | null
  overlapPolicy: OverlapPolicy
}

export interface TriggerClaimResult {
  /**
   * The time of this pass: the pinned `now`, else the transaction's now(), truncated to
   * milliseconds; null when nothing was claimed (the statement returned no row to carry it).
   */
  now: Date | null
  triggers: ClaimedTrigger[]
}

interface ClaimedTriggerRow {
  job_id: string
  kind: ClaimedTrigger['kind']
  cron_expression: string | null
  timezone: string
  interval_ms: string | null
  start_at: Date | null
  end_at: Date | null
  next_fire_at: Date | null
  next_fire_at_key: string | null
  queued_fire_at: Date | null
  queued_fire_at_key: string | null
  misfire_policy: MisfirePolicy
  misfire_max_runs: number
  overlap_policy: OverlapPolicy
  submitted_at: Date | null
  resumed_at: Date | null
  now: Date
}

function toClaimedTrigger(r: ClaimedTriggerRow): ClaimedTrigger {
  return {
    jobId: r.job_id,
    kind: r.kind,
    cronExpression: r.cron_expression,
    timezone: r.timezone,
    // bigint in SQL, bounded to 366 days by triggers_interval_ms_check: safe as a number.
    intervalMs: r.interval_ms === null ? null : Number(r.interval_ms),
    startAt: r.start_at,
    endAt: r.end_at,
    nextFireAt: r.next_fire_at,
    submittedAt: r.submitted_at,
    nextFireAtKey: r.next_fire_at_key,
    queuedFireAt: r.queued_fire_at,
    queuedFireAtKey: r.queued_fire_at_key,
    misfirePolicy: r.misfire_policy,
    misfireMaxRuns: r.misfire_max_runs,
    overlapPolicy: r.overlap_policy,
    resumedAt: r.resumed_at,
  }
}

/** Advisory lock key (per database) that one dispatcher at a time holds for its pass. */
const DISPATCH_LOCK_KEY = 7_411_730_296_012_556_001n

/**
 * Whether another dispatcher holds the dispatch lock now, in one statement outside any transaction
 * (the lock is taken and, when free, released again at once). A dispatcher standing by looks with
 * this before it opens a pass: one round trip instead of three (begin, the claim, commit).
 */
export async function dispatchLockTaken(db: Kysely<DB>): Promise<boolean> {
  const { rows } = await sql<{ free: boolean }>`${sql.raw(PREPARE)}
    select pg_try_advisory_xact_lock(${DISPATCH_LOCK_KEY.toString()}::bigint) as free`.execute(db)
  return rows[0]?.free !== true
}

export interface TriggerClaimDueParams {
  limit: number
  /** An injected time instead of the database's now() (null: now()); tests pin time with it. */
  now?: Date | null
  /** Take the dispatch lock first, and claim nothing if another dispatcher holds it (default true). */
  exclusive?: boolean
  /**
   * Also claim the triggers of overlap policy allow whose next fire time comes within this many ms
   * (default 0): their executions are created ahead of the fire time, due at it.
   */
  aheadMs?: number
  /**
   * The worker whose dispatcher this is: with the dispatch lock, the claim takes triggers only while no
   * live worker (pgsched.workers, seen within 15 s and not stopped) has an older id, so that of several
   * workers one dispatches and the others stand by. Null or absent: any dispatcher holding the lock.
   */
  workerId?: string | null
  /** Claim whatever the oldest live worker is (a standby's pass for work the working dispatcher is late with). */
  force?: boolean
}

export interface TriggerClaimDueResult {
  /** The time of this pass: the pinned `now`, else the transaction's now(), truncated to milliseconds. */
  now: Date
  /**
   * Milliseconds from the transaction's start (now()) to the end of this statement, on the database's
   * clock: `at − now − sinceNowMs` is how long until `at` as the statement ended.
   */
  sinceNowMs: number
  /** False: another dispatcher holds the dispatch lock, or (workerId) an older live worker dispatches; nothing was claimed. */
  held: boolean
  /**
   * The earliest next_fire_at values of unpaused triggers this claim could not take (not due yet, nor
   * within aheadMs for overlap policy allow), earliest first (at most UPCOMING_LIMIT), each with
   * whether its overlap policy is allow.
   */
  upcoming: Array<{ at: Date; allow: boolean }>
  triggers: ClaimedTrigger[]
}

/** How many of the next fire times not due yet a claim reads (for the loop's sleep). */
export const UPCOMING_LIMIT = 64

/** No live worker (seen within 15 s, not stopped) has an older id than `workerId`; true without one. */
const oldestLiveWorker = (workerId: string | null) => sql`(${workerId}::uuid is null
       or not exists (select 1 from pgsched.workers k
                       where k.id < ${workerId}::uuid
                         and k.stopped_at is null
                         and k.last_seen_at > now() - interval '15 seconds'))`

/**
 * In one statement: takes the dispatch lock (when `exclusive`), locks up to `limit` due triggers
 * (not paused, next_fire_at ≤ now, or ≤ now + aheadMs under overlap policy allow; earliest first)
 * for the caller's transaction, skipping rows another dispatcher holds, and reads the next fire
 * times it could not take (UPCOMING_LIMIT, earliest first), for the loop's sleep. Without the dispatch lock no trigger is read, let alone locked (a one-time filter).
 * Served by triggers_due_idx. Requires a transaction: the locks are what makes one pass the only
 * one handling these triggers.
 */
export async function triggerClaimDue(trx: Transaction<DB>, params: TriggerClaimDueParams): Promise<TriggerClaimDueResult> {
  const now = params.now ?? null
  const { rows } = await sql<ClaimedTriggerRow & { held: boolean; upcoming: string | null; upcoming_allow: string; since_now_ms: number }>`${sql.raw(PREPARE)}
    with pass as materialized (
      select p.now, p.now + ${params.aheadMs ?? 0}::int * interval '1 millisecond' as ahead, p.held
        from (select ${passNow(now)} as now,
                     -- the worker first: a dispatcher that is not to pass does not take the lock either (a
                     -- planned pass of the working one would find it held and stand by)
                     (not ${params.exclusive !== false}::bool
                      or ((${params.force === true}::bool or ${oldestLiveWorker(params.workerId ?? null)})
                          and pg_try_advisory_xact_lock(${DISPATCH_LOCK_KEY.toString()}::bigint))) as held) p
    ),
    claimed as (
      select ${claimedTriggerColumns}
        from pgsched.triggers t
       where (select held from pass)
         and ${dueTrigger}
       order by t.next_fire_at
       limit ${params.limit}::int
         for update of t skip locked
    ),
    upcoming as (${upcomingSelect})
    -- the upcoming fire times on the first row only: each row's copy would be parsed again
    select c.*, pass.now, pass.held, ${SINCE_NOW_MS} as since_now_ms,
           case when row_number() over () = 1 then coalesce(upcoming.upcoming, '') end as upcoming,
           case when row_number() over () = 1 then coalesce(upcoming.upcoming_allow, '') end as upcoming_allow
      from pass
     cross join upcoming   -- one row, computed once
      left join claimed c on true
  `.execute(trx)
  const first = rows[0] as { now: Date; held: boolean; since_now_ms: number }
  return {
    now: first.now,
    sinceNowMs: first.since_now_ms,
    held: first.held,
    upcoming: upcomingOf(rows.find((r) => r.upcoming !== null)),
    triggers: rows.filter((r) => r.job_id !== null).map(toClaimedTrigger),
  }
}

/**
 * Milliseconds since now() (the transaction's start) on the database's clock, read as the statement
 * ends: a loop that counts its sleep from the statement's answer would otherwise count from before
 * its transaction began, and under load wake early by the time it took to begin.
 */
const SINCE_NOW_MS = sql`(extract(epoch from clock_timestamp() - now()) * 1000)::float8`

/** The time of a pass: the pinned `now`, else now(), truncated to milliseconds (fire times are JavaScript dates). */
const passNow = (now: Date | null) => sql`date_trunc('milliseconds', coalesce(${now}::timestamptz, now()))`

/** A due trigger (alias t) of a pass (CTE pass: now, ahead): served by triggers_due_idx. */
const dueTrigger = sql`not t.paused
         and t.next_fire_at is not null
         and t.next_fire_at <= (select ahead from pass)
         and (t.next_fire_at <= (select now from pass) or t.overlap_policy = 'allow')`

/**
 * The next fire times not due in a pass (CTE pass), earliest first (UPCOMING_LIMIT): as text (epoch
 * milliseconds, comma-separated; 't'/'f' per time for overlap policy allow), whose split costs a
 * fraction of parsing arrays of timestamps and booleans.
 */
const upcomingSelect = sql`
      select string_agg((extract(epoch from f.next_fire_at) * 1000)::bigint::text, ',' order by f.next_fire_at) as upcoming,
             string_agg(case when f.overlap_policy = 'allow' then 't' else 'f' end, '' order by f.next_fire_at) as upcoming_allow
        from (select f.next_fire_at, f.overlap_policy
                from pgsched.triggers f
               where not f.paused and f.next_fire_at is not null and f.next_fire_at > (select now from pass)
                 and not (f.overlap_policy = 'allow' and f.next_fire_at <= (select ahead from pass))
               order by f.next_fire_at
               limit ${UPCOMING_LIMIT}::int) f`

function upcomingOf(listed: { upcoming: string | null; upcoming_allow: string | null } | undefined): Array<{ at: Date; allow: boolean }> {
  if (!listed?.upcoming) return []
  const allow = listed.upcoming_allow ?? ''
  return listed.upcoming.split(',').map((ms, i) => ({ at: new Date(Number(ms)), allow: allow[i] === 't' }))
}

export interface TriggerLookResult {
  /** The time of the look (as a pass's). */
  now: Date
  /** As TriggerClaimDueResult's (from the look's now() to the statement's end). */
  sinceNowMs: number
  /** Whether a pass would find work: a due trigger, or (when asked) a queue slot to release. */
  work: boolean
  /** With `workerId`: no live worker has an older id (this worker's dispatcher is the one to pass). */
  oldest: boolean
  /** As TriggerClaimDueResult's. */
  upcoming: Array<{ at: Date; allow: boolean }>
}

/**
 * Whether a dispatcher pass would find anything to do, without a transaction or a lock: a due
 * trigger (as triggerClaimDue would claim), or with `queued` a queue slot that looks releasable (as
 * triggerClaimQueued would lock); and the upcoming fire times. One statement, so that a pass the
 * loop makes only because its interval has come (no fire time planned) costs one round trip when
 * there is nothing to do, not a transaction of three or four.
 */
export async function triggerLook(
  db: Kysely<DB>,
  params: {
    now?: Date | null
    aheadMs?: number
    queued: boolean
    workerId?: string | null
    /**
     * A standby's look: a trigger not computed yet ('-infinity', a cron schedule just submitted) counts
     * as work only once it is this old (ms since its submit), which the working dispatcher's next look
     * (within its interval) would have computed by then. Else every submit of a cron job had every
     * standby make a pass of its own, taking the dispatch lock the working dispatcher's planned pass needs.
     */
    uncomputedLateMs?: number
  },
): Promise<TriggerLookResult> {
  const { rows } = await sql<{
    now: Date
    since_now_ms: number
    work: boolean
    oldest: boolean
    upcoming: string | null
    upcoming_allow: string | null
  }>`${sql.raw(PREPARE)}
    with pass as materialized (
      select p.now, p.now + ${params.aheadMs ?? 0}::int * interval '1 millisecond' as ahead
        from (select ${passNow(params.now ?? null)} as now) p
    ),
    upcoming as (${upcomingSelect})
    select pass.now, ${SINCE_NOW_MS} as since_now_ms,
           exists (select 1 from pgsched.triggers t where ${dueTrigger}
                     ${
                       params.uncomputedLateMs === undefined
                         ? sql``
                         : sql`and (t.next_fire_at <> '-infinity'
                                    or t.created_at <= (select now from pass) - ${params.uncomputedLateMs}::int * interval '1 millisecond')`
                     })
           or (${params.queued}::bool and exists (${queuedTriggers(sql`1`, sql`limit 1`)})) as work,
           ${params.workerId ?? null}::uuid is not null and ${oldestLiveWorker(params.workerId ?? null)} as oldest,
           upcoming.upcoming, upcoming.upcoming_allow
      from pass cross join upcoming
  `.execute(db)
  const r = rows[0] as (typeof rows)[number]
  return { now: r.now, sinceNowMs: r.since_now_ms, work: r.work, oldest: r.oldest, upcoming: upcomingOf(r) }
}

export interface TriggerClaimQueuedParams {
  limit: number
  /** Triggers already claimed by this pass. */
  excludeJobIds: readonly string[]
}

/**
 * Locks up to `limit` triggers whose queue slot (overlap policy queue) holds a
 * fire time and whose active job looks idle, so the pass can release the slot.
 * "Looks": this statement's snapshot may predate a commit that made the job
 * busy; the caller re-reads with triggerJobActivityMany after the lock.
 * Served by triggers_queued_idx. Requires a transaction.
 */
/** Triggers (alias t) whose queue slot holds a fire time and whose active job looks idle, by triggers_queued_idx. */
const queuedTriggers = (columns: RawBuilder<unknown>, tail: RawBuilder<unknown>, extra: RawBuilder<unknown> = sql``) => sql`
    select ${columns}
      from pgsched.triggers t
     where t.queued_fire_at is not null
       and not t.paused
       ${extra}
       and exists (select 1 from pgsched.jobs j where j.id = t.job_id and j.state = 'active')
       -- looks idle (re-checked after the lock by triggerJobActivityMany)
       and not exists (select 1 from pgsched.due d where d.job_id = t.job_id)
       and not exists (select 1 from pgsched.runs r where r.job_id = t.job_id)
     order by t.queued_fire_at
     ${tail}`

export async function triggerClaimQueued(trx: Transaction<DB>, params: TriggerClaimQueuedParams): Promise<TriggerClaimResult> {
  // Driven by triggers_queued_idx (usually empty): the job is looked up per queued trigger, never
  // the other way round, whatever the statistics say.
  const { rows } = await sql<ClaimedTriggerRow>`${sql.raw(PREPARE)}
    ${queuedTriggers(
      sql`${claimedTriggerColumns}, date_trunc('milliseconds', now()) as now`,
      sql`limit ${params.limit}::int for update of t skip locked`,
      sql`and t.job_id <> all(${params.excludeJobIds}::uuid[])`,
    )}
  `.execute(trx)
  return { now: rows[0]?.now ?? null, triggers: rows.map(toClaimedTrigger) }
}

export interface JobActivity {
  /** jobs.state: only 'active' jobs get executions. */
  state: 'active' | 'paused' | 'cancelled'
  /** The job has a pending or running execution. */
  busy: boolean
}

export interface TriggerJobActivityManyParams {
  jobIds: readonly string[]
}

/**
 * Job state and whether a run of the job is pending or running, for the
 * overlap policy. Call it after the triggers are locked: a statement started
 * after the lock sees every execution a previous holder of the lock committed.
 * "Busy": the job has a row in pgsched.due or pgsched.runs (an index probe of due,
 * a read of the small runs table), however long the job's history.
 */
export async function triggerJobActivityMany(trx: Transaction<DB>, params: TriggerJobActivityManyParams): Promise<Map<string, JobActivity>> {
  if (params.jobIds.length === 0) return new Map()
  const { rows } = await sql<{ id: string; state: JobActivity['state']; busy: boolean }>`${sql.raw(PREPARE)}
    select j.id, j.state,
           (exists (select 1 from pgsched.due d where d.job_id = j.id)
            or exists (select 1 from pgsched.runs r where r.job_id = j.id)) as busy
      from pgsched.jobs j
     where j.id = any(${params.jobIds}::uuid[])
  `.execute(trx)
  return new Map(rows.map((r) => [r.id, { state: r.state, busy: r.busy }]))
}

export interface TriggerAdvance {
  jobId: string
  /** The claimed next_fire_at / queued_fire_at (their keys): the guard. */
  expectedNextFireAtKey: string | null
  expectedQueuedFireAtKey: string | null
  /** New next_fire_at; null = exhausted. */
  nextFireAt: Date | null
  queuedFireAt: Date | null
  /** Why the schedule stopped (with nextFireAt null); null otherwise. */
  error: string | null
}

export interface TriggerFireAndAdvanceParams {
  /** One entry per execution to create: (job, fire time). */
  fires: ReadonlyArray<{ jobId: string; scheduledFor: Date }>
  /** One entry per trigger the pass handled. */
  advances: readonly TriggerAdvance[]
  /**
   * The time of the pass (default: the database's now()), the executions' created_at: one whose fire
   * time is later was created ahead of it (SCHEDULER_DISPATCHER_AHEAD_MS), which a pause takes back.
   */
  passAt?: Date | null
}

/**
 * The writes of a pass, in one statement:
 * - creates the executions for fire times, copying queue, type, priority, max_attempts and
 *   timeout_ms from the job; run_at = the fire time. Only for jobs in state 'active'. A fire time
 *   that already has an execution is left alone (unique (job_id, scheduled_for)). The executions
 *   insert trigger wakes workers.
 * - writes the outcome of the pass for each trigger, guarded by the next_fire_at and
 *   queued_fire_at the pass claimed.
 * Returns the number of executions created and the job ids whose trigger was updated; a missing
 * one means the trigger changed under the pass (the caller rolls back).
 */
export async function triggerFireAndAdvance(trx: Transaction<DB>, params: TriggerFireAndAdvanceParams): Promise<{ fired: number; advanced: string[] }> {
  const f = params.fires
  const a = params.advances
  if (f.length === 0 && a.length === 0) return { fired: 0, advanced: [] }
  const { rows } = await sql<{ created: string; advanced: string | null }>`${sql.raw(PREPARE)}
    with created as (
      insert into pgsched.due (execution_id, job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms, concurrency_key,
                               tenant, start_deadline, created_at, fair_key)
      select f.execution_id, f.job_id, j.queue, j.type, j.priority, f.scheduled_for, f.scheduled_for, j.max_attempts, j.timeout_ms, j.concurrency_key,
             j.tenant, f.scheduled_for + j.start_deadline_ms * interval '1 millisecond', coalesce(${params.passAt ?? null}::timestamptz, now()),
             ${fairKeyWaiting(sql`j.queue`)}
        -- the execution ids made here (uuidV7), as a submit's are: the column's default, pgsched.uuid_v7(), a
        -- SQL function called per row, cost the server about 6 µs a row
        from unnest(${keyArray(f.map(() => uuidV7()))}::uuid[], ${keyArray(f.map((x) => x.jobId))}::uuid[],
                    ${timeArray(f.map((x) => x.scheduledFor))}::timestamptz[]) as f(execution_id, job_id, scheduled_for)
        join pgsched.jobs j on j.id = f.job_id
       where j.state = 'active'   -- a paused or cancelled job gets no new runs
         -- a fire time never produces two executions: not one that ran or runs (history, runs) ...
         and not exists (select 1 from pgsched.execution_history h where h.job_id = f.job_id and h.scheduled_for = f.scheduled_for)
         and not exists (select 1 from pgsched.runs r where r.job_id = f.job_id and r.scheduled_for = f.scheduled_for)
      on conflict (job_id, scheduled_for) do nothing   -- ... nor one that waits (due_fire_time_key)
      returning job_id, scheduled_for
    ),
    -- each job's latest fire time created, once into one jsonb object read by key: a lookup in
    -- \`created\` for every trigger updated would scan it whole each time (CTE scans have no index, and
    -- the hot-path pool plans no hash join), which took half of a pass of 136 fire times
    latest as (
      select coalesce(jsonb_object_agg(job_id, scheduled_for), '{}'::jsonb) as by_job
        from (select job_id, max(scheduled_for) as scheduled_for from created group by job_id) c
    ),
    advanced as (
      update pgsched.triggers t
         set next_fire_at = u.next_fire_at,
             -- the latest fire time that got an execution in this pass
             last_fire_at = coalesce(((select by_job from latest) ->> t.job_id::text)::timestamptz, t.last_fire_at),
             queued_fire_at = u.queued_fire_at,
             error = u.error,
             updated_at = now()
        from unnest(${keyArray(a.map((x) => x.jobId))}::uuid[], ${a.map((x) => x.expectedNextFireAtKey)}::text[],
                    ${a.map((x) => x.expectedQueuedFireAtKey)}::text[], ${timeArray(a.map((x) => x.nextFireAt))}::timestamptz[],
                    ${timeArray(a.map((x) => x.queuedFireAt))}::timestamptz[], ${a.map((x) => x.error)}::text[])
          as u(job_id, expected_next_fire_at, expected_queued_fire_at, next_fire_at, queued_fire_at, error)
       where t.job_id = u.job_id
         -- guard: unchanged since this pass claimed it (text keys keep microseconds and '-infinity' exact)
         and t.next_fire_at is not distinct from u.expected_next_fire_at::timestamptz
         and t.queued_fire_at is not distinct from u.expected_queued_fire_at::timestamptz
      returning t.job_id
    )
    -- the ids as comma-separated text (uuids hold no comma): split costs a fraction of parsing an array literal
    select (select count(*) from created)::text as created, (select string_agg(job_id::text, ',') from advanced) as advanced
  `.execute(trx)
  const r = rows[0] as { created: string; advanced: string | null }
  return { fired: Number(r.created), advanced: r.advanced ? r.advanced.split(',') : [] }
}
