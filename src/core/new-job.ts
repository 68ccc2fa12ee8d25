/**
 * The Job a fresh submit created, built from what was inserted (no read-back): what the client and
 * the API answer a submit with.
 */
import { firstFireAt } from './fire-times.ts'
import { type Job, type NormalizedSubmit, unservedMessage } from './job.ts'

/**
 * @param now the database's time of the insert's transaction (a one-time job's)
 * @param served whether a live worker serves its type in its queue; `queuePause` whether its queue is paused (both as read lately)
 * @param submittedAt a recurring job's submit time by the database's clock (JobInsertOutcome.submittedAt)
 * @param fireTimesFrom the same up to the whole millisecond, as the dispatcher reckons the first fire time from it
 *   (JobInsertOutcome.fireTimesFrom)
 */
export function newJob(
  n: NormalizedSubmit,
  id: string,
  executionId: string,
  tenant: string,
  createdBy: string | null,
  now: Date,
  served: boolean,
  queuePause: { paused: boolean; pausedAt: Date | null },
  submittedAt: Date = now,
  fireTimesFrom: Date = submittedAt,
): Job {
  const recurring = n.kind === 'cron' || n.kind === 'interval'
  const runAt = n.runAt ?? now
  const createdAt = recurring ? submittedAt : now
  // a schedule's first fire time, none when its window ended before it (as the insert stores it).
  // A cron schedule's is reckoned from its submit time, as the dispatcher reckons it from the trigger's
  // created_at (the insert stores it as not computed yet, unless the submitting host's clock found none
  // to come); until that pass the job reads SCHEDULED, as its view does.
  const firstFire =
    n.kind === 'cron'
      ? n.firstFireAt && firstFireAt({ ...n, kind: 'cron', cronExpression: n.cron }, fireTimesFrom)
      : n.kind === 'interval'
        ? n.startAt && n.startAt > fireTimesFrom
          ? n.startAt
          : fireTimesFrom
        : null
  const fires = n.kind === 'cron' ? n.firstFireAt !== null : firstFire !== null && (n.endAt === null || firstFire <= n.endAt)
  return {
    id,
    tenant,
    type: n.type,
    queue: n.queue,
    priority: n.priority,
    payload: JSON.parse(n.payloadJson) as unknown,
    maxAttempts: n.maxAttempts,
    timeoutMs: n.timeoutMs,
    backoffBaseMs: n.backoffBaseMs,
    backoffMaxMs: n.backoffMaxMs,
    idempotencyKey: n.idempotencyKey,
    concurrencyKey: n.concurrencyKey,
    startDeadlineMs: n.startDeadlineMs,
    state: 'active',
    status: recurring && !fires ? 'COMPLETED' : 'SCHEDULED',
    lastRun: recurring ? null : { executionId, status: 'PENDING', attempt: 0, scheduledFor: runAt, finishedAt: null },
    createdAt,
    createdBy,
    schedule: recurring
      ? {
          kind: n.kind as 'cron' | 'interval',
          cron: n.cron,
          timezone: n.timezone,
          intervalMs: n.intervalMs,
          startAt: n.startAt,
          endAt: n.endAt,
          misfirePolicy: n.misfirePolicy,
          misfireMaxRuns: n.misfireMaxRuns,
          overlapPolicy: n.overlapPolicy,
          paused: false,
          error: null,
        }
      : null,
    nextRunAt: recurring ? (fires ? (firstFire ?? null) : null) : runAt,
    unserved: served ? null : unservedMessage(n.type, n.queue),
    queuePaused: queuePause.paused,
    queuePausedAt: queuePause.pausedAt,
    lastExecution: recurring
      ? null
      : {
          id: executionId,
          jobId: id,
          state: 'pending',
          attempt: 0,
          maxAttempts: n.maxAttempts,
          scheduledFor: runAt,
          runAt,
          startedAt: null,
          finishedAt: null,
          workerId: null,
          leaseExpiresAt: null,
          result: null,
          error: null,
          outputUri: null,
          attempts: [],
        },
  }
}
