/**
 * pgsched.cancel_jobs (migration 0081) cancels many jobs in one statement after locking all their
 * runs in execution order, the order a worker's outcome write locks them in: a worker's write in
 * flight holds it up, but they cannot deadlock, whichever order the jobs were given in.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-00000000081a'

describe('pgsched.cancel_jobs', () => {
  it('waits for a worker’s outcome write that locks the runs in execution order, without a deadlock, and cancels every job', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.submitJobs([{ type: 'cancel.lock' }, { type: 'cancel.lock' }])
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['cancel.lock'], limit: 2, leaseMs: 60_000 })
    expect(claimed).toHaveLength(2)
    const [first, second] = [...claimed].sort((a, b) => (a.id < b.id ? -1 : 1)) as [(typeof claimed)[0], (typeof claimed)[0]]
    const worker = new pg.Client({ connectionString: t.url })
    const operator = new pg.Client({ connectionString: t.url })
    await Promise.all([worker.connect(), operator.connect()])
    try {
      // the worker's write has locked the first run and goes on to the second
      await worker.query('begin')
      await worker.query("set local lock_timeout = '10s'")
      await worker.query('select 1 from pgsched.runs where execution_id = $1 for update', [first.id])
      const pid = (await operator.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid
      // the jobs given the other way round: the second job's first
      const cancelling = operator.query<{ job_id: string; outcome: string }>('select job_id, outcome from pgsched.cancel_jobs($1::uuid[])', [
        [second.jobId, first.jobId],
      ])
      cancelling.catch(() => {})
      await waitFor(async () => (await sql`select 1 from pg_stat_activity where pid = ${pid} and wait_event_type = 'Lock'`.execute(t.db)).rows.length > 0, {
        what: 'the cancel to wait for the worker’s lock',
      })
      // it holds nothing the worker needs next
      await worker.query('select 1 from pgsched.runs where execution_id = $1 for update', [second.id])
      await worker.query('commit')
      const { rows } = await cancelling
      expect(rows).toEqual([first.jobId, second.jobId].sort().map((id) => ({ job_id: id, outcome: 'cancelled' })))
      expect((await client.viewJob(first.jobId)).status).toBe('CANCELLED')
      expect((await client.viewJob(second.jobId)).status).toBe('CANCELLED')
    } finally {
      await Promise.all([worker.end(), operator.end()])
    }
  })

  it('returns each job once, says what it did with each, and refuses a null array', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const [a, b] = await client.submitJobs([{ type: 'cancel.outcomes' }, { type: 'cancel.outcomes' }])
    await client.cancelJob(b?.id as string)
    const missing = '00000000-0000-7000-8000-000000000000'
    const { rows } = await sql<{ job_id: string; outcome: string; status: string | null }>`
      select * from pgsched.cancel_jobs(${[a?.id, b?.id, a?.id, missing, null]}::uuid[])`.execute(t.db)
    expect(rows).toEqual(
      [
        { job_id: a?.id, outcome: 'cancelled', status: 'SCHEDULED' },
        { job_id: b?.id, outcome: 'already cancelled', status: 'CANCELLED' },
        { job_id: missing, outcome: 'not found', status: null },
      ].sort((x, y) => ((x.job_id as string) < (y.job_id as string) ? -1 : 1)),
    )
    expect((await sql`select * from pgsched.cancel_jobs('{}'::uuid[])`.execute(t.db)).rows).toEqual([])
    await expect(sql`select * from pgsched.cancel_jobs(null)`.execute(t.db)).rejects.toMatchObject({ code: '22023' })
  })
})
