import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { setExecutionState } from '../factories.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe('POST /v1/jobs → GET /v1/jobs/{id} → GET /v1/jobs', () => {
  it('accepts a job due now with 202 and Location while it has not started, then views and lists it', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'email.send', payload: { to: 'a@b.c' }, priority: 7, queue: 'mail' })
    expect(res.statusCode).toBe(202)
    const job = res.json()
    expect(job.id).toMatch(UUID)
    expect(res.headers.location).toBe(`/v1/jobs/${job.id}`)
    expect(job).toMatchObject({
      tenant: 'acme',
      type: 'email.send',
      queue: 'mail',
      priority: 7,
      payload: { to: 'a@b.c' },
      status: 'SCHEDULED',
      lastRun: { status: 'PENDING' },
      attempts: 0,
      schedule: null,
      lastExecution: { state: 'pending', attempt: 0, result: null, error: null, outputUrl: null, outputAttempt: null },
    })
    // Committed before the reply: the row is there for any other connection.
    const row = await t.db.selectFrom('pgsched.jobs').select(['id', 'tenant']).where('id', '=', job.id).executeTakeFirst()
    expect(row).toEqual({ id: job.id, tenant: 'acme' })

    const view = await api.call(key, 'GET', res.headers.location as string)
    expect(view.statusCode).toBe(200)
    expect(view.json()).toEqual(job)
    expect(new Date(view.json().nextRunAt).toISOString()).toBe(view.json().nextRunAt)

    const list = await api.call(key, 'GET', '/v1/jobs')
    expect(list.statusCode).toBe(200)
    expect(list.json()).toEqual({ items: [job], nextCursor: null })
  })

  it('stores a delayed job with its run time as nextRunAt', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'report', schedule: { at: '2031-05-01T11:00:00+02:00' } })
    expect(res.statusCode).toBe(202)
    expect(res.json()).toMatchObject({ status: 'SCHEDULED', nextRunAt: '2031-05-01T09:00:00.000Z', lastExecution: { runAt: '2031-05-01T09:00:00.000Z' } })
    const view = await api.call(key, 'GET', `/v1/jobs/${res.json().id}`)
    expect(view.json()).toMatchObject({ status: 'SCHEDULED', lastRun: { status: 'PENDING' }, nextRunAt: '2031-05-01T09:00:00.000Z' })
  })

  it('stores cron and interval jobs as recurring, with no execution yet', async () => {
    const key = await api.keyFor('acme')
    const cron = await api.call(key, 'POST', '/v1/jobs', { type: 'digest', schedule: { cron: '0 9 * * *', timezone: 'Europe/Berlin' } })
    expect(cron.statusCode).toBe(202)
    expect(cron.json()).toMatchObject({
      status: 'SCHEDULED',
      lastRun: null,
      attempts: 0,
      lastExecution: null,
      schedule: { kind: 'cron', cron: '0 9 * * *', timezone: 'Europe/Berlin', paused: false, misfirePolicy: 'fire_once' },
    })
    const next = new Date(cron.json().nextRunAt)
    expect(next.getTime()).toBeGreaterThan(Date.now())
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(next)).toBe('09:00')

    const every = await api.call(key, 'POST', '/v1/jobs', { type: 'poll', schedule: { every: 'PT5M' } })
    expect(every.json()).toMatchObject({ schedule: { kind: 'interval', intervalMs: 300_000 }, status: 'SCHEDULED' })
    const everyMs = await api.call(key, 'POST', '/v1/jobs', { type: 'poll', schedule: { every: 60_000 } })
    expect(everyMs.json()).toMatchObject({ schedule: { kind: 'interval', intervalMs: 60_000 } })

    const view = await api.call(key, 'GET', `/v1/jobs/${cron.json().id}`)
    expect(view.json()).toEqual(cron.json())
    const listed = await api.call(key, 'GET', '/v1/jobs?type=digest')
    expect(listed.json().items.map((j: { id: string }) => j.id)).toEqual([cron.json().id])
  })

  it('accepts application/json with a charset parameter', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', JSON.stringify({ type: 'x' }), { 'content-type': 'application/json; charset=utf-8' })
    expect(res.statusCode).toBe(202)
  })

  it('filters the list by status, type and queue', async () => {
    const key = await api.keyFor('acme')
    const a = (await api.call(key, 'POST', '/v1/jobs', { type: 'a', queue: 'q1' })).json()
    const b = (await api.call(key, 'POST', '/v1/jobs', { type: 'b', queue: 'q2' })).json()
    await api.call(key, 'POST', `/v1/jobs/${b.id}/cancel`)
    const ids = async (query: string) => (await api.call(key, 'GET', `/v1/jobs?${query}`)).json().items.map((j: { id: string }) => j.id)
    expect(await ids('status=SCHEDULED')).toEqual([a.id])
    expect(await ids('status=CANCELLED')).toEqual([b.id])
    expect(await ids('status=COMPLETED')).toEqual([])
    expect(await ids('type=b')).toEqual([b.id])
    expect(await ids('queue=q1')).toEqual([a.id])
    expect(await ids('queue=q1&type=b')).toEqual([])
    expect(await ids('limit=1')).toEqual([b.id])
  })
})

describe('idempotency', () => {
  it('returns the same job with 200 for the same key and body, and 409 for another body', async () => {
    const key = await api.keyFor('acme')
    const body = { type: 'charge', payload: { cents: 100 }, idempotencyKey: 'order-1' }
    const first = await api.call(key, 'POST', '/v1/jobs', body)
    expect(first.statusCode).toBe(202)
    const again = await api.call(key, 'POST', '/v1/jobs', body)
    expect(again.statusCode).toBe(200)
    expect(again.json().id).toBe(first.json().id)
    expect(again.headers.location).toBe(`/v1/jobs/${first.json().id}`)
    const other = await api.call(key, 'POST', '/v1/jobs', { ...body, payload: { cents: 200 } })
    expect(other.statusCode).toBe(409)
    expect(other.json()).toEqual({
      statusCode: 409,
      error: 'Conflict',
      message: 'idempotency key "order-1" was already used for a different job request',
    })
    expect(await t.db.selectFrom('pgsched.jobs').select('id').execute()).toHaveLength(1)
  })

  it('takes the key from the Idempotency-Key header, equal to the same key in the body', async () => {
    const key = await api.keyFor('acme')
    const first = await api.call(key, 'POST', '/v1/jobs', { type: 'charge' }, { 'idempotency-key': 'h-1' })
    expect(first.statusCode).toBe(202)
    expect(first.json().idempotencyKey).toBe('h-1')
    const viaHeader = await api.call(key, 'POST', '/v1/jobs', { type: 'charge' }, { 'idempotency-key': 'h-1' })
    const viaBody = await api.call(key, 'POST', '/v1/jobs', { type: 'charge', idempotencyKey: 'h-1' })
    expect([viaHeader.statusCode, viaBody.statusCode]).toEqual([200, 200])
    expect(viaBody.json().id).toBe(first.json().id)
    const conflict = await api.call(key, 'POST', '/v1/jobs', { type: 'refund' }, { 'idempotency-key': 'h-1' })
    expect(conflict.statusCode).toBe(409)
  })

  it('scopes keys to the tenant', async () => {
    const [acme, globex] = [await api.keyFor('acme'), await api.keyFor('globex')]
    const a = await api.call(acme, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: 'k' })
    const g = await api.call(globex, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: 'k' })
    expect([a.statusCode, g.statusCode]).toEqual([202, 202])
    expect(g.json().id).not.toBe(a.json().id)
  })
})

describe('job control', () => {
  it('cancels a pending job and its execution', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { at: '2035-01-01T00:00:00Z' } })).json()
    const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ id: job.id, status: 'CANCELLED', state: 'cancelled', lastRun: { status: 'CANCELLED' }, nextRunAt: null })
    // Cancelling again is harmless.
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)).statusCode).toBe(200)
  })

  it('accepts a control call with Content-Type: application/json and an empty body', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`, '', { 'content-type': 'application/json' })
    expect(res.statusCode).toBe(200)
  })

  it('refuses a control call with a body, which it would not read, changing nothing; {} is taken as no body', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every: 'PT1M' } })).json()
    for (const action of ['pause', 'cancel'] as const) {
      const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/${action}`, { reason: 'maintenance' })
      expect(res.statusCode).toBe(400)
      expect(res.json()).toMatchObject({
        statusCode: 400,
        error: 'Bad Request',
        message: `POST /v1/jobs/{id}/${action} takes no request body; send none (or {})`,
      })
    }
    expect((await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json()).toMatchObject({ status: 'SCHEDULED', schedule: { paused: false } })
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/pause`, {})).json()).toMatchObject({ status: 'PAUSED' })
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/resume`, '', { 'content-type': 'application/json' })).json()).toMatchObject({
      status: 'SCHEDULED',
    })
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)).json()).toMatchObject({ status: 'CANCELLED' })
  })

  it('pauses and resumes a recurring job; 409 for a one-time job', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every: 'PT1M' } })).json()
    const paused = await api.call(key, 'POST', `/v1/jobs/${job.id}/pause`)
    expect(paused.statusCode).toBe(200)
    expect(paused.json()).toMatchObject({ status: 'PAUSED', schedule: { paused: true }, nextRunAt: null })
    expect((await api.call(key, 'GET', '/v1/jobs?status=PAUSED')).json().items).toHaveLength(1)
    const resumed = await api.call(key, 'POST', `/v1/jobs/${job.id}/resume`)
    expect(resumed.json()).toMatchObject({ status: 'SCHEDULED', schedule: { paused: false } })
    expect(resumed.json().nextRunAt).not.toBeNull()

    const once = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const refused = await api.call(key, 'POST', `/v1/jobs/${once.id}/pause`)
    expect(refused.statusCode).toBe(409)
    expect(refused.json().message).toBe(`job ${once.id} is not recurring; only recurring jobs can be paused or resumed`)
  })

  it('refuses to cancel a job that already finished', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded', attempt: 1, startedAt: new Date(), result: { ok: true } })
    const view = (await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json()
    expect(view).toMatchObject({ status: 'COMPLETED', lastRun: { status: 'SUCCEEDED' }, attempts: 1, lastExecution: { result: { ok: true } } })
    const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)
    expect(res.statusCode).toBe(409)
    expect(res.json().message).toContain('has already finished (COMPLETED)')
  })

  it('refuses to cancel a recurring job whose schedule has ended, as it refuses a finished one-time job', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every: 'PT1M' } })).json()
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)).statusCode).toBe(200)
    // a retry of a cancelled recurring job runs it once; its schedule stays stopped
    expect((await api.call(key, 'POST', `/v1/jobs/${job.id}/retry`)).statusCode).toBe(200)
    await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded', attempt: 1, startedAt: new Date(), result: { ok: true } })
    expect((await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json()).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
    const res = await api.call(key, 'POST', `/v1/jobs/${job.id}/cancel`)
    expect(res.statusCode).toBe(409)
    expect(res.json().message).toBe(`job ${job.id} has already finished (COMPLETED); nothing to cancel`)
    expect((await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json().status).toBe('COMPLETED')
  })
})

describe('GET /v1/jobs/{id}/executions and /v1/executions/{id}/output', () => {
  it("pages a job's executions, latest fire time first", async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every: 'PT1M' } })).json()
    const times = ['2030-01-01T00:00:00Z', '2030-01-01T00:01:00Z', '2030-01-01T00:02:00Z']
    await t.db
      .insertInto('pgsched.due')
      .values(
        times.map((at) => ({
          job_id: job.id,
          tenant: 'acme',
          queue: 'default',
          type: 'x',
          priority: 0,
          scheduled_for: at,
          run_at: at,
          max_attempts: 5,
          timeout_ms: 1000,
        })),
      )
      .execute()
    const first = await api.call(key, 'GET', `/v1/jobs/${job.id}/executions?limit=2`)
    expect(first.statusCode).toBe(200)
    expect(first.json().items.map((e: { scheduledFor: string }) => e.scheduledFor)).toEqual(['2030-01-01T00:02:00.000Z', '2030-01-01T00:01:00.000Z'])
    expect(first.json().items[0]).toMatchObject({ jobId: job.id, state: 'pending', attempt: 0, maxAttempts: 5 })
    const second = await api.call(key, 'GET', `/v1/jobs/${job.id}/executions?limit=2&cursor=${first.json().nextCursor}`)
    expect(second.json().items.map((e: { scheduledFor: string }) => e.scheduledFor)).toEqual(['2030-01-01T00:00:00.000Z'])
    expect(second.json().nextCursor).toBeNull()
  })

  it('streams the stored output of an execution, and 404s when there is none', async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const executionId = job.lastExecution.id as string
    const none = await api.call(key, 'GET', `/v1/executions/${executionId}/output`)
    expect(none.statusCode).toBe(404)
    expect(none.json().message).toBe(`execution ${executionId} has no stored output`)

    const dir = await mkdtemp(join(tmpdir(), 'pgsched-output-'))
    const file = join(dir, `${executionId}.1.log`)
    const text = 'line one\nline two\n'.repeat(10_000)
    await writeFile(file, text)
    await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded', attempt: 1, outputUri: pathToFileURL(file).href })
    const out = await api.call(key, 'GET', `/v1/executions/${executionId}/output`)
    expect(out.statusCode).toBe(200)
    expect(out.headers['content-type']).toBe('text/plain; charset=utf-8')
    expect(out.body).toBe(text)
    const view = (await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json()
    expect(view.lastExecution.outputUrl).toBe(`/v1/executions/${executionId}/output`)
    expect(view.lastExecution.outputAttempt).toBe(1) // the file's name says so

    await t.db
      .updateTable('pgsched.execution_history')
      .set({ output_uri: pathToFileURL(join(dir, 'pruned.log')).href })
      .where('id', '=', executionId)
      .execute()
    const gone = await api.call(key, 'GET', `/v1/executions/${executionId}/output`)
    expect(gone.statusCode).toBe(404)
    expect(gone.json().message).toBe(`output of execution ${executionId} is no longer stored`)
  })

  it("streams an earlier attempt's output with ?attempt=, from the store the latest attempt used, and 404s for one that stored none", async () => {
    const key = await api.keyFor('acme')
    const job = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const id = job.lastExecution.id as string
    // attempts 1 and 3 wrote output in PostgreSQL, attempt 2 none; the execution ended at attempt 3
    for (const [attempt, text] of [
      [1, 'attempt 1 failed here\n'],
      [3, 'attempt 3 ran\n'],
    ] as const) {
      await t.db
        .insertInto('pgsched.execution_output')
        .values({ execution_id: id, attempt, data: Buffer.from(text) })
        .execute()
    }
    await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded', attempt: 3, outputUri: `pgsched:output/${id}/3` })
    const get = (query: string) => api.call(key, 'GET', `/v1/executions/${id}/output${query}`)
    expect((await get('')).body).toBe('attempt 3 ran\n')
    expect((await get('?attempt=3')).body).toBe('attempt 3 ran\n')
    const first = await get('?attempt=1')
    expect(first.statusCode).toBe(200)
    expect(first.body).toBe('attempt 1 failed here\n')
    const none = await get('?attempt=2')
    expect(none.statusCode).toBe(404)
    expect(none.json().message).toBe(`attempt 2 of execution ${id} has no stored output`)
    const beyond = await get('?attempt=4')
    expect(beyond.statusCode).toBe(404)
    expect(beyond.json().message).toBe(`execution ${id} has had 3 attempt(s), not 4`)
    expect((await get('?attempt=0')).statusCode).toBe(400)

    // the latest attempt stored nothing: output_uri still names the attempt before it, which is not
    // the output of the attempt asked for
    const quiet = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const quietId = quiet.lastExecution.id as string
    await t.db
      .insertInto('pgsched.execution_output')
      .values({ execution_id: quietId, attempt: 1, data: Buffer.from('boom\n') })
      .execute()
    await setExecutionState(t.db, { jobIds: [quiet.id], state: 'succeeded', attempt: 2, outputUri: `pgsched:output/${quietId}/1` })
    const quietGet = (query: string) => api.call(key, 'GET', `/v1/executions/${quietId}/output${query}`)
    // the execution says whose output its outputUrl streams: attempt 1's, not the latest's
    const lastOf = async (jobId: string) => (await api.call(key, 'GET', `/v1/jobs/${jobId}/executions`)).json().items[0]
    expect(await lastOf(quiet.id)).toMatchObject({ attempt: 2, outputUrl: `/v1/executions/${quietId}/output`, outputAttempt: 1 })
    expect(await lastOf(job.id)).toMatchObject({ attempt: 3, outputAttempt: 3 })
    expect((await quietGet('?attempt=1')).body).toBe('boom\n')
    const second = await quietGet('?attempt=2')
    expect(second.statusCode).toBe(404)
    expect(second.json().message).toBe(`attempt 2 of execution ${quietId} has no stored output`)

    // a file store: the earlier attempt's file is named as the latest one's, its attempt changed
    const other = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json()
    const otherId = other.lastExecution.id as string
    const dir = await mkdtemp(join(tmpdir(), 'pgsched-output-'))
    await writeFile(join(dir, `${otherId}.1.log`), 'first try\n')
    await writeFile(join(dir, `${otherId}.2.log`), 'second try\n')
    await setExecutionState(t.db, { jobIds: [other.id], state: 'succeeded', attempt: 2, outputUri: pathToFileURL(join(dir, `${otherId}.2.log`)).href })
    expect((await api.call(key, 'GET', `/v1/executions/${otherId}/output?attempt=1`)).body).toBe('first try\n')
    expect((await api.call(key, 'GET', `/v1/executions/${otherId}/output`)).body).toBe('second try\n')
  })
})

describe('tenant isolation', () => {
  it('answers 404 to another tenant and never lists its jobs', async () => {
    const [acme, globex] = [await api.keyFor('acme'), await api.keyFor('globex')]
    const job = (await api.call(acme, 'POST', '/v1/jobs', { type: 'secret', schedule: { every: 'PT1H' } })).json()
    const once = (await api.call(acme, 'POST', '/v1/jobs', { type: 'secret' })).json()
    for (const [method, url] of [
      ['GET', `/v1/jobs/${job.id}`],
      ['GET', `/v1/jobs/${job.id}/executions`],
      ['POST', `/v1/jobs/${job.id}/cancel`],
      ['POST', `/v1/jobs/${job.id}/pause`],
      ['POST', `/v1/jobs/${job.id}/resume`],
      ['GET', `/v1/executions/${once.lastExecution.id}/output`],
    ] as const) {
      const res = await api.call(globex, method, url)
      expect(res.statusCode, `${method} ${url}`).toBe(404)
      expect(res.json().message).toMatch(/^(job|execution) [0-9a-f-]{36} not found$/)
    }
    expect((await api.call(globex, 'GET', '/v1/jobs')).json()).toEqual({ items: [], nextCursor: null })
    expect((await api.call(globex, 'GET', '/v1/jobs?type=secret&status=SCHEDULED')).json().items).toEqual([])
    // Untouched: still active for its owner.
    expect((await api.call(acme, 'GET', `/v1/jobs/${job.id}`)).json()).toMatchObject({ status: 'SCHEDULED', state: 'active' })
    expect((await api.call(acme, 'GET', '/v1/jobs')).json().items).toHaveLength(2)
  })

  it('404s for an id that belongs to nobody', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'GET', '/v1/jobs/01900000-0000-7000-8000-000000000000')
    expect(res.statusCode).toBe(404)
    expect(res.json()).toEqual({ statusCode: 404, error: 'Not Found', message: 'job 01900000-0000-7000-8000-000000000000 not found' })
  })
})
