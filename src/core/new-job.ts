/**
 * The Job a fresh submit created, built from what was inserted (no read-back): what the client and
 * the API answer a submit with.
 */
import { firstFireAt } from './fire-times.ts'
import { type Job, type NormalizedSubmit, unservedMessage } from './job.ts'

export function newJob(n: NormalizedSubmit, id: string, executionId: string, tenant: string, createdBy: string | null, now: Date, served: boolean): Job {
  const recurring = n.kind === 'cron' || n.kind === 'interval'
  const runAt = n.runAt ?? now
  // a schedule's first fire time, none when its window ended before it (as the insert stores it).
  // A cron schedule's is reckoned from `now`, the database's time of the insert, as the dispatcher
  // reckons it from the job's created_at (the insert stores it as not computed yet): the submitting
  // host's clock only told whether one comes at all.
  const firstFire =
    n.kind === 'cron'
      ? n.firstFireAt && firstFireAt({ ...n, kind: 'cron', cronExpression: n.cron }, now)
      : n.kind === 'interval'
        ? n.startAt && n.startAt > now
          ? n.startAt
          : now
        : null
  const fires = firstFire !== null && (n.endAt === null || firstFire <= n.endAt)
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
    createdAt: now,
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
    nextRunAt: recurring ? (fires ? firstFire : null) : runAt,
    unserved: served ? null : unservedMessage(n.type, n.queue),
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
