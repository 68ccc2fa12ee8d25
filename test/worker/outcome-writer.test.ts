/**
 * The outcome writer against Postgres: completions and failures (with the
 * execution-error JSON) reach the row, the lease is released afterwards, and a
 * lost or fenced run leaves the row alone.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { EXECUTION_ERROR_FIELDS } from '../../src/core/execution-error.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { Completer } from '../../src/worker/completer.ts'
import { LeaseKeeper } from '../../src/worker/lease-keeper.ts'
import { OutcomeWriter } from '../../src/worker/outcome-writer.ts'
import { RunContext } from '../../src/worker/run-context.ts'
import { createRun, type Run } from '../../src/worker/run.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { fileOutputStore } from './harness.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000e0'
const client = () => createClient({ db: t.db, tenant: 'acme' })

async function setup() {
  const completer = new Completer({ db: t.db, workerId: WORKER, log: t.log })
  const lost: Run[] = []
  const leases = new LeaseKeeper({
    db: t.db,
    completer,
    workerId: WORKER,
    log: t.log,
    leaseMs: 60_000,
    heartbeatMs: 5_000,
    onLost: (run) => void lost.push(run),
  })
  const retries: number[] = []
  const writer = new OutcomeWriter({ completer, workerId: WORKER, log: t.log, leases, onRetryScheduled: (ms) => void retries.push(ms) })
  await client().submitJob({ type: 'o', maxAttempts: 2, backoffBaseMs: 10, backoffMaxMs: 10 })
  const [c] = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['o'], limit: 1, leaseMs: 60_000 })
  if (!c) throw new Error('nothing claimed')
  const run: Run = createRun(c, performance.now() + 60_000)
  run.state = 'running'
  leases.hold(run)
  const ctx = new RunContext(c, run, t.log, fileOutputStore())
  return { writer, leases, retries, run, ctx, lost }
}

const row = (id: string) => t.db.selectFrom('pgsched.executions').selectAll().where('id', '=', id).executeTakeFirstOrThrow()

describe('OutcomeWriter', () => {
  it('writes a completion, then releases the lease', async () => {
    const s = await setup()
    s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '{"a":1}' })
    await s.writer.drain()
    expect(await row(s.run.ref.id)).toMatchObject({ state: 'succeeded', result: { a: 1 } })
    expect(s.run.state).toBe('finishing')
    expect(s.leases.holds(s.run)).toBe(false)
  })

  it('writes a failure as the execution-error JSON with every field, and reports the retry', async () => {
    const s = await setup()
    const error = new TypeError('boom')
    s.writer.record(s.run, s.ctx, { kind: 'fail', error, fatal: false, timedOut: true })
    await s.writer.drain()
    const r = await row(s.run.ref.id)
    expect(r.state).toBe('pending')
    expect(Object.keys(r.error as object).sort()).toEqual([...EXECUTION_ERROR_FIELDS].sort())
    expect(r.error).toMatchObject({ message: 'boom', name: 'TypeError', fatal: false, timedOut: true, attempt: 1, workerId: WORKER })
    expect(s.retries).toHaveLength(1)
    expect(s.leases.holds(s.run)).toBe(false)
  })

  it('writes nothing for a lost run', async () => {
    const s = await setup()
    s.run.state = 'lost'
    s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '1' })
    await s.writer.drain()
    expect((await row(s.run.ref.id)).state).toBe('running')
  })

  it('lets the fence reject an outcome whose lease is gone, and releases the lease', async () => {
    const s = await setup()
    await client().cancelJob(s.run.ref.jobId)
    s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '1' })
    await s.writer.drain()
    expect((await row(s.run.ref.id)).state).toBe('cancelled')
    expect(s.leases.holds(s.run)).toBe(false)
  })

  /** Requeues the setup's lease as the reaper does one that expired before it began, and claims it again: the new run, held. */
  async function claimedAgain(s: Awaited<ReturnType<typeof setup>>): Promise<Run> {
    await sql`update pgsched.runs set began = false where execution_id = ${s.run.ref.id}::uuid`.execute(t.db)
    const reaped = await new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 10 }).runOnce(new Date(Date.now() + 120_000))
    expect(reaped.unstarted).toBe(1)
    const [again] = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['o'], limit: 1, leaseMs: 60_000 })
    expect(again).toMatchObject({ id: s.run.ref.id, attempt: 1 })
    const rerun = createRun(again as NonNullable<typeof again>, performance.now() + 60_000)
    s.leases.hold(rerun)
    expect(s.lost).toEqual([s.run])
    return rerun
  }

  it('writes no failure for a run whose execution this worker claimed again at the same attempt, its lease requeued without counting it', async () => {
    const s = await setup()
    const rerun = await claimedAgain(s)
    // the earlier run's failure carries the same (worker, attempt) as the new lease: not written for it
    s.writer.record(s.run, s.ctx, { kind: 'fail', error: new Error('from the earlier run'), fatal: true, timedOut: false })
    await s.writer.drain()
    expect(await row(s.run.ref.id)).toMatchObject({ state: 'running', attempt: 1, error: null })
    expect(s.leases.holds(rerun)).toBe(true)
  })

  it('sends no queued completion of such a run either', async () => {
    const s = await setup()
    const rerun = await claimedAgain(s)
    s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '{"from":"the earlier run"}' })
    await s.writer.drain()
    expect(await row(s.run.ref.id)).toMatchObject({ state: 'running', attempt: 1, result: null })
    expect(s.leases.holds(rerun)).toBe(true)
  })

  it('drains: resolves once the writes started so far are written', async () => {
    const s = await setup()
    s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '2' })
    await s.writer.drain()
    expect((await row(s.run.ref.id)).state).toBe('succeeded')
  })

  it('writes again a completion whose batched statement failed, and drains only once it is written', async () => {
    const s = await setup()
    // The completion's statement waits behind a lock on runs, and is then cancelled: it fails.
    const blocker = await t.pool.connect()
    try {
      await blocker.query('begin')
      await blocker.query('lock table pgsched.runs in access exclusive mode')
      s.writer.record(s.run, s.ctx, { kind: 'complete', resultJson: '{"b":2}' })
      const drained = s.writer.drain().then(() => 'drained')
      const pid = await waitFor(
        async () =>
          (
            await sql<{ pid: number }>`select pid from pg_stat_activity
              where wait_event_type = 'Lock' and datname = current_database() and query like '%delete from pgsched.runs%'`.execute(t.db)
          ).rows[0]?.pid,
        { what: 'the completion to wait on the lock' },
      )
      await sql`select pg_cancel_backend(${pid})`.execute(t.db)
      // not drained while the retry waits for the lock
      expect(await Promise.race([drained, new Promise((r) => setTimeout(() => r('waiting'), 300))])).toBe('waiting')
      expect(s.leases.holds(s.run)).toBe(true)
      await blocker.query('commit')
      expect(await drained).toBe('drained')
    } finally {
      blocker.release()
    }
    expect(await row(s.run.ref.id)).toMatchObject({ state: 'succeeded', result: { b: 2 } })
    expect(s.leases.holds(s.run)).toBe(false)
  })
})
