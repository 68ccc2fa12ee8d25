/** What the /v1 route plugins are given by app.ts. */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Client } from '../../client.ts'
import type { ApiKey } from '../../db/queries/api-keys.ts'
import type { CreatedApiKey } from '../auth.ts'
import type { StreamEventsParams } from '../../events/event-stream.ts'
import { ForbiddenError } from '../../errors.ts'
import type { ApiMetrics } from '../metrics.ts'
import type { StreamSlots } from '../stream-slots.ts'
import type { OutputRouteDeps } from './executions.ts'

export interface RouteDeps {
  /** The client acting for the request's tenant (the request must be authenticated). */
  clientFor(request: FastifyRequest): Client
  metrics: ApiMetrics
  /** A stream answered 200 has ended: counted and logged as onResponse does any other request (a hijacked reply runs no onResponse). */
  streamEnded(request: FastifyRequest, reply: FastifyReply): void
  /** For the execution output route. */
  output: OutputRouteDeps
  /** How long a stream's events are captured after it leaves (a reconnect within it misses nothing). */
  eventsRetentionMs?: number
  /** Opens a stream of SSE text pages of `tenant`'s events (null: every tenant's; events/event-stream.ts streamEventMessages). */
  eventMessages(tenant: string | null, params: StreamEventsParams): Promise<AsyncGenerator<string[], void, undefined>>
  /**
   * Whether the request's API key is still valid (looked up again once the authenticator's cache of
   * it expires): a long-lived stream checks it every `keyRecheckMs` and ends once it is revoked. A
   * lookup that fails for another reason (the database unreachable) counts as still valid.
   */
  keyStillValid(request: FastifyRequest): Promise<boolean>
  /** How often long-lived streams check their key (keyStillValid). */
  keyRecheckMs: number
  /** The event streams and output follows each tenant holds open on this process (api/stream-slots.ts). */
  streams: StreamSlots
  /** API keys of every tenant (the /keys routes, which check for an operator key first). */
  keys: {
    /** A page, oldest first (`after`: the previous page's `next`). */
    list(params: { tenant?: string; limit: number; after?: string }): Promise<{ items: ApiKey[]; next: string | null }>
    /** A tenant key (never an operator key), with its secret. */
    create(params: { tenant: string; name: string | null }): Promise<CreatedApiKey>
    /** Revokes the key and forgets it in this process's key cache; undefined: no such key. */
    revoke(id: string): Promise<ApiKey | undefined>
  }
}

/** Refuses a request without an operator key; `what` says why these routes are for operators. */
export function assertOperator(request: FastifyRequest, what: string): void {
  if (!request.identity?.operator) {
    throw new ForbiddenError(`${what}: only an operator key may see or change them (scheduler keys create --tenant <name> --operator)`)
  }
}

/**
 * For a long-lived response (an event stream, an output follow): calls `onRevoked` once the
 * request's API key is found revoked or deleted, checking every `keyRecheckMs`. Returns the stop.
 */
export function watchApiKey(deps: RouteDeps, request: FastifyRequest, onRevoked: () => void): () => void {
  let revoked = false
  const timer = setInterval(() => {
    void deps.keyStillValid(request).then((valid) => {
      if (valid || revoked) return
      revoked = true
      clearInterval(timer)
      onRevoked()
    })
  }, deps.keyRecheckMs)
  return () => clearInterval(timer)
}
