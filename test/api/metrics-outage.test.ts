/**
 * The API's /metrics while the database does not answer (a network partition, a primary gone in a
 * failover without closing its connections): the scrape, over a real HTTP connection, still
 * answers within Prometheus's default scrape timeout, with the request metrics and the last queue
 * depth reading, and the late reading is logged. A reading the database never answered is given up
 * within a bound (its connection replaced), so the first scrape after the database is back reads
 * fresh depths; the failed readings are logged once per outage, with a line when they read again.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { QUEUE_DEPTH_WAIT_MS } from '../../src/api/metrics.ts'
import { BOUNDED_READ_CLIENT_TIMEOUT_MS } from '../../src/db/pool.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'
import { capturingLogger } from '../log-capture.ts'
import { parsePrometheusText } from '../prometheus-text.ts'
import { startTcpProxy, type TcpProxy, viaProxy } from '../worker/tcp-proxy.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
/** Prometheus's default scrape_timeout: a scrape not answered by then counts the target as down. */
const PROMETHEUS_SCRAPE_TIMEOUT_MS = 10_000

let cleanup: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const step of cleanup) await step()
  cleanup = []
})

/** An API over a pool that reaches the database through a TCP proxy, listening on a real port. */
async function apiThroughProxy() {
  const u = new URL(t.url)
  const proxy: TcpProxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) })
  const { log, lines } = capturingLogger<{ level: number; msg: string; waitedMs?: number; err?: unknown; failedReadings?: number }>('warn')
  const database: Database = createDb({ databaseUrl: viaProxy(t.url, proxy), poolSize: 4, log })
  const app: App = buildApp({ db: database.db, log, queueDepthCacheMs: 0 })
  // The proxy first: closing its sockets ends the statement the database never answered.
  cleanup.push(async () => proxy.close())
  cleanup.push(async () => app.close())
  cleanup.push(async () => database.db.destroy())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('the API is not listening on a TCP port')
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${address.port}/metrics`, { signal: AbortSignal.timeout(PROMETHEUS_SCRAPE_TIMEOUT_MS) })
    expect(res.status).toBe(200)
    return parsePrometheusText(await res.text())
  }
  return { proxy, lines, port: address.port, scrape }
}

describe('API metrics during a database outage', () => {
  it('answers a scrape while the database does not answer, with the request metrics and the last queue depth reading', async () => {
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    const { proxy, lines, port, scrape } = await apiThroughProxy()

    const submit = await fetch(`http://127.0.0.1:${port}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'x', queue: 'mail', payload: {} }),
    })
    expect(submit.status).toBe(202)
    expect((await scrape()).sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(1)

    proxy.blackhole()
    const during = await scrape()
    expect(during.sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(1)
    expect(during.sum('pgsched_http_requests_total', { route: '/v1/jobs', status_code: '202' })).toBe(1)
    expect(during.sum('pgsched_http_requests_total', { route: '/metrics', status_code: '200' })).toBe(1)
    // A later scrape does not wait again for the reading still outstanding.
    const again = await scrape()
    expect(again.sum('pgsched_http_requests_total', { route: '/metrics', status_code: '200' })).toBe(2)
    const late = lines.filter((l) => l.msg.startsWith('queue depth reading late'))
    expect(late).toHaveLength(1)
    expect(late[0]).toMatchObject({ level: 40, waitedMs: QUEUE_DEPTH_WAIT_MS })
  })

  it('gives up a queue depth reading the database never answered, so the first scrapes after it is back read fresh depths; logs the failures once', async () => {
    const { proxy, lines, scrape } = await apiThroughProxy()
    await insertExecution(t.db, { job: { queue: 'mail' } })
    expect((await scrape()).sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(1)

    // The database goes silent mid-reading: its connection stays open, no answer ever comes.
    proxy.blackhole()
    await insertExecution(t.db, { job: { queue: 'mail' } })
    expect((await scrape()).sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(1)
    const failedLine = () => lines.filter((l) => l.msg.startsWith('queue depth query failed'))
    // The reading is given up within its bound (not when TCP gives up on the connection, minutes later).
    await waitFor(() => failedLine().length === 1, { timeoutMs: BOUNDED_READ_CLIENT_TIMEOUT_MS + 5_000, what: 'the reading to be given up' })
    // Scrapes during the outage: each a reading that fails, none logged again.
    const readings = lines.length
    for (let i = 0; i < 3; i++) await scrape()
    expect(lines.length).toBe(readings)

    proxy.heal()
    const fresh = await waitFor(
      async () => {
        const m = await scrape()
        return m.sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' }) === 2 ? m : null
      },
      { timeoutMs: 30_000, what: 'a scrape with the depth read after the outage' },
    )
    expect(fresh.sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(2)
    expect(failedLine()).toHaveLength(1)
    expect(failedLine()[0]?.err).toBeDefined()
    const back = lines.filter((l) => l.msg.startsWith('queue depth read again'))
    expect(back).toHaveLength(1)
    expect(back[0]?.failedReadings).toBeGreaterThanOrEqual(1)
  })
})
