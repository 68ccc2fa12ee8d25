/**
 * A run the lease guard aborts because the database went away (a failover, a restart) must count
 * its attempt when it runs again: docs/high-availability.md ("A run aborted at its lease's end … is
 * requeued by the reaper once its lease expires and runs again (its attempt counts)") and
 * docs/reliability.md ("a later attempt always has a higher number", the fence handlers are told to
 * use). When the database comes back, the worker's first claim fails and it hands back "the leases
 * the database gives it that it does not hold" (executionReleaseUnheld), which includes the run it
 * has just aborted: that run is requeued uncounted, at the same attempt, with nothing in its attempt
 * log, and logged as "handed back executions a claim took whose answer was lost". The worker now
 * leaves a run it gave up after its handler started to the reaper, which counts the attempt.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'
import { startTcpProxy, viaProxy } from './tcp-proxy.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('a run aborted by the lease guard during a database outage', () => {
  it('runs again at a higher attempt, with the lost attempt recorded', { timeout: 30_000 }, async () => {
    const target = new URL(t.url)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const proxiedUrl = viaProxy(t.url, proxy)
    const proxied = createDb({ databaseUrl: proxiedUrl, poolSize: 4, log: t.log })
    const runs: Array<{ attempt: number; aborted: boolean }> = []
    const probes: string[] = []
    const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 200, batchSize: 100 })
    try {
      await startWorker(
        [
          defineHandler('hold', async (ctx) => {
            const run = { attempt: ctx.attempt, aborted: false }
            runs.push(run)
            if (runs.length > 1) return // the rerun succeeds at once
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, 20_000)
              ctx.signal.addEventListener(
                'abort',
                () => {
                  clearTimeout(timer)
                  run.aborted = true
                  resolve()
                },
                { once: true },
              )
            })
            // ctx.signal aborted: the worker writes nothing for this run
          }),
          defineHandler('probe', (ctx) => void probes.push(ctx.jobId)),
        ],
        // the guard gives a run up 4 s after its last confirmed renewal; its lease in the database lasts 6 s
        { db: proxied.db, databaseUrl: proxiedUrl, leaseMs: 6_000, heartbeatMs: 2_000 },
      )
      const client = createClient({ db: t.db, tenant: 'acme' })
      const { job } = await client.submitJob({ type: 'hold' })
      await waitFor(() => runs.length === 1, { what: 'the handler to start' })
      // a heartbeat marks it begun in the database
      await waitFor(async () => (await t.db.selectFrom('pgsched.runs').select('began').where('job_id', '=', job.id).executeTakeFirst())?.began === true, {
        what: 'the run marked begun',
      })
      // the database goes away: every connection of the worker breaks, new ones are refused
      await proxy.close()
      await waitFor(() => runs[0]?.aborted === true, { timeoutMs: 10_000, what: 'the lease guard to abort the handler' })
      // the database is back: the worker's next claim follows its hand-back of the leases it does not
      // hold (a claim whose answer was lost); a probe job run shows that claim made
      await proxy.reopen()
      const probe = await client.submitJob({ type: 'probe' })
      await waitFor(() => probes.includes(probe.job.id), { timeoutMs: 15_000, what: 'a claim after the outage' })
      // the reaper (every worker runs one) takes the given-up lease back once it expired, counting its attempt
      await waitFor(async () => runs.length === 2 || (await reaper.runOnce()).retried > 0, { timeoutMs: 15_000, what: 'the lease taken back' })
      await waitFor(() => runs.length === 2, { timeoutMs: 15_000, what: 'the execution to run again' })
      const row = await t.db.selectFrom('pgsched.executions').select(['attempt', 'attempt_log']).where('job_id', '=', job.id).executeTakeFirstOrThrow()
      expect(runs.map((r) => r.attempt)).toEqual([1, 2])
      expect(row.attempt).toBe(2)
      expect(JSON.stringify(row.attempt_log)).toMatch(/lease/i)
    } finally {
      await proxy.close().catch(() => undefined)
      await proxied.db.destroy().catch(() => undefined)
    }
  })
})
