/**
 * When an API key was last used: a listening API records it from real HTTP requests in
 * api_keys.last_used_at, at most once per key and process within its write interval (a minute by
 * default), after the request, and never for a revoked key. Writes to api_keys are counted by a
 * trigger of this file's database; closing an app waits for its writes, so the counts are final.
 */
import { sql } from 'kysely'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App, type AppDeps } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { createKeyUseRecorder } from '../../src/api/key-use-recorder.ts'
import type { Clock } from '../../src/clock.ts'
import { apiKeyList, apiKeyMarkUsed, apiKeyRevoke } from '../../src/db/queries/api-keys.ts'
import { createDb } from '../../src/db/pool.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

beforeAll(async () => {
  // One row per row-update of api_keys, whatever it changed.
  await sql`
    create table public.api_key_writes (key_id uuid not null);
    create function public.api_key_write_count() returns trigger language plpgsql as $$
    begin
      insert into public.api_key_writes values (new.id);
      return new;
    end $$;
    create trigger api_key_write_count after update on pgsched.api_keys
      for each row execute function public.api_key_write_count();`.execute(t.db)
})

const writesOf = async (keyId: string): Promise<number> => {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from public.api_key_writes where key_id = ${keyId}::uuid`.execute(t.db)
  return rows[0]?.n ?? 0
}

const lastUsedAt = async (keyId: string): Promise<Date | null> => {
  const key = (await apiKeyList(t.db)).find((k) => k.id === keyId)
  if (!key) throw new Error(`no key ${keyId}`)
  return key.lastUsedAt
}

const opened: App[] = []
afterEach(async () => {
  for (const app of opened.splice(0)) await app.close()
})

/** A listening API over this file's database, closed after the test. */
async function startApi(options: Partial<Omit<AppDeps, 'db'>> = {}): Promise<{ app: App; get: (key: string, path?: string) => Promise<number> }> {
  const app = buildApp({ db: t.db, log: t.log, ...options })
  opened.push(app)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  const get = async (key: string, path = '/v1/jobs') => {
    const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } })
    await res.arrayBuffer()
    return res.status
  }
  return { app, get }
}

describe('an API key last use', () => {
  it("is recorded from the key's requests and listed with the key, and the key is never logged", async () => {
    const { log, lines } = capturingLogger('trace')
    const { get } = await startApi({ log, apiKeyCacheMs: 0 })
    const created = await createApiKey(t.db, { tenant: 'acme' })
    expect(created.lastUsedAt).toBeNull()

    expect(await get(created.key)).toBe(200)
    const used = await waitFor(() => lastUsedAt(created.id), { what: 'the key use recorded' })
    expect(used.getTime()).toBeGreaterThanOrEqual(created.createdAt.getTime())
    const { rows } = await sql<{ now: Date }>`select now() as now`.execute(t.db)
    expect(used.getTime()).toBeLessThanOrEqual((rows[0] as { now: Date }).now.getTime())
    expect(JSON.stringify(lines)).not.toContain(created.key.slice(12))
  })

  it("is written once for many requests within a minute, with or without the key cache, each key's own", async () => {
    const { app, get } = await startApi()
    const a = await createApiKey(t.db, { tenant: 'acme' })
    const b = await createApiKey(t.db, { tenant: 'acme' })
    // the first requests of each key look it up, the next ones find it in the key cache
    for (let i = 0; i < 20; i++) expect(await get(i % 4 === 0 ? b.key : a.key)).toBe(200)
    await Promise.all(Array.from({ length: 20 }, () => get(a.key)))
    await app.close()
    expect(await writesOf(a.id)).toBe(1)
    expect(await writesOf(b.id)).toBe(1)
    expect(await lastUsedAt(a.id)).toBeInstanceOf(Date)
    expect(await lastUsedAt(b.id)).toBeInstanceOf(Date)
  })

  it("is not written by a revoked key's requests, even those the key cache still accepts", async () => {
    // Writing at every request, so that only the revocation keeps a request from writing.
    const cached = await startApi({ apiKeyCacheMs: 60_000, keyUseWriteIntervalMs: 0 })
    const uncached = await startApi({ apiKeyCacheMs: 0, keyUseWriteIntervalMs: 0 })
    const created = await createApiKey(t.db, { tenant: 'acme' })
    expect(await cached.get(created.key)).toBe(200)
    const used = await waitFor(() => lastUsedAt(created.id), { what: 'the key use recorded' })
    await apiKeyRevoke(t.db, { id: created.id })
    const writes = await writesOf(created.id)

    for (let i = 0; i < 5; i++) {
      expect(await cached.get(created.key)).toBe(200) // still trusted from the key cache
      expect(await uncached.get(created.key)).toBe(401)
    }
    await cached.app.close()
    await uncached.app.close()
    expect(await writesOf(created.id)).toBe(writes)
    expect(await lastUsedAt(created.id)).toEqual(used)
  })
})

describe('createKeyUseRecorder', () => {
  it("writes a key's use again once its interval has passed since the last write", async () => {
    let nowMs = Date.parse('2030-01-01T00:00:00Z')
    const clock: Clock = { now: () => new Date(nowMs) }
    const recorder = createKeyUseRecorder({ db: t.db, log: t.log, clock }, { intervalMs: 60_000 })
    const created = await createApiKey(t.db, { tenant: 'acme' })
    recorder.record(created.id)
    nowMs += 59_999
    recorder.record(created.id)
    await recorder.settled()
    expect(await writesOf(created.id)).toBe(1)
    nowMs += 1
    recorder.record(created.id)
    recorder.record(created.id)
    await recorder.settled()
    expect(await writesOf(created.id)).toBe(2)
  })

  it('never throws when the write fails, and logs it at warn with the key id', async () => {
    const { log, lines } = capturingLogger<{ level: number; msg: string; keyId: string }>('info')
    const missing = createDb({ databaseUrl: t.url.replace(/\/[^/]+$/, '/no_such_database'), poolSize: 1, log: t.log })
    const created = await createApiKey(t.db, { tenant: 'acme' })
    const recorder = createKeyUseRecorder({ db: missing.db, log }, { intervalMs: 0 })
    expect(() => recorder.record(created.id)).not.toThrow()
    await recorder.settled()
    expect(lines).toEqual([expect.objectContaining({ level: 40, msg: 'recording an API key use failed', keyId: created.id })])
    expect(await lastUsedAt(created.id)).toBeNull()
    await missing.db.destroy()
  })
})

describe('apiKeyMarkUsed', () => {
  it('never moves a last use back in time, and leaves a revoked key as it was', async () => {
    const created = await createApiKey(t.db, { tenant: 'acme' })
    const later = new Date('2030-01-02T00:01:00Z')
    expect(await apiKeyMarkUsed(t.db, { id: created.id, now: later })).toBe(true)
    expect(await apiKeyMarkUsed(t.db, { id: created.id, now: new Date('2030-01-02T00:00:00Z') })).toBe(false)
    expect(await lastUsedAt(created.id)).toEqual(later)
    await apiKeyRevoke(t.db, { id: created.id })
    expect(await apiKeyMarkUsed(t.db, { id: created.id, now: new Date('2030-01-02T00:02:00Z') })).toBe(false)
    expect(await lastUsedAt(created.id)).toEqual(later)
  })
})
