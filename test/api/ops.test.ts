import { copyFile, mkdtemp, readdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { buildApp } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { createDb } from '../../src/db/pool.ts'
import { packageRoot } from '../../src/lib/package-root.ts'
import { useTestDb } from '../db.ts'
import { setExecutionState, startExecutions } from '../factories.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t, { queueDepthCacheMs: 60_000 })

/** The value of one sample line of Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe('/healthz and /readyz', () => {
  it('are up and ready with a migrated database', async () => {
    expect((await api.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' })
    const ready = await api.app.inject({ method: 'GET', url: '/readyz' })
    expect(ready.statusCode).toBe(200)
    expect(ready.json()).toEqual({ status: 'ready' })
  })

  it('is not ready while a migration is pending', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pgsched-migrations-'))
    const source = join(packageRoot(), 'migrations')
    for (const file of await readdir(source)) await copyFile(join(source, file), join(dir, file))
    await writeFile(join(dir, '9999_future.sql'), 'select 1;')
    const app = buildApp({ db: t.db, log: t.log, migrationsDir: dir })
    try {
      const res = await app.inject({ method: 'GET', url: '/readyz' })
      expect(res.statusCode).toBe(503)
      expect(res.json()).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'migrations pending: 9999_future; run "scheduler migrate"',
      })
    } finally {
      await app.close()
    }
  })

  it('is not ready, and /v1 answers 503, when the database is unreachable', async () => {
    const { db } = createDb({ databaseUrl: 'postgres://postgres@127.0.0.1:1/none', poolSize: 1 })
    const app = buildApp({ db, log: t.log })
    try {
      const ready = await app.inject({ method: 'GET', url: '/readyz' })
      expect(ready.statusCode).toBe(503)
      expect(ready.json().message).toBe('the database is not reachable')
      expect(ready.headers['retry-after']).toBe('5')
      const res = await app.inject({ method: 'GET', url: '/v1/jobs', headers: { authorization: `Bearer psk_${'B'.repeat(43)}` } })
      expect(res.statusCode).toBe(503)
      expect(res.headers['retry-after']).toBe('5')
      expect(res.json()).toEqual({ statusCode: 503, error: 'Service Unavailable', message: 'the database is not reachable; retry later' })
    } finally {
      await app.close()
      await db.destroy()
    }
  })
})

describe('a read-only database (a standby, or the window of a failover)', () => {
  it('is not ready, and a submit answers 503 with Retry-After, not 500', async () => {
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    // Every transaction of this pool starts read-only, as on a standby.
    const url = new URL(t.url)
    url.searchParams.set('options', '-c default_transaction_read_only=on')
    const { db } = createDb({ databaseUrl: url.toString(), poolSize: 2 })
    const app = buildApp({ db, log: t.log })
    try {
      const ready = await app.inject({ method: 'GET', url: '/readyz' })
      expect(ready.statusCode).toBe(503)
      expect(ready.json().message).toBe('the database is read-only (a standby, or a failover in progress); retry later')
      expect(ready.headers['retry-after']).toBe('5')
      const res = await app.inject({
        method: 'POST',
        url: '/v1/jobs',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        payload: { type: 'x' },
      })
      expect(res.statusCode).toBe(503)
      expect(res.headers['retry-after']).toBe('5')
      expect(res.json()).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'the database is read-only (a standby, or a failover in progress); retry later',
      })
      const { count } = await t.db
        .selectFrom('pgsched.jobs')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .executeTakeFirstOrThrow()
      expect(Number(count)).toBe(0)
    } finally {
      await app.close()
      await db.destroy()
    }
  })
})

describe('/metrics', () => {
  it('counts requests by route and status, submitted jobs, and queue depth from the database (cached)', async () => {
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    for (const queue of ['mail', 'mail', 'reports']) {
      expect((await api.call(key, 'POST', '/v1/jobs', { type: 'x', queue })).statusCode).toBe(202)
    }
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'x', queue: 'mail', idempotencyKey: 'once' })).statusCode).toBe(202)
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'x', queue: 'mail', idempotencyKey: 'once' })).statusCode).toBe(200)
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'x', priority: 'high' })).statusCode).toBe(400)
    expect((await api.call(key, 'GET', '/v1/jobs/01900000-0000-7000-8000-000000000000')).statusCode).toBe(404)
    // A running execution counts under state="running".
    expect(await startExecutions(t.db, { queue: 'reports', workerId: '01900000-0000-7000-8000-0000000000aa' })).toBe(1)

    const res = await api.app.inject({ method: 'GET', url: '/metrics' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('text/plain')
    const text = res.body
    expect(sample(text, 'pgsched_http_requests_total{method="POST",route="/v1/jobs",status_code="202"}')).toBe(4)
    expect(sample(text, 'pgsched_http_requests_total{method="POST",route="/v1/jobs",status_code="200"}')).toBe(1)
    expect(sample(text, 'pgsched_http_requests_total{method="POST",route="/v1/jobs",status_code="400"}')).toBe(1)
    expect(sample(text, 'pgsched_http_requests_total{method="GET",route="/v1/jobs/:id",status_code="404"}')).toBe(1)
    expect(sample(text, 'pgsched_http_request_duration_seconds_count{method="POST",route="/v1/jobs",status_code="202"}')).toBe(4)
    expect(sample(text, 'pgsched_jobs_submitted_total{queue="mail"}')).toBe(3)
    expect(sample(text, 'pgsched_jobs_submitted_total{queue="reports"}')).toBe(1)
    expect(sample(text, 'pgsched_queue_depth{queue="mail",state="pending"}')).toBe(3)
    expect(sample(text, 'pgsched_queue_depth{queue="reports",state="running"}')).toBe(1)
    expect(text).toContain('process_cpu_user_seconds_total')

    // Within the cache period the depth is not read again.
    await api.call(key, 'POST', '/v1/jobs', { type: 'x', queue: 'mail' })
    const cached = (await api.app.inject({ method: 'GET', url: '/metrics' })).body
    expect(sample(cached, 'pgsched_queue_depth{queue="mail",state="pending"}')).toBe(3)
    expect(sample(cached, 'pgsched_jobs_submitted_total{queue="mail"}')).toBe(4)
  })

  it('reads the depth again once the cache period has passed, reporting emptied queues as 0', async () => {
    const app = buildApp({ db: t.db, log: t.log, queueDepthCacheMs: 0 })
    try {
      const key = (await createApiKey(t.db, { tenant: 'acme' })).key
      const auth = { authorization: `Bearer ${key}` }
      await app.inject({ method: 'POST', url: '/v1/jobs', headers: auth, payload: { type: 'x', queue: 'q' } })
      const first = (await app.inject({ method: 'GET', url: '/metrics' })).body
      expect(sample(first, 'pgsched_queue_depth{queue="q",state="pending"}')).toBe(1)
      const { rows: jobs } = await sql<{ id: string }>`select id from pgsched.jobs`.execute(t.db)
      expect(await setExecutionState(t.db, { jobIds: jobs.map((j) => j.id), state: 'cancelled' })).toBe(1)
      const second = (await app.inject({ method: 'GET', url: '/metrics' })).body
      expect(sample(second, 'pgsched_queue_depth{queue="q",state="pending"}')).toBe(0)
    } finally {
      await app.close()
    }
  })
})

describe('request ids', () => {
  it('echoes a plain X-Request-Id and makes one otherwise', async () => {
    const given = await api.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'abc-123' } })
    expect(given.headers['x-request-id']).toBe('abc-123')
    const made = await api.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id\twith spaces' } })
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
  })
})
