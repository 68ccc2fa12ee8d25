import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)
const operatorKey = async () => (await createApiKey(t.db, { tenant: 'ops', operator: true })).key

describe('/v1/queues', () => {
  it('answers 403 to a tenant key that views or changes a queue: queues are shared by every tenant', async () => {
    const key = await api.keyFor('acme')
    for (const [method, url, body] of [
      ['GET', '/v1/queues/mail', undefined],
      ['POST', '/v1/queues/mail/pause', undefined],
      ['PATCH', '/v1/queues/mail', { concurrencyLimit: 2 }],
    ] as const) {
      const res = await api.call(key, method, url, body)
      expect(res.statusCode, `${method} ${url}`).toBe(403)
      expect(res.json().message).toContain('only an operator key')
    }
    expect(await t.db.selectFrom('pgsched.queues').selectAll().execute()).toEqual([])
  })

  it('lists queues with their figures, pauses, resumes and limits one for an operator key', async () => {
    const key = await operatorKey()
    await createClient({ db: t.db, tenant: 'acme' }).submitJobs([
      { type: 'k', queue: 'mail' },
      { type: 'k', queue: 'mail' },
      { type: 'k', queue: 'mail', schedule: { at: new Date(Date.now() + 3_600_000).toISOString() } },
    ])
    await executionClaimBatch(t.db, { workerId: '00000000-0000-7000-8000-00000000b001', queues: ['mail'], types: ['k'], limit: 1, leaseMs: 60_000 })
    const list = await api.call(key, 'GET', '/v1/queues')
    expect(list.statusCode).toBe(200)
    expect(list.json().items).toEqual([
      {
        name: 'mail',
        paused: false,
        pausedAt: null,
        concurrencyLimit: null,
        keyConcurrencyLimit: null,
        rateLimit: null,
        ratePeriodMs: null,
        fairShare: false,
        due: 1,
        scheduled: 1,
        running: 1,
        oldestDueLagMs: expect.any(Number),
        // no live worker serves type k in mail: both pending executions wait for one
        unserved: 2,
        unservedTypes: ['k'],
      },
    ])

    const paused = await api.call(key, 'POST', '/v1/queues/mail/pause')
    expect(paused.statusCode).toBe(200)
    expect(paused.json()).toMatchObject({ name: 'mail', paused: true, pausedAt: expect.any(String) })
    const again = await api.call(key, 'POST', '/v1/queues/mail/pause') // safe to repeat
    expect(again.json().pausedAt).toBe(paused.json().pausedAt)
    const limited = await api.call(key, 'PATCH', '/v1/queues/mail', { concurrencyLimit: 3 })
    expect(limited.json()).toMatchObject({ paused: true, concurrencyLimit: 3 })
    const resumed = await api.call(key, 'POST', '/v1/queues/mail/resume')
    expect(resumed.json()).toMatchObject({ paused: false, pausedAt: null, concurrencyLimit: 3 })
    const unlimited = await api.call(key, 'PATCH', '/v1/queues/mail', { concurrencyLimit: null })
    expect(unlimited.json()).toMatchObject({ concurrencyLimit: null })
    const perKey = await api.call(key, 'PATCH', '/v1/queues/mail', { keyConcurrencyLimit: 1 })
    expect(perKey.json()).toMatchObject({ concurrencyLimit: null, keyConcurrencyLimit: 1 })
    const paced = await api.call(key, 'PATCH', '/v1/queues/mail', { rateLimit: 20, ratePeriodMs: 60_000 })
    expect(paced.json()).toMatchObject({ rateLimit: 20, ratePeriodMs: 60_000, keyConcurrencyLimit: 1 })
    const unpaced = await api.call(key, 'PATCH', '/v1/queues/mail', { rateLimit: null })
    expect(unpaced.json()).toMatchObject({ rateLimit: null, ratePeriodMs: null })
    // A queue nobody used yet can be set up ahead of its jobs.
    const fresh = await api.call(key, 'POST', '/v1/queues/reports/pause')
    expect(fresh.json()).toMatchObject({ name: 'reports', paused: true, due: 0, running: 0 })
  })

  it('names the field of a bad value with 400', async () => {
    const key = await operatorKey()
    const zero = await api.call(key, 'PATCH', '/v1/queues/mail', { concurrencyLimit: 0 })
    expect(zero.statusCode).toBe(400)
    expect(zero.json().details).toEqual([{ path: 'concurrencyLimit', message: expect.stringContaining('an integer from 1 to 100000, or null') }])
    const missing = await api.call(key, 'PATCH', '/v1/queues/mail', {})
    expect(missing.statusCode).toBe(400)
    const periodAlone = await api.call(key, 'PATCH', '/v1/queues/mail', { ratePeriodMs: 1000 })
    expect(periodAlone.statusCode).toBe(400)
    expect(periodAlone.json().details).toEqual([{ path: 'ratePeriodMs', message: 'ratePeriodMs goes with rateLimit' }])
    const badName = await api.call(key, 'POST', `/v1/queues/${encodeURIComponent('bad queue')}/pause`)
    expect(badName.statusCode).toBe(400)
    expect(badName.json().details?.[0]?.path).toBe('name')
  })
})
