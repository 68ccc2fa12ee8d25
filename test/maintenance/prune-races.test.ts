/**
 * The pruner against what commits while it runs: a retry or rerun of a job whose old executions it
 * deletes keeps the job (its new execution is not left without one), and two pruners that take a
 * job's old executions between them delete the job (and free its idempotency key) rather than each
 * keeping it for the other's execution.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { executionPruneFinished } from '../../src/db/queries/prune.ts'
import { insertExecution, insertJob, msAgo } from '../factories.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const DAY_MS = 86_400_000

/** Whether a session of the test database waits for a lock. */
const someoneWaits = async () =>
  (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(t.db))
    .rows[0]?.n !== 0

describe('the pruner, while other transactions commit', () => {
  it('keeps a job whose rerun commits while the prune waits for the job’s row', async () => {
    const job = await insertJob(t.db, { createdAt: msAgo(9 * DAY_MS) })
    await insertExecution(t.db, { jobId: job.id, state: 'succeeded', scheduledFor: msAgo(9 * DAY_MS), finishedAt: msAgo(9 * DAY_MS) })
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    let rerunDone: (id: string) => void = () => {}
    const rerunId = new Promise<string>((resolve) => (rerunDone = resolve))
    const rerun = t.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ id: string }>`select pgsched.rerun_job(${job.id}::uuid) as id`.execute(trx)
      rerunDone(rows[0]?.id as string)
      await held
    })
    const newExecution = await rerunId
    const prune = executionPruneFinished(t.db, { olderThanMs: 7 * DAY_MS, limit: 1000 })
    await waitFor(someoneWaits, { what: 'the prune to wait for the job' })
    release()
    await rerun
    expect(await prune).toEqual({ executions: 1, jobs: 0 })
    const executions = await t.db.selectFrom('pgsched.executions').select('id').where('job_id', '=', job.id).execute()
    expect(executions.map((e) => e.id)).toEqual([newExecution])
    expect(await t.db.selectFrom('pgsched.jobs').select('id').where('id', '=', job.id).execute()).toHaveLength(1)
  })

  it('deletes a one-time job, and frees its idempotency key, when two pruners take its old executions between them', async () => {
    const job = await insertJob(t.db, { createdAt: msAgo(9 * DAY_MS), idempotencyKey: 'k-race' })
    await insertExecution(t.db, { jobId: job.id, state: 'succeeded', scheduledFor: msAgo(9 * DAY_MS), finishedAt: msAgo(9 * DAY_MS) })
    await insertExecution(t.db, { jobId: job.id, state: 'succeeded', scheduledFor: msAgo(8 * DAY_MS), finishedAt: msAgo(8 * DAY_MS) })
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    let firstDone: () => void = () => {}
    const first = new Promise<void>((resolve) => (firstDone = resolve))
    const a = t.db.transaction().execute(async (trx) => {
      expect(await executionPruneFinished(trx, { olderThanMs: 7 * DAY_MS, limit: 1 })).toEqual({ executions: 1, jobs: 0 })
      firstDone()
      await held
    })
    await first
    const b = executionPruneFinished(t.db, { olderThanMs: 7 * DAY_MS, limit: 1 })
    await waitFor(someoneWaits, { what: 'the second pruner to wait for the first' })
    release()
    await a
    expect(await b).toEqual({ executions: 1, jobs: 1 })
    expect(await t.db.selectFrom('pgsched.jobs').select('id').where('id', '=', job.id).execute()).toHaveLength(0)
    expect(await t.db.selectFrom('pgsched.job_idempotency_keys').select('idempotency_key').where('idempotency_key', '=', 'k-race').execute()).toHaveLength(0)
  })
})
