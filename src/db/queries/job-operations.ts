/**
 * SQL of the job operations: retry, rerun, cancel and delete, for one job or many chosen by a
 * filter. Each runs in the caller's transaction in two steps: it locks the jobs' triggers, then
 * the jobs (in id order, the order every operation takes), and then one statement acts on the
 * jobs that still qualify as read at that moment. So a concurrent cancel, retry or delete of the
 * same job waits for the first and then finds it no longer qualifies; a worker still holding
 * a lease keeps the job from being retried, rerun or deleted (only jobs with no pending or
 * running execution are), and its late completion touches only its own execution.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import type { JobStatus } from '../../core/job-status.ts'
import { eventsCaptured } from './event-capture.ts'
import { fairKeyWaiting } from './fragments.ts'
import { jobCancelEffects } from './jobs.ts'
import { admitSubmits } from './admission.ts'
import { QuotaExceededError } from '../../errors.ts'
import { candidateJobIds, isCandidateStatus } from './job-candidates.ts'
import { jobFilterSql, jobJoins, statusCondition, type JobFilter } from './job-filter.ts'

type Executor = Kysely<DB>

/** What an operation does to a job. */
export type JobAction = 'cancel' | 'retry' | 'rerun' | 'delete'

/** The statuses each action applies to. */
export const ACTION_STATUSES: Record<JobAction, readonly JobStatus[]> = {
  cancel: ['SCHEDULED', 'RUNNING', 'PAUSED'],
  retry: ['FAILED', 'EXPIRED', 'CANCELLED'],
  rerun: ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'],
  delete: ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'],
}

/** Whether `action` applies to the job `j` (with `t` and `e`) as it is now. */
export function actionAppliesSql(action: JobAction): RawBuilder<unknown> {
  const statuses = sql.join(
    ACTION_STATUSES[action].map((s) => sql`${statusCondition(s)}`),
    sql` or `,
  )
  if (action === 'cancel') return sql`(${statuses})`
  // a finished job: besides its status, no execution of it is waiting or held by a worker
  return sql`((${statuses}) and not exists (select 1 from pgsched.due x where x.job_id = j.id) and not exists (select 1 from pgsched.runs x where x.job_id = j.id))`
}

/**
 * The ids of the jobs that match `filter` and that `action` applies to, as a select of `id`. When
 * the statuses in question (the filter's, else the action's) all have candidates (job-candidates.ts),
 * only the candidates are read, each job looked up by id; otherwise every job of the filter is.
 */
function jobsForAction(params: { filter: JobFilter; action: JobAction; afterId?: string }): RawBuilder<{ id: string }> {
  const { filter, action } = params
  // a bulk walk's position: the jobs after the last one an earlier call looked at (id order)
  const after = params.afterId === undefined ? sql`true` : sql`j.id > ${params.afterId}::uuid`
  const where = sql`${jobFilterSql(filter)} and ${actionAppliesSql(action)} and ${after}`
  // a COMPLETED job has no candidates (most jobs end with it): every job is read
  const statuses = filter.status ? [filter.status] : ACTION_STATUSES[action]
  if (filter.ids !== undefined || !statuses.every(isCandidateStatus)) return sql`select j.id from ${jobJoins} where ${where}`
  return sql`
    select x.id from (${candidateJobIds(statuses, filter.tenant)}) d
     cross join lateral (select j.id from ${jobJoins} where j.id = d.job_id and ${where}
                         offset 0  -- kept apart: each candidate looks its job up by id
                        ) x`
}

/** Up to `limit` ids of jobs that match `filter` and that `action` applies to, in id order (after `afterId`). */
export async function jobIdsForAction(db: Executor, params: { filter: JobFilter; action: JobAction; limit: number; afterId?: string }): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select a.id from (${jobsForAction(params)}) a
     order by a.id
     limit ${params.limit}::int`.execute(db)
  return rows.map((r) => r.id)
}

/** How many jobs match `filter` and `action` still applies to (after `afterId`). */
export async function jobCountForAction(db: Executor, params: { filter: JobFilter; action: JobAction; afterId?: string }): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*)::text as n from (${jobsForAction(params)}) a`.execute(db)
  return Number(rows[0]?.n ?? 0)
}

/**
 * Locks the jobs' triggers, then the jobs, in id order, then their runs (run inside a transaction).
 * A worker's outcome write in flight holds its run's row: the statement after this one sees the run
 * it ended (a job whose only run just succeeded is COMPLETED, not cancelled), and no run of these
 * jobs ends until the transaction does.
 */
async function lockJobs(trx: Executor, ids: readonly string[]): Promise<void> {
  await sql`select job_id from pgsched.triggers where job_id = any(${[...ids]}::uuid[]) order by job_id for update`.execute(trx)
  await sql`select id from pgsched.jobs where id = any(${[...ids]}::uuid[]) order by id for update`.execute(trx)
  await sql`select execution_id from pgsched.runs where job_id = any(${[...ids]}::uuid[]) order by execution_id for update`.execute(trx)
}

export interface JobActParams {
  /** null: any tenant's (operator scope). */
  tenant: string | null
  ids: readonly string[]
  /** Also the bulk call's filter, checked again as the jobs are acted on. */
  filter?: JobFilter
}

/** The jobs of `ids` (and tenant) that `action` applies to, as a CTE body over the joins. */
const targets = (action: JobAction, p: JobActParams) =>
  sql`select j.id, j.tenant, j.queue, j.type, j.priority, j.max_attempts, j.timeout_ms, j.concurrency_key, j.start_deadline_ms,
             j.idempotency_key, e.scheduled_for as last_scheduled_for
        from ${jobJoins}
       where ${jobFilterSql({ ...p.filter, tenant: p.tenant, ids: p.ids })} and ${actionAppliesSql(action)}`

/**
 * Retry or rerun: each qualifying job gets a new pending execution due now, attempts counted from
 * 0, after (by its time) every earlier one, which stays as history; a cancelled job becomes active
 * again (a recurring one's schedule stays stopped: this is one run). Each new execution is a submit
 * to its tenant's admission quotas (maxPending, maxSubmitsPerSecond), all of a tenant's or none:
 * QuotaExceededError, changing nothing, when one of the tenants cannot take them. Returns the ids
 * changed. Run inside a transaction.
 */
export async function jobRunAgainMany(trx: Executor, params: JobActParams & { action: 'retry' | 'rerun' }): Promise<string[]> {
  if (params.ids.length === 0) return []
  await lockJobs(trx, params.ids)
  const { rows: byTenant } = await sql<{ tenant: string; n: number }>`
    select tenant, count(*)::int as n from (${targets(params.action, params)}) t group by tenant order by tenant`.execute(trx)
  for (const { tenant, n } of byTenant) {
    const { rejection } = await admitSubmits(trx, tenant, n, false)
    if (rejection) throw new QuotaExceededError(rejection.message, rejection.quota, rejection.limit, rejection.retryAfterMs)
  }
  const { rows } = await sql<{ id: string }>`
    with target as (${targets(params.action, params)}),
    reactivated as (
      update pgsched.jobs set state = 'active', updated_at = now()
       where id in (select id from target) and state = 'cancelled'
    ),
    -- a stopped schedule stays stopped: a fire time it had queued behind a run is dropped, or the
    -- dispatcher would run it once the job is active again
    unqueued as (
      update pgsched.triggers set queued_fire_at = null
       where job_id in (select id from target) and next_fire_at is null and queued_fire_at is not null
    ),
    added as (
      insert into pgsched.due (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms,
                               concurrency_key, tenant, start_deadline, fair_key)
      select id, queue, type, priority,
             -- the latest run by its time, even when an earlier run was due later (a cancelled future run)
             greatest(now(), last_scheduled_for + interval '1 microsecond'), now(), max_attempts, timeout_ms,
             concurrency_key, tenant, now() + start_deadline_ms * interval '1 millisecond', ${fairKeyWaiting(sql`queue`)}
        from target
      returning execution_id as id, job_id, tenant, queue, type
    ),
    ${eventsCaptured(sql`select 'submitted', tenant, job_id, id, queue, type, 0 from added`)}
    -- the insert trigger on due wakes the workers that wait for these queues (migration 0011)
    select job_id as id from added order by job_id`.execute(trx)
  return rows.map((r) => r.id)
}

/**
 * Cancels the qualifying jobs (scheduled, running or paused): each job and its trigger stop,
 * pending and running executions become cancelled (a running one's worker loses its lease; a
 * notification on `pgsched_cancel` makes it abort the handler at once). Run inside a transaction.
 * Returns the ids of the jobs cancelled and of the executions that were running.
 */
export async function jobCancelMany(trx: Executor, params: JobActParams): Promise<{ jobIds: string[]; runningExecutionIds: string[] }> {
  if (params.ids.length === 0) return { jobIds: [], runningExecutionIds: [] }
  await lockJobs(trx, params.ids)
  const { rows } = await sql<{ job_ids: string[] | null; running_ids: string[] | null }>`
    with target as (${targets('cancel', params)}),
    job as (
      update pgsched.jobs
         set state = 'cancelled', updated_at = now()
       where id in (select id from target)
      returning id, tenant, queue, type
    ),
    ${jobCancelEffects}
    select (select array_agg(id order by id) from job) as job_ids,
           (select array_agg(id) from running) as running_ids,
           (select count(*) from notified) as notified`.execute(trx)
  const row = rows[0]
  return { jobIds: row?.job_ids ?? [], runningExecutionIds: row?.running_ids ?? [] }
}

/**
 * Deletes the qualifying finished jobs with their executions, output chunks, trigger and
 * idempotency key (the key may then be used again). Run inside a transaction. Returns the ids
 * deleted.
 */
export async function jobDeleteMany(trx: Executor, params: JobActParams): Promise<string[]> {
  if (params.ids.length === 0) return []
  await lockJobs(trx, params.ids)
  const { rows } = await sql<{ id: string }>`
    with target as (${targets('delete', params)}),
    doomed_executions as (
      delete from pgsched.execution_history x where x.job_id in (select id from target) returning x.id
    ),
    output as (
      delete from pgsched.execution_output o where o.execution_id in (select id from doomed_executions)
    ),
    doomed_trigger as (
      delete from pgsched.triggers where job_id in (select id from target)
    ),
    keys as (
      delete from pgsched.job_idempotency_keys k
       using target g
       where g.idempotency_key is not null and k.tenant = g.tenant and k.idempotency_key = g.idempotency_key and k.job_id = g.id
    ),
    deleted as (
      delete from pgsched.jobs where id in (select id from target) returning id
    )
    select id from deleted order by id`.execute(trx)
  return rows.map((r) => r.id)
}

/** The tenant of the job an execution belongs to; undefined when there is no such execution. */
export async function executionTenantOf(db: Executor, id: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('pgsched.executions as e')
    .innerJoin('pgsched.jobs as j', 'j.id', 'e.job_id')
    .select('j.tenant')
    .where('e.id', '=', id)
    .executeTakeFirst()
  return row?.tenant
}

/** The tenant of a job, whichever it is (for operator keys); undefined when there is no such job. */
export async function jobTenantOf(db: Executor, id: string): Promise<string | undefined> {
  const row = await db.selectFrom('pgsched.jobs').select('tenant').where('id', '=', id).executeTakeFirst()
  return row?.tenant
}
