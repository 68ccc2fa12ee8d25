/**
 * Migration 0072 on a database with a lease held and an execution due: the lease is taken as begun
 * (a worker of an earlier version holds it, and nothing told the database otherwise), so the reaper
 * counts its attempt as before; the due execution is claimed by the new claim with no requeue counted.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { useDatabaseBefore, useTestDb } from '../db.ts'

const before = useDatabaseBefore('0072')
const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000e2'

describe('migration 0072 (leases that had not begun)', () => {
  it('takes the leases held before it as begun, and the due executions as never requeued', async () => {
    const url = before.url
    const { db } = createDb({ databaseUrl: url, poolSize: 2 })
    try {
      const client = createClient({ db, tenant: 'acme' })
      const [held, due] = await client.submitJobs([
        { type: 'm', maxAttempts: 1, priority: 1 },
        { type: 'm', maxAttempts: 1 },
      ])
      // the lease as migration 0071's claim wrote it, already expired
      await sql`
        with taken as (delete from pgsched.due where job_id = ${held?.id}::uuid returning *)
        insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                                  scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at)
        select execution_id, job_id, ${WORKER}::uuid, attempt + 1, now() - interval '1 second', now(), queue, type, priority, run_at,
               scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at
          from taken`.execute(db)

      await migrate({ databaseUrl: url })
      const { rows: runs } = await sql<{ began: boolean; unstarted_requeues: number }>`select began, unstarted_requeues from pgsched.runs`.execute(db)
      expect(runs).toEqual([{ began: true, unstarted_requeues: 0 }])
      const { rows: dues } = await sql<{ unstarted_requeues: number }>`select unstarted_requeues from pgsched.due`.execute(db)
      expect(dues).toEqual([{ unstarted_requeues: 0 }])

      const reaper = new Reaper({ db, log: t.log, intervalMs: 1_000, batchSize: 10 })
      expect(await reaper.runOnce()).toEqual({ retried: 0, failed: 1, unstarted: 0, expired: 0, cancelled: 0 })
      expect((await client.viewJob(held?.id as string)).status).toBe('FAILED')
      const claimed = await executionClaimBatch(db, { workerId: WORKER, queues: ['default'], types: ['m'], limit: 1, leaseMs: 60_000, startsNow: 0 })
      expect(claimed.map((c) => c.jobId)).toEqual([due?.id])
      const { rows: after } = await sql<{ began: boolean; unstarted_requeues: number }>`select began, unstarted_requeues from pgsched.runs`.execute(db)
      expect(after).toEqual([{ began: false, unstarted_requeues: 0 }])
    } finally {
      await db.destroy()
    }
  })
})
