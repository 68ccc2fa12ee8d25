/**
 * /v1/queues: the queues with their settings and live figures, pause, resume and the concurrency
 * limit. A queue is shared by every tenant, so changing or viewing one answers operator keys only
 * (`scheduler keys create --tenant <name> --operator`; other keys get 403); the list answers tenant keys too, with
 * figures of their own executions.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { ValidationError } from '../../errors.ts'
import { CommonErrors, ErrorResponses, documented } from '../schemas/error.ts'
import { QueueListRef, QueueParams, QueuePatchBodyRef, QueueRef, queueToJson } from '../schemas/queue.ts'
import { assertOperator, type RouteDeps } from './deps.ts'
import { noPeriodWithout } from '../../queue-admin.ts'

const security = [{ apiKey: [] }]
const errors = { ...CommonErrors, 403: ErrorResponses[403] }
const queue = documented(QueueRef, 'The queue (a queue never used answers its defaults).')

/** Registers the /queues routes (mounted under /v1 behind authentication). */
export const queueRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  /** The queue operations, for an operator key. */
  const queuesFor = (request: FastifyRequest) => {
    const client = deps.clientFor(request)
    assertOperator(request, 'queues are shared by every tenant')
    return client.queues
  }

  app.get(
    '/queues',
    {
      schema: {
        operationId: 'listQueues',
        tags: ['queues'],
        summary: 'List queues',
        description:
          'Every queue with settings or with pending or running executions: paused, concurrency limit, depth by state, oldest due lag. ' +
          "For a tenant key, the figures count that tenant's executions only (and queues appear where it has work or that have settings).",
        security,
        response: { 200: documented(QueueListRef, 'The queues.'), ...errors },
      },
    },
    async (request) => {
      const client = deps.clientFor(request)
      const queues = request.identity?.operator ? await client.queues.list() : await client.listQueues()
      return { items: queues.map(queueToJson) }
    },
  )

  app.get(
    '/queues/:name',
    {
      schema: { operationId: 'viewQueue', tags: ['queues'], summary: 'View a queue', security, params: QueueParams, response: { 200: queue, ...errors } },
    },
    async (request) => queueToJson(await queuesFor(request).view(request.params.name)),
  )

  app.post(
    '/queues/:name/pause',
    {
      schema: {
        operationId: 'pauseQueue',
        tags: ['queues'],
        summary: 'Pause a queue',
        description:
          'Once this answers, no worker claims an execution of the queue; executions already claimed finish. Submits are still accepted. Safe to repeat.',
        security,
        params: QueueParams,
        response: { 200: queue, ...errors },
      },
    },
    async (request) => queueToJson(await queuesFor(request).pause(request.params.name)),
  )

  app.post(
    '/queues/:name/resume',
    {
      schema: {
        operationId: 'resumeQueue',
        tags: ['queues'],
        summary: 'Resume a queue',
        description: 'Workers take the queue’s work again; they are woken at once. Safe to repeat.',
        security,
        params: QueueParams,
        response: { 200: queue, ...errors },
      },
    },
    async (request) => queueToJson(await queuesFor(request).resume(request.params.name)),
  )

  app.patch(
    '/queues/:name',
    {
      schema: {
        operationId: 'updateQueue',
        tags: ['queues'],
        summary: "Set a queue's limits and fair share",
        description:
          'At most `concurrencyLimit` executions of the queue run at once across all workers and hosts, and at most `keyConcurrencyLimit` of one ' +
          'concurrency key, and at most `rateLimit` starts per `ratePeriodMs`, and at most `keyRateLimit` starts of one concurrency key per ' +
          '`keyRatePeriodMs` (null: no limit); `fairShare` makes claims take turns between tenants. ' +
          'Fields left out stay as they are. Takes effect within a second.',
        security,
        params: QueueParams,
        body: QueuePatchBodyRef,
        response: { 200: queue, ...errors },
      },
    },
    async (request) => {
      const queues = queuesFor(request)
      const { name } = request.params
      const { concurrencyLimit, keyConcurrencyLimit, rateLimit, ratePeriodMs, keyRateLimit, keyRatePeriodMs, fairShare } = request.body
      if (ratePeriodMs !== undefined && rateLimit === undefined) {
        throw new ValidationError('ratePeriodMs goes with rateLimit', [{ path: 'ratePeriodMs', message: 'ratePeriodMs goes with rateLimit' }])
      }
      // a null limit removes it and takes no period (refused before anything changes)
      for (const [limit, period, limitPath, periodPath] of [
        [rateLimit, ratePeriodMs, 'rateLimit', 'ratePeriodMs'],
        [keyRateLimit, keyRatePeriodMs, 'keyRateLimit', 'keyRatePeriodMs'],
      ] as const) {
        noPeriodWithout(limitPath, periodPath, limit, period)
      }
      if (keyRatePeriodMs !== undefined && keyRateLimit === undefined) {
        const message = 'keyRatePeriodMs goes with keyRateLimit'
        throw new ValidationError(message, [{ path: 'keyRatePeriodMs', message }])
      }
      let view = await queues.view(name)
      if (concurrencyLimit !== undefined) view = await queues.setConcurrencyLimit(name, concurrencyLimit)
      if (keyConcurrencyLimit !== undefined) view = await queues.setKeyConcurrencyLimit(name, keyConcurrencyLimit)
      if (rateLimit !== undefined) view = await queues.setRateLimit(name, rateLimit, ratePeriodMs)
      if (keyRateLimit !== undefined) view = await queues.setKeyRateLimit(name, keyRateLimit, keyRatePeriodMs)
      if (fairShare !== undefined) view = await queues.setFairShare(name, fairShare)
      return queueToJson(view)
    },
  )
}
