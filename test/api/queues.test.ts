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
        keyRateLimit: null,
        keyRatePeriodMs: null,
        fairShare: false,
        due: 1,
        scheduled: 1,
        running: 1,
        oldestDueLagMs: expect.any(Number),
        // no live worker serves type k in mail: both pending executions wait for one
        unserved: 2,
        unservedTypes: ['k'],
        liveWorkers: 0,
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
    const perKeyPaced = await api.call(key, 'PATCH', '/v1/queues/mail', { keyRateLimit: 2 })
    expect(perKeyPaced.json()).toMatchObject({ keyRateLimit: 2, keyRatePeriodMs: 1000, rateLimit: null })
    const perKeyUnpaced = await api.call(key, 'PATCH', '/v1/queues/mail', { keyRateLimit: null })
    expect(perKeyUnpaced.json()).toMatchObject({ keyRateLimit: null, keyRatePeriodMs: null })
    // A queue nobody used yet can be set up ahead of its jobs.
    const fresh = await api.call(key, 'POST', '/v1/queues/reports/pause')
    expect(fresh.json()).toMatchObject({ name: 'reports', paused: true, due: 0, running: 0 })
  })

  it('keeps the period of a rate limit changed without one, and gives a new limit 1 s', async () => {
    const key = await operatorKey()
    const set = await api.call(key, 'PATCH', '/v1/queues/kept', { rateLimit: 20, ratePeriodMs: 60_000, keyRateLimit: 5, keyRatePeriodMs: 10_000 })
    expect(set.json()).toMatchObject({ rateLimit: 20, ratePeriodMs: 60_000, keyRateLimit: 5, keyRatePeriodMs: 10_000 })
    const raised = await api.call(key, 'PATCH', '/v1/queues/kept', { rateLimit: 30, keyRateLimit: 6 })
    expect(raised.json()).toMatchObject({ rateLimit: 30, ratePeriodMs: 60_000, keyRateLimit: 6, keyRatePeriodMs: 10_000 })
    const client = createClient({ db: t.db })
    expect(await client.queues.setRateLimit('kept', 40)).toMatchObject({ rateLimit: 40, ratePeriodMs: 60_000 })
    expect(await client.queues.setKeyRateLimit('kept', 7)).toMatchObject({ keyRateLimit: 7, keyRatePeriodMs: 10_000 })
    // removed, then set again without a period: the default, not the period it had before
    await client.queues.setRateLimit('kept', null)
    expect(await client.queues.setRateLimit('kept', 3)).toMatchObject({ rateLimit: 3, ratePeriodMs: 1000 })
    expect((await api.call(key, 'PATCH', '/v1/queues/fresh-one', { rateLimit: 9 })).json()).toMatchObject({ rateLimit: 9, ratePeriodMs: 1000 })
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
    const keyPeriodAlone = await api.call(key, 'PATCH', '/v1/queues/mail', { keyRatePeriodMs: 1000 })
    expect(keyPeriodAlone.statusCode).toBe(400)
    expect(keyPeriodAlone.json().details).toEqual([{ path: 'keyRatePeriodMs', message: 'keyRatePeriodMs goes with keyRateLimit' }])
    // a period with a null limit (which removes it) is refused, changing nothing: not dropped without a word
    expect((await api.call(key, 'PATCH', '/v1/queues/mail', { rateLimit: 7 })).statusCode).toBe(200)
    for (const [body, path, limit] of [
      [{ concurrencyLimit: 3, rateLimit: null, ratePeriodMs: 500 }, 'ratePeriodMs', 'rateLimit'],
      [{ concurrencyLimit: 3, keyRateLimit: null, keyRatePeriodMs: 500 }, 'keyRatePeriodMs', 'keyRateLimit'],
    ] as const) {
      const res = await api.call(key, 'PATCH', '/v1/queues/mail', body)
      expect(res.statusCode).toBe(400)
      const message = `${path} goes with a ${limit}: a null ${limit} removes the limit and takes no period`
      expect(res.json().details).toEqual([{ path, message }])
    }
    const unchanged = (await api.call(key, 'GET', '/v1/queues/mail')).json()
    expect([unchanged.concurrencyLimit, unchanged.rateLimit]).toEqual([null, 7])
    const client = createClient({ db: t.db })
    await expect(client.queues.setRateLimit('mail', null, 500)).rejects.toThrow('ratePeriodMs goes with a rateLimit')
    await expect(client.queues.setKeyRateLimit('mail', null, 500)).rejects.toThrow('keyRatePeriodMs goes with a keyRateLimit')
    expect((await client.queues.setRateLimit('mail', null)).rateLimit).toBeNull()
    const keyRateZero = await api.call(key, 'PATCH', '/v1/queues/mail', { keyRateLimit: 0 })
    expect(keyRateZero.statusCode).toBe(400)
    expect(keyRateZero.json().details?.[0]?.path).toBe('keyRateLimit')
    const badName = await api.call(key, 'POST', `/v1/queues/${encodeURIComponent('bad queue')}/pause`)
    expect(badName.statusCode).toBe(400)
    expect(badName.json().details?.[0]?.path).toBe('name')
  })

  it("tells a tenant key that its job's queue is paused, and since when, in the job's view, the list and the submit reply, over HTTP", async () => {
    const operator = await operatorKey()
    const acme = await api.keyFor('acme')
    const address = await api.app.listen({ host: '127.0.0.1', port: 0 })
    const http = async (key: string, method: 'GET' | 'POST', path: string, body?: unknown) => {
      const res = await fetch(`${address}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: res.status, body: (await res.json()) as Record<string, unknown> }
    }
    const before = await http(acme, 'POST', '/v1/jobs', { type: 'k', queue: 'held' })
    expect(before.status).toBe(202)
    expect(before.body).toMatchObject({ queuePaused: false, queuePausedAt: null })

    const pause = await http(operator, 'POST', '/v1/queues/held/pause')
    expect(pause.status).toBe(200)
    const pausedAt = pause.body.pausedAt as string
    expect(pausedAt).toEqual(expect.any(String))
    // the tenant key may still not read the queue, but its jobs say it is paused
    expect((await http(acme, 'GET', '/v1/queues/held')).status).toBe(403)
    const view = await http(acme, 'GET', `/v1/jobs/${before.body.id}`)
    expect(view.status).toBe(200)
    expect(view.body).toMatchObject({ id: before.body.id, queue: 'held', status: 'SCHEDULED', queuePaused: true, queuePausedAt: pausedAt })
    const after = await http(acme, 'POST', '/v1/jobs', { type: 'k', queue: 'held' })
    expect(after.body).toMatchObject({ queuePaused: true, queuePausedAt: pausedAt })
    const list = await http(acme, 'GET', '/v1/jobs?queue=held')
    expect((list.body.items as Array<Record<string, unknown>>).map((j) => [j.id, j.queuePaused, j.queuePausedAt])).toEqual([
      [after.body.id, true, pausedAt],
      [before.body.id, true, pausedAt],
    ])
    // a job of another queue is not held
    const other = await http(acme, 'POST', '/v1/jobs', { type: 'k', queue: 'mail' })
    expect((await http(acme, 'GET', `/v1/jobs/${other.body.id}`)).body).toMatchObject({ queuePaused: false, queuePausedAt: null })

    expect((await http(operator, 'POST', '/v1/queues/held/resume')).status).toBe(200)
    expect((await http(acme, 'GET', `/v1/jobs/${before.body.id}`)).body).toMatchObject({ queuePaused: false, queuePausedAt: null })
  })
})
