import { inspect } from 'node:util'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Kysely, PostgresDialect, sql } from 'kysely'
import type { DB } from '../../src/db/schema.ts'
import { executionFailMany } from '../../src/db/queries/lease.ts'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { FatalError } from '../../src/errors.ts'
import { CancelledError, LeaseLostError, TimeoutError } from '../../src/worker/abort-reasons.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { LATE_HANDLER_WARN_MS } from '../../src/worker/executor.ts'
import { capturingLogger } from '../log-capture.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { insertExecutions, takeOverExecution } from '../factories.ts'
import { fileOutputStore, useWorkers } from './harness.ts'
import { pino } from 'pino'
import { serverAutovacuumOn } from '../../src/db/queries/ops.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
const client = () => createClient({ db: t.db, tenant: 'acme' })

async function execution(jobId: string) {
  return t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', jobId).executeTakeFirstOrThrow()
}

describe('Worker', () => {
  it('warns at start exactly when the server runs without autovacuum', async () => {
    const lines: string[] = []
    const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
    await startWorker([defineHandler('noop', async () => null)], { log })
    const warned = lines.some((l) => l.includes('autovacuum is off on this server'))
    const { rows } = await sql<{ setting: string }>`select setting from pg_settings where name = 'autovacuum'`.execute(t.db)
    expect(warned).toBe(rows[0]?.setting === 'off')
    expect(await serverAutovacuumOn(t.db)).toBe(rows[0]?.setting === 'on')
  })

  it('runs a submitted job and stores its result', async () => {
    await startWorker([
      defineHandler('add', async (ctx) => {
        const p = ctx.payload as { a: number; b: number }
        return { sum: p.a + p.b, attempt: ctx.attempt }
      }),
    ])
    const { job } = await client().submitJob({ type: 'add', payload: { a: 2, b: 3 } })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded', { what: 'job to succeed' })
    const view = await client().viewJob(job.id)
    expect(view).toMatchObject({ status: 'COMPLETED', lastExecution: { state: 'succeeded', attempt: 1, result: { sum: 5, attempt: 1 } } })
    expect(view.lastExecution?.workerId).toBeNull()
  })

  it("gives the handler the execution's identity, attempt, queue and fire time", async () => {
    await startWorker([
      defineHandler('whoami', async (ctx) => ({
        jobId: ctx.jobId,
        executionId: ctx.executionId,
        attempt: ctx.attempt,
        maxAttempts: ctx.maxAttempts,
        type: ctx.type,
        queue: ctx.queue,
        scheduledFor: ctx.scheduledFor.toISOString(),
        payload: ctx.payload,
        // a wrapper handing the context on through Object.create keeps its lazy parts working
        wrapped: ((c: typeof ctx) => c.signal instanceof AbortSignal && typeof c.log.info === 'function' && c.jobId === ctx.jobId)(Object.create(ctx)),
        // what logging the context shows: the run's fields, not the worker's own (its logger, output store, abort state)
        json: JSON.parse(JSON.stringify(ctx)),
        inspected: inspect(ctx),
      })),
    ])
    const runAt = new Date(Date.now() + 300)
    const { job } = await client().submitJob({ type: 'whoami', schedule: { at: runAt }, maxAttempts: 3, payload: { k: 1 } })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded', { what: 'job to succeed' })
    const e = await execution(job.id)
    expect(e.result).toEqual({
      jobId: job.id,
      executionId: e.id,
      attempt: 1,
      maxAttempts: 3,
      type: 'whoami',
      queue: 'default',
      scheduledFor: e.scheduled_for.toISOString(),
      payload: { k: 1 },
      wrapped: true,
      json: {
        jobId: job.id,
        executionId: e.id,
        attempt: 1,
        maxAttempts: 3,
        type: 'whoami',
        queue: 'default',
        scheduledFor: e.scheduled_for.toISOString(),
        payload: { k: 1 },
      },
      inspected: expect.stringMatching(/^HandlerContext \{\n {2}payload: \{ k: 1 \},\n {2}jobId: '/),
    })
    expect((e.result as { inspected: string }).inspected).not.toMatch(/parentLog|outputStore|abortState|childLog|outputHandle/)
    expect(e.scheduled_for.getTime()).toBe(runAt.getTime())
  })

  it('claims only the types it has handlers for and the queues it serves', async () => {
    await startWorker([defineHandler('mine', async () => 'ok')], { queues: ['emails'] })
    const mine = await client().submitJob({ type: 'mine', queue: 'emails' })
    const otherType = await client().submitJob({ type: 'theirs', queue: 'emails' })
    const otherQueue = await client().submitJob({ type: 'mine', queue: 'reports' })
    await waitFor(async () => (await execution(mine.job.id)).state === 'succeeded')
    expect((await execution(otherType.job.id)).state).toBe('pending')
    expect((await execution(otherQueue.job.id)).state).toBe('pending')
  })

  it('starts due jobs in priority order', async () => {
    const started: number[] = []
    const jobs = Array.from({ length: 60 }, (_, i) => ({ type: 'p', priority: ((i * 37) % 11) - 5, payload: { i } }))
    await client().submitJobs(jobs)
    await startWorker([defineHandler('p', async (ctx) => void started.push((ctx.payload as { i: number }).i))], { concurrency: 1 })
    await waitFor(() => started.length === 60, { what: 'all jobs to start' })
    const priorities = started.map((i) => (jobs[i] as { priority: number }).priority)
    expect(priorities).toEqual([...priorities].sort((a, b) => b - a))
  })

  it('retries a failing handler with growing backoff, then marks it failed when attempts run out', async () => {
    const attempts: number[] = []
    await startWorker([
      defineHandler('flaky', async (ctx) => {
        attempts.push(ctx.attempt)
        throw new Error(`boom ${ctx.attempt}`)
      }),
    ])
    const { job } = await client().submitJob({ type: 'flaky', maxAttempts: 3, backoffBaseMs: 10, backoffMaxMs: 200 })
    await waitFor(async () => (await execution(job.id)).state === 'failed', { what: 'job to fail' })
    expect(attempts).toEqual([1, 2, 3])
    const row = await execution(job.id)
    expect(row).toMatchObject({ attempt: 3, error: { message: 'boom 3', fatal: false, attempt: 3 } })
    expect((await client().viewJob(job.id)).status).toBe('FAILED')
  })

  it('computes retry delays with full jitter under a cap that doubles per attempt', async () => {
    // 150 running executions at each of attempts 1-3 fail through the real statement; read run_at - now().
    const workerId = '00000000-0000-7000-8000-0000000000aa'
    const means: number[] = []
    for (const attempt of [1, 2, 3]) {
      const rows = await insertExecutions(t.db, 150, {
        state: 'running',
        attempt,
        workerId,
        job: { type: 'x', maxAttempts: 10, backoffBaseMs: 1000, backoffMaxMs: 3_600_000 },
      })
      const outcomes = await executionFailMany(t.db, {
        workerId,
        failures: rows.map((r) => ({ id: r.id, jobId: r.jobId, attempt, errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
      })
      expect(outcomes).toHaveLength(150)
      expect(outcomes.every((o) => o.state === 'pending')).toBe(true)
      const cap = 1000 * 2 ** (attempt - 1)
      expect(Math.max(...outcomes.map((o) => o.retryInMs))).toBeLessThanOrEqual(cap)
      means.push(outcomes.reduce((a, o) => a + o.retryInMs, 0) / outcomes.length)
    }
    const [m1, m2, m3] = means as [number, number, number]
    expect(m2 / m1).toBeGreaterThan(1.4)
    expect(m3 / m2).toBeGreaterThan(1.4)
  })

  it('stops at once on FatalError', async () => {
    let calls = 0
    await startWorker([
      defineHandler('fatal', async () => {
        calls++
        throw new FatalError('bad input, do not retry')
      }),
    ])
    const { job } = await client().submitJob({ type: 'fatal', maxAttempts: 5 })
    await waitFor(async () => (await execution(job.id)).state === 'failed')
    expect(calls).toBe(1)
    expect((await execution(job.id)).error).toMatchObject({ message: 'bad input, do not retry', fatal: true })
  })

  it('aborts a handler on timeout and counts it as a retriable failure', async () => {
    const seen: boolean[] = []
    await startWorker([
      defineHandler('slow', async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        seen.push(ctx.signal.aborted)
        return 'too late'
      }),
    ])
    const { job } = await client().submitJob({ type: 'slow', timeoutMs: 100, maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })
    await waitFor(async () => (await execution(job.id)).state === 'failed', { what: 'both attempts to time out' })
    expect(seen).toEqual([true, true])
    expect((await execution(job.id)).error).toMatchObject({ timedOut: true, message: 'timed out after 100 ms' })
  })

  it('warns, once it returns, of a handler that ran on long after its timeout (ignoring ctx.signal); not of one that stopped on it', async () => {
    const { log, lines } = capturingLogger<{ msg: string; lateMs?: number; reason?: string; executionId?: string }>('warn')
    await startWorker(
      [
        defineHandler('deaf', async () => {
          await new Promise((resolve) => setTimeout(resolve, 100 + LATE_HANDLER_WARN_MS + 300))
          return 'late'
        }),
        defineHandler('listening', async (ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        }),
      ],
      { log },
    )
    const late =
      'handler returned long after its run was aborted: it does not stop on ctx.signal, so it held its slot, and its execution may have run again meanwhile (a process sandbox ends such a handler)'
    const { job: listening } = await client().submitJob({ type: 'listening', timeoutMs: 100, maxAttempts: 1 })
    const { job: deaf } = await client().submitJob({ type: 'deaf', timeoutMs: 100, maxAttempts: 1 })
    await waitFor(() => lines.some((l) => l.msg === late), { what: 'the warning', timeoutMs: 10_000 })
    expect((await execution(listening.id)).state).toBe('failed')
    const warned = lines.filter((l) => l.msg === late)
    expect(warned).toEqual([expect.objectContaining({ reason: 'TimeoutError', executionId: (await execution(deaf.id)).id })])
    expect(warned[0]?.lateMs).toBeGreaterThanOrEqual(LATE_HANDLER_WARN_MS)
  })

  it('rejects a result over 64 KiB with a message pointing to the output stream', async () => {
    await startWorker([defineHandler('big', async () => 'x'.repeat(70_000))])
    const { job } = await client().submitJob({ type: 'big' })
    await waitFor(async () => (await execution(job.id)).state === 'failed')
    expect(((await execution(job.id)).error as { message: string }).message).toContain('write large output to ctx.output')
  })

  it('counts the 64 KiB result limit in UTF-8 bytes, not characters', async () => {
    // 33,000 two-byte characters: 66,002 bytes as JSON, in 33,002 characters
    await startWorker([defineHandler('wide', async () => 'é'.repeat(33_000)), defineHandler('narrow', async () => 'é'.repeat(32_000))])
    const wide = await client().submitJob({ type: 'wide' })
    const narrow = await client().submitJob({ type: 'narrow' })
    await waitFor(async () => (await execution(wide.job.id)).state === 'failed', { what: 'the wide result to be rejected' })
    expect(((await execution(wide.job.id)).error as { message: string }).message).toContain('66002 bytes')
    await waitFor(async () => (await execution(narrow.job.id)).state === 'succeeded', { what: 'the narrow result to be stored' })
  })

  it('keeps handler output in Postgres, named by output_uri', async () => {
    await startWorker([
      defineHandler('log', async (ctx) => {
        ctx.output.write('line 1\n')
        ctx.output.write('line 2\n')
        return 'done'
      }),
    ])
    const { job } = await client().submitJob({ type: 'log' })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    const row = await execution(job.id)
    expect(row.output_uri).toBe(`pgsched:output/${row.id}/1`)
    const chunks = await t.db.selectFrom('pgsched.execution_output').select('data').where('execution_id', '=', row.id).orderBy('seq').execute()
    expect(Buffer.concat(chunks.map((c) => c.data)).toString()).toBe('line 1\nline 2\n')
  })

  it('keeps handler output in a file named by output_uri when the file store is selected', async () => {
    await startWorker(
      [
        defineHandler('log', async (ctx) => {
          ctx.output.write('line 1\n')
          ctx.output.write('line 2\n')
          return 'done'
        }),
      ],
      { outputStore: fileOutputStore() },
    )
    const { job } = await client().submitJob({ type: 'log' })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    const uri = (await execution(job.id)).output_uri
    expect(uri).toMatch(/^file:\/\//)
    expect(readFileSync(fileURLToPath(uri as string), 'utf8')).toBe('line 1\nline 2\n')
  })

  it('aborts a handler whose lease is lost and writes nothing for it', async () => {
    let reason: unknown
    const ended: string[] = []
    await startWorker(
      [
        defineHandler('stubborn', async (ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
          reason = ctx.signal.reason
          return 'late result'
        }),
      ],
      { heartbeatMs: 100, leaseMs: 1_000, events: { runEnded: (e) => void ended.push(e.jobId) } },
    )
    const { job } = await client().submitJob({ type: 'stubborn' })
    await waitFor(async () => (await execution(job.id)).state === 'running')
    // Another party takes the execution over (as the reaper would after expiry): attempt moves on.
    expect(await takeOverExecution(t.db, { jobId: job.id, workerId: '00000000-0000-7000-8000-000000000001' })).toBe(1)
    // The next heartbeat misses the lease; the handler, aborted, returns a result that is not written.
    await waitFor(() => ended.includes(job.id), { what: 'the run to end after its lease was lost' })
    expect(reason).toBeInstanceOf(LeaseLostError)
    expect((reason as Error).name).toBe('LeaseLostError')
    const row = await execution(job.id)
    expect(row).toMatchObject({ state: 'running', worker_id: '00000000-0000-7000-8000-000000000001', result: null })
  })

  it('keeps a handler running while heartbeats fail, and aborts it only when its lease is about to expire', async () => {
    // The worker gets its own small pool; taking all its connections makes every heartbeat fail
    // (10 a second here). The lease (1.5 s) is still valid: the handler runs on until the guard
    // gives the lease up at leaseMs − heartbeatMs without a renewal. The test takes them with time
    // to spare (a busy machine can take over 100 ms to open one), then the wait is cut to 100 ms.
    const pool = new pg.Pool({ connectionString: t.url, max: 2, connectionTimeoutMillis: 30_000 })
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
    let aborted: unknown
    let abortedAtMs = 0
    // when the last heartbeat that renewed the lease was sent
    let renewedAtMs = 0
    const events = {
      heartbeat: (tookMs: number, renewed: number) => {
        if (renewed > 0) renewedAtMs = performance.now() - tookMs
      },
    }
    const worker = await startWorker(
      [
        defineHandler('wait', async (ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
          aborted = ctx.signal.reason
          abortedAtMs = performance.now()
        }),
      ],
      { db, heartbeatMs: 100, leaseMs: 1_500, pollIntervalMs: 60_000, events },
    )
    const { job } = await client().submitJob({ type: 'wait' })
    await waitFor(async () => (await execution(job.id)).state === 'running')
    await waitFor(() => renewedAtMs > 0, { what: 'a heartbeat to renew the lease' })
    const held = [await pool.connect(), await pool.connect()]
    pool.options.connectionTimeoutMillis = 100
    const takenAtMs = performance.now()
    await waitFor(() => aborted !== undefined, { what: 'handler to be aborted' })
    for (const c of held) c.release()
    expect(aborted).toBeInstanceOf(LeaseLostError)
    expect((aborted as Error).message).toContain('lease not confirmed in time')
    // Failed heartbeats went by first: the guard acts leaseMs − heartbeatMs (1,400 ms) after the last
    // renewal was sent, not before (the renewals went on while the connections were being taken)
    expect(renewedAtMs).toBeGreaterThan(0)
    expect(renewedAtMs).toBeLessThan(takenAtMs)
    expect(abortedAtMs - renewedAtMs).toBeGreaterThanOrEqual(1_390)
    await worker.stop()
    await db.destroy()
  })

  it("retries a timed-out run's failure write while the database is unreachable, and records it once it answers", async () => {
    // At the timeout, before the failure is written, the handler takes every connection of the
    // worker's pool for a second: the failure cannot be written and the lease cannot be renewed.
    // The lease (200 s) is valid throughout: the write waits for the database and then lands. The
    // connections are taken with time to spare, then the pool's wait is cut to 100 ms.
    const pool = new pg.Pool({ connectionString: t.url, max: 2, connectionTimeoutMillis: 30_000 })
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
    const lines: string[] = []
    const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
    let reason: unknown
    const worker = await startWorker(
      [
        defineHandler('slow', async (ctx) => {
          await new Promise<void>((resolve) => {
            const onAbort = () => {
              reason = ctx.signal.reason
              const taking = Promise.all([pool.connect(), pool.connect()])
              // (each asked-for connection keeps the wait it was asked with: the failure write's is 100 ms)
              pool.options.connectionTimeoutMillis = 100
              void taking.then(async (held) => {
                await new Promise((r) => setTimeout(r, 1_000)) // the outage
                for (const c of held) c.release()
              })
              resolve()
            }
            ctx.signal.addEventListener('abort', onAbort, { once: true })
          })
        }),
      ],
      { db, log, heartbeatMs: 100, leaseMs: 200_000, pollIntervalMs: 60_000 },
    )
    const { job } = await client().submitJob({ type: 'slow', timeoutMs: 500, maxAttempts: 1 })
    await waitFor(async () => (await execution(job.id)).state === 'failed', { what: 'the failure to be recorded', timeoutMs: 10_000 })
    expect(reason).toBeInstanceOf(TimeoutError)
    expect(lines.some((l) => l.includes('writing failures failed'))).toBe(true) // it did meet the outage
    expect(lines.some((l) => l.includes('outcome not recorded'))).toBe(false)
    await worker.stop()
    await db.destroy()
  })

  it('carries on when an event listener throws: the run still starts, ends and is recorded', async () => {
    const lines: string[] = []
    const log = pino({ level: 'error' }, { write: (line: string) => lines.push(line) })
    const boom = () => {
      throw new Error('listener failed')
    }
    await startWorker([defineHandler('fine', async () => 'ok')], { log, events: { claimed: boom, runStarted: boom, runEnded: boom } })
    const { job } = await client().submitJob({ type: 'fine' })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded', { what: 'the job to succeed' })
    expect(lines.some((l) => l.includes('worker event listener threw'))).toBe(true)
  })

  it('cancels a running execution: the handler is aborted and the execution stays cancelled', async () => {
    let reason: unknown
    await startWorker([
      defineHandler('long', async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        reason = ctx.signal.reason
        return 'finished anyway'
      }),
    ])
    const { job } = await client().submitJob({ type: 'long' })
    await waitFor(async () => (await execution(job.id)).state === 'running')
    await client().cancelJob(job.id)
    await waitFor(() => reason !== undefined, { what: 'abort on cancel' })
    expect(reason).toBeInstanceOf(CancelledError)
    expect((reason as Error).name).toBe('CancelledError')
    expect((await execution(job.id)).state).toBe('cancelled')
  })

  it('hands back running executions on stop after the grace period, leaving nothing running', async () => {
    const worker = await startWorker(
      [
        defineHandler('forever', async (ctx) => {
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        }),
      ],
      { shutdownGraceMs: 100 },
    )
    const { job } = await client().submitJob({ type: 'forever' })
    await waitFor(async () => (await execution(job.id)).state === 'running')
    await worker.stop()
    expect(await execution(job.id)).toMatchObject({ state: 'pending', attempt: 0, worker_id: null })
  })
})

describe('Worker lease check before start', () => {
  it('does not start a handler whose claim is already past its safe lease time', async () => {
    let started = 0
    let ended = 0
    await client().submitJob({ type: 'late' })
    // start() sends the first claim; the loop is then blocked past lease − heartbeat before the
    // answer is handled, as a freeze between claim and start would.
    await startWorker([defineHandler('late', async () => void started++)], {
      leaseMs: 1_000,
      heartbeatMs: 200,
      pollIntervalMs: 60_000,
      events: { runEnded: () => void ended++ },
    })
    const until = performance.now() + 900
    while (performance.now() < until) {
      /* frozen */
    }
    await waitFor(() => ended === 1, { what: 'the run to end' })
    expect(started).toBe(0)
  })
})

describe('Worker prefetch', () => {
  it('claims ahead of its free slots once handlers are known to be short, and runs each execution once', async () => {
    const runs = new Map<number, number>()
    let maxBuffered = 0
    await startWorker(
      [
        defineHandler('short', async (ctx) => {
          const i = (ctx.payload as { i: number }).i
          runs.set(i, (runs.get(i) ?? 0) + 1)
        }),
      ],
      {
        concurrency: 4,
        prefetch: 50,
        events: {
          claimed: (_, waiting) => {
            maxBuffered = Math.max(maxBuffered, waiting)
          },
        },
      },
    )
    await client().submitJobs(Array.from({ length: 600 }, (_, i) => ({ type: 'short', payload: { i } })))
    await waitFor(
      async () => Number((await sql<{ n: string }>`select count(*) as n from pgsched.executions where state = 'succeeded'`.execute(t.db)).rows[0]?.n) === 600,
      { what: 'all 600 to succeed', timeoutMs: 30_000 },
    )
    expect(runs.size).toBe(600)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    expect(maxBuffered).toBeGreaterThan(4)
    expect(maxBuffered).toBeLessThanOrEqual(50)
  })

  it('hands back buffered executions on stop: pending again, attempt not counted', async () => {
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    let runs = 0
    let waiting = 0
    const worker = await startWorker(
      [
        defineHandler('gated', async () => {
          runs++
          if (runs > 20) await gate
        }),
      ],
      {
        concurrency: 2,
        prefetch: 30,
        shutdownGraceMs: 100,
        events: {
          claimed: (_, w) => {
            waiting = w
          },
        },
      },
    )
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'gated' })))
    await waitFor(() => runs === 20, { what: 'the first 20 runs' })
    await client().submitJobs(Array.from({ length: 100 }, () => ({ type: 'gated' })))
    await waitFor(() => waiting > 0, { what: 'executions buffered behind the gated handlers' })
    const stopping = worker.stop()
    release()
    await stopping
    const { rows } = await sql<{ state: string; attempt: number; n: string }>`
      select state, attempt, count(*) as n from pgsched.executions group by state, attempt order by state, attempt`.execute(t.db)
    expect(rows.find((r) => r.state === 'running')).toBeUndefined()
    const pending = rows.filter((r) => r.state === 'pending')
    expect(pending.every((r) => r.attempt === 0)).toBe(true)
    expect(pending.reduce((n, r) => n + Number(r.n), 0)).toBeGreaterThan(0)
  })

  it('hands back buffered executions at the start of a stop, not after the grace period, while a handler still runs', async () => {
    const pendingUncounted = async () => {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where state = 'pending' and attempt = 0`.execute(t.db)
      return rows[0]?.n ?? 0
    }
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    let started = 0
    let waiting = 0
    const worker = await startWorker(
      [
        defineHandler('held', async () => {
          started++
          // the first 20 are quick: the worker claims ahead only behind handlers it has seen to be short
          if (started > 20) await gate
        }),
      ],
      {
        concurrency: 1,
        prefetch: 10,
        shutdownGraceMs: 60_000,
        events: {
          claimed: (_, w) => {
            waiting = w
          },
        },
      },
    )
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'held' })))
    await waitFor(() => started === 20, { what: 'the first 20 runs' })
    await waitFor(async () => (await pendingUncounted()) === 0, { what: 'nothing due' })
    await client().submitJobs(Array.from({ length: 8 }, () => ({ type: 'held' })))
    // all 8 claimed: one runs, 7 wait in the buffer, none is due
    await waitFor(() => started === 21 && waiting === 7, { what: 'one run and 7 executions buffered behind it' })
    expect(await pendingUncounted()).toBe(0)
    const stopping = worker.stop()
    // while the one handler still holds the worker in its grace period, the buffered ones are due again
    await waitFor(async () => (await pendingUncounted()) === 7, { what: 'the 7 not started handed back', timeoutMs: 10_000 })
    expect(started).toBe(21)
    release()
    await stopping
    const { rows } = await sql<{ state: string; n: number }>`select state, count(*)::int as n from pgsched.executions group by state order by state`.execute(
      t.db,
    )
    expect(rows).toEqual([
      { state: 'pending', n: 7 },
      { state: 'succeeded', n: 21 },
    ])
  })

  it('reports at each heartbeat how many of the executions it holds are running, and 0 once stopped', async () => {
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    let started = 0
    let waiting = 0
    const worker = await startWorker(
      [
        defineHandler('held', async () => {
          started++
          // the first 20 end at once, so the worker learns its handlers are short and claims ahead
          if (started > 20) await gate
        }),
      ],
      {
        concurrency: 3,
        prefetch: 30,
        heartbeatMs: 100,
        shutdownGraceMs: 100,
        events: {
          claimed: (_, w) => {
            waiting = w
          },
        },
      },
    )
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'held' })))
    await waitFor(() => started === 20, { what: 'the first 20 runs' })
    await client().submitJobs(Array.from({ length: 40 }, () => ({ type: 'held' })))
    await waitFor(() => started === 23 && waiting > 0, { what: '3 handlers running with executions buffered behind them' })
    const own = async () => (await client().listWorkers()).find((w) => w.id === worker.id)
    await waitFor(async () => (await own())?.running === 3, { what: 'the heartbeat to report 3 running' })
    const seen = await own()
    // what it holds counts the buffered executions too; running only those whose handler runs
    expect(seen?.inFlight).toBeGreaterThan(3)
    const stopping = worker.stop()
    release()
    await stopping
    expect(await own()).toMatchObject({ state: 'stopped', running: 0, inFlight: 0 })
  })

  it('starts announced higher-priority work before the lower-priority work it has buffered', async () => {
    const started: Array<{ high: boolean; at: number }> = []
    let waiting = 0
    await startWorker(
      [
        defineHandler('mixed', async (ctx) => {
          started.push({ high: (ctx.payload as { high?: boolean }).high === true, at: performance.now() })
          // 10 ms runs: the two slots start about one low run per 5 ms while the announcement is on
          // its way (a notification takes a few ms on a busy machine), so the bound below holds
          // whatever the machine's speed and still catches a buffer that goes first
          await new Promise((r) => setTimeout(r, 10))
        }),
      ],
      {
        concurrency: 2,
        prefetch: 40,
        events: {
          claimed: (_, w) => {
            waiting = w
          },
        },
      },
    )
    await client().submitJobs(Array.from({ length: 200 }, () => ({ type: 'mixed', priority: 0, payload: {} })))
    await waitFor(() => waiting >= 10, { what: 'low-priority executions buffered' })
    await client().submitJobs(Array.from({ length: 10 }, () => ({ type: 'mixed', priority: 5, payload: { high: true } })))
    const committedAt = performance.now()
    await waitFor(() => started.filter((s) => s.high).length === 10, { what: 'the high-priority runs' })
    const lastHigh = Math.max(...started.filter((s) => s.high).map((s) => s.at))
    const lowBetween = started.filter((s) => !s.high && s.at > committedAt && s.at < lastHigh).length
    // Without the fence, the buffer (≥ 10 low runs) would go first.
    expect(lowBetween).toBeLessThanOrEqual(2)
  })
})
