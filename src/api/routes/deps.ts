/** What the /v1 route plugins are given by app.ts. */
import type { FastifyRequest } from 'fastify'
import type { Client } from '../../client.ts'
import type { ApiMetrics } from '../metrics.ts'

export interface RouteDeps {
  /** The client acting for the request's tenant (the request must be authenticated). */
  clientFor(request: FastifyRequest): Client
  metrics: ApiMetrics
}
