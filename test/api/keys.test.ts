/**
 * API keys over HTTP (/v1/keys): operator keys list every key without its secret, create tenant
 * keys (the secret once, in the answer) and revoke keys, which stop working at once in the answering
 * process even while cached; every other key gets 403, and no operator key is made over HTTP.
 */
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { capturingLogger } from '../log-capture.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const logged = capturingLogger<Record<string, unknown>>('trace')
let app: App

beforeAll(async () => {
  // keys cached for a minute: a revocation must not wait for the cache
  app = buildApp({ db: t.db, log: logged.log, apiKeyCacheMs: 60_000 })
  await app.ready()
})
afterAll(async () => {
  await app?.close()
})

const call = (key: string, method: 'GET' | 'POST', url: string, body?: unknown) =>
  app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(body === undefined ? {} : { payload: body as object }) })

const KEY_FIELDS = ['createdAt', 'id', 'keyPrefix', 'lastUsedAt', 'name', 'operator', 'revokedAt', 'tenant']

describe('/v1/keys', () => {
  it('lets an operator key create a tenant key, shown once, that works at once, and list it without its secret', async () => {
    const ops = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const created = await call(ops, 'POST', '/v1/keys', { tenant: 'acme', name: 'billing' })
    expect(created.statusCode).toBe(201)
    const body = created.json<Record<string, unknown> & { key: string; id: string }>()
    expect(Object.keys(body).sort()).toEqual([...KEY_FIELDS, 'key'].sort())
    expect(body).toMatchObject({ tenant: 'acme', name: 'billing', operator: false, revokedAt: null, lastUsedAt: null })
    expect(body.key).toMatch(/^psk_[A-Za-z0-9_-]{43}$/)
    expect(body.key.startsWith(body.keyPrefix as string)).toBe(true)
    // the new key acts for its tenant
    const jobs = await call(body.key, 'GET', '/v1/jobs')
    expect(jobs.statusCode).toBe(200)
    const identity = await call(body.key, 'GET', '/v1/identity')
    expect(identity.json()).toMatchObject({ tenant: 'acme', operator: false, keyId: body.id })
    // listed, every tenant's or one tenant's, never with a secret or a hash
    const all = (await call(ops, 'GET', '/v1/keys')).json<{ items: Record<string, unknown>[] }>()
    expect(all.items.map((k) => k.tenant)).toEqual(['ops', 'acme'])
    for (const k of all.items) expect(Object.keys(k).sort()).toEqual(KEY_FIELDS)
    expect(JSON.stringify(all)).not.toContain(body.key)
    const acme = (await call(ops, 'GET', '/v1/keys?tenant=acme')).json<{ items: { id: string }[] }>()
    expect(acme.items.map((k) => k.id)).toEqual([body.id])
    // the creation is logged with the key that asked, and the secret is in no log line
    const me = (await call(ops, 'GET', '/v1/identity')).json<{ keyId: string }>().keyId
    expect(logged.lines.filter((l) => l.msg === 'API key created')).toEqual([expect.objectContaining({ keyId: body.id, tenant: 'acme', byKeyId: me })])
    expect(JSON.stringify(logged.lines)).not.toContain(body.key)
  })

  it('lists the keys a page at a time, oldest first, each once, however many share a creation time', async () => {
    const ops = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    // 120 keys, in groups made in one statement each (one creation time per group)
    for (let g = 0; g < 4; g++) {
      await sql`insert into pgsched.api_keys (tenant, name, key_prefix, key_hash)
                select 'many', 'k' || i, 'psk_x', sha256(convert_to(gen_random_uuid()::text, 'UTF8')) from generate_series(1, 30) i`.execute(t.db)
    }
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await call(ops, 'GET', `/v1/keys?tenant=many&limit=50${cursor ? `&cursor=${cursor}` : ''}`)
      expect(res.statusCode).toBe(200)
      const page = res.json<{ items: Array<{ id: string; tenant: string }>; nextCursor: string | null }>()
      seen.push(...page.items.map((k) => k.id))
      cursor = page.nextCursor
      pages++
    } while (cursor !== null && pages < 10)
    expect(pages).toBe(3)
    const { rows } = await sql<{ id: string }>`select id from pgsched.api_keys where tenant = 'many' order by created_at, id`.execute(t.db)
    expect(seen).toEqual(rows.map((r) => r.id))
    // the default page is 50; a cursor that is not one is refused
    expect((await call(ops, 'GET', '/v1/keys')).json<{ items: unknown[] }>().items).toHaveLength(50)
    const bad = await call(ops, 'GET', '/v1/keys?cursor=bm90LWEtY3Vyc29y')
    expect(bad.statusCode).toBe(400)
    expect(bad.json().message).toBe('cursor is invalid; pass nextCursor from the previous page')
  })

  it('revokes a key, which fails at once though it was just accepted, and keeps its first revocation time', async () => {
    const ops = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const victim = await createApiKey(t.db, { tenant: 'globex' })
    expect((await call(victim.key, 'GET', '/v1/jobs')).statusCode).toBe(200)
    const revoked = await call(ops, 'POST', `/v1/keys/${victim.id}/revoke`)
    expect(revoked.statusCode).toBe(200)
    const first = revoked.json<{ revokedAt: string }>().revokedAt
    expect(Date.parse(first)).toBeGreaterThan(0)
    const refused = await call(victim.key, 'GET', '/v1/jobs')
    expect(refused.statusCode).toBe(401)
    expect(refused.json<{ message: string }>().message).toBe('API key has been revoked')
    expect(logged.lines.filter((l) => l.msg === 'API key revoked').map((l) => l.keyId)).toEqual([victim.id])
    const again = await call(ops, 'POST', `/v1/keys/${victim.id}/revoke`)
    expect(again.json<{ revokedAt: string }>().revokedAt).toBe(first)
    const missing = await call(ops, 'POST', '/v1/keys/00000000-0000-7000-8000-000000000001/revoke')
    expect(missing.statusCode).toBe(404)
    expect(missing.json<{ message: string }>().message).toBe('API key 00000000-0000-7000-8000-000000000001 not found')
  })

  it('answers 403 to a tenant key, makes no operator key, and names a bad tenant', async () => {
    const ops = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const tenant = await createApiKey(t.db, { tenant: 'acme' })
    for (const [method, url, body] of [
      ['GET', '/v1/keys', undefined],
      ['POST', '/v1/keys', { tenant: 'acme' }],
      ['POST', `/v1/keys/${tenant.id}/revoke`, undefined],
    ] as const) {
      const res = await call(tenant.key, method, url, body)
      expect(res.statusCode, `${method} ${url}`).toBe(403)
      expect(res.json<{ message: string }>().message).toContain('only an operator key may')
    }
    // the tenant key still works: its revoke was refused
    expect((await call(tenant.key, 'GET', '/v1/jobs')).statusCode).toBe(200)
    const operator = await call(ops, 'POST', '/v1/keys', { tenant: 'acme', operator: true })
    expect(operator.statusCode).toBe(400)
    expect(operator.json<{ message: string }>().message).toContain('operator')
    const bad = await call(ops, 'POST', '/v1/keys', { tenant: 'no spaces' })
    expect(bad.statusCode).toBe(400)
    expect(bad.json<{ message: string }>().message).toContain('tenant must be a tenant name')
    const keys = (await call(ops, 'GET', '/v1/keys')).json<{ items: { operator: boolean }[] }>()
    expect(keys.items.filter((k) => k.operator)).toHaveLength(1)
  })
})
