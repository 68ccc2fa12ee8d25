/**
 * SQL that reads jobs: one job with its schedule and latest execution, and a
 * keyset page of jobs (newest first, filtered as job-filter.ts says). Rows become domain types through `toJob` and `toExecution` (which
 * executions.ts uses too).
 */
import { sql, type Expression, type Kysely, type SqlBool, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import type { AttemptRecord, Execution, Job, Schedule } from '../../core/job.ts'
import { unservedMessage } from '../../core/job.ts'
import { workerLive } from './workers.ts'
import { jobStatus, lastRunOf } from '../../core/job-status.ts'
import { candidateAccepted, isCandidateStatus, jobCandidates } from './job-candidates.ts'
import { aheadFireTime, notAheadOfRecurring } from './fragments.ts'
import { fireTimesAsOf, firstFireSinceSubmitOrNull } from '../../core/fire-times.ts'
import { jobFilterSql, statusCondition, type JobFilter } from './job-filter.ts'

type Executor = Kysely<DB>

interface JobViewRow {
  /** The database's clock as it read the row. */
  db_now: Date
  /** The first fire time whose execution was created ahead of it (recurring jobs). */
  ahead_fire_at?: Date | null
  id: string
  tenant: string
  type: string
  queue: string
  priority: number
  payload: unknown
  max_attempts: number
  backoff_base_ms: number
  backoff_max_ms: number
  timeout_ms: number
  idempotency_key: string | null
  concurrency_key: string | null
  start_deadline_ms: number | null
  state: Job['state']
  created_by: string | null
  created_at: Date
  trigger: Record<string, unknown> | null
  last_execution: Record<string, unknown> | null
  unserved: boolean
  queue_paused: boolean
  queue_paused_at: Date | null
}

/** The host of the worker of an executions row's latest attempt (`e`: the row's alias). */
export const latestHost = (e: RawBuilder<unknown>) =>
  sql<string | null>`(select w.host from pgsched.workers w where w.id = coalesce(${e}.worker_id, ${e}.last_worker_id))`

const date = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string))
/**
 * A timestamp's JSON text (microseconds) taken up to the whole millisecond, as the dispatcher takes a
 * stored fire time or submit time (fragments.ts ceilMs): Date would cut the microseconds off.
 */
const dateUpToMs = (text: string): Date => {
  const d = new Date(text)
  return /\.\d{3}\d*[1-9]/.test(text) ? new Date(d.getTime() + 1) : d
}

/** Maps an executions row (or its to_jsonb form) to the domain type. */
export function toExecution(r: Record<string, unknown>): Execution {
  return {
    id: r.id as string,
    jobId: r.job_id as string,
    state: r.state as Execution['state'],
    attempt: Number(r.attempt),
    maxAttempts: Number(r.max_attempts),
    scheduledFor: date(r.scheduled_for) as Date,
    runAt: date(r.run_at) as Date,
    startedAt: date(r.started_at),
    finishedAt: date(r.finished_at),
    workerId: (r.worker_id as string | null) ?? null,
    leaseExpiresAt: date(r.lease_expires_at),
    result: r.result ?? null,
    error: (r.error as Execution['error']) ?? null,
    outputUri: (r.output_uri as string | null) ?? null,
    attempts: attemptsOf(r),
  }
}

/**
 * The attempts of an executions row: its attempt log (migration 0017), then its latest attempt
 * from its own columns unless the log already holds it (a failure) or none started. `latest_host`:
 * the host of the latest attempt's worker, when the query read it.
 */
function attemptsOf(r: Record<string, unknown>): AttemptRecord[] {
  const log = ((r.attempt_log as Array<Record<string, unknown>> | null) ?? []).map(
    (a): AttemptRecord => ({
      attempt: Number(a.attempt),
      startedAt: date(a.startedAt),
      endedAt: date(a.endedAt),
      workerId: (a.workerId as string | null) ?? null,
      host: (a.host as string | null) ?? null,
      outcome: a.outcome as AttemptRecord['outcome'],
      error: (a.error as AttemptRecord['error']) ?? null,
    }),
  )
  const attempt = Number(r.attempt)
  const state = r.state as Execution['state']
  const logged = log.some((a) => a.attempt === attempt)
  if (attempt === 0 || logged || state === 'pending') return log
  const outcome: AttemptRecord['outcome'] = state === 'running' ? 'running' : state
  log.push({
    attempt,
    startedAt: date(r.started_at),
    endedAt: date(r.finished_at),
    workerId: ((state === 'running' ? r.worker_id : r.last_worker_id) as string | null) ?? null,
    host: (r.latest_host as string | null) ?? null,
    outcome,
    error: state === 'succeeded' || state === 'running' ? null : ((r.error as AttemptRecord['error']) ?? null),
  })
  return log
}

function toSchedule(t: Record<string, unknown>): Schedule {
  return {
    kind: t.kind as Schedule['kind'],
    cron: (t.cron_expression as string | null) ?? null,
    timezone: t.timezone as string,
    intervalMs: t.interval_ms === null ? null : Number(t.interval_ms),
    startAt: date(t.start_at),
    endAt: date(t.end_at),
    misfirePolicy: t.misfire_policy as Schedule['misfirePolicy'],
    misfireMaxRuns: Number(t.misfire_max_runs),
    overlapPolicy: t.overlap_policy as Schedule['overlapPolicy'],
    paused: Boolean(t.paused),
    error: (t.error as string | null | undefined) ?? null,
  }
}

/**
 * The first fire time of a schedule that gets a run, from its stored next one: the stored one unless
 * it passed while no dispatcher ran, when the misfire policy decides (fireTimesAsOf: `skip` runs none
 * of the missed ones). Null when none comes.
 */
function nextOwed(schedule: Schedule | null, stored: Date, now: Date, resumedAt: Date | null): Date | null {
  // (an instant JavaScript cannot read stays as it is, and fails where it is written out)
  if (schedule === null || (schedule.kind !== 'cron' && schedule.kind !== 'interval') || !(stored <= now)) return stored
  const s = { ...schedule, cronExpression: schedule.cron, resumedAt }
  return fireTimesAsOf(s, stored, now, 1)[0] ?? null
}

function toJob(r: JobViewRow): Job {
  const last = r.last_execution ? toExecution(r.last_execution) : null
  const schedule = r.trigger ? toSchedule(r.trigger) : null
  // the stored next fire time; one not computed yet ('-infinity') as the dispatcher's first pass will
  // reckon it, from the submit by the database's clock (none: nothing to come, or not to be evaluated)
  const stored = (r.trigger?.next_fire_at as string | null | undefined) ?? null
  const next =
    stored === '-infinity' && schedule
      ? firstFireSinceSubmitOrNull({ ...schedule, cronExpression: schedule.cron }, dateUpToMs(r.trigger?.created_at as string), r.db_now)
      : stored === null
        ? null
        : dateUpToMs(stored)
  // still firing: a next or queued fire time, or an execution created ahead of its fire time (the last one's, when the trigger has no
  // more). One not computed yet counts, as the status filters in SQL count it, until the first pass computes it (or finds none).
  const firing = r.trigger ? stored !== null || r.trigger.queued_fire_at !== null || r.ahead_fire_at !== null : false
  const progress = r.trigger ? { firing, error: schedule?.error ?? null } : null
  let nextRunAt: Date | null = null
  if (r.state === 'active') {
    if (r.trigger) {
      nextRunAt = next ? nextOwed(schedule, next, r.db_now, r.trigger?.resumed_at ? new Date(r.trigger.resumed_at as string) : null) : null
      if (last?.state === 'pending' && schedule?.overlapPolicy !== 'allow') {
        // an execution waiting for a worker or a retry runs next: under the overlap policies queue and
        // skip it holds back the fire times after it (they wait in the slot, or are passed over). Under
        // allow the schedule's fire times go on beside it, and the next of them is the next run.
        nextRunAt = last.runAt
      } else {
        // a fire time waiting for the running execution to end (overlap policy queue) runs before the next
        const queued = r.trigger.queued_fire_at as string | null
        if (queued !== null && (nextRunAt === null || new Date(queued) < nextRunAt)) nextRunAt = new Date(queued)
      }
      // an execution created ahead of its fire time comes first (SCHEDULER_DISPATCHER_AHEAD_MS)
      if (r.ahead_fire_at && (nextRunAt === null || r.ahead_fire_at < nextRunAt)) nextRunAt = r.ahead_fire_at
      // the next fire time is the next run; once the schedule has none, a run waiting outside it (a
      // rerun, a retry) is
      if (nextRunAt === null && last?.state === 'pending') nextRunAt = last.runAt
    } else if (last?.state === 'pending') nextRunAt = last.runAt
  }
  return {
    id: r.id,
    tenant: r.tenant,
    type: r.type,
    queue: r.queue,
    priority: r.priority,
    payload: r.payload,
    maxAttempts: r.max_attempts,
    timeoutMs: r.timeout_ms,
    backoffBaseMs: r.backoff_base_ms,
    backoffMaxMs: r.backoff_max_ms,
    idempotencyKey: r.idempotency_key,
    concurrencyKey: r.concurrency_key,
    startDeadlineMs: r.start_deadline_ms,
    state: r.state,
    status: jobStatus(r.state, progress, last),
    lastRun: lastRunOf(last),
    createdAt: r.created_at,
    createdBy: r.created_by,
    schedule,
    nextRunAt,
    lastExecution: last,
    unserved: r.unserved ? unservedMessage(r.type, r.queue) : null,
    queuePaused: r.queue_paused,
    queuePausedAt: r.queue_paused_at,
  }
}

function jobViewQuery(db: Executor) {
  return (
    db
      .selectFrom('pgsched.jobs as j')
      .leftJoin('pgsched.triggers as t', 't.job_id', 'j.id')
      .leftJoinLateral(
        // the latest execution not waiting for a fire time still to come (see jobJoins)
        (eb) =>
          eb
            .selectFrom('pgsched.executions as le')
            .whereRef('le.job_id', '=', 'j.id')
            .where(notAheadOfRecurring(sql`le`, sql`t`))
            .orderBy('le.scheduled_for', 'desc')
            .limit(1)
            .selectAll()
            .as('e'),
        (join) => join.onTrue(),
      )
      // the queue's settings row, when it has one (a queue without one is active): whether it is paused
      // is told to whoever may read the job, though the queue itself is for operator keys only
      .leftJoin('pgsched.queues as qs', 'qs.name', 'j.queue')
      .select([
        'j.id',
        'j.tenant',
        'j.type',
        'j.queue',
        'j.priority',
        'j.payload',
        'j.max_attempts',
        'j.backoff_base_ms',
        'j.backoff_max_ms',
        'j.timeout_ms',
        'j.idempotency_key',
        'j.concurrency_key',
        'j.start_deadline_ms',
        'j.state',
        'j.created_by',
        'j.created_at',
        sql<Date>`now()`.as('db_now'),
        sql<Record<string, unknown> | null>`case when t.job_id is null then null else to_jsonb(t) end`.as('trigger'),
        sql<Date | null>`case when t.job_id is null then null else ${aheadFireTime(sql`j.id`)} end`.as('ahead_fire_at'),
        // work to run (a pending execution, or a schedule that still fires) and no live worker for it
        sql<boolean>`(j.state = 'active' and (e.state = 'pending' or (t.job_id is not null and t.next_fire_at is not null and not t.paused))
                    and not exists (select 1 from pgsched.workers w
                                     where ${workerLive('w')}
                                       and j.queue = any(w.queues) and j.type = any(w.types)))`.as('unserved'),
        sql<boolean>`coalesce(qs.paused, false)`.as('queue_paused'),
        sql<Date | null>`case when qs.paused then qs.paused_at end`.as('queue_paused_at'),
        sql<Record<
          string,
          unknown
        > | null>`case when e.id is null then null else to_jsonb(e) || jsonb_build_object('latest_host', ${latestHost(sql`e`)}) end`.as('last_execution'),
      ])
  )
}

export interface JobGetByIdParams {
  tenant: string
  id: string
}

/** The job with its schedule and latest execution; undefined when absent or another tenant's. */
export async function jobGetById(db: Executor, params: JobGetByIdParams): Promise<Job | undefined> {
  const row = await jobViewQuery(db).where('j.id', '=', params.id).where('j.tenant', '=', params.tenant).executeTakeFirst()
  return row ? toJob(row as JobViewRow) : undefined
}

export interface JobListParams extends JobFilter {
  limit: number
  /** Only jobs with an id below this one (the previous page's last id). */
  beforeId?: string
}

/**
 * A condition the planner cannot see into: a scalar subquery, whose selectivity it takes as one
 * half. The status conditions test the trigger of a left join for null, which it estimates near
 * zero (its statistics have no null job_id); expecting almost no match, it then reads and sorts
 * every job of the tenant instead of reading them newest first until the page is full (COMPLETED
 * at 10,000,000 executions: 30 s instead of 20 ms). Taking half to match, it reads newest first.
 */
const opaque = (condition: Expression<SqlBool>) => sql<SqlBool>`(select ${condition})`

/**
 * One page of jobs matching the filter, newest first (keyset on the time-ordered id). A rare
 * status is read from its candidates (job-candidates.ts), the others through the jobs indexes.
 */
export async function jobList(db: Executor, params: JobListParams): Promise<Job[]> {
  const { status, ...filter } = params
  let q = jobViewQuery(db).where(sql<SqlBool>`${jobFilterSql(filter)}`)
  if (params.beforeId) q = q.where('j.id', '<', params.beforeId)
  if (isCandidateStatus(status)) {
    // one page per source of candidates, merged: a job accepted through two sources (SCHEDULED) is kept once
    const pages = await Promise.all(
      jobCandidates(status, params.tenant, params.beforeId).map((candidates) =>
        q
          .innerJoin(candidates.as('d'), (join) => join.onRef('d.job_id', '=', 'j.id'))
          .where(opaque(sql<SqlBool>`${candidateAccepted(status)} and ${statusCondition(status)}`))
          .orderBy('j.id', 'desc')
          .limit(params.limit)
          .execute(),
      ),
    )
    const rows = [...new Map(pages.flat().map((r) => [r.id, r])).values()].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    return rows.slice(0, params.limit).map((r) => toJob(r as JobViewRow))
  }
  if (status) q = q.where(opaque(statusCondition(status)))
  const rows = await q.orderBy('j.id', 'desc').limit(params.limit).execute()
  return rows.map((r) => toJob(r as JobViewRow))
}
