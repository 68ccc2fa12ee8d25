/**
 * What the dashboard reads beside jobs: failed jobs grouped by error, workers, recurring
 * schedules and per-minute figures. Tenant keys see their own tenant's; operator keys every
 * tenant's, narrowed by `tenant`. Workers hold no job data: every key may list them.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@fastify/type-provider-typebox'
import { CommonErrors, ErrorResponses, documented } from '../schemas/error.ts'
import { FailuresQuery, SchedulesQuery, StatsQuery, failureToJson, scheduleToJson, statsToJson, workerToJson } from '../schemas/operations.ts'
import type { RouteDeps } from './deps.ts'
import { operationsFor } from './job-operations.ts'

const security = [{ apiKey: [] }]
const errors = { ...CommonErrors, 403: ErrorResponses[403] }
const ref = (id: string, description: string) => documented(Type.Unsafe<unknown>(Type.Ref(id)), description)

/** Registers the view routes (mounted under /v1 behind authentication). */
export const viewRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.get(
    '/failures',
    {
      schema: {
        operationId: 'listFailures',
        tags: ['jobs'],
        summary: 'Failed jobs grouped by error',
        description:
          'Jobs whose status is FAILED or EXPIRED, grouped by their latest error (its name and message; a stopped schedule counts as ' +
          'ScheduleError), largest groups first, with first and last failure times, their types and queues, and the newest job with its ' +
          'payload as a sample. At most 500 groups.',
        security,
        querystring: FailuresQuery,
        response: { 200: ref('FailureGroupList', 'The groups.'), ...errors },
      },
    },
    async (request) => ({ items: (await operationsFor(deps, request).listFailures(request.query)).map(failureToJson) }),
  )

  app.get(
    '/workers',
    {
      schema: {
        operationId: 'listWorkers',
        tags: ['workers'],
        summary: 'List workers',
        description:
          'Workers most recently seen first (at most 500): alive (seen within 60 s), stale (not seen since and not stopped) or stopped, with ' +
          'their host, pid, queues, types, concurrency and the executions they hold now. Any key may list them (they hold no job data).',
        security,
        response: { 200: ref('WorkerList', 'The workers.'), ...CommonErrors },
      },
    },
    async (request) => ({ items: (await deps.clientFor(request).listWorkers()).map(workerToJson) }),
  )

  app.get(
    '/schedules',
    {
      schema: {
        operationId: 'listSchedules',
        tags: ['jobs'],
        summary: 'List recurring schedules',
        description: 'Recurring jobs (cron or interval) by job id, keyset-paginated, with their next five fire times and latest run.',
        security,
        querystring: SchedulesQuery,
        response: { 200: ref('ScheduleList', 'A page of schedules.'), ...errors },
      },
    },
    async (request) => {
      const page = await operationsFor(deps, request).listSchedules(request.query)
      return { items: page.items.map(scheduleToJson), nextCursor: page.nextCursor }
    },
  )

  app.get(
    '/stats',
    {
      schema: {
        operationId: 'viewStats',
        tags: ['queues'],
        summary: 'Per-minute figures',
        description:
          'Per minute and queue over the last `minutes` (1-1440, default 60): executions started, succeeded and failed, and the schedule lag ' +
          '(start minus due time) of those started at the 50th and 95th percentiles. Tenant keys: their own executions only.',
        security,
        querystring: StatsQuery,
        response: { 200: ref('MinuteStatsList', 'The figures.'), ...errors },
      },
    },
    async (request) => ({ items: (await operationsFor(deps, request).stats(request.query)).map(statsToJson) }),
  )
}
