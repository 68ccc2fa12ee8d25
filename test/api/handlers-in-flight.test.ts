/**
 * trackHandlers: a graceful close can wait for requests whose clients hung up,
 * in a hook or in the handler (the HTTP server's close waits only for connections).
 */
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { trackHandlers } from '../../src/api/handlers-in-flight.ts'

describe('trackHandlers', () => {
  const apps: Array<ReturnType<typeof Fastify>> = []
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()))
  })

  /** An app whose /slow handler runs until released; resolves `entered` when it starts. */
  async function slowApp() {
    const app = Fastify()
    apps.push(app)
    const tracked = trackHandlers(app)
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    let entered: () => void = () => undefined
    const started = new Promise<void>((resolve) => (entered = resolve))
    let finished = false
    app.get('/slow', async () => {
      entered()
      await released
      finished = true
      return { ok: true }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/slow`
    return { app, tracked, release, started, url, finished: () => finished }
  }

  it("waits, after the server has closed, for a handler whose client hung up", async () => {
    const s = await slowApp()
    const client = new AbortController()
    const request = fetch(s.url, { signal: client.signal }).catch((err: unknown) => err)
    await s.started
    client.abort()
    await request
    await s.app.close() // resolves: no connection is left
    let settled: boolean | undefined
    const settling = s.tracked.settled(10_000).then((v) => (settled = v))
    // The handler is still running: nothing has settled.
    await new Promise((resolve) => setImmediate(resolve))
    expect(settled).toBeUndefined()
    expect(s.finished()).toBe(false)
    s.release()
    await settling
    expect(settled).toBe(true)
    expect(s.finished()).toBe(true)
  })

  it('gives up after the timeout when a handler never returns', async () => {
    const s = await slowApp()
    const client = new AbortController()
    const request = fetch(s.url, { signal: client.signal }).catch((err: unknown) => err)
    await s.started
    client.abort()
    await request
    await s.app.close()
    expect(await s.tracked.settled(50)).toBe(false)
    s.release()
    expect(await s.tracked.settled(10_000)).toBe(true)
  })

  it('settles at once when no handler runs', async () => {
    const s = await slowApp()
    expect(await s.tracked.settled(10_000)).toBe(true)
    s.release()
  })

  it('counts a request from its first hook: a hook still running when the client hung up is waited for', async () => {
    const app = Fastify()
    apps.push(app)
    const tracked = trackHandlers(app)
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    let entered: () => void = () => undefined
    const inHook = new Promise<void>((resolve) => (entered = resolve))
    let handled = false
    app.addHook('onRequest', async () => {
      entered()
      await released // a key lookup, say
    })
    app.get('/x', async () => {
      handled = true
      return { ok: true }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    const client = new AbortController()
    const request = fetch(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/x`, { signal: client.signal }).catch(
      (err: unknown) => err,
    )
    await inHook
    client.abort()
    await request
    await app.close()
    let settled: boolean | undefined
    const settling = tracked.settled(10_000).then((v) => (settled = v))
    await new Promise((resolve) => setImmediate(resolve))
    expect(settled).toBeUndefined()
    release()
    await settling
    expect(settled).toBe(true)
    expect(handled).toBe(true)
  })

  it('leaves a synchronous handler synchronous (its reply is not replaced by an empty one)', async () => {
    const app = Fastify()
    apps.push(app)
    trackHandlers(app)
    app.get('/later', (_request, reply) => {
      setImmediate(() => void reply.send({ later: true }))
    })
    const res = await app.inject({ method: 'GET', url: '/later' })
    expect(res.json()).toEqual({ later: true })
  })
})
