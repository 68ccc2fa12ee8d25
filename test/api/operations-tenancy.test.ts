/**
 * A tenant key cannot see or act on another tenant's jobs through any job operation or view: a
 * job id of another tenant answers 404 and changes nothing, bulk counts and lists leave its jobs
 * out, naming another tenant is a 403, and queue settings stay operator-only (403).
 */
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, insertTrigger } from '../factories.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

describe('job operations across tenants', () => {
  it("answers 404 to every operation on another tenant's job and leaves it unchanged", async () => {
    const key = await api.keyFor('acme')
    const failed = await insertExecution(t.db, { state: 'failed', error: { message: 'x', name: 'Error', attempt: 1 }, job: { tenant: 'globex' } })
    const done = await insertExecution(t.db, { state: 'succeeded', job: { tenant: 'globex' } })
    for (const [method, url] of [
      ['POST', `/v1/jobs/${failed.jobId}/retry`],
      ['POST', `/v1/jobs/${done.jobId}/rerun`],
      ['DELETE', `/v1/jobs/${done.jobId}`],
      ['DELETE', `/v1/jobs/${failed.jobId}`],
    ] as const) {
      const res = await api.call(key, method, url)
      expect(res.statusCode, `${method} ${url}`).toBe(404)
      expect(res.json().message).toMatch(/^job .* not found$/)
    }
    const rows = await t.db.selectFrom('pgsched.executions').select(['job_id', 'state']).where('tenant', '=', 'globex').execute()
    expect(rows).toHaveLength(2)
  })

  it("leaves another tenant's jobs out of bulk counts, lists, exports, failures, schedules and stats", async () => {
    const key = await api.keyFor('initech')
    const theirs = await insertExecution(t.db, {
      state: 'failed',
      error: { message: 'theirs', name: 'Error', attempt: 1 },
      job: { tenant: 'umbrella', queue: 'x' },
    })
    await insertTrigger(t.db, { job: { tenant: 'umbrella' } })
    const mine = await insertExecution(t.db, { state: 'failed', error: { message: 'mine', name: 'Error', attempt: 1 }, job: { tenant: 'initech', queue: 'x' } })

    const byIds = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { ids: [theirs.jobId] } })
    expect(byIds.json()).toEqual({ action: 'retry', matched: 0, changed: 0, remaining: 0, lastId: null })
    const dryRun = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'delete', filter: { all: true }, limit: 1 })
    expect(dryRun.json()).toEqual({ action: 'delete', matched: 1, changed: 1, remaining: 0, lastId: expect.any(String) })
    expect(await t.db.selectFrom('pgsched.jobs').select('id').where('id', '=', mine.jobId).execute()).toEqual([])
    expect(await t.db.selectFrom('pgsched.jobs').select('id').where('id', '=', theirs.jobId).execute()).toHaveLength(1)

    const list = await api.call(key, 'GET', '/v1/jobs?queue=x')
    expect(list.json().items).toEqual([])
    const exported = await api.call(key, 'GET', '/v1/jobs/export?format=json')
    expect(exported.json()).toEqual([])
    expect((await api.call(key, 'GET', '/v1/failures')).json().items).toEqual([])
    expect((await api.call(key, 'GET', '/v1/schedules')).json().items).toEqual([])
    expect((await api.call(key, 'GET', '/v1/stats?minutes=5')).json().items).toEqual([])
    expect((await api.call(key, 'GET', `/v1/jobs?idempotencyKey=k&errorMessage=theirs`)).json().items).toEqual([])
  })

  it('refuses a tenant key that names another tenant (403), and queue settings (403)', async () => {
    const key = await api.keyFor('acme')
    for (const [method, url, body] of [
      ['GET', '/v1/jobs?tenant=globex', undefined],
      ['GET', '/v1/jobs/export?tenant=globex', undefined],
      ['GET', '/v1/failures?tenant=globex', undefined],
      ['GET', '/v1/schedules?tenant=globex', undefined],
      ['GET', '/v1/stats?tenant=globex', undefined],
      ['POST', '/v1/jobs/bulk', { action: 'cancel', filter: { tenant: 'globex' } }],
      ['POST', '/v1/queues/default/pause', undefined],
      ['POST', '/v1/queues/default/resume', undefined],
      ['PATCH', '/v1/queues/default', { concurrencyLimit: 1 }],
    ] as const) {
      const res = await api.call(key, method, url, body)
      expect(res.statusCode, `${method} ${url}`).toBe(403)
    }
    // its own name is accepted
    expect((await api.call(key, 'GET', '/v1/jobs?tenant=acme')).statusCode).toBe(200)
    expect(await t.db.selectFrom('pgsched.queues').selectAll().execute()).toEqual([])
  })

  it("lets an operator key retry, view and cancel another tenant's job by id and list every tenant's jobs", async () => {
    const operator = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const { jobId } = await insertExecution(t.db, { state: 'failed', error: { message: 'x', name: 'Error', attempt: 1 }, job: { tenant: 'hooli' } })
    const res = await api.call(operator, 'POST', `/v1/jobs/${jobId}/retry`)
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ tenant: 'hooli', status: 'SCHEDULED' })
    const list = await api.call(operator, 'GET', '/v1/jobs?tenant=hooli')
    expect(list.json().items.map((j: { id: string }) => j.id)).toEqual([jobId])
    // and views and controls it by id, as the dashboard's job page does
    expect((await api.call(operator, 'GET', `/v1/jobs/${jobId}`)).json()).toMatchObject({ id: jobId, tenant: 'hooli' })
    expect((await api.call(operator, 'GET', `/v1/jobs/${jobId}/executions`)).json().items).toHaveLength(2)
    expect((await api.call(operator, 'POST', `/v1/jobs/${jobId}/cancel`)).json()).toMatchObject({ status: 'CANCELLED' })
    // a tenant key still cannot
    expect((await api.call(await api.keyFor('acme'), 'GET', `/v1/jobs/${jobId}`)).statusCode).toBe(404)
  })
})
