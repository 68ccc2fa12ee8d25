import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { Pruner } from '../../src/maintenance/pruner.ts'
import { FACTORY_WORKER_ID, insertExecution, insertExecutions, msAgo } from '../factories.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const DAY_MS = 86_400_000

/** `n` running executions (jobs without backoff, so a retry is due at once) whose lease expires `leaseExpiresAgoMs` before now. */
async function runningExecutions(n: number, opts: { attempt: number; maxAttempts: number; leaseExpiresAgoMs: number }) {
  return insertExecutions(t.db, n, {
    state: 'running',
    attempt: opts.attempt,
    leaseExpiresAt: msAgo(opts.leaseExpiresAgoMs),
    startedAt: msAgo(3_600_000),
    job: { maxAttempts: opts.maxAttempts, backoffBaseMs: 0, backoffMaxMs: 0 },
  })
}

async function states() {
  const { rows } = await sql<{ state: string; n: number }>`select state, count(*)::int as n from pgsched.executions group by state order by state`.execute(t.db)
  return Object.fromEntries(rows.map((r) => [r.state, r.n]))
}

describe('Reaper', () => {
  it('returns executions with an expired lease to pending, counting the attempt, and fails those out of attempts', async () => {
    await runningExecutions(5, { attempt: 1, maxAttempts: 3, leaseExpiresAgoMs: 1000 })
    await runningExecutions(2, { attempt: 3, maxAttempts: 3, leaseExpiresAgoMs: 1000 })
    await runningExecutions(4, { attempt: 1, maxAttempts: 3, leaseExpiresAgoMs: -60_000 })
    const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 2 })
    expect(await reaper.runOnce()).toEqual({ retried: 5, failed: 2, unstarted: 0, expired: 0, cancelled: 0 })
    expect(await states()).toEqual({ failed: 2, pending: 5, running: 4 })
    const { rows } = await sql<{ attempt: number; worker_id: string | null; error: Record<string, unknown> }>`
      select attempt, worker_id, error from pgsched.executions where state = 'pending'`.execute(t.db)
    expect(rows).toHaveLength(5)
    for (const r of rows) {
      expect(r).toMatchObject({ attempt: 1, worker_id: null })
      expect(r.error).toEqual({
        message: `lease expired: worker ${FACTORY_WORKER_ID} stopped renewing it`,
        name: 'LeaseExpiredError',
        attempt: 1,
        workerId: FACTORY_WORKER_ID,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), // as Date#toISOString writes it
      })
    }
  })

  it('cancels running executions of cancelled jobs that no sweep reached, and leaves the others running', async () => {
    const [stray] = await insertExecutions(t.db, 1, { state: 'running', job: { type: 'left.over' } })
    await insertExecutions(t.db, 3, { state: 'running', job: { type: 'still.running' } })
    // a cancel whose sweep never ran: the job is cancelled, its execution still holds its lease
    await sql`update pgsched.jobs set state = 'cancelled' where id = ${stray?.jobId}::uuid`.execute(t.db)
    const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 10 })
    expect(await reaper.runOnce()).toEqual({ retried: 0, failed: 0, unstarted: 0, expired: 0, cancelled: 1 })
    const { rows } = await sql<{ type: string; state: string }>`select type, state from pgsched.executions order by type`.execute(t.db)
    expect(rows).toEqual([{ type: 'left.over', state: 'cancelled' }, ...Array.from({ length: 3 }, () => ({ type: 'still.running', state: 'running' }))])
    expect((await reaper.runOnce()).cancelled).toBe(0)
  })

  it('rescues each expired execution exactly once when several reapers run at the same time', async () => {
    await runningExecutions(300, { attempt: 1, maxAttempts: 5, leaseExpiresAgoMs: 1000 })
    const reapers = Array.from({ length: 4 }, () => new Reaper({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 50 }))
    const results = await Promise.all(reapers.map((r) => r.runOnce()))
    expect(results.reduce((n, r) => n + r.retried, 0)).toBe(300)
    expect(await states()).toEqual({ pending: 300 })
  })
})

describe('Pruner', () => {
  it('deletes finished executions past the retention, and the one-time jobs left empty', async () => {
    const old = { job: { createdAt: msAgo(8 * DAY_MS) } }
    for (let i = 0; i < 4; i++) await insertExecution(t.db, { ...old, state: 'succeeded', finishedAt: msAgo(8 * DAY_MS) })
    await insertExecution(t.db, { ...old, state: 'failed', finishedAt: msAgo(DAY_MS) })
    await insertExecution(t.db, old)
    const pruner = new Pruner({ db: t.db, log: t.log, retentionMs: 7 * DAY_MS, intervalMs: 1000, batchSize: 3 })
    expect(await pruner.runOnce()).toEqual({ executions: 4, jobs: 4, events: 0, workers: 0 })
    expect(await states()).toEqual({ failed: 1, pending: 1 })
    expect((await t.db.selectFrom('pgsched.jobs').select('id').execute()).length).toBe(2)
  })

  it('deletes workers last seen before the retention, stopped or gone, but none that holds a lease', async () => {
    const id = (n: number) => `00000000-0000-7000-8000-0000000f00${String(n).padStart(2, '0')}`
    const worker = (n: number, lastSeenAgoMs: number, stopped: boolean) =>
      sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at, stopped_at)
          values (${id(n)}::uuid, 'h', ${n}, '{default}', '{x}', 1, now() - ${lastSeenAgoMs}::int * interval '1 millisecond',
                  case when ${stopped} then now() - ${lastSeenAgoMs}::int * interval '1 millisecond' end)`.execute(t.db)
    for (let n = 1; n <= 5; n++) await worker(n, 8 * DAY_MS, n % 2 === 0) // gone long ago: stopped or not
    await worker(6, DAY_MS, true) // stopped within the retention
    await worker(7, 1_000, false) // alive
    await worker(8, 8 * DAY_MS, false) // gone long ago, but its lease is still held (the reaper has not run)
    await insertExecution(t.db, { state: 'running', workerId: id(8) })
    const pruner = new Pruner({ db: t.db, log: t.log, retentionMs: 7 * DAY_MS, intervalMs: 1000, batchSize: 3 })
    expect((await pruner.runOnce()).workers).toBe(5)
    const ids = Array.from({ length: 8 }, (_, i) => id(i + 1))
    const left = await t.db.selectFrom('pgsched.workers').select('id').where('id', 'in', ids).orderBy('id').execute()
    expect(left.map((w) => w.id)).toEqual([id(6), id(7), id(8)])
  })
})
