/**
 * Requests in flight, for a graceful close. The HTTP server's close waits for
 * connections, not for the work of their requests: a client that hangs up
 * mid-request leaves its hooks and handler running (a key lookup, a submit
 * still writing its job), and closing the pool under them would fail those
 * writes. A request counts from its first onRequest hook until its handler
 * settles or its response is sent, whichever comes first.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'

export interface HandlersInFlight {
  /** Resolves true once no request is in flight, or false after `timeoutMs`. */
  settled(timeoutMs: number): Promise<boolean>
}

/** Counts the requests of `app`; call before any other hook or route is added. */
export function trackHandlers(app: FastifyInstance): HandlersInFlight {
  let running = 0
  const open = new WeakSet<FastifyRequest>()
  const waiters = new Set<() => void>()
  const finish = (request: FastifyRequest) => {
    if (!open.delete(request)) return
    running--
    if (running === 0) for (const w of waiters) w()
  }
  app.addHook('onRequest', async (request) => {
    open.add(request)
    running++
  })
  app.addHook('onResponse', async (request) => finish(request))
  // An async handler (every /v1 route) is followed to its end even when its client is gone and no
  // response will be sent; a synchronous one is left as it is and counted until its response.
  app.addHook('onRoute', (route: RouteOptions) => {
    const handler = route.handler
    route.handler = function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const result: unknown = handler.call(this, request, reply)
      if (result instanceof Promise) {
        return result.finally(() => finish(request))
      }
      return result
    } as RouteOptions['handler']
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
