/**
 * Which jobs a list, an export or a bulk operation covers: the jobs `j` joined to their trigger
 * `t` and latest execution `e`, and the conditions over them (the `status` of
 * core/job-status.ts in SQL, and the other filters).
 */
import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely'
import type { JobStatus } from '../../core/job-status.ts'
import { createdAhead, notAheadOfRecurring } from './fragments.ts'

/**
 * The `status` filter: core/job-status.ts `jobStatus` in SQL. `ended`: no work to come — no pending
 * or running execution, and no schedule that still fires.
 */
export function statusCondition(status: JobStatus): Expression<SqlBool> {
  // a schedule that still fires: a next or queued fire time, or the execution of its last fire time
  // created ahead of it (SCHEDULER_DISPATCHER_AHEAD_MS), once the trigger itself has no more to come
  const firing = sql`(t.job_id is not null and t.error is null
                      and (t.next_fire_at is not null or t.queued_fire_at is not null
                           or exists (select 1 from pgsched.due d where d.job_id = j.id and ${createdAhead(sql`d`)})))`
  const ended = sql`(j.state = 'active' and (e.state is null or e.state not in ('pending', 'running')) and not ${firing}
                     and (t.job_id is null or t.error is null))`
  switch (status) {
    case 'PAUSED':
      return sql<SqlBool>`j.state = 'paused'`
    case 'RUNNING':
      return sql<SqlBool>`(j.state = 'active' and e.state = 'running')`
    case 'SCHEDULED':
      return sql<SqlBool>`(j.state = 'active' and (e.state = 'pending' or ((e.state is null or e.state <> 'running') and ${firing})))`
    case 'CANCELLED':
      return sql<SqlBool>`(j.state = 'cancelled' or (${ended} and e.state = 'cancelled'))`
    case 'COMPLETED':
      return sql<SqlBool>`(${ended} and (e.state = 'succeeded' or e.id is null))`
    case 'FAILED':
      return sql<SqlBool>`((${ended} and e.state = 'failed' and e.attempt > 0)
                           or (j.state = 'active' and t.error is not null and (e.state is null or e.state not in ('pending', 'running'))))`
    case 'EXPIRED':
      return sql<SqlBool>`(${ended} and e.state = 'failed' and e.attempt = 0)`
  }
}

/** Which jobs: every field given must match. */
export interface JobFilter {
  /** null: every tenant (operator scope). */
  tenant: string | null
  ids?: readonly string[]
  status?: JobStatus
  type?: string
  queue?: string
  idempotencyKey?: string
  /** The job's error type as the failures view groups it (errorTypeSql), exact. */
  errorType?: string
  /** The job's error message as the failures view groups it (errorMessageSql), exact. */
  errorMessage?: string
  createdAfter?: Date
  createdBefore?: Date
}

/**
 * Jobs `j` with their trigger `t` and latest execution `e` (the aliases statusCondition expects).
 * The latest execution is the latest that is not waiting for a fire time still to come (one the
 * dispatcher created ahead of it, see createdAhead): a recurring job's status is its last run's.
 */
export const jobJoins = sql`pgsched.jobs j
      left join pgsched.triggers t on t.job_id = j.id
      left join lateral (select le.* from pgsched.executions le where le.job_id = j.id and ${notAheadOfRecurring(sql`le`, sql`t`)}
                          order by le.scheduled_for desc limit 1) e on true`

/**
 * A job's error type and message (null when it has none): its stopped schedule's error
 * (`ScheduleError`), else its latest execution's. The failures view groups by them and the
 * filters match them, so a group's actions reach exactly its jobs.
 */
export const errorTypeSql = sql`(case when t.error is not null then 'ScheduleError' when e.error is not null then coalesce(e.error->>'name', 'Error') end)`
export const errorMessageSql = sql`(case when t.error is not null then t.error when e.error is not null then coalesce(e.error->>'message', '') end)`

/** The filter as one condition over `j`, `t` and `e`. */
export function jobFilterSql(f: JobFilter): RawBuilder<unknown> {
  const parts: RawBuilder<unknown>[] = [sql`true`]
  if (f.tenant !== null) parts.push(sql`j.tenant = ${f.tenant}::text`)
  if (f.ids !== undefined) parts.push(sql`j.id = any(${[...f.ids]}::uuid[])`)
  if (f.status !== undefined) parts.push(sql`${statusCondition(f.status)}`)
  if (f.type !== undefined) parts.push(sql`j.type = ${f.type}::text`)
  if (f.queue !== undefined) parts.push(sql`j.queue = ${f.queue}::text`)
  if (f.idempotencyKey !== undefined) parts.push(sql`j.idempotency_key = ${f.idempotencyKey}::text`)
  if (f.errorType !== undefined) parts.push(sql`${errorTypeSql} = ${f.errorType}::text`)
  if (f.errorMessage !== undefined) parts.push(sql`${errorMessageSql} = ${f.errorMessage}::text`)
  if (f.createdAfter !== undefined) parts.push(sql`j.created_at > ${f.createdAfter}::timestamptz`)
  if (f.createdBefore !== undefined) parts.push(sql`j.created_at < ${f.createdBefore}::timestamptz`)
  return sql.join(parts, sql` and `)
}
