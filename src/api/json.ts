/**
 * The JSON bodies the API answers with, made from the library's objects: kept apart from the
 * schemas (api/schemas/*), which re-export them, so that the CLI prints the same JSON without
 * loading TypeBox (about 900 modules, half a second of every command's start).
 */
import type { Execution, Job } from '../core/job.ts'
import { outputUriAttempt, parseOutputUri } from '../core/output-uri.ts'
import type { WorkerView } from '../db/queries/workers.ts'
import type { WebhookDelivery, WebhookSubscription } from '../events/webhook-admin.ts'
import type { QueueView } from '../queue-admin.ts'
import type { TenantView } from '../tenant-admin.ts'
import type { ExecutionJson } from './schemas/execution.ts'
import type { JobJson } from './schemas/job.ts'
import type { QueueJson } from './schemas/queue.ts'
import type { TenantJson } from './schemas/tenant.ts'

/** The JSON body for a job. */
export function jobToJson(job: Job): JobJson {
  const last = job.lastExecution
  return {
    id: job.id,
    tenant: job.tenant,
    type: job.type,
    queue: job.queue,
    priority: job.priority,
    payload: job.payload,
    maxAttempts: job.maxAttempts,
    timeoutMs: job.timeoutMs,
    backoffBaseMs: job.backoffBaseMs,
    backoffMaxMs: job.backoffMaxMs,
    idempotencyKey: job.idempotencyKey,
    concurrencyKey: job.concurrencyKey,
    startDeadlineMs: job.startDeadlineMs,
    state: job.state,
    status: job.status,
    lastRun: job.lastRun
      ? { ...job.lastRun, scheduledFor: job.lastRun.scheduledFor.toISOString(), finishedAt: job.lastRun.finishedAt?.toISOString() ?? null }
      : null,
    attempts: last?.attempt ?? 0,
    createdAt: job.createdAt.toISOString(),
    createdBy: job.createdBy,
    schedule: job.schedule
      ? {
          ...job.schedule,
          startAt: job.schedule.startAt?.toISOString() ?? null,
          endAt: job.schedule.endAt?.toISOString() ?? null,
        }
      : null,
    nextRunAt: job.nextRunAt?.toISOString() ?? null,
    lastExecution: last ? executionToJson(last) : null,
    unserved: job.unserved,
    queuePaused: job.queuePaused,
    queuePausedAt: job.queuePausedAt?.toISOString() ?? null,
  }
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null)

/** The JSON body for an execution. */
export function executionToJson(e: Execution): ExecutionJson {
  return {
    id: e.id,
    jobId: e.jobId,
    state: e.state,
    attempt: e.attempt,
    maxAttempts: e.maxAttempts,
    scheduledFor: e.scheduledFor.toISOString(),
    runAt: e.runAt.toISOString(),
    startedAt: iso(e.startedAt),
    finishedAt: iso(e.finishedAt),
    workerId: e.workerId,
    leaseExpiresAt: iso(e.leaseExpiresAt),
    result: e.result ?? null,
    error: e.error,
    outputUri: e.outputUri,
    outputUrl: e.outputUri ? `/v1/executions/${e.id}/output` : null,
    outputAttempt: outputAttemptOf(e.outputUri),
    attempts: e.attempts.map((a) => ({ ...a, startedAt: iso(a.startedAt), endedAt: iso(a.endedAt) })),
  }
}

/** The attempt an output URI names (outputUriAttempt); null for none or a form that does not say. */
function outputAttemptOf(uri: string | null): number | null {
  const location = parseOutputUri(uri)
  return location === null ? null : outputUriAttempt(location)
}

export function queueToJson(q: QueueView): QueueJson {
  return { ...q, pausedAt: q.pausedAt?.toISOString() ?? null }
}

export function tenantToJson(t: TenantView): TenantJson {
  return { ...t }
}

export const workerToJson = (w: WorkerView) => ({
  ...w,
  startedAt: w.startedAt.toISOString(),
  lastSeenAt: w.lastSeenAt.toISOString(),
  stoppedAt: iso(w.stoppedAt),
})

export function webhookToJson(w: WebhookSubscription) {
  return {
    id: w.id,
    tenant: w.tenant,
    url: w.url,
    events: w.events,
    queue: w.queue,
    createdAt: w.createdAt.toISOString(),
    enabled: w.enabled,
    failingSince: w.failingSince?.toISOString() ?? null,
    disabledAt: w.disabledAt?.toISOString() ?? null,
    disabledReason: w.disabledReason,
  }
}

export function deliveryToJson(d: WebhookDelivery) {
  return { ...d, at: d.at.toISOString() }
}
