/**
 * POST /v1/jobs/{id}/retry, POST /v1/jobs/{id}/rerun and DELETE /v1/jobs/{id}: which statuses
 * each accepts, the history they keep or remove, and their fencing against a worker that still
 * holds a lease and against a concurrent operation on the same job.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, insertTrigger, setExecutionState } from '../factories.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)
const WORKER = '00000000-0000-7000-8000-00000000c001'
const failedError = { message: 'boom', name: 'Error', attempt: 3 }

const executionsOf = (jobId: string) => t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', jobId).orderBy('scheduled_for').execute()

describe('POST /v1/jobs/{id}/retry', () => {
  it('gives a failed job a new pending execution with attempts from 0 and keeps the failed one as history', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertExecution(t.db, { state: 'failed', attempt: 3, error: failedError, job: { maxAttempts: 3 } })
    const before = await api.call(key, 'GET', `/v1/jobs/${jobId}`)
    expect(before.json().status).toBe('FAILED')

    const res = await api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ id: jobId, status: 'SCHEDULED', attempts: 0, lastRun: { status: 'PENDING', attempt: 0 } })
    const rows = await executionsOf(jobId)
    expect(rows.map((r) => [r.state, r.attempt])).toEqual([
      ['failed', 3],
      ['pending', 0],
    ])
    expect(rows[0]?.error).toMatchObject({ message: 'boom' })

    const history = await api.call(key, 'GET', `/v1/jobs/${jobId}/executions`)
    expect(history.json().items).toHaveLength(2)
    // a worker claims the new run as its first attempt
    const [claimed] = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['noop'], limit: 1, leaseMs: 60_000 })
    expect(claimed).toMatchObject({ id: rows[1]?.id, attempt: 1 })
    expect((await api.call(key, 'GET', `/v1/jobs/${jobId}`)).json().status).toBe('RUNNING')

    // a second retry finds it RUNNING: 409 naming the status, nothing added
    const again = await api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)
    expect(again.statusCode).toBe(409)
    expect(again.json().message).toContain('is RUNNING')
    expect(await executionsOf(jobId)).toHaveLength(2)
  })

  it('retries an expired job and a cancelled one (due later: the new run is still the latest and due now)', async () => {
    const key = await api.keyFor('acme')
    const expired = await insertExecution(t.db, {
      state: 'failed',
      attempt: 0,
      error: { message: 'missed its start deadline', name: 'ExpiredError', attempt: 0 },
    })
    expect((await api.call(key, 'POST', `/v1/jobs/${expired.jobId}/retry`)).json().status).toBe('SCHEDULED')

    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', schedule: { at: new Date(Date.now() + 3_600_000).toISOString() } })
    await client.cancelJob(job.id)
    const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/retry`)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ state: 'active', status: 'SCHEDULED' })
    expect(Date.parse(res.json().nextRunAt)).toBeLessThan(Date.now() + 60_000)
  })

  it('answers 409 for a completed, scheduled or running job, naming its status', async () => {
    const key = await api.keyFor('acme')
    for (const [state, status] of [
      ['succeeded', 'COMPLETED'],
      ['pending', 'SCHEDULED'],
      ['running', 'RUNNING'],
    ] as const) {
      const { jobId } = await insertExecution(t.db, { state })
      const res = await api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)
      expect(res.statusCode, status).toBe(409)
      expect(res.json().message).toBe(`job ${jobId} is ${status}; only FAILED, EXPIRED or CANCELLED jobs can be retried`)
    }
  })

  it('runs a cancelled recurring job once without restarting its schedule', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertTrigger(t.db, { job: { state: 'cancelled' }, nextFireAt: null })
    const res = await api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)
    expect(res.statusCode).toBe(200)
    expect(res.json().lastRun.status).toBe('PENDING')
    const trigger = await t.db.selectFrom('pgsched.triggers').select('next_fire_at').where('job_id', '=', jobId).executeTakeFirstOrThrow()
    expect(trigger.next_fire_at).toBeNull()
  })

  it('drops a fire time the cancelled schedule had queued behind a run, so the retry is its only run', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertTrigger(t.db, { job: { state: 'cancelled' }, nextFireAt: null })
    await t.db
      .updateTable('pgsched.triggers')
      .set({ queued_fire_at: new Date(Date.now() - 60_000) })
      .where('job_id', '=', jobId)
      .execute()
    expect((await api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)).statusCode).toBe(200)
    const trigger = await t.db.selectFrom('pgsched.triggers').select(['next_fire_at', 'queued_fire_at']).where('job_id', '=', jobId).executeTakeFirstOrThrow()
    expect(trigger).toEqual({ next_fire_at: null, queued_fire_at: null })
  })

  it('adds exactly one execution when two retries of the same job race', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertExecution(t.db, { state: 'failed', error: failedError })
    const results = await Promise.all(Array.from({ length: 4 }, () => api.call(key, 'POST', `/v1/jobs/${jobId}/retry`)))
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409])
    expect((await executionsOf(jobId)).filter((r) => r.state === 'pending')).toHaveLength(1)
  })

  it('leaves a cancelled run to its worker: the late completion of the old attempt changes nothing of the retry', async () => {
    const key = await api.keyFor('acme')
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', queue: 'ops-fence' })
    const [claimed] = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['ops-fence'], types: ['k'], limit: 1, leaseMs: 60_000 })
    if (!claimed) throw new Error('nothing claimed')
    // running under a lease: not retryable
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/retry`)).statusCode).toBe(409)
    await client.cancelJob(job.id)
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/retry`)).statusCode).toBe(200)
    const accepted = await executionCompleteMany(t.db, {
      workerId: WORKER,
      completions: [{ id: claimed.id, jobId: job.id, attempt: claimed.attempt, resultJson: '{}', outputUri: null }],
    })
    expect(accepted.size).toBe(0)
    expect((await executionsOf(job.id)).map((r) => r.state)).toEqual(['cancelled', 'pending'])
  })
})

describe('POST /v1/jobs/{id}/rerun', () => {
  it('runs a completed job once more with the same payload, keeping its history', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertExecution(t.db, { state: 'succeeded', result: { ok: true }, job: { payload: { n: 7 } } })
    const res = await api.call(key, 'POST', `/v1/jobs/${jobId}/rerun`)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ status: 'SCHEDULED', payload: { n: 7 } })
    expect((await executionsOf(jobId)).map((r) => r.state)).toEqual(['succeeded', 'pending'])
  })

  it('gives a rerun recurring job whose schedule ended the rerun as its next run', async () => {
    const key = await api.keyFor('acme')
    const ended = (await api.call(key, 'POST', '/v1/jobs', { type: 'k', schedule: { every: '1h' }, endAt: new Date(Date.now() - 60_000).toISOString() })).json<{
      id: string
      status: string
    }>()
    expect(ended.status).toBe('COMPLETED')
    const res = await api.call(key, 'POST', `/v1/jobs/${ended.id}/rerun`)
    expect(res.statusCode).toBe(200)
    const job = res.json<{ status: string; nextRunAt: string | null; lastRun: { status: string; scheduledFor: string } | null }>()
    expect(job).toMatchObject({ status: 'SCHEDULED', lastRun: { status: 'PENDING' } })
    expect(job.nextRunAt).not.toBeNull()
    expect(job.nextRunAt).toBe(job.lastRun?.scheduledFor)
  })

  it('answers 409 for a job that is not finished', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertExecution(t.db, { state: 'running' })
    const res = await api.call(key, 'POST', `/v1/jobs/${jobId}/rerun`)
    expect(res.statusCode).toBe(409)
    expect(res.json().message).toContain('is RUNNING')
  })
})

describe('DELETE /v1/jobs/{id}', () => {
  it('removes a finished job with its executions, output and idempotency key, which a new submit may then use', async () => {
    const key = await api.keyFor('acme')
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'k', idempotencyKey: 'order-1' })
    const [execution] = await executionsOf(job.id)
    await sql`insert into pgsched.execution_output (execution_id, attempt, data) values (${execution?.id}::uuid, 1, 'hello')`.execute(t.db)
    await setExecutionState(t.db, { jobIds: [job.id], state: 'failed', attempt: 1, error: failedError })

    const res = await api.call(key, 'DELETE', `/v1/jobs/${job.id}`)
    expect(res.statusCode).toBe(204)
    expect(res.body).toBe('')
    expect((await api.call(key, 'GET', `/v1/jobs/${job.id}`)).statusCode).toBe(404)
    expect(await executionsOf(job.id)).toEqual([])
    const output = await sql<{ n: string }>`select count(*)::text as n from pgsched.execution_output where execution_id = ${execution?.id}::uuid`.execute(t.db)
    expect(output.rows[0]?.n).toBe('0')
    const again = await client.submitJob({ type: 'k', idempotencyKey: 'order-1' })
    expect(again.created).toBe(true)
    expect(again.job.id).not.toBe(job.id)
    // deleting again: gone
    expect((await api.call(key, 'DELETE', `/v1/jobs/${job.id}`)).statusCode).toBe(404)
  })

  it('answers 409 for a job with work pending or running, and deletes nothing', async () => {
    const key = await api.keyFor('acme')
    for (const state of ['pending', 'running'] as const) {
      const { jobId } = await insertExecution(t.db, { state })
      const res = await api.call(key, 'DELETE', `/v1/jobs/${jobId}`)
      expect(res.statusCode).toBe(409)
      expect(res.json().message).toMatch(/only finished \(COMPLETED, FAILED, EXPIRED or CANCELLED\) jobs can be deleted$/)
      expect(await executionsOf(jobId)).toHaveLength(1)
    }
  })

  it('deletes a cancelled recurring job with its schedule', async () => {
    const key = await api.keyFor('acme')
    const { jobId } = await insertTrigger(t.db, { job: { state: 'cancelled' }, nextFireAt: null })
    expect((await api.call(key, 'DELETE', `/v1/jobs/${jobId}`)).statusCode).toBe(204)
    expect(await t.db.selectFrom('pgsched.triggers').select('job_id').where('job_id', '=', jobId).execute()).toEqual([])
  })
})
