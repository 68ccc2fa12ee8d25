/**
 * Every attempt on record (migration 0017): an execution's history shows each attempt that failed or
 * lost its lease, with its error, worker and host, and then its latest one, in the client, over
 * REST and in SQL.
 */
import { hostname } from 'node:os'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionRescueExpired } from '../../src/db/queries/rescue.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const api = useTestApi(t)
const startWorker = useWorkers(t)

describe('the attempts of an execution', () => {
  it('shows a job that failed twice then succeeded as three attempts, with both errors', async () => {
    const calls = new Map<string, number>()
    const worker = await startWorker([
      defineHandler('flaky', async (ctx) => {
        const n = (calls.get(ctx.jobId) ?? 0) + 1
        calls.set(ctx.jobId, n)
        if (n <= 2) throw new Error(`flaky failure ${n}`)
        return { ok: n }
      }),
    ])
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'flaky', maxAttempts: 5, backoffBaseMs: 0, backoffMaxMs: 0 })
    await waitFor(async () => (await client.viewJob(job.id)).status === 'COMPLETED', { what: 'the job to succeed' })
    const [execution] = (await client.listExecutions(job.id)).items
    expect(execution?.attempts.map((a) => [a.attempt, a.outcome, a.error?.message ?? null])).toEqual([
      [1, 'failed', 'flaky failure 1'],
      [2, 'failed', 'flaky failure 2'],
      [3, 'succeeded', null],
    ])
    for (const a of execution?.attempts ?? []) {
      expect(a.workerId).toBe(worker.id)
      expect(a.host).toBe(hostname())
      expect(a.startedAt?.getTime()).toBeLessThanOrEqual(a.endedAt?.getTime() ?? 0)
    }
    // over REST, the same history
    const res = await api.call(await api.keyFor('acme'), 'GET', `/v1/jobs/${job.id}/executions`)
    expect(res.json().items[0].attempts.map((a: { outcome: string; error: { message: string } | null }) => [a.outcome, a.error?.message ?? null])).toEqual([
      ['failed', 'flaky failure 1'],
      ['failed', 'flaky failure 2'],
      ['succeeded', null],
    ])
    // and in SQL, the attempts that did not succeed
    const { rows } = await sql<{ n: number }>`select jsonb_array_length(attempt_log) as n from pgsched.executions where job_id = ${job.id}`.execute(t.db)
    expect(rows[0]?.n).toBe(2)
  })

  it('fails the attempt of a handler that throws a value without a JSON form (a BigInt, a structure that refers to itself, undefined)', async () => {
    const circular: Record<string, unknown> = { status: 502 }
    circular.self = circular
    const thrown: Record<string, unknown> = { bigint: 10n, circular, nothing: undefined, symbol: Symbol('gone') }
    const calls = new Map<string, number>()
    await startWorker(
      Object.keys(thrown).map((type) =>
        defineHandler(type, (ctx) => {
          calls.set(ctx.jobId, (calls.get(ctx.jobId) ?? 0) + 1)
          throw thrown[type]
        }),
      ),
      { leaseMs: 2_000, heartbeatMs: 200 },
    )
    const client = createClient({ db: t.db, tenant: 'acme' })
    const ids = new Map<string, string>()
    for (const type of Object.keys(thrown)) ids.set(type, (await client.submitJob({ type, maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })).job.id)
    // each attempt fails, is counted, and the second ends the job: no lease kept renewed, no attempt run again uncounted
    for (const [type, id] of ids) {
      await waitFor(async () => (await client.viewJob(id)).status === 'FAILED', { what: `the ${type} job to fail` })
      expect(calls.get(id), type).toBe(2)
    }
    const messages = async (id: string) => (await client.listExecutions(id)).items[0]?.attempts.map((a) => [a.attempt, a.outcome, a.error?.message])
    expect(await messages(ids.get('bigint') ?? '')).toEqual([
      [1, 'failed', '10'],
      [2, 'failed', '10'],
    ])
    expect(await messages(ids.get('circular') ?? '')).toEqual([
      [1, 'failed', '[object Object]'],
      [2, 'failed', '[object Object]'],
    ])
    expect(await messages(ids.get('nothing') ?? '')).toEqual([
      [1, 'failed', 'undefined'],
      [2, 'failed', 'undefined'],
    ])
    expect(await messages(ids.get('symbol') ?? '')).toEqual([
      [1, 'failed', 'Symbol(gone)'],
      [2, 'failed', 'Symbol(gone)'],
    ])
  })

  it('records at once the failure of an Error whose message or name is not text, as its JSON', async () => {
    await startWorker(
      [
        defineHandler('odd.message', () => {
          const err = new Error('x')
          ;(err as unknown as { message: unknown }).message = { code: 'E_ODD', detail: 'not a string' }
          throw err
        }),
        defineHandler('odd.name', () => {
          const err = new Error('plain')
          ;(err as unknown as { name: unknown }).name = 42
          throw err
        }),
      ],
      // a lease far longer than the wait: only a failure written by the worker can end these jobs in time
      { leaseMs: 60_000, heartbeatMs: 1_000 },
    )
    const client = createClient({ db: t.db, tenant: 'acme' })
    const message = (await client.submitJob({ type: 'odd.message', maxAttempts: 1 })).job.id
    const name = (await client.submitJob({ type: 'odd.name', maxAttempts: 1 })).job.id
    for (const id of [message, name]) await waitFor(async () => (await client.viewJob(id)).status === 'FAILED', { timeoutMs: 10_000, what: `${id} to fail` })
    const errorOf = async (id: string) =>
      (await client.listExecutions(id)).items[0]?.attempts.map((a) => [a.attempt, a.outcome, a.error?.name, a.error?.message])
    expect(await errorOf(message)).toEqual([[1, 'failed', 'Error', '{"code":"E_ODD","detail":"not a string"}']])
    expect(await errorOf(name)).toEqual([[1, 'failed', '42', 'plain']])
  })

  it('ends a run whose result or error holds text jsonb cannot store (NUL, a lone surrogate), beside runs that succeed', async () => {
    await startWorker([
      defineHandler('nul.result', () => ({ text: 'a\u0000b' })),
      defineHandler('surrogate.result', () => ({ 'key \ud800': 1 })),
      defineHandler('nul.error', () => {
        throw new TypeError('bad \u0000 byte and a lone \udc00')
      }),
      // a backslash before "u" in a plain string: stored as it is
      defineHandler('backslash.result', () => 'C:\\users\\u0000'),
    ])
    const client = createClient({ db: t.db, tenant: 'acme' })
    const submit = (type: string) => client.submitJob({ type, maxAttempts: 1 })
    const [nul, surrogate, error, backslash] = await Promise.all(['nul.result', 'surrogate.result', 'nul.error', 'backslash.result'].map(submit))
    const ended = async (id: string) => {
      await waitFor(async () => ['COMPLETED', 'FAILED'].includes((await client.viewJob(id)).status), { what: `job ${id} to end` })
      return (await client.listExecutions(id)).items[0]
    }
    expect((await ended(nul?.job.id ?? ''))?.error).toMatchObject({
      name: 'FatalError',
      message: 'result cannot be stored as JSON: result.text must not contain NUL characters (\\u0000)',
    })
    // the message names the key, its lone surrogate stored as U+FFFD
    expect((await ended(surrogate?.job.id ?? ''))?.error?.message).toBe(
      'result cannot be stored as JSON: result.key \ufffd key must be well-formed Unicode (no lone surrogates, \\ud800-\\udfff)',
    )
    expect((await ended(error?.job.id ?? ''))?.error).toMatchObject({ name: 'TypeError', message: 'bad \ufffd byte and a lone \ufffd' })
    const stored = await ended(backslash?.job.id ?? '')
    expect(stored?.state).toBe('succeeded')
    expect(stored?.result).toBe('C:\\users\\u0000')
  })

  it('records an attempt whose lease expired, and a running attempt as running', async () => {
    const { jobId } = await insertExecution(t.db, {
      state: 'running',
      attempt: 1,
      leaseExpiresAt: new Date(Date.now() - 1_000),
      job: { tenant: 'acme', type: 'slow' },
    })
    await executionRescueExpired(t.db, { limit: 10 })
    const client = createClient({ db: t.db, tenant: 'acme' })
    const [execution] = (await client.listExecutions(jobId)).items
    expect(execution?.state).toBe('pending')
    expect(execution?.attempts).toMatchObject([{ attempt: 1, outcome: 'lease expired', error: { name: 'LeaseExpiredError' } }])
    // claimed again: the second attempt shows as running, with its worker
    const W = '00000000-0000-7000-8000-00000000e001'
    await sql`update pgsched.due set run_at = now() where job_id = ${jobId}::uuid`.execute(t.db)
    await executionClaimBatch(t.db, { workerId: W, queues: ['default'], types: ['slow'], limit: 1, leaseMs: 60_000 })
    const [again] = (await client.listExecutions(jobId)).items
    expect(again?.attempts).toMatchObject([
      { attempt: 1, outcome: 'lease expired' },
      { attempt: 2, outcome: 'running', workerId: W, endedAt: null, error: null },
    ])
  })
})
