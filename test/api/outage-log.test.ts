/**
 * A database outage logs two lines in the API, not one per request: a warning when requests start
 * getting 503, and one when a request that needs the database succeeds again. The outage is real
 * to the API: its pool connects through a TCP proxy to the test database, and the proxy closes.
 * Only a request begun after the outage was seen ends it (the second test, on the log itself).
 */
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { afterEach, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { OutageLog } from '../../src/api/outage.ts'
import { createDb } from '../../src/db/pool.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

/** A TCP proxy to the test database that can be closed (connections refused, open ones cut) and opened again. */
async function proxyTo(target: URL) {
  const sockets = new Set<net.Socket>()
  let server: net.Server | undefined
  const open = (port: number) =>
    new Promise<number>((resolve) => {
      const listening = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        for (const s of [client, upstream]) {
          sockets.add(s)
          s.on('close', () => sockets.delete(s))
          s.on('error', () => undefined)
        }
        client.pipe(upstream).pipe(client)
      })
      server = listening
      listening.listen(port, '127.0.0.1', () => resolve((listening.address() as net.AddressInfo).port))
    })
  const port = await open(0)
  return {
    port,
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    },
    async reopen() {
      await open(port)
    },
  }
}

describe('a database outage in the API log', () => {
  it('is one warning when submits start getting 503 and one line when a submit succeeds again, whatever the number of requests', async () => {
    const lines: Array<{ level: number; msg: string; outageMs?: number; answered503?: number }> = []
    const { log } = capturingLogger('warn', lines)
    const proxy = await proxyTo(new URL(t.url))
    cleanups.push(() => proxy.close())
    const url = new URL(t.url)
    url.host = `127.0.0.1:${proxy.port}`
    const database = createDb({ databaseUrl: url.toString(), poolSize: 2, log })
    cleanups.push(() => database.db.destroy())
    const app = buildApp({ db: database.db, log, apiKeyCacheMs: 60_000 })
    cleanups.push(() => app.close())
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    const submit = () =>
      app.inject({ method: 'POST', url: '/v1/jobs', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, payload: { type: 'x' } })

    expect((await submit()).statusCode).toBe(202) // the key is cached from here on
    await proxy.close()
    for (let i = 0; i < 10; i++) expect((await submit()).statusCode).toBe(503)
    await proxy.reopen()
    expect((await submit()).statusCode).toBe(202)

    const outageLines = lines.filter((l) => !/connection lost/.test(l.msg)) // a pool's own lines: one per connection cut
    expect(outageLines.map((l) => l.msg)).toEqual([
      'database unavailable: the database is not reachable; retry later; requests that need it get 503 until it is back',
      'database available again',
    ])
    expect(outageLines[1]?.answered503).toBe(10)
    expect(lines.filter((l) => /connection lost/.test(l.msg)).length).toBeLessThanOrEqual(2 * 2)
  })

  it('is not ended by a request begun before the outage was seen, only by one begun after', () => {
    const lines: Array<{ msg: string; answered503?: number }> = []
    const outages = new OutageLog(capturingLogger('info', lines).log)
    const before = performance.now()
    outages.failed('database unreachable', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))
    // its answer came from the database before it went
    outages.succeeded(before)
    expect(lines.map((l) => l.msg)).toEqual(['database unavailable: database unreachable; requests that need it get 503 until it is back'])
    outages.succeeded(performance.now())
    outages.succeeded(performance.now())
    expect(lines.map((l) => l.msg)).toEqual([
      'database unavailable: database unreachable; requests that need it get 503 until it is back',
      'database available again',
    ])
    expect(lines[1]?.answered503).toBe(1)
  })
})
