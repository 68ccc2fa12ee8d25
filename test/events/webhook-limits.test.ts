/**
 * A tenant has at most SCHEDULER_WEBHOOK_MAX_PER_TENANT webhook subscriptions (createClient's
 * webhookMaxPerTenant; default 100): a creation beyond is refused, over REST (409) and the client,
 * naming the cap, and nothing is written; other tenants are not held to one tenant's count.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { WEBHOOK_MAX_PER_TENANT_DEFAULT } from '../../src/core/events.ts'
import { ConflictError } from '../../src/errors.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const api = useTestApi(t, { webhookMaxPerTenant: 3 })

const count = async (tenant: string) =>
  (await t.pool.query('select count(*)::int as n from pgsched.webhook_subscriptions where tenant = $1', [tenant])).rows[0].n as number

describe('the most webhook subscriptions of a tenant', () => {
  it('refuses a creation beyond SCHEDULER_WEBHOOK_MAX_PER_TENANT over REST with a 409 naming it, and admits one again after a delete', async () => {
    const key = await api.keyFor('many')
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const res = await api.call(key, 'POST', '/v1/webhooks', { url: `https://example.com/hook/${i}` })
      expect(res.statusCode).toBe(201)
      ids.push(res.json<{ id: string }>().id)
    }
    // a disabled one counts too
    await api.call(key, 'PATCH', `/v1/webhooks/${ids[0]}`, { enabled: false })
    const refused = await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.com/hook/3' })
    expect(refused.statusCode).toBe(409)
    expect(refused.json()).toEqual({
      statusCode: 409,
      error: 'Conflict',
      message:
        'tenant "many" has 3 webhook subscriptions, the most a tenant may have (SCHEDULER_WEBHOOK_MAX_PER_TENANT, ' +
        "createClient's webhookMaxPerTenant: 3; disabled ones count too): delete one, or change the event types or URL of one, rather than creating another",
    })
    expect(await count('many')).toBe(3)
    // another tenant is not held to this one's count
    expect((await api.call(await api.keyFor('few'), 'POST', '/v1/webhooks', { url: 'https://example.com/hook/0' })).statusCode).toBe(201)

    expect((await api.call(key, 'DELETE', `/v1/webhooks/${ids[1]}`)).statusCode).toBe(200)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.com/hook/3' })).statusCode).toBe(201)
  })

  it('refuses it through the client with a ConflictError, and lets no more than the cap through when creations race', async () => {
    const client = createClient({ db: t.db, tenant: 'racing', webhookMaxPerTenant: 2 })
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => client.webhooks.create({ url: `https://example.com/r/${i}` })))
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(2)
    const reasons = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as Error] : []))
    expect(reasons).toHaveLength(4)
    for (const r of reasons) {
      expect(r).toBeInstanceOf(ConflictError)
      expect(r.message).toMatch(/^tenant "racing" has 2 webhook subscriptions, the most a tenant may have/)
    }
    expect(await count('racing')).toBe(2)
  })

  it('is 100 unless set, and refuses a cap that is not a positive integer', async () => {
    expect(WEBHOOK_MAX_PER_TENANT_DEFAULT).toBe(100)
    expect(loadConfig({ DATABASE_URL: t.url }).api.webhookMaxPerTenant).toBe(100)
    expect(loadConfig({ DATABASE_URL: t.url, SCHEDULER_WEBHOOK_MAX_PER_TENANT: '5' }).api.webhookMaxPerTenant).toBe(5)
    expect(() => loadConfig({ DATABASE_URL: t.url, SCHEDULER_WEBHOOK_MAX_PER_TENANT: '0' })).toThrow('SCHEDULER_WEBHOOK_MAX_PER_TENANT')
    expect(() => createClient({ db: t.db, webhookMaxPerTenant: 0 })).toThrow('webhookMaxPerTenant must be a positive integer (got 0)')
    const client = createClient({ db: t.db, tenant: 'default-cap' })
    for (let i = 0; i < 100; i++) await client.webhooks.create({ url: `https://example.com/d/${i}` })
    await expect(client.webhooks.create({ url: 'https://example.com/d/100' })).rejects.toThrow(
      'tenant "default-cap" has 100 webhook subscriptions, the most a tenant may have',
    )
  })
})
