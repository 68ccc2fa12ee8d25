/**
 * A worker asked to stop while its database does not answer: it waits for the database only so
 * long (STOP_DATABASE_WAIT_MS after the handlers' grace), then ends, leaving the outcome it could
 * not record to the reaper. Before, the outcome writer retried until the database came back and
 * the stop waited for it, whatever the grace: a SIGTERM in an outage was never obeyed.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { STOP_DATABASE_WAIT_MS } from '../../src/worker/worker.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { startTcpProxy, viaProxy } from './tcp-proxy.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe('a worker stopped while the database does not answer', () => {
  it('ends within its grace and the database wait, its unrecorded outcome left to the reaper', async () => {
    const lines: Array<{ msg: string; outcomesNotRecorded?: number }> = []
    const { log } = capturingLogger('info', lines)
    const server = new URL(t.url)
    const proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) })
    cleanups.push(() => proxy.close())
    const config = loadConfig({
      DATABASE_URL: viaProxy(t.url, proxy),
      SCHEDULER_SHUTDOWN_GRACE_MS: '300',
      SCHEDULER_POLL_INTERVAL_MS: '200',
      SCHEDULER_WORKER_METRICS_PORT: 'off',
    }) as Parameters<typeof createWorkerSystem>[0]['config']
    let release = () => {}
    const returned = new Promise<void>((resolve) => (release = resolve))
    let started = false
    const system = createWorkerSystem({
      config,
      log,
      handlers: [
        defineHandler('outage.stop', async () => {
          started = true
          await returned
          return { done: true }
        }),
      ],
    })
    let stopped = false
    cleanups.push(async () => {
      if (!stopped) await system.stop()
    })
    await system.start()
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'outage.stop' })
    await waitFor(() => started, { what: 'the handler started' })

    await proxy.close() // the database stops answering: connections cut, new ones refused
    release() // the handler returns: its outcome cannot be written
    await waitFor(() => lines.some((l) => l.msg.startsWith('database unavailable')), { what: 'the outage seen by the outcome write' })
    const stopAt = performance.now()
    await system.stop()
    stopped = true
    const tookMs = performance.now() - stopAt
    // the grace (300 ms) and the wait for the outcome (5 s), with room for the other steps; before, it never ended
    expect(tookMs).toBeLessThan(300 + 3 * STOP_DATABASE_WAIT_MS)
    expect(lines.find((l) => l.msg.startsWith('the database did not answer while the worker stopped'))).toMatchObject({ outcomesNotRecorded: 1 })
    expect(lines.at(-1)?.msg).toBe('worker stopped')

    // the outcome was not recorded: the execution is still leased, for the reaper to requeue at expiry
    await proxy.reopen()
    const { rows } = await t.pool.query<{ n: string }>('select count(*)::text as n from pgsched.runs where job_id = $1', [job.id])
    expect(rows[0]?.n).toBe('1')
  }, 40_000)
})
