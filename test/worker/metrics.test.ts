import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { FatalError } from '../../src/errors.ts'
import type { Logger } from '../../src/logger.ts'
import { createWorkerSystem, type WorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { executionRescueExpired } from '../../src/db/queries/rescue.ts'
import { SCHEDULE_LAG_BUCKETS_S, WorkerMetrics } from '../../src/worker/metrics.ts'
import type { ClaimedExecution } from '../../src/db/queries/claim.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'
import { parsePrometheusText, scrape } from '../prometheus-text.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

/** A port free a moment ago (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })
}

const systems: WorkerSystem[] = []
afterEach(async () => {
  await Promise.all(systems.splice(0).map((s) => s.stop()))
})

async function startSystem(env: Record<string, string>, log: Logger = t.log): Promise<WorkerSystem> {
  const config = loadConfig({
    DATABASE_URL: t.url,
    SCHEDULER_QUEUES: 'default,reports',
    SCHEDULER_WORKER_CONCURRENCY: '8',
    SCHEDULER_HEARTBEAT_MS: '200',
    SCHEDULER_LEASE_MS: '30000',
    SCHEDULER_REAPER_INTERVAL_MS: '100',
    SCHEDULER_WORKER_METRICS_HOST: '127.0.0.1',
    ...env,
  }) as Parameters<typeof createWorkerSystem>[0]['config']
  const handlers = [
    defineHandler<{ fail?: boolean }>('metrics.job', async (ctx) => {
      await new Promise((r) => setTimeout(r, 5))
      if (ctx.payload.fail) throw new FatalError('asked to fail')
      return { ok: true }
    }),
  ]
  const system = createWorkerSystem({ config, log, handlers })
  systems.push(system)
  await system.start()
  return system
}

describe('worker metrics', () => {
  it("serves a busy worker's /metrics, with a schedule-lag count equal to the executions started and lags equal to the database's started_at − run_at", async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    // The jobs are made and submitted once the worker runs, so that the lag of those due just now is
    // the claim's, not the worker's start-up (seconds on a loaded machine: no lag would be under a second).
    const port = await freePort()
    const system = await startSystem({ SCHEDULER_WORKER_METRICS_PORT: String(port) })
    expect(system.metricsPort()).toBe(port)
    const nowMs = Date.now()
    // Due at different times, most in the past, so the lags spread over several buckets; those due
    // 1.9-2 s from now start on an idle worker, within its wake-up (under a second however busy the
    // machine: the claim takes the oldest first, so on a loaded one even those due now wait longer).
    const jobs = Array.from({ length: 400 }, (_, i) => ({
      type: 'metrics.job',
      queue: i % 4 === 0 ? 'reports' : 'default',
      payload: { fail: i % 10 === 0 },
      maxAttempts: 1,
      schedule: { at: new Date(nowMs + 2_000 - (i % 7) * 1_300 - (i % 3) * 40).toISOString() },
    }))
    // Not claimed (its start deadline passed long ago): the reaper expires it.
    jobs.push({ type: 'metrics.job', queue: 'default', payload: { fail: false }, maxAttempts: 1, schedule: { at: new Date(nowMs - 3_600_000).toISOString() } })
    await client.submitJobs(jobs.slice(0, -1))
    await client.submitJob({ ...(jobs.at(-1) as (typeof jobs)[number]), startDeadlineMs: 1_000 })

    // While it works: a real scrape of the port.
    const busy = await waitFor(
      async () => {
        const s = await scrape(port)
        return s.sum('pgsched_worker_executions_started_total') > 0 && s.sum('pgsched_worker_executions_started_total') < 400 ? s : undefined
      },
      { what: 'a scrape while the worker runs jobs', intervalMs: 5 },
    )
    expect(busy.contentType).toContain('text/plain')
    expect(busy.types.get('pgsched_worker_schedule_lag_seconds')).toBe('histogram')

    const finished = async () => {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where state in ('succeeded', 'failed')`.execute(t.db)
      return rows[0]?.n === 401
    }
    await waitFor(finished, { timeoutMs: 60_000, what: 'every execution to finish or expire' })
    const s = await waitFor(
      async () => {
        const m = await scrape(port)
        return m.sum('pgsched_worker_executions_succeeded_total') + m.sum('pgsched_worker_executions_failed_total') === 400 &&
          m.sum('pgsched_worker_executions_expired_total') === 1
          ? m
          : undefined
      },
      { what: 'the outcomes counted' },
    )

    // The database's own lag of each attempt that started (each ran once: maxAttempts 1).
    const { rows } = await sql<{ queue: string; lag_s: string }>`
      select queue, extract(epoch from started_at - run_at)::text as lag_s
        from pgsched.executions where started_at is not null`.execute(t.db)
    expect(rows).toHaveLength(400)
    const started = s.sum('pgsched_worker_executions_started_total')
    expect(started).toBe(400)
    expect(s.sum('pgsched_worker_executions_claimed_total')).toBe(400)
    expect(s.sum('pgsched_worker_schedule_lag_seconds_count')).toBe(started)
    for (const queue of ['default', 'reports']) {
      const lags = rows.filter((r) => r.queue === queue).map((r) => Number(r.lag_s))
      expect(s.sum('pgsched_worker_schedule_lag_seconds_count', { queue })).toBe(lags.length)
      // The sum of the lags recorded equals the database's within a millisecond in all (each value
      // is the same started_at − run_at, read as epoch milliseconds: off by under a microsecond).
      const dbSum = lags.reduce((a, b) => a + b, 0)
      expect(Math.abs(s.sum('pgsched_worker_schedule_lag_seconds_sum', { queue }) - dbSum)).toBeLessThan(0.001)
      // Every bucket holds exactly the executions whose database lag is at most its bound (a lag
      // within a microsecond of a bound may fall either side).
      for (const le of SCHEDULE_LAG_BUCKETS_S) {
        const bucket = s.sum('pgsched_worker_schedule_lag_seconds_bucket', { queue, le: String(le) })
        expect(bucket).toBeGreaterThanOrEqual(lags.filter((l) => l <= le - 1e-6).length)
        expect(bucket).toBeLessThanOrEqual(lags.filter((l) => l <= le + 1e-6).length)
      }
    }
    // The lags spread: some under a second, some over 2.5 s.
    expect(s.sum('pgsched_worker_schedule_lag_seconds_bucket', { le: '1' })).toBeGreaterThan(0)
    expect(s.sum('pgsched_worker_schedule_lag_seconds_bucket', { le: '2.5' })).toBeLessThan(400)

    expect(s.sum('pgsched_worker_executions_failed_total', { queue: 'default', type: 'metrics.job' })).toBe(20)
    expect(s.sum('pgsched_worker_executions_failed_total', { queue: 'reports', type: 'metrics.job' })).toBe(20)
    expect(s.sum('pgsched_worker_executions_succeeded_total', { queue: 'reports', type: 'metrics.job' })).toBe(80)
    expect(s.sum('pgsched_worker_executions_expired_total', { queue: 'default', type: 'metrics.job' })).toBe(1)
    expect(s.sum('pgsched_worker_executions_retried_total')).toBe(0)
    expect(s.sum('pgsched_worker_leases_lost_total')).toBe(0)
    expect(s.sum('pgsched_worker_run_duration_seconds_count')).toBe(400)
    expect(s.sum('pgsched_worker_run_duration_seconds_sum')).toBeGreaterThanOrEqual(400 * 0.004)
    expect(s.sum('pgsched_worker_executions_running')).toBe(0)
    expect(s.sum('pgsched_worker_executions_buffered')).toBe(0)
    expect(s.sum('pgsched_worker_db_pool_connections', { pool: 'worker' })).toBeGreaterThan(0)
    expect(s.samples.some((x) => x.name === 'pgsched_worker_db_pool_waiting' && x.labels.pool === 'maintenance')).toBe(true)
    expect(s.samples.some((x) => x.name === 'pgsched_worker_db_pool_idle')).toBe(true)
    expect(s.sum('pgsched_worker_sandboxes')).toBe(0)
    // every claim counted once, by result, with its round trip observed once: the 400 executions took
    // more than one claim (8 slots), each of those claims at least one of them
    expect(s.types.get('pgsched_worker_claims_total')).toBe('counter')
    expect(s.types.get('pgsched_worker_claim_duration_seconds')).toBe('histogram')
    const withRows = s.sum('pgsched_worker_claims_total', { result: 'rows' })
    expect(withRows).toBeGreaterThan(1)
    expect(withRows).toBeLessThanOrEqual(400)
    expect(s.sum('pgsched_worker_claim_duration_seconds_count')).toBe(withRows + s.sum('pgsched_worker_claims_total', { result: 'empty' }))
    expect(s.sum('pgsched_worker_claim_duration_seconds_sum')).toBeGreaterThan(0)
    await waitFor(async () => (await scrape(port)).sum('pgsched_worker_heartbeat_duration_seconds_count') > 0, { what: 'a heartbeat counted' })
    // prom-client's process metrics come along.
    expect(s.types.has('process_cpu_seconds_total')).toBe(true)
  })

  it('opens no port when SCHEDULER_WORKER_METRICS_PORT is off, and serves nothing but GET /metrics', async () => {
    const off = await startSystem({ SCHEDULER_WORKER_METRICS_PORT: 'off' })
    expect(off.metrics).toBeUndefined()
    expect(off.metricsPort()).toBeUndefined()
    const port = await freePort()
    await startSystem({ SCHEDULER_WORKER_METRICS_PORT: String(port) })
    await expect(scrape(port, '/other')).rejects.toThrow(/404/)
  })

  it('runs on without metrics when its port is taken, logging why', async () => {
    const port = await freePort()
    const first = await startSystem({ SCHEDULER_WORKER_METRICS_PORT: String(port) })
    const logged = capturingLogger()
    const second = await startSystem({ SCHEDULER_WORKER_METRICS_PORT: String(port) }, logged.log)
    expect(first.metricsPort()).toBe(port)
    expect(second.metricsPort()).toBeUndefined()
    expect(logged.lines.filter((l) => l.msg.startsWith('worker metrics not served'))).toEqual([
      expect.objectContaining({
        level: 50,
        msg: 'worker metrics not served: the port is taken (several workers on one host need distinct SCHEDULER_WORKER_METRICS_PORT values)',
      }),
    ])
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'metrics.job' })
    await waitFor(async () => (await client.viewJob(job.id)).status === 'COMPLETED', { what: 'the job to run' })
  })
})

describe('worker metrics: a host it cannot listen on', () => {
  it('says so, naming the host, and no database outage is reported for it', async () => {
    const logged = capturingLogger()
    const system = await startSystem(
      { SCHEDULER_WORKER_METRICS_PORT: String(await freePort()), SCHEDULER_WORKER_METRICS_HOST: 'no-such-host.invalid' },
      logged.log,
    )
    expect(system.metricsPort()).toBeUndefined()
    const notServed = logged.lines.filter((l) => l.msg.startsWith('worker metrics not served'))
    expect(notServed).toHaveLength(1)
    expect(notServed[0]?.msg).toMatch(
      /^worker metrics not served: could not listen on no-such-host\.invalid:\d+ \(SCHEDULER_WORKER_METRICS_HOST, SCHEDULER_WORKER_METRICS_PORT\)$/,
    )
    expect(logged.lines.filter((l) => l.msg.startsWith('database unavailable'))).toEqual([])
  })
})

describe('worker metrics: retried and leases lost', () => {
  const read = async (m: WorkerMetrics) => parsePrometheusText(await m.registry.metrics())
  const claimed = (queue: string, type: string) => ({ queue, type }) as ClaimedExecution

  it('counts each claim by whether it took executions, and puts its round trip in its bucket', async () => {
    const m = new WorkerMetrics()
    m.claimed(2, 0, [claimed('default', 'a'), claimed('reports', 'a')], 3)
    m.claimed(0, 0, [], 1.5)
    m.claimed(0, 0, [], 40)
    const s = await read(m)
    expect(s.sum('pgsched_worker_claims_total', { result: 'rows' })).toBe(1)
    expect(s.sum('pgsched_worker_claims_total', { result: 'empty' })).toBe(2)
    expect(s.sum('pgsched_worker_executions_claimed_total', { queue: 'default', type: 'a' })).toBe(1)
    expect(s.sum('pgsched_worker_claim_duration_seconds_count')).toBe(3)
    expect(s.sum('pgsched_worker_claim_duration_seconds_sum')).toBeCloseTo(0.0445, 9)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '0.001' })).toBe(0)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '0.0025' })).toBe(1)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '0.005' })).toBe(2)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '0.025' })).toBe(2)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '0.05' })).toBe(3)
    expect(s.sum('pgsched_worker_claim_duration_seconds_bucket', { le: '+Inf' })).toBe(3)
  })

  it('counts each retried outcome and each lost lease under its queue and type, and as nothing else', async () => {
    const m = new WorkerMetrics()
    m.outcomeWritten(claimed('default', 'a'), 'retried')
    m.outcomeWritten(claimed('default', 'a'), 'retried')
    m.outcomeWritten(claimed('reports', 'a'), 'retried')
    m.outcomeWritten(claimed('default', 'a'), 'succeeded')
    m.leaseLost(claimed('default', 'b'))
    m.leaseLost(claimed('reports', 'a'))
    m.leaseLost(claimed('reports', 'a'))
    const s = await read(m)
    expect(s.types.get('pgsched_worker_executions_retried_total')).toBe('counter')
    expect(s.types.get('pgsched_worker_leases_lost_total')).toBe('counter')
    expect(s.sum('pgsched_worker_executions_retried_total', { queue: 'default', type: 'a' })).toBe(2)
    expect(s.sum('pgsched_worker_executions_retried_total', { queue: 'reports', type: 'a' })).toBe(1)
    expect(s.sum('pgsched_worker_executions_retried_total', { type: 'b' })).toBe(0)
    expect(s.sum('pgsched_worker_leases_lost_total', { queue: 'default', type: 'b' })).toBe(1)
    expect(s.sum('pgsched_worker_leases_lost_total', { queue: 'reports', type: 'a' })).toBe(2)
    expect(s.sum('pgsched_worker_leases_lost_total', { queue: 'default', type: 'a' })).toBe(0)
    // neither is an outcome of another kind
    expect(s.sum('pgsched_worker_executions_succeeded_total')).toBe(1)
    expect(s.sum('pgsched_worker_executions_failed_total')).toBe(0)
  })

  it('counts the retries a worker writes: two failed attempts of each flaky job, then its success', async () => {
    const m = new WorkerMetrics()
    await startWorker(
      [
        defineHandler('flaky', (ctx) => {
          if (ctx.attempt <= 2) throw new Error(`planned failure ${ctx.attempt}`)
        }),
      ],
      { events: m },
    )
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.submitJobs(Array.from({ length: 5 }, () => ({ type: 'flaky', maxAttempts: 3, backoffBaseMs: 0, backoffMaxMs: 0 })))
    const s = await waitFor(
      async () => {
        const x = await read(m)
        return x.sum('pgsched_worker_executions_succeeded_total') === 5 ? x : undefined
      },
      { timeoutMs: 30_000, what: 'five successes' },
    )
    expect(s.sum('pgsched_worker_executions_retried_total', { queue: 'default', type: 'flaky' })).toBe(10)
    expect(s.sum('pgsched_worker_executions_failed_total')).toBe(0)
    expect(s.sum('pgsched_worker_leases_lost_total')).toBe(0)
    expect(s.sum('pgsched_worker_executions_started_total')).toBe(15)
  })

  it('counts the executions its reaper takes back from expired leases, by queue, type and outcome, whatever queue they are in', async () => {
    const expired = new Date(Date.now() - 60_000)
    const job = { queue: 'elsewhere', type: 'lost.job' }
    await insertExecution(t.db, { state: 'running', attempt: 1, leaseExpiresAt: expired, job: { ...job, maxAttempts: 5 } })
    await insertExecution(t.db, { state: 'running', attempt: 1, leaseExpiresAt: expired, job: { ...job, maxAttempts: 1 } })
    await insertExecution(t.db, { state: 'running', attempt: 1, job: { ...job, maxAttempts: 1 } })
    const port = await freePort()
    await startSystem({ SCHEDULER_WORKER_METRICS_PORT: String(port) })
    const s = await waitFor(
      async () => {
        const m = await scrape(port)
        return m.sum('pgsched_worker_executions_rescued_total') === 2 ? m : undefined
      },
      { what: 'the two rescues counted' },
    )
    expect(s.types.get('pgsched_worker_executions_rescued_total')).toBe('counter')
    expect(s.sum('pgsched_worker_executions_rescued_total', { ...job, outcome: 'retried' })).toBe(1)
    expect(s.sum('pgsched_worker_executions_rescued_total', { ...job, outcome: 'failed' })).toBe(1)
    const { rows } = await sql<{ state: string; n: number }>`
      select state, count(*)::int as n from pgsched.executions group by state order by state`.execute(t.db)
    expect(rows).toEqual([
      { state: 'failed', n: 1 },
      { state: 'pending', n: 1 },
      { state: 'running', n: 1 },
    ])
  })

  it('counts a lease lost once when the execution is rescued while its handler runs, and writes no outcome for it', async () => {
    const m = new WorkerMetrics()
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    let running = false
    const worker = await startWorker(
      [
        defineHandler('held', async () => {
          running = true
          await held
        }),
      ],
      { events: m },
    )
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'held', maxAttempts: 1 })
    await waitFor(() => running, { what: 'the handler to start' })
    // the reaper of another process, an hour on: the lease has expired, the attempt is over
    expect(await executionRescueExpired(t.db, { limit: 10, now: new Date(Date.now() + 3_600_000) })).toMatchObject({ failed: 1 })
    release()
    await waitFor(async () => (await read(m)).sum('pgsched_worker_leases_lost_total') > 0, { timeoutMs: 30_000, what: 'the lost lease counted' })
    // once the worker has stopped, nothing of this run is left to count (the heartbeat's finding and the fence are one loss)
    await worker.stop()
    const s = await read(m)
    expect(s.sum('pgsched_worker_leases_lost_total', { queue: 'default', type: 'held' })).toBe(1)
    expect(s.sum('pgsched_worker_executions_succeeded_total') + s.sum('pgsched_worker_executions_failed_total')).toBe(0)
    expect(s.sum('pgsched_worker_executions_retried_total')).toBe(0)
    // the database keeps the rescue's outcome, not the handler's
    expect((await client.viewJob(job.id)).status).toBe('FAILED')
  })
})
