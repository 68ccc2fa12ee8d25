/**
 * docs/high-availability.md: with a multi-host URL, "when the primary goes away, the next connection
 * searches again and finds the promoted node". When the old primary's host vanishes without closing
 * its connections (the host lost, a network partition that drops packets), the statements in flight on
 * it get no answer: without a bound, the worker's claims, dispatcher and reaper waited until TCP gave
 * up (about 15 minutes on Linux), the worker looking alive by its heartbeats. Every statement of the
 * worker's pools is now given up after ANSWERED_WITHIN_MS, its connection replaced. Here host 1 of the
 * URL is a proxy to the test database that starts dropping every byte; host 2 is the database itself
 * (standing for the promoted standby).
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { ANSWERED_WITHIN_MS } from '../../src/db/pool.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { startTcpProxy } from './tcp-proxy.ts'

const t = useTestDb()

describe('a worker on a multi-host URL whose first host vanishes without closing its connections', () => {
  it('claims again through the other host once its statements in flight are given up', { timeout: 120_000 }, async () => {
    const target = new URL(t.url)
    const port = Number(target.port || 5432)
    const proxy = await startTcpProxy({ host: target.hostname, port })
    const auth = target.password ? `${target.username}:${target.password}` : target.username
    const url = `postgres://${auth}@127.0.0.1:${proxy.port},${target.hostname}:${port}${target.pathname}?target_session_attrs=read-write`
    const ran: string[] = []
    const config = loadConfig({
      DATABASE_URL: url,
      SCHEDULER_WORKER_METRICS_PORT: 'off',
      SCHEDULER_LEASE_MS: '6000',
      SCHEDULER_HEARTBEAT_MS: '1000',
      SCHEDULER_POLL_INTERVAL_MS: '200',
    })
    const system = createWorkerSystem({ config, log: t.log, handlers: [defineHandler('tick', async (ctx) => void ran.push(ctx.jobId))] })
    const client = createClient({ db: t.db, tenant: 'acme' })
    await system.start()
    try {
      const first = await client.submitJob({ type: 'tick' })
      await waitFor(() => ran.includes(first.job.id), { what: 'a run through the first host' })
      const lostAt = Date.now()
      proxy.blackhole()
      const second = await client.submitJob({ type: 'tick' })
      await waitFor(() => ran.includes(second.job.id), {
        timeoutMs: ANSWERED_WITHIN_MS + 45_000,
        intervalMs: 250,
        what: 'a run through the second host after the first vanished',
      })
      // within the bound and a new connection's search, not TCP's quarter of an hour
      expect(Date.now() - lostAt).toBeLessThan(ANSWERED_WITHIN_MS + 45_000)
    } finally {
      await proxy.close()
      await system.stop()
      await client.close()
    }
  })
})
