/**
 * Sandboxes: a handler in a worker thread or a child process that ignores its
 * signal is ended for real, one that exits, crashes or runs out of memory fails
 * only its attempt, and meanwhile the worker's other runs keep their leases.
 * Real threads and processes, loaded from test/fixtures/sandbox-handlers.js
 * (compiled sources: npm test builds first).
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { threadId } from 'node:worker_threads'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { ConfigError, ValidationError } from '../../src/errors.ts'
import type { Execution } from '../../src/core/job.ts'
import { PassThrough } from 'node:stream'
import { defineHandler, loadHandlerModule } from '../../src/worker/handlers.ts'
import { SandboxPool } from '../../src/worker/sandbox-pool.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
const sandboxed = await loadHandlerModule('test/fixtures/sandbox-handlers.js')

/** An in-process handler that sleeps payload.ms, honouring its signal. */
const nap = defineHandler('nap', async (ctx) => {
  const ms = (ctx.payload as { ms: number }).ms
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    ctx.signal.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(ctx.signal.reason)
    })
  })
  return 'rested'
})

const client = () => createClient({ db: t.db, tenant: 'acme' })

async function settled(jobId: string): Promise<Execution> {
  const c = client()
  await waitFor(async () => ['COMPLETED', 'FAILED'].includes((await c.viewJob(jobId)).status), { what: `job ${jobId} to end`, timeoutMs: 30_000 })
  const [execution] = (await c.listExecutions(jobId)).items
  if (!execution) throw new Error(`job ${jobId} has no execution`)
  return execution
}

function attemptsOf(e: Execution) {
  return e.attempts.map((a) => ({ outcome: a.outcome, name: a.error?.name ?? null, message: a.error?.message ?? null }))
}

describe('sandboxed handlers', () => {
  it('ends a thread and a process handler that spin ignoring the signal within timeout + 1 s, retries them, and the worker’s other runs keep their leases', async () => {
    // A short lease: a blocked event loop would lose the naps' leases within 1.5 s.
    const ranMs: Array<[type: string, ms: number]> = []
    const events = { runEnded: (e: { type: string }, ms: number) => void ranMs.push([e.type, ms]) }
    await startWorker([...sandboxed, nap], { leaseMs: 1_500, heartbeatMs: 300, events })
    const c = client()
    const naps = await Promise.all([1, 2, 3].map(() => c.submitJob({ type: 'nap', payload: { ms: 5_000 }, timeoutMs: 20_000 })))
    const spins = await Promise.all(
      ['spin.thread', 'spin.process'].map((type) => c.submitJob({ type, timeoutMs: 1_000, maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })),
    )
    for (const { job } of spins) {
      const e = await settled(job.id)
      expect(attemptsOf(e)).toEqual([
        { outcome: 'failed', name: 'TimeoutError', message: 'timed out after 1000 ms' },
        { outcome: 'failed', name: 'TimeoutError', message: 'timed out after 1000 ms' },
      ])
    }
    // Each attempt's slot was free (its sandbox ended) within timeout + 1 s of its start.
    // (an attempt's timeout is recorded at once; its slot is free once its sandbox is ended)
    const spun = await waitFor(
      () => {
        const ended = ranMs.filter(([type]) => type.startsWith('spin.'))
        return ended.length === 4 ? ended : undefined
      },
      { what: 'the four spinning attempts to free their slots' },
    )
    for (const [type, ms] of spun) expect(ms, type).toBeLessThan(2_000)
    for (const { job } of naps) {
      const e = await settled(job.id)
      expect(e.state).toBe('succeeded')
      // One attempt, never reaped or taken over.
      expect(attemptsOf(e)).toEqual([{ outcome: 'succeeded', name: null, message: null }])
    }
  })

  it.each([
    ['exit.process', 'sandbox process exited with code 1 during the run'],
    ['exit.thread', 'sandbox thread exited with code 1 during the run'],
    ['oom.process', 'sandbox process ran out of memory (limit 64 MB) during the run'],
    ['oom.thread', 'sandbox thread ran out of memory (limit 64 MB) during the run'],
    ['crash.process', 'uncaught error in sandbox process: RangeError: thrown outside the promise during the run'],
    ['crash.thread', 'uncaught error in sandbox thread: RangeError: thrown outside the promise during the run'],
  ])('fails the attempt of %s with a clear, retriable error, and the worker carries on', async (type, message) => {
    const worker = await startWorker(sandboxed)
    const c = client()
    const { job } = await c.submitJob({ type, maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })
    const e = await settled(job.id)
    expect(attemptsOf(e)).toEqual([
      { outcome: 'failed', name: 'SandboxError', message },
      { outcome: 'failed', name: 'SandboxError', message },
    ])
    // The worker is still up and runs the next job in a fresh sandbox.
    const mode = type.split('.')[1]
    const next = await c.submitJob({ type: `echo.${mode}`, payload: { n: 1 } })
    expect((await settled(next.job.id)).state).toBe('succeeded')
    expect(worker.id).toBeTruthy()
  })

  it.each(['thread', 'process'])('gives a %s handler its payload, output, log and result as in-process, and reuses the sandbox', async (mode) => {
    await startWorker(sandboxed, { concurrency: 1 })
    const c = client()
    const results: Array<{ threadId: number; pid: number; echoed: unknown; at: string }> = []
    for (const n of [1, 2]) {
      const { job } = await c.submitJob({ type: `echo.${mode}`, payload: { n } })
      const e = await settled(job.id)
      expect(e.state).toBe('succeeded')
      expect(e.outputUri).toBeTruthy()
      const { rows } = await sql<{ result: { threadId: number; pid: number; echoed: unknown; at: string } }>`
        select result from pgsched.executions where id = ${e.id}`.execute(t.db)
      results.push(rows[0]?.result as (typeof results)[number])
    }
    expect(results.map((r) => r.echoed)).toEqual([{ n: 1 }, { n: 2 }])
    // Stored exactly as JSON.stringify would in-process (the Date as ISO text).
    expect(results[0]?.at).toBe('1970-01-01T00:00:00.000Z')
    if (mode === 'thread') {
      expect(results[0]?.pid).toBe(process.pid)
      expect(results[0]?.threadId).not.toBe(threadId)
    } else {
      expect(results[0]?.pid).not.toBe(process.pid)
    }
    // The second job ran in the same sandbox.
    expect([results[1]?.threadId, results[1]?.pid]).toEqual([results[0]?.threadId, results[0]?.pid])
  })

  it('records a sandboxed handler’s timeout once its sandbox has ended it, so that the retry does not start beside it', async () => {
    await startWorker(sandboxed, { concurrency: 2 })
    const dir = mkdtempSync(join(tmpdir(), 'pgsched-timeout-'))
    // two sandboxes started and idle (as on any busy worker): a retry starts in one at once
    const warm = join(dir, 'warm')
    await client().submitJobs([1, 2].map(() => ({ type: 'ledger-spin.process', payload: { file: warm, ms: 1_000 }, timeoutMs: 60_000 })))
    await waitFor(() => existsSync(warm) && (readFileSync(warm, 'utf8').match(/^end /gm) ?? []).length === 2, { what: 'the warm-up', timeoutMs: 30_000 })
    const file = join(dir, 'ledger')
    const { job } = await client().submitJob({
      type: 'ledger-spin.process',
      payload: { file, ms: 8_000 },
      timeoutMs: 1_000,
      maxAttempts: 2,
      backoffBaseMs: 0,
      backoffMaxMs: 0,
    })
    await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').includes('start 2 '), { what: 'attempt 2 to start', timeoutMs: 30_000 })
    // attempt 1's sandbox was gone when attempt 2 started
    expect(readFileSync(file, 'utf8')).not.toMatch(/^alive /m)
    const [execution] = (await client().listExecutions(job.id)).items
    expect(execution?.attempts[0]).toMatchObject({ attempt: 1, outcome: 'failed', error: expect.objectContaining({ name: 'TimeoutError', timedOut: true }) })
  })

  it('hands back a sandboxed run at shutdown only once its sandbox has ended it, so that no other worker can start it beside it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pgsched-stop-'))
    // the handler ignores its abort: its sandbox ends it after the sandbox grace
    const worker = await startWorker(sandboxed, { concurrency: 1, shutdownGraceMs: 100, sandboxGraceMs: 1_000 })
    const file = join(dir, 'ledger')
    const { job } = await client().submitJob({ type: 'ledger-spin.process', payload: { file, ms: 60_000 }, timeoutMs: 120_000 })
    const pid = await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').match(/^start 1 (\d+)$/m)?.[1], {
      what: 'the run to start',
      timeoutMs: 30_000,
    })
    const sandboxRuns = () => {
      try {
        return !/^\d+ \(.*\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
      } catch {
        return false
      }
    }
    // Is the sandbox that ran it still running when the worker hands the execution back (pending
    // again, for any worker to claim)?
    const leases = (worker as unknown as { leases: { handBack: (runs: unknown[]) => Promise<number> } }).leases
    const handBack = leases.handBack.bind(leases)
    let aliveAtHandBack: boolean | undefined
    leases.handBack = (runs) => {
      aliveAtHandBack = sandboxRuns()
      return handBack(runs)
    }
    await worker.stop()
    expect(aliveAtHandBack).toBe(false)
    // not counted as an attempt
    const [execution] = (await client().listExecutions(job.id)).items
    expect(execution).toMatchObject({ state: 'pending', attempt: 0 })
  })

  it('drops a write after the output was ended, as in-process, rather than ending the sandbox', async () => {
    await startWorker(sandboxed)
    for (const type of ['end-write.thread', 'end-write.process']) {
      const { job } = await client().submitJob({ type, maxAttempts: 1 })
      const e = await settled(job.id)
      expect(e, type).toMatchObject({ state: 'succeeded', result: 'done' })
      const { rows } = await sql<{ data: Buffer }>`select data from pgsched.execution_output where execution_id = ${e.id}::uuid order by seq`.execute(t.db)
      expect(Buffer.concat(rows.map((r) => r.data)).toString(), type).toBe('before end\n')
    }
  })

  it('keeps a FatalError thrown in a sandbox fatal, and an ordinary error retriable with its name', async () => {
    await startWorker(sandboxed)
    const c = client()
    const fatal = await c.submitJob({ type: 'echo.process', payload: { fatal: true }, maxAttempts: 3, backoffBaseMs: 0 })
    const plain = await c.submitJob({ type: 'echo.thread', payload: { fail: true }, maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })
    expect(attemptsOf(await settled(fatal.job.id))).toEqual([{ outcome: 'failed', name: 'FatalError', message: 'asked to fail for good' }])
    expect(attemptsOf(await settled(plain.job.id))).toEqual([
      { outcome: 'failed', name: 'TypeError', message: 'asked to fail' },
      { outcome: 'failed', name: 'TypeError', message: 'asked to fail' },
    ])
  })

  it('keeps a subclass of FatalError fatal with its own name, and a thrown non-Error as in-process, in each sandbox', async () => {
    await startWorker(sandboxed)
    const c = client()
    for (const type of ['echo.thread', 'echo.process', 'echo.inline']) {
      const subclass = await c.submitJob({ type, payload: { fatalSubclass: true }, maxAttempts: 3, backoffBaseMs: 0, backoffMaxMs: 0 })
      expect(attemptsOf(await settled(subclass.job.id)), type).toEqual([{ outcome: 'failed', name: 'InvalidRecipient', message: 'no such recipient' }])
      const thrown = await c.submitJob({ type, payload: { thrownObject: true }, maxAttempts: 1 })
      expect(attemptsOf(await settled(thrown.job.id)), type).toEqual([{ outcome: 'failed', name: 'Error', message: '{"code":"E42","detail":"an object"}' }])
    }
  })

  it('fails the attempt of a sandbox that says it is done with a result that is not JSON text', async () => {
    await startWorker(sandboxed)
    const { job } = await client().submitJob({ type: 'forge.process', maxAttempts: 1 })
    const [attempt] = attemptsOf(await settled(job.id))
    expect(attempt?.name).toBe('SandboxError')
    expect(attempt?.message).toMatch(/^the sandbox returned a result that is not JSON text: /)
  })

  it('runs every handler from a module in the worker’s sandbox when the worker says so', async () => {
    await startWorker(sandboxed, { sandbox: 'process' })
    const c = client()
    const { job } = await c.submitJob({ type: 'echo.inline', payload: { n: 1 } })
    const e = await settled(job.id)
    const { rows } = await sql<{ pid: number }>`select (result->>'pid')::int as pid from pgsched.executions where id = ${e.id}`.execute(t.db)
    expect(rows[0]?.pid).not.toBe(process.pid)
  })

  it('names a bad sandbox option when the handler is defined', () => {
    expect(() => defineHandler('x', () => 1, { sandbox: 'vm' as 'thread' })).toThrow('handler "x": sandbox must be one of none, thread, process, not "vm"')
    expect(() => defineHandler('x', () => 1, { memoryLimitMb: 4 })).toThrow('handler "x": memoryLimitMb must be an integer of at least 16, not 4')
  })

  it('refuses an option it does not know, naming it and the known ones, rather than running without a sandbox', () => {
    // from JavaScript: a misspelt sandbox would run the handler in the worker's thread
    const refusal = (options: unknown) => {
      try {
        defineHandler('x', () => 1, options as never)
      } catch (err: unknown) {
        expect(err).toBeInstanceOf(ValidationError)
        return { message: (err as ValidationError).message, details: (err as ValidationError).details }
      }
      throw new Error('not refused')
    }
    expect(refusal({ sandBox: 'process' })).toEqual({
      message: 'handler "x": unknown field "sandBox" (known: sandbox, memoryLimitMb, module)',
      details: [{ path: 'sandBox', message: 'unknown field "sandBox"' }],
    })
    expect(refusal('process').message).toBe('handler "x": options must be an object')
    // a key left undefined is no option
    expect(defineHandler('x', () => 1, { sandbox: 'thread', memoryLimitMB: undefined } as never).sandbox).toBe('thread')
  })

  it('refuses a handler that asks for a sandbox when its module is not known', async () => {
    const orphan = defineHandler('orphan', () => 1, { sandbox: 'thread' })
    const err = await startWorker([orphan]).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as Error).message).toMatch(/handler "orphan" asks for a thread sandbox but its module is not known/)
  })

  it('ends a spinning sandboxed handler at shutdown and hands its execution back', async () => {
    const worker = await startWorker(sandboxed, { shutdownGraceMs: 200 })
    const c = client()
    const { job } = await c.submitJob({ type: 'spin.process', timeoutMs: 60_000 })
    await waitFor(async () => (await c.viewJob(job.id)).status === 'RUNNING', { what: 'the spin to start' })
    const stopStartedAt = Date.now()
    await worker.stop()
    expect(Date.now() - stopStartedAt).toBeLessThan(5_000)
    const [execution] = (await c.listExecutions(job.id)).items
    expect(execution?.state).toBe('pending')
  })

  it('never hands a sandbox ended while it loaded to the next run', async () => {
    const pool = new SandboxPool({ log: t.log, logLevel: 'silent', graceMs: 100, idleMs: 10_000, maxIdle: 2 })
    const handler = sandboxed.find((h) => h.type === 'echo.process')
    if (!handler) throw new Error('no echo.process fixture')
    const run = (signal: AbortSignal) => {
      const ctx = { payload: { n: 1 }, jobId: 'j', executionId: 'e', attempt: 1, maxAttempts: 1, type: 'echo.process', queue: 'q' }
      return pool.run({ handler, mode: 'process', memoryLimitMb: undefined, ctx: { ...ctx, scheduledFor: new Date(), signal, output: new PassThrough() } })
    }
    try {
      const controller = new AbortController()
      const first = run(controller.signal)
      controller.abort(Object.assign(new Error('timed out'), { name: 'TimeoutError' }))
      await expect(first).rejects.toThrow('timed out')
      // at once, before the ended sandbox's exit is seen: a new one runs it
      const second = await run(new AbortController().signal)
      expect(JSON.parse(second.json)).toMatchObject({ echoed: { n: 1 } })
    } finally {
      await pool.close()
    }
  })
})
