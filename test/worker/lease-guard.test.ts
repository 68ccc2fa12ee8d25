/**
 * A worker cut off from the database without an error (a partition that drops
 * packets: its heartbeat neither succeeds nor fails) must still abort its
 * handlers before its lease can expire, since after that another worker may
 * start the same execution.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'
import { startTcpProxy, viaProxy } from './tcp-proxy.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('Worker lease guard', () => {
  it('aborts its handlers before the lease expires when the heartbeat hangs in a partition', async () => {
    const target = new URL(t.url)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const proxiedUrl = viaProxy(t.url, proxy)
    const proxied = createDb({ databaseUrl: proxiedUrl, poolSize: 4, log: t.log })
    try {
      let startedAtMs = 0
      let abortedAtMs = 0
      let reason = ''
      await startWorker(
        [
          defineHandler('hold', async (ctx) => {
            startedAtMs = Date.now()
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, 20_000)
              ctx.signal.addEventListener(
                'abort',
                () => {
                  clearTimeout(timer)
                  abortedAtMs = Date.now()
                  reason = (ctx.signal.reason as Error).message
                  resolve()
                },
                { once: true },
              )
            })
          }),
        ],
        { db: proxied.db, databaseUrl: proxiedUrl, leaseMs: 1500, heartbeatMs: 300 },
      )
      const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'hold' })
      await waitFor(() => startedAtMs > 0, { what: 'the handler to start' })
      const leaseExpiresAt = async () =>
        (await t.db.selectFrom('pgsched.executions').select('lease_expires_at').where('job_id', '=', job.id).executeTakeFirstOrThrow()).lease_expires_at as Date
      const claimedUntil = (await leaseExpiresAt()).getTime()
      await waitFor(async () => (await leaseExpiresAt()).getTime() > claimedUntil, { what: 'a heartbeat to renew the lease through the proxy' })
      proxy.blackhole()
      await waitFor(() => abortedAtMs > 0, { timeoutMs: 4000, what: 'the handler to be aborted' })
      const row = await t.db.selectFrom('pgsched.executions').select(['state', 'lease_expires_at']).where('job_id', '=', job.id).executeTakeFirstOrThrow()
      // The lease the database still holds was last renewed before the cut: the abort came before it ran out.
      expect(row.state).toBe('running')
      expect(abortedAtMs).toBeLessThan((row.lease_expires_at as Date).getTime())
      expect(reason).toMatch(/lease/)
    } finally {
      await proxy.close()
      await proxied.db.destroy().catch(() => undefined)
    }
  })
})
