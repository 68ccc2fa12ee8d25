/**
 * A retry or rerun adds a pending execution: a submit to the tenant's admission quotas, as a new
 * job is. They skipped the quotas, so a tenant at maxPending (or held at 0, closed until an operator
 * opens it) added work past it by retrying its jobs. Refused as a submit is, changing nothing: from
 * the client (QuotaExceededError), over REST (429 with Retry-After), in bulk and in SQL (53400).
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { QuotaExceededError } from '../../src/errors.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const api = useTestApi(t)

async function pending(tenant: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.due where tenant = ${tenant}`.execute(t.db)
  return rows[0]?.n ?? 0
}

/** Two cancelled jobs of `tenant`, then two pending ones: the tenant at its maxPending of 2. */
async function atQuota(tenant: string): Promise<[string, string]> {
  const c = createClient({ db: t.db, tenant })
  await c.tenants.update(tenant, { maxPending: 2 })
  const a = await c.submitJob({ type: 'noop' })
  const b = await c.submitJob({ type: 'noop' })
  await c.cancelJob(a.job.id)
  await c.cancelJob(b.job.id)
  await c.submitJob({ type: 'noop' })
  await c.submitJob({ type: 'noop' })
  await expect(c.submitJob({ type: 'noop' })).rejects.toBeInstanceOf(QuotaExceededError)
  return [a.job.id, b.job.id]
}

describe('a retry or rerun is held to the tenant’s quotas', () => {
  it('from the client: refused at maxPending, changing nothing, and taken once there is room', async () => {
    const c = createClient({ db: t.db, tenant: 'acme' })
    const [a, b] = await atQuota('acme')
    await expect(c.retryJob(a)).rejects.toMatchObject({ quota: 'maxPending', limit: 2 })
    await expect(c.rerunJob(b)).rejects.toBeInstanceOf(QuotaExceededError)
    expect(await pending('acme')).toBe(2)
    expect((await c.viewJob(a)).status).toBe('CANCELLED')
    await c.tenants.update('acme', { maxPending: 3 })
    expect((await c.retryJob(a)).status).toBe('SCHEDULED')
    expect(await pending('acme')).toBe(3)
  })

  it('over REST: 429 with Retry-After, for one job and in bulk', async () => {
    const [a] = await atQuota('rest')
    const key = await api.keyFor('rest')
    const one = await api.call(key, 'POST', `/v1/jobs/${a}/retry`)
    expect(one.statusCode, one.body).toBe(429)
    expect(one.headers['retry-after']).toBeDefined()
    const bulk = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { status: 'CANCELLED' } })
    expect(bulk.statusCode, bulk.body).toBe(429)
    expect(await pending('rest')).toBe(2)
  })

  it('in SQL: pgsched.retry_job refused with 53400', async () => {
    const [a] = await atQuota('sql')
    const c = new pg.Client({ connectionString: t.url })
    await c.connect()
    try {
      await expect(c.query('select pgsched.retry_job($1)', [a])).rejects.toMatchObject({ code: '53400' })
    } finally {
      await c.end()
    }
    expect(await pending('sql')).toBe(2)
  })
})
