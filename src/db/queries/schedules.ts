/**
 * Recurring jobs (a cron or interval trigger) with their schedule and latest run, as a keyset page
 * by job id. Their next fire times are computed from the stored next one (core/fire-times.ts).
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import type { Execution, JobState, MisfirePolicy } from '../../core/job.ts'
import { aheadFireTime, ceilMs, notAheadOfRecurring } from './fragments.ts'
import { toExecution } from './job-views.ts'
import { firstFireSinceSubmitOrNull } from '../../core/fire-times.ts'

export interface ScheduleRow {
  jobId: string
  tenant: string
  type: string
  queue: string
  state: JobState
  kind: 'cron' | 'interval'
  cronExpression: string | null
  intervalMs: number | null
  timezone: string
  startAt: Date | null
  endAt: Date | null
  paused: boolean
  misfirePolicy: MisfirePolicy
  misfireMaxRuns: number
  /** When it was last resumed after a pause (the fire times before then are missed); null: never. */
  resumedAt: Date | null
  /** The stored next fire time (it may have passed, while no dispatcher ran); null once the schedule stopped (cancelled, past its end, or failed). */
  nextFireAt: Date | null
  /** The database's clock as it read the row. */
  dbNow: Date
  /** Why the schedule stopped, when its fire times could not be computed; else null. */
  error: string | null
  lastExecution: Execution | null
}

export interface ScheduleListParams {
  /** null: every tenant. */
  tenant: string | null
  limit: number
  /** Only jobs with an id above this one (the previous page's last). */
  afterId?: string
  /** Only this job's schedule. */
  jobId?: string
}

export async function scheduleList(db: Kysely<DB>, params: ScheduleListParams): Promise<ScheduleRow[]> {
  const { rows } = await sql<{
    job_id: string
    tenant: string
    type: string
    queue: string
    state: JobState
    kind: 'cron' | 'interval'
    cron_expression: string | null
    interval_ms: string | null
    timezone: string
    start_at: Date | null
    end_at: Date | null
    paused: boolean
    misfire_policy: MisfirePolicy
    misfire_max_runs: number
    resumed_at: Date | null
    db_now: Date
    next_fire_at: Date | null
    submitted_at: Date | null
    error: string | null
    last_execution: Record<string, unknown> | null
  }>`
    select t.job_id, j.tenant, j.type, j.queue, j.state, t.kind, t.cron_expression, t.interval_ms::text as interval_ms, t.timezone,
           t.start_at, t.end_at, t.paused or j.state = 'paused' as paused, t.misfire_policy, t.misfire_max_runs, t.resumed_at, now() as db_now, t.error,
           -- the next fire time: the first of those the dispatcher created ahead (due at it), else the trigger's
           -- (an execution created ahead is one whose fire time is still to come, before the trigger's: so
           -- when the trigger's has passed, there is none, and the views read the trigger's under its misfire policy)
           case when t.next_fire_at = '-infinity' or j.state = 'cancelled' then null
                else least(${ceilMs(sql`t.next_fire_at`)}, ${aheadFireTime(sql`j.id`)}) end as next_fire_at,
           -- not computed yet: reckoned from the submit, as the dispatcher's first pass will
           -- (both up to the millisecond, as the dispatcher takes them: claimedTriggerColumns)
           case when t.next_fire_at = '-infinity' and j.state <> 'cancelled' then ${ceilMs(sql`t.created_at`)} end as submitted_at,
           (select to_jsonb(le) from pgsched.executions le where le.job_id = j.id and ${notAheadOfRecurring(sql`le`, sql`t`)}
             order by le.scheduled_for desc limit 1) as last_execution
      from pgsched.triggers t
      join pgsched.jobs j on j.id = t.job_id
     where t.kind in ('cron', 'interval')
       and (${params.tenant}::text is null or j.tenant = ${params.tenant}::text)
       and (${params.afterId ?? null}::uuid is null or t.job_id > ${params.afterId ?? null}::uuid)
       and (${params.jobId ?? null}::uuid is null or t.job_id = ${params.jobId ?? null}::uuid)
     order by t.job_id
     limit ${params.limit}::int`.execute(db)
  return rows.map((r) => {
    const row: Omit<ScheduleRow, 'nextFireAt'> = {
      jobId: r.job_id,
      tenant: r.tenant,
      type: r.type,
      queue: r.queue,
      state: r.state,
      kind: r.kind,
      cronExpression: r.cron_expression,
      intervalMs: r.interval_ms === null ? null : Number(r.interval_ms),
      timezone: r.timezone,
      startAt: r.start_at,
      endAt: r.end_at,
      paused: r.paused,
      misfirePolicy: r.misfire_policy,
      misfireMaxRuns: r.misfire_max_runs,
      resumedAt: r.resumed_at,
      dbNow: r.db_now,
      error: r.error,
      lastExecution: r.last_execution ? toExecution(r.last_execution) : null,
    }
    // the row is its own schedule (TriggerSchedule)
    const nextFireAt = r.submitted_at === null ? r.next_fire_at : firstFireSinceSubmitOrNull(row, r.submitted_at, r.db_now)
    return { ...row, nextFireAt }
  })
}
