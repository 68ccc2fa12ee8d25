/**
 * A database outage in a worker process's log: one line when it starts and one when the database
 * answers again, whatever the number of retries of the claim loop, the heartbeat, the LISTEN
 * connection and the maintenance loops in between. The worker process (worker, reaper, dispatcher,
 * pruner: createWorkerSystem) reaches the test database through a TCP proxy that closes and
 * reopens; its loops run every 100 ms to 1 s here, so a 3-second outage is many retries.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { startTcpProxy } from './tcp-proxy.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe('a database outage in the worker log', () => {
  it('is one line when it starts and one when the database answers again', async () => {
    const lines: Array<{ level: number; time: number; msg: string; outageMs?: number; linesHeldBack?: number; err?: { code?: string; message?: string } }> = []
    const { log } = capturingLogger('info', lines)
    const server = new URL(t.url)
    const proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) })
    cleanups.push(() => proxy.close())
    const url = new URL(t.url)
    url.host = `127.0.0.1:${proxy.port}`
    const config = loadConfig({
      DATABASE_URL: url.toString(),
      SCHEDULER_HEARTBEAT_MS: '100',
      SCHEDULER_LEASE_MS: '30000',
      SCHEDULER_POLL_INTERVAL_MS: '200',
      SCHEDULER_REAPER_INTERVAL_MS: '100',
      SCHEDULER_DISPATCHER_INTERVAL_MS: '100',
      SCHEDULER_PRUNE_INTERVAL_MS: '1000',
      SCHEDULER_WORKER_METRICS_PORT: 'off',
    }) as Parameters<typeof createWorkerSystem>[0]['config']
    const ran: string[] = []
    const system = createWorkerSystem({ config, log, handlers: [defineHandler('outage.job', async (ctx) => void ran.push(ctx.jobId))] })
    cleanups.push(() => system.stop())
    await system.start()
    const client = createClient({ db: t.db, tenant: 'acme' })
    const before = await client.submitJob({ type: 'outage.job' })
    await waitFor(() => ran.includes(before.job.id), { what: `a job run before the outage; log: ${lines.map((l) => l.msg).join(' | ')}` })

    const start = lines.length
    const closedAt = Date.now()
    await proxy.close()
    await new Promise((r) => setTimeout(r, 3_000)) // the outage: its length is the point, not a wait for something
    await proxy.reopen()
    const after = await client.submitJob({ type: 'outage.job' })
    await waitFor(() => ran.includes(after.job.id), { what: 'a job run after the outage', timeoutMs: 15_000 })

    const during = lines.slice(start)
    const messages = during.map((l) => l.msg)
    // Each line with its time from the outage's start and its error, for a failure to be read from.
    const account = during.map((l) => `+${l.time - closedAt} ms ${l.msg}${l.err ? ` [${l.err.code ?? ''} ${l.err.message ?? ''}]` : ''}`).join('\n')
    expect(
      messages.filter((m) => m.startsWith('database unavailable')),
      account,
    ).toHaveLength(1)
    const back = during.filter((l) => l.msg === 'database available again')
    expect(back, account).toHaveLength(1)
    expect(back[0]?.outageMs).toBeGreaterThanOrEqual(2_500)
    expect(back[0]?.linesHeldBack).toBeGreaterThan(10) // the retries it stood for
    // The rest: connections cut (one line per pooled or LISTEN connection) and the LISTEN connection restored.
    expect(during.length, account).toBeLessThan(12)
  })
})
