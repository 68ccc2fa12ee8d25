import { describe, expect, it } from 'vitest'
import { createApiKey, hashApiKey } from '../../src/api/auth.ts'
import { apiKeyFindByHash, apiKeyList, apiKeyRevoke } from '../../src/db/queries/api-keys.ts'
import { ValidationError } from '../../src/errors.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
// No key cache here, so a revocation shows on the next request.
const api = useTestApi(t, { apiKeyCacheMs: 0 })

const UNKNOWN_KEY = `psk_${'A'.repeat(43)}`

describe('API keys', () => {
  it('are psk_ plus 43 base64url characters, stored only as their SHA-256', async () => {
    const created = await createApiKey(t.db, { tenant: 'acme', name: 'ci' })
    expect(created.key).toMatch(/^psk_[A-Za-z0-9_-]{43}$/)
    expect(created).toMatchObject({ tenant: 'acme', name: 'ci', keyPrefix: created.key.slice(0, 12), revokedAt: null })
    const rows = await t.db.selectFrom('pgsched.api_keys').selectAll().execute()
    expect(rows).toHaveLength(1)
    expect(rows[0]?.key_hash.equals(hashApiKey(created.key))).toBe(true)
    expect(JSON.stringify(rows)).not.toContain(created.key.slice(12))
    expect(await apiKeyFindByHash(t.db, { keyHash: hashApiKey(created.key) })).toMatchObject({ id: created.id, tenant: 'acme' })
  })

  it('are listed without their secret and revoked once', async () => {
    const a = await createApiKey(t.db, { tenant: 'acme' })
    const b = await createApiKey(t.db, { tenant: 'globex', name: 'ops' })
    expect((await apiKeyList(t.db)).map((k) => k.id)).toEqual([a.id, b.id])
    expect((await apiKeyList(t.db, { tenant: 'globex' })).map((k) => k.name)).toEqual(['ops'])
    const revoked = await apiKeyRevoke(t.db, { id: a.id })
    expect(revoked?.revokedAt).toBeInstanceOf(Date)
    const again = await apiKeyRevoke(t.db, { id: a.id })
    expect(again?.revokedAt).toEqual(revoked?.revokedAt)
    expect((await apiKeyList(t.db, { includeRevoked: false })).map((k) => k.id)).toEqual([b.id])
    expect(await apiKeyRevoke(t.db, { id: '01900000-0000-7000-8000-000000000000' })).toBeUndefined()
  })

  it('refuse a tenant name that is empty or has spaces', async () => {
    await expect(createApiKey(t.db, { tenant: '' })).rejects.toBeInstanceOf(ValidationError)
    await expect(createApiKey(t.db, { tenant: 'a b' })).rejects.toThrow('tenant must be 1-128 characters')
  })
})

describe('authentication', () => {
  const cases: Array<{ name: string; authorization?: () => Promise<string>; message: string }> = [
    { name: 'no Authorization header', message: 'missing API key; send Authorization: Bearer <api key>' },
    { name: 'empty header', authorization: async () => '', message: 'missing API key; send Authorization: Bearer <api key>' },
    { name: 'Basic scheme', authorization: async () => 'Basic dXNlcjpwYXNz', message: 'Authorization header must be "Bearer <api key>"' },
    { name: 'Bearer without a key', authorization: async () => 'Bearer ', message: 'Authorization header must be "Bearer <api key>"' },
    { name: 'malformed key', authorization: async () => 'Bearer secret', message: 'API key is malformed; keys look like psk_ followed by 43 characters' },
    { name: 'unknown key', authorization: async () => `Bearer ${UNKNOWN_KEY}`, message: 'API key is not valid' },
    {
      name: 'revoked key',
      authorization: async () => {
        const created = await createApiKey(t.db, { tenant: 'acme' })
        await apiKeyRevoke(t.db, { id: created.id })
        return `Bearer ${created.key}`
      },
      message: 'API key has been revoked',
    },
  ]

  for (const c of cases) {
    it(`answers 401 for ${c.name}`, async () => {
      const headers = c.authorization ? { authorization: await c.authorization() } : {}
      for (const [method, url] of [
        ['GET', '/v1/jobs'],
        ['POST', '/v1/jobs'],
        ['GET', '/v1/jobs/01900000-0000-7000-8000-000000000000'],
      ] as const) {
        const res = await api.app.inject({ method, url, headers, ...(method === 'POST' ? { payload: { type: 'x' } } : {}) })
        expect(res.statusCode).toBe(401)
        expect(res.headers['www-authenticate']).toBe('Bearer realm="pgsched"')
        expect(res.json()).toEqual({ statusCode: 401, error: 'Unauthorized', message: c.message })
      }
      expect(await t.db.selectFrom('pgsched.jobs').select('id').execute()).toEqual([])
    })
  }

  it('stops accepting a key as soon as it is revoked (no cache)', async () => {
    const created = await createApiKey(t.db, { tenant: 'acme' })
    expect((await api.call(created.key, 'GET', '/v1/jobs')).statusCode).toBe(200)
    await apiKeyRevoke(t.db, { id: created.id })
    expect((await api.call(created.key, 'GET', '/v1/jobs')).statusCode).toBe(401)
  })

  it('checks authentication before the body, and leaves ops endpoints open', async () => {
    const res = await api.app.inject({ method: 'POST', url: '/v1/jobs', headers: { 'content-type': 'application/json' }, payload: '{bad' })
    expect(res.statusCode).toBe(401)
    expect((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  })

  it('records which key created a job', async () => {
    const created = await createApiKey(t.db, { tenant: 'acme' })
    const job = (await api.call(created.key, 'POST', '/v1/jobs', { type: 'x' })).json()
    expect(job).toMatchObject({ tenant: 'acme', createdBy: `api-key:${created.id}` })
  })
})
