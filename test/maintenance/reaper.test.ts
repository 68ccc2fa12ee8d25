import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { Pruner } from '../../src/maintenance/pruner.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const workerId = '00000000-0000-7000-8000-0000000000bb'

async function runningJobs(n: number, opts: { attempt: number; maxAttempts: number; leaseAgo: string }) {
  const ids = await createClient({ db: t.db }).submitJobs(Array.from({ length: n }, () => ({ type: 'x', maxAttempts: opts.maxAttempts, backoffBaseMs: 0, backoffMaxMs: 0 })))
  await sql`update pgsched.executions
               set state = 'running', attempt = ${opts.attempt}::int, worker_id = ${workerId}::uuid,
                   lease_expires_at = now() - ${opts.leaseAgo}::interval, started_at = now() - interval '1 hour'
             where job_id = any(${ids.map((r) => r.id)}::uuid[])`.execute(t.db)
  return ids.map((r) => r.id)
}

async function states() {
  const { rows } = await sql<{ state: string; n: number }>`select state, count(*)::int as n from pgsched.executions group by state order by state`.execute(t.db)
  return Object.fromEntries(rows.map((r) => [r.state, r.n]))
}

describe('Reaper', () => {
  it('returns executions with an expired lease to pending, counting the attempt, and fails those out of attempts', async () => {
    await runningJobs(5, { attempt: 1, maxAttempts: 3, leaseAgo: '1 second' })
    await runningJobs(2, { attempt: 3, maxAttempts: 3, leaseAgo: '1 second' })
    await runningJobs(4, { attempt: 1, maxAttempts: 3, leaseAgo: '-1 minute' })
    const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 2 })
    expect(await reaper.runOnce()).toEqual({ retried: 5, failed: 2 })
    expect(await states()).toEqual({ failed: 2, pending: 5, running: 4 })
    const { rows } = await sql<{ attempt: number; worker_id: string | null; error: { name: string } }>`
      select attempt, worker_id, error from pgsched.executions where state = 'pending'`.execute(t.db)
    expect(rows.every((r) => r.attempt === 1 && r.worker_id === null && r.error.name === 'LeaseExpiredError')).toBe(true)
  })

  it('rescues each expired execution exactly once when several reapers run at the same time', async () => {
    await runningJobs(300, { attempt: 1, maxAttempts: 5, leaseAgo: '1 second' })
    const reapers = Array.from({ length: 4 }, () => new Reaper({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 50 }))
    const results = await Promise.all(reapers.map((r) => r.runOnce()))
    expect(results.reduce((n, r) => n + r.retried, 0)).toBe(300)
    expect(await states()).toEqual({ pending: 300 })
  })
})

describe('Pruner', () => {
  it('deletes finished executions past the retention, and the one-time jobs left empty', async () => {
    const ids = await createClient({ db: t.db }).submitJobs(Array.from({ length: 6 }, () => ({ type: 'x' })))
    await sql`update pgsched.executions set state = 'succeeded', finished_at = now() - interval '8 days' where job_id = any(${ids.slice(0, 4).map((r) => r.id)}::uuid[])`.execute(t.db)
    await sql`update pgsched.jobs set created_at = now() - interval '8 days'`.execute(t.db)
    await sql`update pgsched.executions set state = 'failed', finished_at = now() - interval '1 day' where job_id = ${ids[4]?.id}::uuid`.execute(t.db)
    const pruner = new Pruner({ db: t.db, log: t.log, retentionMs: 7 * 86_400_000, intervalMs: 1000, batchSize: 3 })
    expect(await pruner.runOnce()).toEqual({ executions: 4, jobs: 4 })
    expect(await states()).toEqual({ failed: 1, pending: 1 })
    expect((await t.db.selectFrom('pgsched.jobs').select('id').execute()).length).toBe(2)
  })
})
