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

/** The most tenant names GET /v1/identity lists for an operator key. */
export const IDENTITY_TENANTS_MAX = 1000

const IdentitySchema = Type.Object(
  {
    tenant: Type.String({ description: "The key's tenant." }),
    operator: Type.Boolean({ description: 'Whether the key is an operator key (every tenant, queues and tenant settings).' }),
    keyId: Type.String({ description: "The key's id (as `scheduler keys list` shows it)." }),
    tenants: Type.Array(Type.String(), {
      description:
        `The tenants whose jobs the key may see: its own; for an operator key every tenant that has jobs, settings or an API key, ` +
        `in order, at most ${IDENTITY_TENANTS_MAX}.`,
    }),
  },
  { additionalProperties: false },
)

/** Registers the view routes (mounted under /v1 behind authentication). */
export const viewRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.get(
    '/identity',
    {
      schema: {
        operationId: 'viewIdentity',
        tags: ['keys'],
        summary: 'Who the key is',
        description: "The calling key's tenant, whether it is an operator key, and the tenants whose jobs it may see. Any key may ask.",
        security,
        response: { 200: documented(IdentitySchema, 'The key.'), ...CommonErrors },
      },
    },
    async (request) => {
      const identity = request.identity
      if (!identity) throw new Error('GET /v1/identity reached without an identity')
      const tenants = identity.operator ? await deps.clientFor(request).tenants.names(IDENTITY_TENANTS_MAX) : [identity.tenant]
      return { tenant: identity.tenant, operator: identity.operator, keyId: identity.keyId, tenants }
    },
  )

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
          'Workers most recently seen first (at most 500): alive (seen within its lease length, 30 s by default), stale (not seen since and not stopped) or stopped, with ' +
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
        description:
          'Recurring jobs (cron or interval) by job id, keyset-paginated, with their next five fire times and latest run. ' +
          "With `jobId`, only that job's schedule (an empty list when it has none).",
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
