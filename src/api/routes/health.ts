/**
 * Operations endpoints, without authentication (meant for load balancers
 * and Prometheus on the internal network):
 *   /healthz  the process answers
 *   /readyz   the database answers within `readyTimeoutMs`, accepts writes, and every migration is
 *             applied (else 503)
 *   /metrics  Prometheus text format (metrics.ts)
 */
import { Type, type FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.ts'
import { pendingMigrations } from '../../db/migrate.ts'
import { databaseWritable } from '../../db/queries/ops.ts'
import { ErrorRef, REQUEST_ID_HEADER, documented, retryAfter } from '../schemas/error.ts'
import { READ_ONLY_MESSAGE, sendError } from '../error-handler.ts'
import type { ApiMetrics } from '../metrics.ts'

export interface HealthRoutesDeps {
  db: Kysely<DB>
  metrics: ApiMetrics
  /** Default: the package's migrations/ folder. */
  migrationsDir?: string
  /** Default 2000. */
  readyTimeoutMs?: number
}

const Status = Type.Object({ status: Type.String() })

/** Registers /healthz, /readyz and /metrics at the root, without authentication. */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesDeps> = async (app, deps) => {
  const timeoutMs = deps.readyTimeoutMs ?? 2000
  // The migrations this process knows never change, and applied ones stay applied.
  let migrationsCurrent = false

  /** Why the API is not ready, or null when it is. */
  async function notReadyReason(): Promise<string | null> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs)
    })
    try {
      const ping = databaseWritable(deps.db).then((writable) => (writable ? ('ok' as const) : ('read-only' as const)))
      const outcome = await Promise.race([ping, timeout]).catch(() => 'failed' as const)
      ping.catch(() => undefined)
      if (outcome === 'timeout') return `the database did not answer within ${timeoutMs} ms`
      if (outcome === 'failed') return 'the database is not reachable'
      if (outcome === 'read-only') return READ_ONLY_MESSAGE
      if (!migrationsCurrent) {
        const pending = await pendingMigrations(deps.db as unknown as Kysely<unknown>, deps.migrationsDir)
        if (pending.length > 0) return `migrations pending: ${pending.join(', ')}; run "scheduler migrate"`
        migrationsCurrent = true
      }
      return null
    } finally {
      clearTimeout(timer)
    }
  }

  app.get(
    '/healthz',
    { schema: { operationId: 'health', tags: ['ops'], summary: 'Liveness', response: { 200: documented(Status, 'The process is up.') } } },
    async () => ({ status: 'ok' }),
  )

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'ready',
        tags: ['ops'],
        summary: 'Readiness',
        description: 'Ready when the database answers, accepts writes (not a standby, not read-only) and every migration is applied.',
        response: {
          200: documented(Status, 'Ready to serve.'),
          503: documented(ErrorRef, 'Not ready: `message` says why.', retryAfter('Seconds to wait before asking again (5).')),
        },
      },
    },
    async (request, reply) => {
      const reason = await notReadyReason().catch((err: unknown) => {
        request.log.warn({ err }, 'readiness check failed')
        return 'the readiness check failed'
      })
      // as every 503 of this API: when to ask again
      if (reason) return sendError(reply.header('retry-after', '5'), 503, reason)
      return { status: 'ready' }
    },
  )

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        tags: ['ops'],
        summary: 'Prometheus metrics',
        response: { 200: { description: 'Prometheus text format.', headers: REQUEST_ID_HEADER, content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_request, reply) => {
      const text = await deps.metrics.registry.metrics()
      return reply.type(deps.metrics.registry.contentType).send(text)
    },
  )
}
