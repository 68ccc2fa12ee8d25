/**
 * A cancel racing the end of the job's run. A worker's outcome write takes the run's row
 * (pgsched.runs), not the job's; each way to cancel reads the job's status under the job's locks,
 * so without its runs locked too a run could end between that read and the change, and a job
 * whose only run had just succeeded was marked CANCELLED (and could then be retried, its work run
 * again). Here another session holds the run's row, so the worker's completion waits for it, and
 * the cancel comes while the completion is in flight: it must wait for the completion and refuse.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient, type Client } from '../../src/client.ts'
import { InvalidStateError } from '../../src/errors.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

/** Sessions of this database waiting for a lock. */
async function lockWaiters(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(t.db)
  return rows[0]?.n ?? 0
}

const WAYS: Record<string, (client: Client, id: string) => Promise<unknown>> = {
  'client.cancelJob': (client, id) => client.cancelJob(id),
  'a bulk cancel of its id': async (client, id) => {
    const result = await client.bulkJobs({ action: 'cancel', filter: { ids: [id] } })
    if (result.changed === 0) throw new InvalidStateError('nothing cancelled')
    return result
  },
  'pgsched.cancel_job in SQL': async (_client, id) => {
    const c = new pg.Client({ connectionString: t.url })
    await c.connect()
    try {
      return await c.query('select pgsched.cancel_job($1)', [id])
    } catch (err: unknown) {
      throw (err as { code?: string }).code === '55000' ? new InvalidStateError((err as Error).message) : err
    } finally {
      await c.end()
    }
  },
}

describe('a cancel while the job’s only run is ending', () => {
  for (const [way, cancel] of Object.entries(WAYS)) {
    it(`${way}: waits for the outcome write in flight, refuses the finished job, and leaves it COMPLETED`, async () => {
      let finish!: () => void
      const gate = new Promise<void>((resolve) => (finish = resolve))
      await startWorker([
        defineHandler('slow', async () => {
          await gate
          return { done: true }
        }),
      ])
      const client = createClient({ db: t.db, tenant: 'acme' })
      const { job } = await client.submitJob({ type: 'slow' })
      await waitFor(async () => (await client.viewJob(job.id)).status === 'RUNNING', { what: 'the job to run' })

      const other = new pg.Client({ connectionString: t.url })
      await other.connect()
      try {
        await other.query('begin')
        await other.query('select 1 from pgsched.runs where job_id = $1 for update', [job.id])
        finish() // the handler returns; its completion waits for the row `other` holds
        await waitFor(async () => (await lockWaiters()) >= 1, { what: 'the completion to wait for the run’s row' })
        const cancelling = cancel(client, job.id).then(
          () => 'cancelled',
          (err: unknown) => err,
        )
        await waitFor(async () => (await lockWaiters()) >= 2, { what: 'the cancel to wait too' })
        await other.query('commit')
        expect(await cancelling).toBeInstanceOf(InvalidStateError)
      } finally {
        await other.end()
      }
      const after = await client.viewJob(job.id)
      expect(after.status).toBe('COMPLETED')
      expect(after.lastExecution?.state).toBe('succeeded')
      await expect(client.retryJob(job.id)).rejects.toBeInstanceOf(InvalidStateError)
    })
  }
})
