/**
 * Security over real processes: keys made and revoked with the `scheduler
 * keys` CLI, a real `scheduler api` process logging at its most verbose
 * level, and HTTP traffic that goes through every authentication path
 * (missing, wrong, malformed, revoked and valid keys; another tenant's jobs).
 * Then no key, nor the secret part of one, may appear in what the API wrote
 * to stdout or stderr, nor anywhere in any row of any pgsched table (each row
 * read whole as text, so every column is scanned, bytea as hex too). The
 * status codes themselves are covered in depth by test/api/auth.test.ts and
 * test/api/jobs.test.ts; here they only prove that the traffic took each path.
 */
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { freePort, schedulerCli, startApiProcess, type ApiProcess } from './api-process.ts'

const t = useTestDb()
let api: ApiProcess | undefined

afterEach(async () => {
  if (api?.alive()) api.child.kill('SIGKILL')
  await api?.exited
})

/** Where `needle` occurs in any row of any table of schema pgsched: `table: count`. */
async function findInDatabase(needle: string): Promise<string[]> {
  const hex = Buffer.from(needle, 'utf8').toString('hex')
  const { rows: tables } = await sql<{ name: string }>`
    select tablename as name from pg_tables where schemaname = 'pgsched' order by tablename`.execute(t.db)
  expect(tables.map((x) => x.name)).toEqual(expect.arrayContaining(['api_keys', 'jobs', 'execution_history', 'due', 'runs', 'triggers', 'workers']))
  const found: string[] = []
  for (const { name } of tables) {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from ${sql.table(`pgsched.${name}`)} as r
       where position(${needle}::text in r::text) > 0 or position(${hex}::text in r::text) > 0`.execute(t.db)
    if ((rows[0]?.n ?? 0) > 0) found.push(`${name}: ${rows[0]?.n}`)
  }
  return found
}

describe('API keys over real processes', () => {
  it('never appear in the API process logs nor in clear in the database, through every authentication path', { timeout: 60_000 }, async () => {
    const acme = (await schedulerCli(t.url, ['keys', 'create', '--tenant', 'acme'])).trim()
    const globex = (await schedulerCli(t.url, ['keys', 'create', '--tenant', 'globex'])).trim()
    const revoked = (await schedulerCli(t.url, ['keys', 'create', '--tenant', 'acme', '--name', 'to revoke'])).trim()
    const listed = (JSON.parse(await schedulerCli(t.url, ['keys', 'list', '--json'])) as { items: Array<{ id: string; name: string | null }> }).items
    await schedulerCli(t.url, ['keys', 'revoke', listed.find((k) => k.name === 'to revoke')?.id as string])
    const wrong = `psk_${'Z'.repeat(43)}`
    const keys = { acme, globex, revoked, wrong }

    api = await startApiProcess({ databaseUrl: t.url, port: await freePort(), env: { LOG_LEVEL: 'trace' } })
    const call = async (key: string | null, method: string, path: string, body?: unknown) => {
      const headers: Record<string, string> = {}
      if (key !== null) headers.authorization = `Bearer ${key}`
      if (body !== undefined) headers['content-type'] = 'application/json'
      const res = await fetch(`${api?.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
      return { status: res.status, body: (await res.json()) as Record<string, unknown> }
    }

    const recurring = await call(acme, 'POST', '/v1/jobs', { type: 'report', schedule: { every: 'PT1H' }, idempotencyKey: 'acme-report' })
    const once = await call(acme, 'POST', '/v1/jobs', { type: 'email.send', payload: { to: 'someone' } })
    expect([recurring.status, once.status]).toEqual([202, 202])
    const id = recurring.body.id as string

    for (const key of [null, wrong, revoked, 'not-a-key', `${acme}x`]) {
      expect((await call(key, 'GET', '/v1/jobs')).status).toBe(401)
      expect((await call(key, 'POST', '/v1/jobs', { type: 'x' })).status).toBe(401)
      expect((await call(key, 'GET', `/v1/jobs/${id}`)).status).toBe(401)
      expect((await call(key, 'POST', `/v1/jobs/${id}/cancel`)).status).toBe(401)
    }
    expect((await call(globex, 'GET', `/v1/jobs/${id}`)).status).toBe(404)
    expect((await call(globex, 'GET', `/v1/jobs/${id}/executions`)).status).toBe(404)
    expect((await call(globex, 'POST', `/v1/jobs/${id}/cancel`)).status).toBe(404)
    expect((await call(globex, 'GET', '/v1/jobs')).body.items).toEqual([])
    // The owner still sees it untouched, and can act on it.
    expect((await call(acme, 'GET', `/v1/jobs/${id}`)).body).toMatchObject({ state: 'active', status: 'SCHEDULED' })
    expect((await call(acme, 'POST', `/v1/jobs/${id}/pause`)).status).toBe(200)
    // A key pasted into the URL instead of the header is refused without being echoed to the log.
    expect((await call(null, 'GET', `/v1/jobs?cursor=${acme}`)).status).toBe(401)
    expect((await call(acme, 'GET', `/v1/jobs/${acme}`)).status).toBe(400)

    api.child.kill('SIGTERM')
    expect(await api.exited).toEqual({ code: 0, signal: null })
    const logs = api.output()
    expect(logs).toContain('"msg":"request completed"')
    expect(logs).toContain('"statusCode":401')
    for (const [label, key] of Object.entries(keys)) {
      const secret = key.slice(12) // after the display prefix (psk_ + 8), which listings show by design
      expect(logs.includes(key) || logs.includes(secret), `${label} key in the API logs`).toBe(false)
      expect(await findInDatabase(secret), `${label} key in the database`).toEqual([])
    }
    // The scan does find what is there: the display prefix is stored, by design.
    expect(await findInDatabase(acme.slice(0, 12))).toEqual(['api_keys: 1'])
  })
})
