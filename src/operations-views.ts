/**
 * What an operator's dashboard reads beside jobs: failed jobs grouped by error, workers, recurring
 * schedules with their next fire times, per-minute figures, the queues with figures of the scope's
 * own executions, and webhook subscriptions. A scope is one tenant, or every tenant (null; a
 * `tenant` parameter may narrow it). Workers hold no job data: every scope lists all of them.
 */
import type { Kysely } from 'kysely'
import { fireTimesAsOf } from './core/fire-times.ts'
import type { Execution, JobState } from './core/job.ts'
import type { DB } from './db/schema.ts'
import { ForbiddenError, ValidationError } from './errors.ts'
import { failureGroupList, type FailureGroup } from './db/queries/failures.ts'
import { scheduleList } from './db/queries/schedules.ts'
import { statsPerMinute, type MinuteStats } from './db/queries/stats.ts'
import { workerList, type WorkerView } from './db/queries/workers.ts'
import { queueList, type QueueView } from './db/queries/queues.ts'
import { webhookSubscriptionList, webhookTenantOf } from './db/queries/webhooks.ts'
import type { WebhookSubscription } from './events/webhook-admin.ts'
import { UUID, assertUuid, decodeCursor, encodeCursor, limitOf, type Page } from './paging.ts'
import { assertKnownFields, assertNoMoreArguments, RUNS_ON_CLIENT, type FieldSet } from './core/known-fields.ts'

export type { FailureGroup, MinuteStats, WorkerView }

/** A recurring job's schedule as listed. */
export interface ScheduleView {
  jobId: string
  tenant: string
  type: string
  queue: string
  state: JobState
  kind: 'cron' | 'interval'
  /** The cron expression, or the interval as a duration (`90s`, `5m`, `1h`, `1500ms`). */
  schedule: string
  intervalMs: number | null
  timezone: string
  paused: boolean
  /** The next fire times (up to 5); none once the schedule stopped or while it is paused. */
  nextFireTimes: Date[]
  /** Why the schedule stopped when its fire times could not be computed (the job is FAILED); else null. */
  error: string | null
  lastExecution: Execution | null
}

export interface ListFailuresParams {
  queue?: string
  type?: string
  since?: Date | string
  tenant?: string
}

export interface ListSchedulesParams {
  limit?: number
  cursor?: string
  tenant?: string
  /** Only this job's schedule (none when the job is not recurring or not in the scope). */
  jobId?: string
}

export interface StatsParams {
  minutes?: number
  queue?: string
  tenant?: string
}

export interface ListQueuesParams {
  tenant?: string
}

export interface ListWebhooksParams {
  tenant?: string
  /** Most subscriptions listed (1-1000; default every one). */
  limit?: number
  /** Only those after this subscription id (the last one of the previous page). */
  afterId?: string
}

export interface OperationsViews {
  listFailures(params?: ListFailuresParams): Promise<FailureGroup[]>
  /** Every worker seen, most recent first (at most 500). */
  listWorkers(): Promise<WorkerView[]>
  listSchedules(params?: ListSchedulesParams): Promise<Page<ScheduleView>>
  /** Per-minute figures over the last `minutes` (1–1440, default 60). */
  stats(params?: StatsParams): Promise<MinuteStats[]>
  /** The queues with their settings and figures counting only the scope's executions. */
  listQueues(params?: ListQueuesParams): Promise<QueueView[]>
  /** The scope's webhook subscriptions (without their secrets), oldest first; an operator's scope: every tenant's, or one named. */
  listWebhooks(params?: ListWebhooksParams): Promise<WebhookSubscription[]>
  /** The tenant a webhook subscription belongs to (in a tenant's scope, that tenant's only); undefined when there is no such one. */
  tenantOfWebhook(id: string): Promise<string | undefined>
}

/** The fields each view takes; any other is refused (core/known-fields.ts), as REST refuses it. */
const FAILURES_FIELDS: FieldSet<ListFailuresParams> = { queue: true, type: true, since: true, tenant: true }
const SCHEDULES_FIELDS: FieldSet<ListSchedulesParams> = { limit: true, cursor: true, tenant: true, jobId: true }
const STATS_FIELDS: FieldSet<StatsParams> = { minutes: true, queue: true, tenant: true }
const QUEUES_FIELDS: FieldSet<ListQueuesParams> = { tenant: true }
const WEBHOOKS_FIELDS: FieldSet<ListWebhooksParams> = { tenant: true, limit: true, afterId: true }

/** Most failure groups listed; most workers listed. */
const FAILURE_GROUPS_MAX = 500
const WORKERS_MAX = 500
const NEXT_FIRE_TIMES = 5

const fail = (path: string, message: string) => new ValidationError(message, [{ path, message }])

/** An interval as a compact duration: the largest unit that divides it. */
export function formatIntervalMs(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}

export function operationsViews(db: Kysely<DB>, own: string | null): OperationsViews {
  /** The tenant a read covers: the scope's own (naming another is refused), or the one asked for, or every tenant. */
  const tenantOf = (asked: string | undefined): string | null => {
    if (own !== null && asked !== undefined && asked !== own) {
      throw new ForbiddenError(`tenant "${asked}": a key of tenant "${own}" sees its own tenant only; only an operator key may name another`)
    }
    return own ?? asked ?? null
  }
  return {
    async listFailures(params = {}, ...extra: unknown[]) {
      assertNoMoreArguments('listFailures', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, FAILURES_FIELDS, 'listFailures params')
      let since: Date | undefined
      if (params.since !== undefined) {
        since = new Date(params.since)
        if (Number.isNaN(since.getTime())) throw fail('since', 'since must be an ISO-8601 date-time')
      }
      return failureGroupList(db, { tenant: tenantOf(params.tenant), queue: params.queue, type: params.type, since, limit: FAILURE_GROUPS_MAX })
    },

    async listWorkers(...extra: unknown[]) {
      assertNoMoreArguments('listWorkers', [], extra, RUNS_ON_CLIENT)
      return workerList(db, { limit: WORKERS_MAX })
    },

    async listSchedules(params = {}, ...extra: unknown[]) {
      assertNoMoreArguments('listSchedules', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, SCHEDULES_FIELDS, 'listSchedules params')
      const limit = limitOf(params.limit)
      const afterId = params.cursor === undefined ? undefined : decodeCursor(params.cursor, UUID)
      if (params.jobId !== undefined && (typeof params.jobId !== 'string' || !UUID.test(params.jobId))) throw fail('jobId', 'jobId must be a UUID')
      const rows = await scheduleList(db, { tenant: tenantOf(params.tenant), limit: limit + 1, afterId, jobId: params.jobId })
      const page = rows.slice(0, limit)
      const last = page[page.length - 1]
      return {
        items: page.map((r) => ({
          jobId: r.jobId,
          tenant: r.tenant,
          type: r.type,
          queue: r.queue,
          state: r.state,
          kind: r.kind,
          schedule: r.kind === 'cron' ? (r.cronExpression ?? '') : formatIntervalMs(r.intervalMs ?? 0),
          intervalMs: r.intervalMs,
          timezone: r.timezone,
          paused: r.paused,
          nextFireTimes: r.nextFireAt === null || r.paused ? [] : fireTimesAsOf(r, r.nextFireAt, r.dbNow, NEXT_FIRE_TIMES), // the row is its own schedule
          error: r.error,
          lastExecution: r.lastExecution,
        })),
        nextCursor: rows.length > limit && last ? encodeCursor(last.jobId) : null,
      }
    },

    async stats(params = {}, ...extra: unknown[]) {
      assertNoMoreArguments('stats', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, STATS_FIELDS, 'stats params')
      const minutes = params.minutes ?? 60
      if (!Number.isInteger(minutes) || minutes < 1 || minutes > 1440) throw fail('minutes', 'minutes must be an integer from 1 to 1440')
      return statsPerMinute(db, { tenant: tenantOf(params.tenant), minutes, queue: params.queue })
    },

    listQueues: async (params = {}, ...extra: unknown[]) => {
      assertNoMoreArguments('listQueues', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, QUEUES_FIELDS, 'listQueues params')
      const tenant = tenantOf(params.tenant)
      return queueList(db, tenant === null ? {} : { tenant })
    },

    async listWebhooks(params = {}, ...extra: unknown[]) {
      assertNoMoreArguments('listWebhooks', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, WEBHOOKS_FIELDS, 'listWebhooks params')
      const { limit, afterId } = params
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000)) throw fail('limit', 'limit must be an integer from 1 to 1000')
      if (afterId !== undefined) assertUuid(afterId, 'afterId')
      return (await webhookSubscriptionList(db, { tenant: tenantOf(params.tenant), limit, afterId })).map(({ secret: _secret, ...rest }) => rest)
    },

    async tenantOfWebhook(id, ...extra: unknown[]) {
      assertNoMoreArguments('tenantOfWebhook', ['id'], extra, RUNS_ON_CLIENT)
      assertUuid(id, 'id')
      const tenant = await webhookTenantOf(db, id)
      return own === null || tenant === own ? tenant : undefined
    },
  }
}
