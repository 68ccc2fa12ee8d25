/**
 * Route handlers in flight, for a graceful close. The HTTP server's close waits
 * for connections, not for handlers: a client that hangs up mid-request leaves
 * its handler running (a submit may still be writing its job), and closing the
 * pool under it would fail that write.
 */
import type { FastifyInstance, RouteOptions } from 'fastify'

export interface HandlersInFlight {
  /** Resolves true once no handler runs, or false after `timeoutMs`. */
  settled(timeoutMs: number): Promise<boolean>
}

/** Counts the handlers of routes registered on `scope` (and its children) from now on. */
export function trackHandlers(scope: FastifyInstance): HandlersInFlight {
  let running = 0
  const waiters = new Set<() => void>()
  scope.addHook('onRoute', (route: RouteOptions) => {
    const handler = route.handler
    route.handler = async function (this: FastifyInstance, request, reply) {
      running++
      try {
        return await handler.call(this, request, reply)
      } finally {
        running--
        if (running === 0) for (const w of waiters) w()
      }
    }
  })
  return {
    settled(timeoutMs) {
      if (running === 0) return Promise.resolve(true)
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer)
          waiters.delete(done)
          resolve(running === 0)
        }
        const timer = setTimeout(done, timeoutMs)
        waiters.add(done)
      })
    },
  }
}
