/**
 * Leases whose handler had not begun (migration 0072): the claim marks begun only the runs the
 * worker starts at once, the heartbeat marks those that started since, and the reaper requeues an
 * expired lease that had not begun without counting its attempt, at most UNSTARTED_REQUEUES_MAX
 * times per execution.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionFailMany } from '../../src/db/queries/lease.ts'
import { UNSTARTED_REQUEUES_MAX } from '../../src/db/queries/rescue.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { Completer } from '../../src/worker/completer.ts'
import { LeaseKeeper } from '../../src/worker/lease-keeper.ts'
import { createRun } from '../../src/worker/run.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000e1'
const client = () => createClient({ db: t.db, tenant: 'acme' })
/** Far enough ahead for every lease of a test to have expired. */
const later = () => new Date(Date.now() + 120_000)

const claim = (limit: number, startsNow?: number) =>
  executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['u'], limit, leaseMs: 1_000, startsNow })

async function runsRows() {
  const { rows } = await sql<{ job_id: string; began: boolean; unstarted_requeues: number }>`
    select job_id, began, unstarted_requeues from pgsched.runs order by priority desc`.execute(t.db)
  return rows
}

async function dueRow(jobId: string) {
  const { rows } = await sql<{ attempt: number; unstarted_requeues: number; start_deadline: Date | null; due_now: boolean }>`
    select attempt, unstarted_requeues, start_deadline, run_at <= now() as due_now from pgsched.due where job_id = ${jobId}::uuid`.execute(t.db)
  return rows[0]
}

const reaper = () => new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 })

describe('leases whose handler had not begun', () => {
  it('the claim marks begun the first runs in its order, as many as start at once; all of them by default', async () => {
    const jobs = await client().submitJobs([0, 5, 3].map((priority) => ({ type: 'u', priority })))
    expect(await claim(3, 1)).toHaveLength(3)
    const rows = await runsRows()
    expect(rows.map((r) => [r.job_id, r.began])).toEqual([
      [jobs[1]?.id, true],
      [jobs[2]?.id, false],
      [jobs[0]?.id, false],
    ])
    await client().submitJobs([{ type: 'u' }, { type: 'u' }])
    await claim(2)
    expect((await runsRows()).filter((r) => r.began)).toHaveLength(3)
    await client().submitJob({ type: 'u' })
    await claim(1, 0)
    expect((await runsRows()).filter((r) => !r.began)).toHaveLength(3)
  })

  it('the heartbeat marks begun the leases whose handler started, and only those', async () => {
    await client().submitJobs([{ type: 'u' }, { type: 'u' }, { type: 'u' }])
    const runs = (await claim(3, 0)).map((c) => createRun(c, performance.now() + 60_000))
    const keeper = new LeaseKeeper({
      db: t.db,
      completer: new Completer({ db: t.db, workerId: WORKER, log: t.log }),
      workerId: WORKER,
      log: t.log,
      leaseMs: 60_000,
      heartbeatMs: 5_000,
      onLost: () => {
        throw new Error('no lease should be lost')
      },
    })
    for (const run of runs) keeper.hold(run)
    ;(runs[0] as { state: string }).state = 'running'
    ;(runs[1] as { state: string }).state = 'finishing'
    await keeper.runOnce()
    const { rows } = await sql<{ id: string; began: boolean }>`select execution_id as id, began from pgsched.runs`.execute(t.db)
    expect(new Map(rows.map((r) => [r.id, r.began]))).toEqual(
      new Map([
        [runs[0]?.ref.id, true],
        [runs[1]?.ref.id, true],
        [runs[2]?.ref.id, false],
      ]),
    )
  })

  it(`the reaper requeues an expired lease that had not begun due now, its attempt not counted, ${UNSTARTED_REQUEUES_MAX} times; then it counts`, async () => {
    const { job } = await client().submitJob({ type: 'u', maxAttempts: 1, startDeadlineMs: 3_600_000 })
    const deadline = (await dueRow(job.id))?.start_deadline
    expect(deadline).toBeInstanceOf(Date)
    const submitted = await client().viewJob(job.id)
    for (let i = 1; i <= UNSTARTED_REQUEUES_MAX; i++) {
      const [c] = await claim(1, 0)
      expect(c?.attempt).toBe(1)
      expect(await reaper().runOnce(later())).toEqual({ retried: 0, failed: 0, unstarted: 1, expired: 0, cancelled: 0 })
      // as it was before the claim: first attempt to come, its start deadline kept, due now
      expect(await dueRow(job.id)).toEqual({ attempt: 0, unstarted_requeues: i, start_deadline: deadline, due_now: true })
      const view = await client().viewJob(job.id)
      expect([view.status, view.lastExecution?.state, view.lastExecution?.attempt]).toEqual([
        submitted.status,
        submitted.lastExecution?.state,
        submitted.lastExecution?.attempt,
      ])
      expect(view.lastExecution?.error ?? null).toBeNull()
    }
    const [c] = await claim(1, 0)
    expect(c?.attempt).toBe(1)
    expect(await reaper().runOnce(later())).toEqual({ retried: 0, failed: 1, unstarted: 0, expired: 0, cancelled: 0 })
    const view = await client().viewJob(job.id)
    expect(view.status).toBe('FAILED')
    expect(view.lastExecution?.error).toMatchObject({ name: 'LeaseExpiredError', attempt: 1 })
  })

  it('the reaper counts the attempt of an expired lease that had begun, as before', async () => {
    const { job } = await client().submitJob({ type: 'u', maxAttempts: 1 })
    await claim(1, 1)
    expect(await reaper().runOnce(later())).toEqual({ retried: 0, failed: 1, unstarted: 0, expired: 0, cancelled: 0 })
    expect((await client().viewJob(job.id)).status).toBe('FAILED')
  })

  it('a retry keeps the count of requeues without a start, so the cap holds across attempts', async () => {
    const { job } = await client().submitJob({ type: 'u', maxAttempts: 3, backoffBaseMs: 0, backoffMaxMs: 0 })
    await claim(1, 0)
    await reaper().runOnce(later())
    const [c] = await claim(1, 1)
    if (c === undefined) throw new Error('not claimed')
    const failed = await executionFailMany(t.db, {
      workerId: WORKER,
      failures: [{ id: c.id, jobId: c.jobId, attempt: c.attempt, errorJson: '{"message":"boom"}', fatal: false, outputUri: null }],
    })
    expect(failed.map((f) => f.state)).toEqual(['pending'])
    expect(await dueRow(job.id)).toMatchObject({ attempt: 1, unstarted_requeues: 1 })
    await claim(1, 0)
    expect((await runsRows()).map((r) => [r.began, r.unstarted_requeues])).toEqual([[false, 1]])
  })
})
