/**
 * The status model: a job's `status` is its lifecycle, apart from the
 * outcome of its latest run (`lastRun.status`), so a recurring job that keeps
 * firing reads SCHEDULED or RUNNING whatever its last run did.
 *
 *   status      when
 *   PAUSED      a recurring job paused (state paused)
 *   CANCELLED   the job was cancelled, or a one-time job's execution was
 *   RUNNING     its latest execution is running
 *   SCHEDULED   it has work to come: a pending execution (due, later, or a
 *               retry), or a recurring schedule that still fires
 *   COMPLETED   finished: its (last) run succeeded — a one-time job, or a
 *               recurring one past its endAt — or it has no run at all and
 *               nothing to come (a schedule that ended before its first fire
 *               time; a one-time job has its execution from its submit on)
 *   FAILED      finished: its (last) run failed, or the schedule stopped
 *               (its fire times could not be computed)
 *   EXPIRED     finished: its (last) execution missed its start deadline
 * The SQL of the `status` filter (db/queries/job-filter.ts statusCondition)
 * derives the same values; test/api/job-status.test.ts holds both to it.
 */
import type { Execution, JobState } from './job.ts'

/** A job's lifecycle status, in lifecycle order. */
export const JOB_STATUSES = ['SCHEDULED', 'RUNNING', 'PAUSED', 'CANCELLED', 'COMPLETED', 'FAILED', 'EXPIRED'] as const
export type JobStatus = (typeof JOB_STATUSES)[number]

/** The outcome of one run (an execution): PENDING and RUNNING while it has none yet. */
export const RUN_STATUSES = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'EXPIRED', 'CANCELLED'] as const
export type RunStatus = (typeof RUN_STATUSES)[number]

/** The latest run of a job: its execution, outcome and times. */
export interface LastRun {
  executionId: string
  status: RunStatus
  /** Attempts made (0: none started). */
  attempt: number
  /** The run's time: its run-at, or its fire time for a recurring job. */
  scheduledFor: Date
  finishedAt: Date | null
}

/** What the status needs of a recurring job's schedule: whether it still fires, and why it stopped. */
export interface ScheduleProgress {
  /** A next fire time (or a queued one) is still to come. */
  firing: boolean
  /** Why the dispatcher stopped the schedule; null while it runs. */
  error: string | null
}

/** The outcome of an execution. A failure without any attempt is a missed start deadline. */
export function runStatus(e: Pick<Execution, 'state' | 'attempt'>): RunStatus {
  switch (e.state) {
    case 'pending':
      return 'PENDING'
    case 'running':
      return 'RUNNING'
    case 'succeeded':
      return 'SUCCEEDED'
    case 'failed':
      return e.attempt === 0 ? 'EXPIRED' : 'FAILED'
    case 'cancelled':
      return 'CANCELLED'
  }
}

/** The latest run of a job from its latest execution. */
export function lastRunOf(e: Execution | null): LastRun | null {
  return e ? { executionId: e.id, status: runStatus(e), attempt: e.attempt, scheduledFor: e.scheduledFor, finishedAt: e.finishedAt } : null
}

/**
 * A job's status from its state, its schedule (null for a one-time job) and its latest execution.
 */
export function jobStatus(state: JobState, schedule: ScheduleProgress | null, last: Pick<Execution, 'state' | 'attempt'> | null): JobStatus {
  if (state === 'cancelled') return 'CANCELLED'
  if (state === 'paused') return 'PAUSED'
  const run = last ? runStatus(last) : null
  if (run === 'RUNNING') return 'RUNNING'
  if (run === 'PENDING') return 'SCHEDULED'
  if (schedule) {
    if (schedule.error !== null) return 'FAILED'
    if (schedule.firing) return 'SCHEDULED'
  }
  switch (run) {
    case null:
    case 'SUCCEEDED':
      return 'COMPLETED'
    case 'FAILED':
      return 'FAILED'
    case 'EXPIRED':
      return 'EXPIRED'
    case 'CANCELLED':
      return 'CANCELLED'
  }
}
