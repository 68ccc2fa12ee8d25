/**
 * Start deadlines (migration 0018): an execution not started within startDeadlineMs of its time is
 * never claimed, and the reaper ends it failed at attempt 0 with a StartDeadlineError; the job's
 * status is EXPIRED (and the list filters by it). A retry is not expired.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionFailMany, executionReleaseMany } from '../../src/db/queries/lease.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const api = useTestApi(t)
const W = '00000000-0000-7000-8000-00000000d001'
const claim = () => executionClaimBatch(t.db, { workerId: W, queues: ['default'], types: ['k'], limit: 10, leaseMs: 60_000 })

describe('start deadlines', () => {
  it('expires a job whose work did not start in time: never claimed, EXPIRED, with the deadline named', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'k', startDeadlineMs: 1_000 })
    expect(res.statusCode).toBe(202)
    expect(res.json().startDeadlineMs).toBe(1_000)
    const id = res.json().id as string
    const { job: onTime } = await client.submitJob({ type: 'k', startDeadlineMs: 60_000 })
    // the deadline passes (moved into the past rather than waited for)
    await sql`update pgsched.due set start_deadline = now() - interval '1 millisecond' where job_id = ${id}::uuid`.execute(t.db)
    const claimed = await claim()
    expect(claimed.map((c) => c.jobId)).toEqual([onTime.id]) // the expired one is not started
    const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 })
    expect((await reaper.runOnce()).expired).toBe(1)
    const view = await client.viewJob(id)
    expect(view.status).toBe('EXPIRED')
    expect(view.lastExecution).toMatchObject({ state: 'failed', attempt: 0, error: { name: 'StartDeadlineError', fatal: true } })
    // the same text for every execution of one deadline: the failures view groups them
    expect(view.lastExecution?.error?.message).toBe('not started within its start deadline, 1000 ms after its time')
    expect((await api.call(key, 'GET', '/v1/jobs?status=EXPIRED')).json().items.map((j: { id: string }) => j.id)).toEqual([id])
    expect((await api.call(key, 'GET', '/v1/jobs?status=FAILED')).json().items).toEqual([])
    expect((await reaper.runOnce()).expired).toBe(0)
  })

  it('does not expire a retry: once an attempt started, the deadline was met', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', startDeadlineMs: 1_000, backoffBaseMs: 0, backoffMaxMs: 0 })
    const [c] = await claim()
    if (!c) throw new Error('nothing claimed')
    const failed = await executionFailMany(t.db, {
      workerId: W,
      failures: [{ ...c, errorJson: '{"message":"x","name":"Error","attempt":1}', fatal: false, outputUri: null }],
    })
    expect(failed).toMatchObject([{ id: c.id, state: 'pending' }]) // a retry: back in pgsched.due, one attempt made
    await sql`update pgsched.due set start_deadline = now() - interval '1 second' where job_id = ${job.id}::uuid`.execute(t.db)
    expect(await new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 }).runOnce()).toMatchObject({ expired: 0 })
    expect((await claim()).map((x) => x.jobId)).toEqual([job.id])
  })

  it('does not expire an execution handed back at shutdown after it started', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', startDeadlineMs: 1_000 })
    const [c] = await claim()
    if (!c) throw new Error('nothing claimed')
    await executionReleaseMany(t.db, { workerId: W, leases: [c], started: true }) // attempt back to 0, as if never claimed
    await sql`update pgsched.due set run_at = now() + interval '1 hour' where job_id = ${job.id}::uuid`.execute(t.db)
    expect(await new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 }).runOnce()).toMatchObject({ expired: 0 })
    expect((await client.viewJob(job.id)).status).toBe('SCHEDULED')
  })

  it('keeps the deadline of an execution claimed ahead and handed back before it started, and expires it once the deadline passes', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', startDeadlineMs: 1_000 })
    const [c] = await claim()
    if (!c) throw new Error('nothing claimed')
    // a worker stopping (or with a surplus of runs waiting) hands back what it had not started
    await executionReleaseMany(t.db, { workerId: W, leases: [c], started: false })
    const { rows } = await sql<{ kept: boolean }>`select start_deadline is not null as kept from pgsched.due where job_id = ${job.id}::uuid`.execute(t.db)
    expect(rows).toEqual([{ kept: true }])
    await sql`update pgsched.due set start_deadline = now() - interval '1 second' where job_id = ${job.id}::uuid`.execute(t.db)
    expect(await new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 }).runOnce()).toMatchObject({ expired: 1 })
    expect((await client.viewJob(job.id)).status).toBe('EXPIRED')
    expect(await claim()).toEqual([])
  })

  it('refuses a deadline out of range, naming the field', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await expect(client.submitJob({ type: 'k', startDeadlineMs: 10 })).rejects.toThrow(/startDeadlineMs must be an integer from 1000 to 604800000/)
    const res = await api.call(await api.keyFor('acme'), 'POST', '/v1/jobs', { type: 'k', startDeadlineMs: 'soon' })
    expect(res.statusCode).toBe(400)
    expect(res.json().details[0].path).toBe('startDeadlineMs')
  })
})
