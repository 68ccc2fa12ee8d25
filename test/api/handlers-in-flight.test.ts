/**
 * trackHandlers: a graceful close can wait for requests whose clients hung up,
 * in a hook or in the handler (the HTTP server's close waits only for connections).
 */
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { trackHandlers } from '../../src/api/handlers-in-flight.ts'

/** A step that signals when it is reached and waits until released. */
function gate() {
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => (release = resolve))
  let reach: () => void = () => undefined
  const reached = new Promise<void>((resolve) => (reach = resolve))
  return {
    release,
    reached,
    async pass() {
      reach()
      await released
    },
  }
}

describe('trackHandlers', () => {
  const apps: Array<ReturnType<typeof Fastify>> = []
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()))
  })

  /** A tracked app; `route` adds its routes and hooks. */
  async function trackedApp(route: (app: ReturnType<typeof Fastify>) => void) {
    const app = Fastify()
    apps.push(app)
    const tracked = trackHandlers(app)
    route(app)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
    return { app, tracked, base }
  }

  /** Sends GET `url`, waits until `reached`, hangs up, then closes the server (which resolves: no connection is left). */
  async function hangUpAndClose(app: ReturnType<typeof Fastify>, url: string, reached: Promise<void>) {
    const client = new AbortController()
    const request = fetch(url, { signal: client.signal }).catch((err: unknown) => err)
    await reached
    client.abort()
    await request
    await app.close()
  }

  /** `settled` stays pending while `step` is held, and resolves true once it is released. */
  async function expectSettledOnlyAfter(tracked: ReturnType<typeof trackHandlers>, step: ReturnType<typeof gate>) {
    let settled: boolean | undefined
    const settling = tracked.settled(10_000).then((v) => (settled = v))
    await new Promise((resolve) => setImmediate(resolve))
    expect(settled).toBeUndefined()
    step.release()
    await settling
    expect(settled).toBe(true)
  }

  it('waits, after the server has closed, for a handler whose client hung up', async () => {
    const step = gate()
    let finished = false
    const { app, tracked, base } = await trackedApp((a) =>
      a.get('/slow', async () => {
        await step.pass()
        finished = true
        return { ok: true }
      }),
    )
    await hangUpAndClose(app, `${base}/slow`, step.reached)
    expect(finished).toBe(false)
    await expectSettledOnlyAfter(tracked, step)
    expect(finished).toBe(true)
  })

  it('counts a request from its first hook: a hook still running when the client hung up is waited for', async () => {
    const step = gate()
    let handled = false
    const { app, tracked, base } = await trackedApp((a) => {
      a.addHook('onRequest', () => step.pass()) // a key lookup, say
      a.get('/x', async () => {
        handled = true
        return { ok: true }
      })
    })
    await hangUpAndClose(app, `${base}/x`, step.reached)
    await expectSettledOnlyAfter(tracked, step)
    expect(handled).toBe(true)
  })

  it('gives up after the timeout when a handler never returns', async () => {
    const step = gate()
    const { app, tracked, base } = await trackedApp((a) => a.get('/slow', () => step.pass()))
    await hangUpAndClose(app, `${base}/slow`, step.reached)
    expect(await tracked.settled(50)).toBe(false)
    step.release()
    expect(await tracked.settled(10_000)).toBe(true)
  })

  it('settles at once when no request is in flight', async () => {
    const { tracked } = await trackedApp((a) => a.get('/x', async () => ({ ok: true })))
    expect(await tracked.settled(10_000)).toBe(true)
  })

  it('leaves a synchronous handler synchronous (its reply is not replaced by an empty one)', async () => {
    const { app } = await trackedApp((a) =>
      a.get('/later', (_request: FastifyRequest, reply: FastifyReply) => {
        setImmediate(() => void reply.send({ later: true }))
      }),
    )
    const res = await app.inject({ method: 'GET', url: '/later' })
    expect(res.json()).toEqual({ later: true })
  })
})
