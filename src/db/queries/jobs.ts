/**
 * SQL that writes jobs: batch insert (job + execution or trigger + idempotency
 * key in one statement) and the control transitions (cancel, pause, resume).
 * Reading jobs (view, keyset list) and the mapping to domain types: job-views.ts.
 * Each records its events (submitted, cancelled, paused, resumed) while someone listens.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { keyArray } from './array-literal.ts'
import { ceilMs, createdAhead, executionErrorSql, executionsFromSubmitted, executionsFromSubmittedPlain, fairShareUnused, historyUpsert } from './fragments.ts'
import { withPlainForm, type PlainForm } from './plain-forms.ts'
import { eventsCaptured, eventsUnheard } from './event-capture.ts'
import type { NormalizedSubmit } from '../../core/job.ts'
import type { QuotaRejection } from './admission.ts'
import { claimsInFlightEnded } from './queues.ts'

type Executor = Kysely<DB>

export interface JobInsertManyParams {
  tenant: string
  createdBy: string | null
  jobs: ReadonlyArray<NormalizedSubmit & { id: string; executionId: string; traceparent?: string | null }>
}

export interface JobInsertOutcome {
  /** The id asked for. */
  id: string
  created: boolean
  /** Set when the idempotency key already belonged to another job. */
  existingJobId: string | null
  existingRequestHash: string | null
  /** Not written: refused by the tenant's admission quotas (set by insertRows, never by the insert itself). */
  rejected?: QuotaRejection
  /**
   * When a recurring job was submitted, by the database's clock (SUBMITTED_AT): its created_at, from
   * which its first fire time is reckoned. Unset for a one-time job, dated by the transaction (now()).
   */
  submittedAt?: Date
  /**
   * The same up to the whole millisecond (fragments.ts ceilMs): what the dispatcher reckons the first
   * fire time from (submittedAt cuts the microseconds off).
   */
  fireTimesFrom?: Date
}

/**
 * A recurring job's submit time: its statement's, not the start of a caller's transaction around it
 * (a schedule's first fire time is reckoned from it, so a long transaction must not count the fire
 * times since it began as due), and never before the transaction's own start (inside a procedure that
 * commits, statement_timestamp() stays at the CALL while now() moves on with each transaction).
 */
const SUBMITTED_AT = sql`greatest(now(), statement_timestamp())`

/**
 * The columns both insert forms start with, one array each (for unnest): id, execution_id, type,
 * queue, priority, payload, max_attempts, timeout_ms, backoff_base_ms, backoff_max_ms, concurrency_key,
 * start_deadline_ms.
 */
function jobArrays(j: JobInsertManyParams['jobs']) {
  const col = <T>(f: (x: (typeof j)[number]) => T): T[] => j.map(f)
  const key = (f: (x: (typeof j)[number]) => string | number): string => keyArray(j.map(f))
  return sql.join([
    sql`${key((x) => x.id)}::uuid[]`,
    sql`${key((x) => x.executionId)}::uuid[]`,
    sql`${col((x) => x.type)}::text[]`,
    sql`${col((x) => x.queue)}::text[]`,
    sql`${key((x) => x.priority)}::int[]`,
    sql`${col((x) => x.payloadJson)}::text[]`,
    sql`${key((x) => x.maxAttempts)}::int[]`,
    sql`${key((x) => x.timeoutMs)}::int[]`,
    sql`${key((x) => x.backoffBaseMs)}::int[]`,
    sql`${key((x) => x.backoffMaxMs)}::int[]`,
    sql`${col((x) => x.concurrencyKey)}::text[]`,
    sql`${col((x) => x.startDeadlineMs)}::int[]`,
  ])
}

/**
 * The traceparent column of an insert (migration 0023): only when a submit of the batch was traced,
 * so an untraced insert sends no extra parameter. `array`: the unnest argument; `alias`: its name
 * at the end of the unnest's column list; `column`: its place in the jobs column and select lists.
 */
function traceparentColumn(j: JobInsertManyParams['jobs']) {
  if (!j.some((x) => x.traceparent)) return { array: sql``, alias: sql``, column: sql`` }
  return { array: sql`, ${j.map((x) => x.traceparent ?? null)}::text[]`, alias: sql`, traceparent`, column: sql`, traceparent` }
}

/**
 * Inserts jobs with their execution (run now / at) or trigger (cron / interval)
 * in one statement. A job whose idempotency key is already taken is not
 * inserted; its outcome names the existing job. Atomic on its own; runs inside
 * the caller's transaction when given one.
 */
export async function jobInsertMany(db: Executor, params: JobInsertManyParams): Promise<{ outcomes: JobInsertOutcome[]; now: Date }> {
  const j = params.jobs
  if (j.every((x) => x.idempotencyKey === null && (x.kind === 'now' || x.kind === 'at'))) return jobInsertPlain(db, params)
  const col = <T>(f: (x: (typeof j)[number]) => T): T[] => j.map(f)
  const tp = traceparentColumn(j)
  const result = await sql<{
    id: string
    created: boolean
    existing_job_id: string | null
    existing_request_hash: string | null
    now: Date
    submitted_at: Date | null
    fire_times_from: Date | null
  }>`${sql.raw(PREPARE)}
    with input as (
      select *
        from unnest(
          ${jobArrays(j)}, ${col((x) => x.idempotencyKey)}::text[], ${col((x) => x.requestHash)}::text[],
          ${col((x) => x.kind)}::text[], ${col((x) => x.runAt)}::timestamptz[], ${col((x) => x.cron)}::text[],
          ${col((x) => x.timezone)}::text[], ${col((x) => x.intervalMs)}::bigint[], ${col((x) => x.startAt)}::timestamptz[],
          ${col((x) => x.endAt)}::timestamptz[], ${col((x) => x.firstFireAt)}::timestamptz[], ${col((x) => x.misfirePolicy)}::text[],
          ${col((x) => x.misfireMaxRuns)}::int[], ${col((x) => x.overlapPolicy)}::text[]${tp.array}
        ) with ordinality as i(id, execution_id, type, queue, priority, payload, max_attempts, timeout_ms, backoff_base_ms,
                               backoff_max_ms, concurrency_key, start_deadline_ms, idempotency_key, request_hash, kind, run_at, cron, timezone, interval_ms,
                               start_at, end_at, first_fire_at, misfire_policy, misfire_max_runs, overlap_policy${tp.alias}, ord)
    ),
    keyed as (
      insert into pgsched.job_idempotency_keys (tenant, idempotency_key, job_id, request_hash)
      select ${params.tenant}::text, idempotency_key, id, request_hash
        from input
       where idempotency_key is not null
      on conflict do nothing   -- waits for a concurrent insert of the same key, then skips
      returning job_id
    ),
    accepted as (
      select * from input where idempotency_key is null or id in (select job_id from keyed)
    ),
    new_jobs as (
      -- a recurring job dated by its statement (SUBMITTED_AT): its first fire time is reckoned from it
      -- (below, and by the dispatcher from the trigger's); a one-time job by the transaction, as its execution
      insert into pgsched.jobs (id, tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                                timeout_ms, idempotency_key, concurrency_key, start_deadline_ms, created_by, created_at${tp.column})
      select id, ${params.tenant}::text, type, queue, priority, payload::jsonb, max_attempts, backoff_base_ms, backoff_max_ms,
             timeout_ms, idempotency_key, concurrency_key, start_deadline_ms, ${params.createdBy}::text,
             case when kind in ('cron', 'interval') then ${SUBMITTED_AT} else now() end${tp.column}
        from accepted
      returning id
    ),
    new_executions as (
      ${executionsFromSubmitted(params.tenant, sql`accepted where kind in ('now', 'at')`)}
    ),
    new_triggers as (
      insert into pgsched.triggers (job_id, kind, cron_expression, timezone, interval_ms, start_at, end_at, next_fire_at,
                                    misfire_policy, misfire_max_runs, overlap_policy, created_at)
      select id, kind, cron, timezone, interval_ms, start_at, end_at,
             -- none when the window ends before the first fire time: nothing to come. A cron
             -- schedule's first fire time is left to the dispatcher ('-infinity': not computed yet),
             -- which reckons it from created_at, the database's clock, not the submitting host's
             -- (first_fire_at, from that host's clock, only says whether one comes at all)
             (select case when f.at <= coalesce(end_at, 'infinity') then f.at end
                from (select case when kind = 'cron' then case when first_fire_at is not null then '-infinity'::timestamptz end
                                  else greatest(coalesce(start_at, ${SUBMITTED_AT}), ${SUBMITTED_AT}) end as at) f),
             misfire_policy, misfire_max_runs, overlap_policy, ${SUBMITTED_AT}
        from accepted
       where kind in ('cron', 'interval')
    ),
    ${eventsCaptured(sql`select 'submitted', ${params.tenant}::text, id, case when kind in ('now', 'at') then execution_id end, queue, type,
                                case when kind in ('now', 'at') then 0 end   -- a recurring job's submit: no execution, no attempt
                           from accepted order by ord`)}
    select i.id,
           i.id in (select id from new_jobs) as created,
           k.job_id as existing_job_id,
           k.request_hash as existing_request_hash,
           now() as now,
           case when i.kind in ('cron', 'interval') then ${SUBMITTED_AT} end as submitted_at,
           case when i.kind in ('cron', 'interval') then ${ceilMs(SUBMITTED_AT)} end as fire_times_from
      from input i
      left join pgsched.job_idempotency_keys k
        on i.idempotency_key is not null
       and k.tenant = ${params.tenant}::text
       and k.idempotency_key = i.idempotency_key
     order by i.ord
  `.execute(db)
  return {
    now: result.rows[0]?.now ?? new Date(),
    outcomes: result.rows.map((r) => ({
      id: r.id,
      created: r.created,
      existingJobId: r.created ? null : r.existing_job_id,
      existingRequestHash: r.created ? null : r.existing_request_hash,
      ...(r.submitted_at === null ? {} : { submittedAt: r.submitted_at }),
      ...(r.fire_times_from === null ? {} : { fireTimesFrom: r.fire_times_from }),
    })),
  }
}

/**
 * The common case, one-time jobs without idempotency keys: no key to claim and
 * no schedule, so two plain inserts (about half the work of the general form).
 */
async function jobInsertPlain(db: Executor, params: JobInsertManyParams): Promise<{ outcomes: JobInsertOutcome[]; now: Date }> {
  const queues = [...new Set(params.jobs.map((x) => x.queue))]
  // in the plain form (no event capture, no fair-share numbering) where it applies (plain-forms.ts)
  const result = await withPlainForm(db, queues, (form) => jobInsertPlainQuery(params, form).execute(db))
  const j = params.jobs
  return {
    now: result.rows[0]?.now ?? new Date(),
    outcomes: j.map((x) => ({ id: x.id, created: true, existingJobId: null, existingRequestHash: null })),
  }
}

function jobInsertPlainQuery(params: JobInsertManyParams, form: PlainForm) {
  const j = params.jobs
  const tp = traceparentColumn(j)
  return sql<{ now: Date }>`${sql.raw(PREPARE)}
    with input as (
      select *
        from unnest(
          ${jobArrays(j)}, ${j.map((x) => x.runAt)}::timestamptz[]${tp.array}
        ) as i(id, execution_id, type, queue, priority, payload, max_attempts, timeout_ms, backoff_base_ms, backoff_max_ms,
               concurrency_key, start_deadline_ms, run_at${tp.alias})
    ),
    new_jobs as (
      insert into pgsched.jobs (id, tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                                timeout_ms, concurrency_key, start_deadline_ms, created_by${tp.column})
      select id, ${params.tenant}::text, type, queue, priority, payload::jsonb, max_attempts, backoff_base_ms, backoff_max_ms,
             timeout_ms, concurrency_key, start_deadline_ms, ${params.createdBy}::text${tp.column}
        from input
    ),
    new_executions as (
      ${form.fair ? executionsFromSubmittedPlain(params.tenant, sql`input`) : executionsFromSubmitted(params.tenant, sql`input where true`)}
    ),
    ${form.fair ? sql`${fairShareUnused(sql`input where true`)},` : sql``}
    ${form.events ? eventsUnheard() : eventsCaptured(sql`select 'submitted', ${params.tenant}::text, id, execution_id, queue, type, case when execution_id is not null then 0 end from input`)}
    select now() as now
  `
}

/** The error a cancelled execution ends with (the row before the update: a running one names its worker). */
const cancelledError = executionErrorSql({
  message: sql`'cancelled'`,
  name: sql`'CancelledError'`,
  attempt: sql`attempt`,
  workerId: sql`worker_id`,
})

export interface JobCancelParams {
  tenant: string
  id: string
}

/**
 * Most execution ids one `pgsched_cancel` notification names (a JSON array of about 40 bytes an id):
 * PostgreSQL refuses a payload of 8000 bytes or more, so a cancel of more running executions sends
 * several (migration 0080 does the same in pgsched.job_cancel_effects).
 */
const CANCEL_NOTIFY_IDS = 100

/**
 * What cancelling the jobs of a `job` CTE (updated to cancelled, returning id, tenant, queue, type)
 * also does, as further CTEs: their triggers stop, their pending and running executions leave
 * pgsched.due and pgsched.runs and are cancelled in the history (`cancelled`; `running` names those that ran), an event per execution cancelled or
 * one per job when none was, and notifications on `pgsched_cancel` for the running ones (up to
 * CANCEL_NOTIFY_IDS each).
 */
export const jobCancelEffects = cancelEffects(true)

/** jobCancelEffects; `first` false: the sweep after the cancel (jobCancelSweep), which records no event of the job alone. */
function cancelEffects(first: boolean): RawBuilder<unknown> {
  return sql`
    stop_trigger as (
      update pgsched.triggers
         set next_fire_at = null, updated_at = now()
       where ${first}::boolean and job_id in (select id from job)
    ),
    running as (
      select execution_id as id from pgsched.runs
       where job_id in (select id from job)
    ),
    dropped as (
      delete from pgsched.due d where d.job_id in (select id from job)
      returning execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
                null::timestamptz as started_at, concurrency_key, tenant, start_deadline, created_at, null::uuid as worker_id,
                null::text as output_uri,
                ${createdAhead(sql`d`)} and exists (select 1 from pgsched.triggers t where t.job_id = d.job_id) as ahead
    ),
    stopped as (
      delete from pgsched.runs where job_id in (select id from job)
      returning execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
                started_at, concurrency_key, tenant, start_deadline, created_at, worker_id, output_uri, false as ahead
    ),
    cancelled as (
      ${historyUpsert(sql`select execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
                                 started_at, concurrency_key, tenant, start_deadline, created_at, 'cancelled', now(), null::jsonb,
                                 ${cancelledError}, output_uri, null::jsonb, worker_id
                            -- an execution created ahead of a fire time still to come (createdAhead) leaves no trace:
                            -- that fire time is not the job's, now it is cancelled
                            from (select * from dropped union all select * from stopped) x where not x.ahead`)}
    ),
    ${eventsCaptured(sql`select 'cancelled', tenant, job_id, id, queue, type, attempt from cancelled
                          union all
                         select 'cancelled', tenant, id, null::uuid, queue, type, null::int from job
                          where ${first}::boolean and id not in (select job_id from cancelled)`)},
    notified as (
      select pg_notify('pgsched_cancel', json_agg(c.id order by c.id)::text)
        from (select id, (row_number() over (order by id) - 1) / ${CANCEL_NOTIFY_IDS}::int as part from running) c
       group by c.part
    )`
}

/**
 * The sweep after cancelling `ids` (once the cancel committed): a claim, a retry or a hand-back in
 * flight when the cancel ran moved an execution of those jobs into pgsched.runs or pgsched.due where
 * the cancel's statement could not see it (a row inserted by a transaction it did not wait for).
 * This waits, blocking no one, until the write transactions on runs that started before now have
 * ended (as a queue pause does), then cancels what they left. A claim that starts after the cancel
 * committed takes no execution of a cancelled job (claim.ts), so nothing can appear after this.
 * Returns the ids of executions that were running.
 */
export async function jobCancelSweep(db: Executor, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return []
  await claimsInFlightEnded(db)
  return jobCancelSweepNow(db, ids)
}

/**
 * The sweep's statement alone, with no wait for the claims in flight: inside the cancel's own
 * transaction (a caller's), as a statement after the cancel's, its snapshot includes what the cancel
 * waited for (a worker's outcome write holding a run's row, and the retry that write put in
 * pgsched.due), which the cancel's own statement could not see. Returns the executions it took from
 * a worker.
 */
export async function jobCancelSweepNow(db: Executor, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<{ running_ids: string[] | null }>`
    with job as (
      select id, tenant, queue, type from pgsched.jobs where id = any(${[...ids]}::uuid[]) and state = 'cancelled'
    ),
    ${cancelEffects(false)}
    select (select array_agg(id) from running) as running_ids,
           (select count(*) from notified) as notified,
           (select count(*) from cancelled) as cancelled`.execute(db)
  return rows[0]?.running_ids ?? []
}

/**
 * What a cancel's sweep could not reach: a cancel inside a caller's transaction has no sweep after
 * its commit, and a process that stopped between a cancel and its sweep ran none, so an execution
 * that a claim in flight moved into pgsched.runs can still hold a lease of a cancelled job. Each such
 * execution is cancelled as the sweep would (its worker loses the lease and stops; a notification
 * makes that immediate). Run by the reaper; returns how many it cancelled.
 */
export async function jobCancelLeftovers(db: Executor): Promise<number> {
  const { rows } = await sql<{ cancelled: number }>`
    with leftover as (
      -- locked first, skipping those a worker's outcome write (or another reaper) holds: deleting
      -- them in another order than that write could deadlock with it; a skipped one is taken next pass
      select r.job_id
        from pgsched.runs r
       where exists (select 1 from pgsched.jobs j where j.id = r.job_id and j.state = 'cancelled')
         for update of r skip locked
    ),
    job as (
      select j.id, j.tenant, j.queue, j.type
        from (select distinct job_id from leftover) r
        cross join lateral (select id, tenant, queue, type from pgsched.jobs where id = r.job_id offset 0) j
    ),
    ${cancelEffects(false)}
    select (select count(*) from notified) as notified,
           (select count(*)::int from cancelled) as cancelled`.execute(db)
  return rows[0]?.cancelled ?? 0
}

/** What jobCancel did: cancelled the job (naming the executions that were running), or nothing, and why. */
export type JobCancelOutcome =
  | { outcome: 'cancelled'; runningExecutionIds: string[] }
  | { outcome: 'already cancelled' }
  | { outcome: 'finished'; status: string }

/**
 * Cancels a job: the job and its trigger stop, pending and running executions
 * become cancelled (a running one's worker loses its lease and aborts the
 * handler; a notification on `pgsched_cancel` makes that immediate). A job
 * that has finished (a one-time job whose execution ended, a schedule with
 * nothing to come) or is cancelled already is left as it is. Undefined if no
 * such job. Run in a transaction: its locks then hold until the cancel commits.
 */
export async function jobCancel(db: Executor, params: JobCancelParams): Promise<JobCancelOutcome | undefined> {
  // Wait for a dispatcher that holds this job's trigger: the statement below then starts with
  // a snapshot that includes the execution it may just have created, and cancels that too.
  // Then the job, and its runs: a worker's outcome write in flight holds its run's row, so the
  // status read next (a statement of its own, a snapshot of its own) sees the run that just ended,
  // and no run of the job can end until this transaction does (pgsched.cancel_job_unless_ended
  // locks the same, in the same order).
  await sql`select job_id from pgsched.triggers where job_id = ${params.id}::uuid for update`.execute(db)
  const locked = await sql`select id from pgsched.jobs where id = ${params.id}::uuid and tenant = ${params.tenant}::text for update`.execute(db)
  if (locked.rows.length === 0) return undefined
  await sql`select execution_id from pgsched.runs where job_id = ${params.id}::uuid order by execution_id for update`.execute(db)
  const { rows: states } = await sql<{ status: string; cancelled: boolean; one_time_ended: boolean }>`
    select pgsched.job_status(j.id) as status, j.state = 'cancelled' as cancelled,
           -- finished: a one-time job's execution ended (as pgsched.cancel_job_unless_ended reads it)
           not exists (select 1 from pgsched.triggers t where t.job_id = j.id)
           and coalesce((select x.state from pgsched.executions x where x.job_id = j.id
                          order by x.scheduled_for desc limit 1) in ('succeeded', 'failed', 'cancelled'), false) as one_time_ended
      from pgsched.jobs j where j.id = ${params.id}::uuid`.execute(db)
  const state = states[0]
  if (!state) return undefined
  if (state.cancelled) return { outcome: 'already cancelled' }
  if (['COMPLETED', 'FAILED', 'EXPIRED'].includes(state.status) || state.one_time_ended) return { outcome: 'finished', status: state.status }
  const result = await sql<{ found: boolean; running_ids: string[] | null }>`
    with job as (
      update pgsched.jobs
         set state = 'cancelled', updated_at = now()
       where id = ${params.id}::uuid and tenant = ${params.tenant}::text
      returning id, tenant, queue, type
    ),
    ${jobCancelEffects}
    select exists (select 1 from job) as found,
           (select array_agg(id) from running) as running_ids,
           (select count(*) from notified) as notified,
           (select count(*) from cancelled) as cancelled
  `.execute(db)
  const row = result.rows[0]
  if (!row?.found) return undefined
  return { outcome: 'cancelled', runningExecutionIds: row.running_ids ?? [] }
}

export interface JobSetPausedParams {
  tenant: string
  id: string
  paused: boolean
}

/**
 * Pauses or resumes a recurring job (one with a trigger). Returns false when
 * there is no such active/paused recurring job of this tenant. A pause also takes back the
 * executions the dispatcher created ahead of fire times still to come (SCHEDULER_DISPATCHER_AHEAD_MS:
 * createdAhead in fragments.ts) and moves the schedule back to the
 * first of them, so that what the pause holds back is what it always held back: every fire time
 * after it, until a resume (which applies the misfire policy to those it missed). Run it in a
 * transaction: the trigger's lock is taken by a statement of its own, so that the next one's
 * snapshot holds the executions of a dispatcher pass that held the lock before it.
 */
export async function jobSetPaused(db: Executor, params: JobSetPausedParams): Promise<boolean> {
  await sql`select 1 from pgsched.triggers t
              where t.job_id = ${params.id}::uuid and exists (select 1 from pgsched.jobs j where j.id = t.job_id and j.tenant = ${params.tenant}::text)
                for update of t`.execute(db)
  const result = await sql<{ job_id: string }>`
    -- the trigger first, then the job: the order of a cancel and of the job operations, so a pause
    -- beside them waits instead of deadlocking
    with locked as (
      select job_id, paused from pgsched.triggers where job_id = ${params.id}::uuid for update
    ),
    job as (
      update pgsched.jobs
         set state = case when ${params.paused}::boolean then 'paused' else 'active' end, updated_at = now()
       where id = ${params.id}::uuid and tenant = ${params.tenant}::text and state in ('active', 'paused')
         and exists (select 1 from locked)
      returning id, tenant, queue, type
    ),
    ahead as (
      delete from pgsched.due d
       where ${params.paused}::boolean and d.job_id in (select id from job) and ${createdAhead(sql`d`)}
      returning d.scheduled_for
    ),
    changed as (
      update pgsched.triggers
         set paused = ${params.paused}::boolean, updated_at = now(),
             -- the resume of a paused schedule: the fire times before it passed while paused, and are
             -- missed ones (planFires); resuming one that was not paused changes nothing
             resumed_at = case when paused and not ${params.paused}::boolean then now() else resumed_at end,
             -- least() ignores a null: a schedule whose last fire times were created ahead gets them back
             next_fire_at = least(next_fire_at, (select min(scheduled_for) from ahead))
       where job_id in (select id from job)
      returning job_id
    ),
    -- an event only where the schedule's pause changed: a repeated pause, or the resume of a schedule
    -- that was not paused, is no state change for subscribers
    ${eventsCaptured(sql`select case when ${params.paused}::boolean then 'paused' else 'resumed' end, tenant, id, null::uuid, queue, type, null::int
                           from job where id in (select job_id from changed)
                            and (select l.paused from locked l) is distinct from ${params.paused}::boolean`)}
    select job_id from changed
  `.execute(db)
  return result.rows.length > 0
}
