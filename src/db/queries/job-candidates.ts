/**
 * Where a page of jobs filtered by a status other than COMPLETED is read from. Listing newest
 * first through the jobs index and testing each job's status stops after a page of matches, which
 * is quick while matches are dense (COMPLETED), but reads every job of the tenant when they are
 * rare (10 RUNNING jobs among millions). For the statuses that a small index or table can
 * enumerate, the page is read from candidates instead: job ids, newest first, a superset of the
 * jobs with that status, each with the execution that would make it so.
 *
 *   status      candidates (pgsched.due and migration 0026's partial indexes)
 *   SCHEDULED   jobs with a pending execution (pgsched.due, by due_fire_time_key: the backlog and
 *               the work to come) and schedules that still fire (pgsched.triggers, by key): every
 *               job of a backlog, and a few among millions once they have run
 *   RUNNING     running executions (pgsched.runs: as many as the workers' slots)
 *   FAILED      failed executions with an attempt (executions_ended_badly_idx), and
 *               schedules stopped by an error (triggers_error_idx)
 *   EXPIRED     failed executions without an attempt (executions_ended_badly_idx)
 *   CANCELLED   cancelled jobs (jobs_tenant_inactive_idx); an execution is cancelled only
 *               with its job
 *   PAUSED      paused jobs (jobs_tenant_inactive_idx)
 * An execution candidate counts only as its job's latest execution, so a recurring job with many
 * failed runs is listed once; `candidateAccepted` says which candidate of a job stands for it. A
 * SCHEDULED job is a candidate once per source (each source lists a job once), through its pending
 * executions and through its schedule: the caller keeps one of each job.
 * The status condition itself is still applied to every candidate.
 */
import { sql, type RawBuilder, type SqlBool } from 'kysely'
import type { JobStatus } from '../../core/job-status.ts'

/** A candidate: a job id and the execution (null: the job itself, or its schedule) that makes it one. */
export interface JobCandidate {
  job_id: string
  execution_id: string | null
}

/** Statuses read from candidates. */
export type CandidateStatus = Exclude<JobStatus, 'COMPLETED'>

/** Every status but COMPLETED, which has no source to read it from (most jobs end with it). */
export function isCandidateStatus(status: JobStatus | undefined): status is CandidateStatus {
  return status !== undefined && status !== 'COMPLETED'
}

/**
 * The candidates of `status`, one set per source, each newest job first: an ordered subquery (so
 * the planner keeps it apart and a page stops reading it once full) that one index returns in
 * order. The caller reads the sources apart and merges their pages: a UNION ALL of them is sorted
 * whole (480,000 failed executions at 10,000,000), not merged in order. `tenant` narrows the job
 * candidates and the pending executions (each due row carries its tenant); the other execution
 * candidates are narrowed by the caller's join to jobs (executions finished before migration 0016
 * carry no tenant), or also by their own tenant with `executionsOfTenant` (which reads each
 * execution's row: worth it where every candidate costs a look-up of its job). Schedules are
 * narrowed by the caller's join only.
 */
export function jobCandidates(
  status: CandidateStatus,
  tenant: string | null,
  beforeId?: string,
  options: { executionsOfTenant?: boolean } = {},
): RawBuilder<JobCandidate>[] {
  const below = (column: RawBuilder<unknown>) => (beforeId === undefined ? sql`true` : sql`${column} < ${beforeId}::uuid`)
  const ofTenant = tenant !== null && options.executionsOfTenant === true ? sql`(x.tenant = ${tenant}::text or x.tenant is null)` : sql`true`
  const executions = (condition: RawBuilder<unknown>) => sql<JobCandidate>`
      (select x.job_id, x.id as execution_id
         from pgsched.executions x
        where ${condition} and ${ofTenant} and ${below(sql`x.job_id`)}
        order by x.job_id desc)`
  const jobs = (condition: RawBuilder<unknown>) => sql<JobCandidate>`
      (select c.id as job_id, null::uuid as execution_id
         from pgsched.jobs c
        where ${condition}
          and ${tenant === null ? sql`true` : sql`c.tenant = ${tenant}::text`} and ${below(sql`c.id`)}
        order by c.id desc)`
  const pending = sql<JobCandidate>`
      (select distinct on (x.job_id) x.job_id, x.execution_id
         from pgsched.due x
        where ${tenant === null ? sql`true` : sql`x.tenant = ${tenant}::text`} and ${below(sql`x.job_id`)}
        order by x.job_id desc)`
  const firingSchedules = sql<JobCandidate>`
      (select s.job_id, null::uuid as execution_id
         from pgsched.triggers s
        where s.error is null and (s.next_fire_at is not null or s.queued_fire_at is not null) and ${below(sql`s.job_id`)}
        order by s.job_id desc)`
  const stoppedSchedules = sql<JobCandidate>`
      (select s.job_id, null::uuid as execution_id
         from pgsched.triggers s
        where s.error is not null and ${below(sql`s.job_id`)}
        order by s.job_id desc)`
  switch (status) {
    case 'SCHEDULED':
      return [pending, firingSchedules]
    case 'RUNNING':
      return [executions(sql`x.state = 'running'`)]
    case 'FAILED':
      return [executions(sql`x.state = 'failed' and x.attempt > 0`), stoppedSchedules]
    case 'EXPIRED':
      return [executions(sql`x.state = 'failed' and x.attempt = 0`)]
    case 'CANCELLED':
      // An execution is cancelled only with its job (jobCancel), so the cancelled jobs are all the
      // candidates: reading cancelled executions too would read every one of them to accept none.
      return [jobs(sql`c.state = 'cancelled'`)]
    case 'PAUSED':
      return [jobs(sql`c.state = 'paused'`)]
  }
}

/**
 * The ids of the jobs that may have one of `statuses`, each once: the union of their candidates.
 * For statements that test each job's status anyway (counts, bulk actions, the failures report):
 * with it they read the candidates (of `tenant` only, when given) and look each job up by id,
 * instead of reading every job.
 */
export function candidateJobIds(statuses: readonly CandidateStatus[], tenant: string | null): RawBuilder<{ job_id: string }> {
  const sources = statuses.flatMap((status) => jobCandidates(status, tenant, undefined, { executionsOfTenant: true }))
  return sql`select distinct c.job_id from (${sql.join(sources, sql` union all `)}) c`
}

/**
 * Whether the candidate `d` stands for its job `j` (with trigger `t` and latest execution `e`):
 * an execution candidate only as the latest execution, and each job through one candidate only;
 * for SCHEDULED, every candidate (one per source), the caller keeping one row of each job.
 */
export function candidateAccepted(status: CandidateStatus): RawBuilder<SqlBool> {
  switch (status) {
    case 'SCHEDULED':
      // the status condition decides; a job through both sources is kept once by the caller
      return sql<SqlBool>`true`
    case 'RUNNING':
    case 'EXPIRED':
    case 'PAUSED':
    case 'CANCELLED':
      return sql<SqlBool>`(d.execution_id is null or d.execution_id = e.id)`
    case 'FAILED':
      // a stopped schedule whose latest run failed too is listed through that run
      return sql<SqlBool>`(case when d.execution_id is null then not coalesce(e.state = 'failed' and e.attempt > 0, false)
                               else d.execution_id = e.id end)`
  }
}
