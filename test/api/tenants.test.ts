/**
 * Admission quotas and tenant settings over HTTP (migration 0016, tenant-admin.ts, admission.ts):
 * a submit over a quota gets 429 with Retry-After and a message naming the quota, writes nothing,
 * and the next submit after work drains is accepted; the TypeScript client throws
 * QuotaExceededError; /v1/tenants answers operator keys only and names a bad field.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { QuotaExceededError } from '../../src/errors.ts'
import { WebhookDispatcher } from '../../src/maintenance/webhook-dispatcher.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)
const operatorKey = async () => (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
const W = '00000000-0000-7000-8000-00000000c001'

/** Row counts of every table a submit writes. */
async function written(): Promise<Record<string, number>> {
  const { rows } = await sql<{ jobs: number; executions: number; keys: number; triggers: number }>`
    select (select count(*)::int from pgsched.jobs) as jobs, (select count(*)::int from pgsched.executions) as executions,
           (select count(*)::int from pgsched.job_idempotency_keys) as keys, (select count(*)::int from pgsched.triggers) as triggers`.execute(t.db)
  return rows[0] as Record<string, number>
}

describe('admission quotas', () => {
  it('says a tenant with maxPending 0 accepts no new jobs, and asks for a retry in a minute, not a second', async () => {
    const ops = await operatorKey()
    expect((await api.call(ops, 'PATCH', '/v1/tenants/closed', { maxPending: 0 })).statusCode).toBe(200)
    const refused = await api.call(await api.keyFor('closed'), 'POST', '/v1/jobs', { type: 'k' })
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.json()).toEqual({ statusCode: 429, error: 'Too Many Requests', message: 'tenant closed accepts no new jobs: its quota maxPending is 0' })
  })

  it('refuses a quota beyond its range for that range, however large the number, and changes nothing', async () => {
    const ops = await operatorKey()
    const JSON_TYPE = { 'content-type': 'application/json' }
    for (const [body, message] of [
      ['{"maxSubmitsPerSecond":1e300}', 'maxSubmitsPerSecond must be a number from 0.001 to 1000000, or null for no quota'],
      ['{"maxSubmitsPerSecond":9007199254740993}', 'maxSubmitsPerSecond must be a number from 0.001 to 1000000, or null for no quota'],
      ['{"maxPending":1e300}', 'maxPending must be an integer from 0 to 1000000000, or null for no quota'],
    ] as const) {
      const res = await api.call(ops, 'PATCH', '/v1/tenants/ranged', body, JSON_TYPE)
      expect(res.statusCode, body).toBe(400)
      expect(res.json().message, body).toBe(message)
    }
    expect((await api.call(ops, 'GET', '/v1/tenants')).json().items.map((x: { name: string }) => x.name)).not.toContain('ranged')
  })

  it('refuses the submit over maxPending with 429, Retry-After and the quota named, writes nothing, and accepts again once work drains', async () => {
    const ops = await operatorKey()
    const set = await api.call(ops, 'PATCH', '/v1/tenants/acme', { maxPending: 3 })
    expect(set.statusCode).toBe(200)
    expect(set.json()).toEqual({ name: 'acme', weight: 1, maxPending: 3, maxSubmitsPerSecond: null, pending: 0, running: 0 })
    const key = await api.keyFor('acme')
    for (let i = 0; i < 3; i++) expect((await api.call(key, 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(202)
    const before = await written()
    const refused = await api.call(key, 'POST', '/v1/jobs', { type: 'k', idempotencyKey: 'fourth', schedule: { at: '2031-01-01T00:00:00Z' } })
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.json()).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: 'tenant acme has 3 or more pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is 3',
    })
    expect(await written()).toEqual(before)
    // another tenant is not held back by acme's quota
    expect((await api.call(await api.keyFor('other'), 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(202)
    // one of acme's runs: room for exactly one more
    const [claimed] = await executionClaimBatch(t.db, { workerId: W, queues: ['default'], types: ['k'], limit: 1, leaseMs: 60_000 })
    if (!claimed) throw new Error('nothing claimed')
    await executionCompleteMany(t.db, { workerId: W, completions: [{ ...claimed, resultJson: 'null', outputUri: null }] })
    const tenantOfClaimed = (await t.db.selectFrom('pgsched.jobs').select('tenant').where('id', '=', claimed.jobId).executeTakeFirstOrThrow()).tenant
    expect(tenantOfClaimed).toBe('acme') // the oldest due job is acme's
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(202)
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(429)
    // removing the quota lets everything in
    expect((await api.call(ops, 'PATCH', '/v1/tenants/acme', { maxPending: null })).json().maxPending).toBeNull()
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(202)
  })

  it('holds submits to maxSubmitsPerSecond and says when to retry', async () => {
    await createClient({ db: t.db }).tenants.update('acme', { maxSubmitsPerSecond: 2 })
    const key = await api.keyFor('acme')
    const codes = []
    for (let i = 0; i < 4; i++) codes.push((await api.call(key, 'POST', '/v1/jobs', { type: 'k' })).statusCode)
    expect(codes.slice(0, 2)).toEqual([202, 202])
    expect(codes.slice(2)).toEqual([429, 429]) // the bucket holds one second; these requests take milliseconds
    const refused = await api.call(key, 'POST', '/v1/jobs', { type: 'k' })
    expect(refused.statusCode).toBe(429)
    expect(refused.json().message).toBe('tenant acme may submit at most 2 jobs per second (quota maxSubmitsPerSecond)')
    expect(Number(refused.headers['retry-after'])).toBe(1)
  })

  it('admits a submit now and then under a rate below one per second', async () => {
    await createClient({ db: t.db }).tenants.update('acme', { maxSubmitsPerSecond: 0.5 })
    const acme = createClient({ db: t.db, tenant: 'acme' })
    await acme.submitJob({ type: 'k' }) // the bucket holds one submit
    const err = await acme.submitJob({ type: 'k' }).catch((e: unknown) => e)
    expect(err).toMatchObject({ quota: 'maxSubmitsPerSecond', limit: 0.5 })
    expect((err as QuotaExceededError).retryAfterMs).toBeGreaterThan(1_900) // one token takes 2 s
    expect((err as QuotaExceededError).retryAfterMs).toBeLessThanOrEqual(2_000)
  })

  it('makes the client throw QuotaExceededError, and a batch is admitted whole or not at all', async () => {
    const admin = createClient({ db: t.db })
    await admin.tenants.update('acme', { maxPending: 5 })
    const acme = createClient({ db: t.db, tenant: 'acme' })
    await acme.submitJobs(Array.from({ length: 4 }, () => ({ type: 'k' })))
    const err = await acme.submitJobs([{ type: 'k' }, { type: 'k' }]).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(QuotaExceededError)
    expect(err).toMatchObject({ code: 'quota_exceeded', quota: 'maxPending', limit: 5, retryAfterMs: 1000 })
    expect((err as Error).message).toBe(
      'tenant acme has 4 pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is 5; 2 submits were asked for together',
    )
    expect((await written()).executions).toBe(4)
    await acme.submitJob({ type: 'k' })
    await expect(acme.submitJob({ type: 'k' })).rejects.toBeInstanceOf(QuotaExceededError)
    // SQL submits are held to the same quota
    await expect(sql`select pgsched.submit_job('k', tenant => 'acme')`.execute(t.db)).rejects.toMatchObject({
      code: '53400',
      message: 'tenant acme has 5 or more pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is 5',
    })
    // a quota lowered below the pending work: not "has 2"
    await admin.tenants.update('acme', { maxPending: 2 })
    await expect(acme.submitJob({ type: 'k' })).rejects.toThrow(
      'tenant acme has 2 or more pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is 2',
    )
  })

  it('says a batch larger than maxPending itself is never admitted at once, and asks for a retry in a minute, not a second', async () => {
    const admin = createClient({ db: t.db })
    await admin.tenants.update('acme', { maxPending: 2 })
    const acme = createClient({ db: t.db, tenant: 'acme' })
    const err = await acme.submitJobs(Array.from({ length: 3 }, () => ({ type: 'k' }))).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(QuotaExceededError)
    expect(err).toMatchObject({ quota: 'maxPending', limit: 2, retryAfterMs: 60_000 })
    expect((err as Error).message).toBe(
      'tenant acme has the quota maxPending 2, and 3 submits asked for together are more than it: they are never admitted at once; send at most 2 at a time',
    )
    expect((await written()).executions).toBe(0)
    // a bulk retry over REST the same way: 429 with Retry-After 60, and one of at most the quota passes
    await admin.tenants.update('acme', { maxPending: null })
    const ids = (await acme.submitJobs(Array.from({ length: 3 }, () => ({ type: 'k', schedule: { at: '2031-01-01T00:00:00Z' } })))).map((j) => j.id)
    for (const id of ids) await acme.cancelJob(id)
    await admin.tenants.update('acme', { maxPending: 2 })
    const key = await api.keyFor('acme')
    const bulk = (limit: number) => api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { status: 'CANCELLED' }, limit })
    const refused = await bulk(1000)
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('60')
    expect(refused.json().message).toBe(
      'tenant acme has the quota maxPending 2, and 3 submits asked for together are more than it: they are never admitted at once; send at most 2 at a time',
    )
    const passed = await bulk(2)
    expect(passed.statusCode).toBe(200)
    expect(passed.json()).toMatchObject({ action: 'retry', changed: 2, remaining: 1 })
    // at the quota now: the last one waits for work to drain, a retry in a second
    const full = await bulk(1)
    expect(full.statusCode).toBe(429)
    expect(full.headers['retry-after']).toBe('1')
  })

  it("leaves the tenant's pending webhook deliveries out of maxPending: it still submits up to its quota of its own jobs, which still count", async () => {
    const ops = await operatorKey()
    expect((await api.call(ops, 'PATCH', '/v1/tenants/acme', { maxPending: 3 })).statusCode).toBe(200)
    const key = await api.keyFor('acme')
    // every submit of acme's is delivered to a receiver that is not there: the deliveries stay pending
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.com/hooks/acme', events: ['submitted'] })).statusCode).toBe(201)
    const dispatcher = new WebhookDispatcher({ db: t.db, log: t.log })
    const submit = () => api.call(key, 'POST', '/v1/jobs', { type: 'k' })
    expect((await submit()).statusCode).toBe(202)
    expect((await submit()).statusCode).toBe(202)
    expect(await dispatcher.runOnce()).toBe(2)
    const pendingOf = async (type: string) =>
      (await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where tenant = 'acme' and state = 'pending' and type = ${type}`.execute(t.db))
        .rows[0]?.n
    expect([await pendingOf('k'), await pendingOf('pgsched.webhook')]).toEqual([2, 2])

    // 4 pending executions, 2 of them deliveries: room for one more of acme's own
    expect((await submit()).statusCode).toBe(202)
    expect(await dispatcher.runOnce()).toBe(1)
    const refused = await submit()
    expect(refused.statusCode).toBe(429)
    expect(refused.json<{ message: string }>().message).toBe(
      'tenant acme has 3 or more pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is 3',
    )
    // the TypeScript client and SQL submits are admitted by the same count
    await expect(createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'k' })).rejects.toBeInstanceOf(QuotaExceededError)
    await expect(sql`select pgsched.submit_job('k', tenant => 'acme')`.execute(t.db)).rejects.toMatchObject({ code: '53400' })
    expect([await pendingOf('k'), await pendingOf('pgsched.webhook')]).toEqual([3, 3])

    // the deliveries are still acme's jobs, in its lists and its pending figure
    const listed = await api.call(key, 'GET', '/v1/jobs?type=pgsched.webhook')
    expect(listed.json<{ items: unknown[] }>().items).toHaveLength(3)
    expect((await api.call(ops, 'GET', '/v1/tenants/acme')).json()).toMatchObject({ maxPending: 3, pending: 6 })
  })

  it('admits concurrent single submits up to the quota exactly', async () => {
    await createClient({ db: t.db }).tenants.update('acme', { maxPending: 7 })
    const acme = createClient({ db: t.db, tenant: 'acme' })
    const results = await Promise.allSettled(Array.from({ length: 30 }, () => acme.submitJob({ type: 'k' })))
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(7)
    expect(results.filter((r) => r.status === 'rejected').every((r) => r.reason instanceof QuotaExceededError)).toBe(true)
    expect((await written()).executions).toBe(7)
  })
})

describe('/v1/tenants', () => {
  it('answers 403 to a tenant key and changes nothing', async () => {
    const key = await api.keyFor('acme')
    for (const [method, url, body] of [
      ['GET', '/v1/tenants', undefined],
      ['GET', '/v1/tenants/acme', undefined],
      ['PATCH', '/v1/tenants/acme', { maxPending: 1 }],
    ] as const) {
      const res = await api.call(key, method, url, body)
      expect(res.statusCode, `${method} ${url}`).toBe(403)
      expect(res.json().message).toContain('only an operator key')
    }
    expect(await t.db.selectFrom('pgsched.tenants').selectAll().execute()).toEqual([])
  })

  it('no longer lists a tenant whose settings are back to the defaults, and still views it', async () => {
    const ops = await operatorKey()
    await api.call(ops, 'PATCH', '/v1/tenants/acme', { maxPending: 5, weight: 2 })
    await api.call(ops, 'PATCH', '/v1/tenants/beta', { weight: 3 })
    expect((await api.call(ops, 'GET', '/v1/tenants')).json().items.map((x: { name: string }) => x.name)).toEqual(['acme', 'beta'])
    const reset = await api.call(ops, 'PATCH', '/v1/tenants/acme', { weight: 1, maxPending: null, maxSubmitsPerSecond: null })
    expect(reset.json()).toMatchObject({ name: 'acme', weight: 1, maxPending: null, maxSubmitsPerSecond: null })
    expect((await api.call(ops, 'GET', '/v1/tenants')).json().items.map((x: { name: string }) => x.name)).toEqual(['beta'])
    expect((await api.call(ops, 'GET', '/v1/tenants/acme')).json()).toMatchObject({ name: 'acme', weight: 1, maxPending: null })
  })

  it('lists and views tenants, and names the field of a bad value', async () => {
    const ops = await operatorKey()
    await api.call(ops, 'PATCH', '/v1/tenants/zeta', { weight: 2.5 })
    await api.call(ops, 'PATCH', '/v1/tenants/alpha', { maxSubmitsPerSecond: 100, maxPending: 10 })
    await createClient({ db: t.db, tenant: 'alpha' }).submitJob({ type: 'k' })
    const list = await api.call(ops, 'GET', '/v1/tenants')
    expect(list.json().items).toEqual([
      { name: 'alpha', weight: 1, maxPending: 10, maxSubmitsPerSecond: 100, pending: 1, running: 0 },
      { name: 'zeta', weight: 2.5, maxPending: null, maxSubmitsPerSecond: null, pending: 0, running: 0 },
    ])
    expect((await api.call(ops, 'GET', '/v1/tenants/nobody')).json()).toEqual({
      name: 'nobody',
      weight: 1,
      maxPending: null,
      maxSubmitsPerSecond: null,
      pending: 0,
      running: 0,
    })
    for (const [body, field] of [
      [{ weight: 0 }, 'weight'],
      [{ maxPending: -1 }, 'maxPending'],
      [{ maxPending: 1.5 }, 'maxPending'],
      [{ maxSubmitsPerSecond: 0 }, 'maxSubmitsPerSecond'],
      [{ color: 'red' }, 'color'],
      [{}, ''],
    ] as const) {
      const res = await api.call(ops, 'PATCH', '/v1/tenants/alpha', body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      if (field) expect(JSON.stringify(res.json()), JSON.stringify(body)).toContain(field)
    }
    // the messages say what is accepted, not the validator's words
    const messageOf = async (path: string, body: unknown) => (await api.call(ops, 'PATCH', path, body)).json<{ message: string }>().message
    expect(await messageOf('/v1/tenants/alpha', { maxPending: 'x' })).toBe('maxPending must be an integer from 0 to 1000000000, or null for no quota')
    expect(await messageOf('/v1/tenants/alpha', {})).toBe('request body must give at least 1 of its fields (weight, maxPending, maxSubmitsPerSecond)')
    // and a name no API key can have is not a tenant
    const badName = await api.call(ops, 'PATCH', '/v1/tenants/bad%20tenant!', { weight: 2 })
    expect(badName.statusCode).toBe(400)
    expect(badName.json<{ message: string }>().message).toContain('name must be a tenant name: 1-128 characters')
  })

  it('turns fair share on for a queue over PATCH /v1/queues/{name}', async () => {
    const ops = await operatorKey()
    const res = await api.call(ops, 'PATCH', '/v1/queues/shared', { fairShare: true })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ name: 'shared', fairShare: true })
    expect((await api.call(ops, 'PATCH', '/v1/queues/shared', { fairShare: 'yes' })).statusCode).toBe(400)
  })
})

describe('a tenant whose admission is held by a long transaction', () => {
  it('answers its submits 503 with Retry-After after a bounded wait, while a submit of another tenant is accepted', async () => {
    await createClient({ db: t.db }).tenants.update('acme', { maxPending: 100 })
    const holder = await t.pool.connect()
    try {
      await holder.query('begin')
      await holder.query("select pgsched.submit_job('k', tenant => 'acme')") // admitted: holds acme's row
      const key = await api.keyFor('acme')
      const startedAt = Date.now()
      const [held, other] = await Promise.all([
        api.call(key, 'POST', '/v1/jobs', { type: 'k' }),
        api.call(await api.keyFor('other'), 'POST', '/v1/jobs', { type: 'k' }),
      ])
      const waitedMs = Date.now() - startedAt
      expect(other.statusCode).toBe(202)
      expect(held.statusCode).toBe(503)
      expect(held.headers['retry-after']).toBe('1')
      expect(held.json().message).toContain("tenant acme's admission quotas are held by another transaction")
      expect(waitedMs).toBeGreaterThanOrEqual(1_900)
      expect(waitedMs).toBeLessThan(5_000)
    } finally {
      await holder.query('rollback')
      holder.release()
    }
    expect((await api.call(await api.keyFor('acme'), 'POST', '/v1/jobs', { type: 'k' })).statusCode).toBe(202)
  })
})

describe('GET /v1/identity', () => {
  it("names a tenant key's own tenant only, and lists an operator key every tenant with jobs, settings or a key", async () => {
    const acme = await api.keyFor('acme')
    await createClient({ db: t.db, tenant: 'jobs-only' }).submitJobs([{ type: 'k' }, { type: 'k' }])
    await createClient({ db: t.db, tenant: 'beta' }).submitJob({ type: 'k' })
    await createClient({ db: t.db }).tenants.update('settings-only', { weight: 2 })
    const revoked = await createApiKey(t.db, { tenant: 'revoked-key' })
    await sql`update pgsched.api_keys set revoked_at = now() where id = ${revoked.id}::uuid`.execute(t.db)

    const own = await api.call(acme, 'GET', '/v1/identity')
    expect(own.statusCode).toBe(200)
    expect(own.json()).toEqual({ tenant: 'acme', operator: false, keyId: expect.any(String), tenants: ['acme'] })

    const ops = await createApiKey(t.db, { tenant: 'ops', operator: true })
    const operator = await api.call(ops.key, 'GET', '/v1/identity')
    expect(operator.json()).toEqual({ tenant: 'ops', operator: true, keyId: ops.id, tenants: ['acme', 'beta', 'jobs-only', 'ops', 'settings-only'] })
    expect((await api.call('not-a-key', 'GET', '/v1/identity')).statusCode).toBe(401)
  })

  it('lists the names of tenants with jobs in order, at most the limit', async () => {
    for (const tenant of ['t3', 't1', 't2', 't4']) await createClient({ db: t.db, tenant }).submitJobs([{ type: 'k' }, { type: 'k' }, { type: 'k' }])
    const admin = createClient({ db: t.db }).tenants
    expect(await admin.names()).toEqual(['t1', 't2', 't3', 't4'])
    expect(await admin.names(2)).toEqual(['t1', 't2'])
  })
})
