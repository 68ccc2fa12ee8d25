/**
 * POST /v1/jobs/bulk on 10,000 jobs: cancel, retry and delete, each repeated until nothing
 * remains, with exact counts checked against the database; the bounds of one call; and the
 * refusals of a bad request; and that a retry reads the candidates of its statuses, not every job.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { jobCountForAction, jobIdsForAction } from '../../src/db/queries/job-operations.ts'
import { jobRowsRead, useTestDb } from '../db.ts'
import { insertExecution, insertExecutions, setExecutionState } from '../factories.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

const JOBS = 10_000

/** Calls the bulk route until `remaining` is 0; returns each call's counts. */
async function untilDone(key: string, body: Record<string, unknown>) {
  const calls: Array<{ matched: number; changed: number; remaining: number }> = []
  for (;;) {
    const res = await api.call(key, 'POST', '/v1/jobs/bulk', body)
    expect(res.statusCode, res.body).toBe(200)
    calls.push(res.json())
    if (res.json().remaining === 0) return calls
    if (calls.length > 50) throw new Error('bulk calls did not finish')
  }
}

const count = async (where: ReturnType<typeof sql>) =>
  Number((await sql<{ n: string }>`select count(*)::text as n from pgsched.jobs j where ${where}`.execute(t.db)).rows[0]?.n)

describe('POST /v1/jobs/bulk', () => {
  it('retries each failed job once when a walk passes lastId as after, though retried jobs fail again between calls', async () => {
    const key = await api.keyFor('walk')
    const failed = await insertExecutions(t.db, 20, { state: 'failed', job: { tenant: 'walk', queue: 'walk' } })
    const jobIds = failed.map((e) => e.jobId)
    let after: string | undefined
    const calls: Array<{ matched: number; changed: number; remaining: number; lastId: string | null }> = []
    for (let i = 0; i < 10; i++) {
      const res = await api.call(key, 'POST', '/v1/jobs/bulk', {
        action: 'retry',
        filter: { queue: 'walk', status: 'FAILED' },
        limit: 6,
        ...(after ? { after } : {}),
      })
      expect(res.statusCode, res.body).toBe(200)
      const r = res.json()
      calls.push(r)
      after = r.lastId ?? after
      // every job this call retried fails again at once: it matches the filter again
      await setExecutionState(t.db, { jobIds, state: 'failed' })
      if (r.remaining === 0 || r.matched === 0) break
    }
    expect(calls.map((c) => c.changed)).toEqual([6, 6, 6, 2])
    expect(calls.map((c) => c.remaining)).toEqual([14, 8, 2, 0])
    // each job ran its retry once: two executions each, the first failure and the retry's
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where job_id = any(${jobIds}::uuid[]) group by job_id`.execute(
      t.db,
    )
    expect(rows.map((r) => r.n)).toEqual(Array(20).fill(2))
    // an after that is not a job id is refused
    const bad = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { queue: 'walk' }, after: 'x' })
    expect(bad.statusCode).toBe(400)
  })

  it('cancels, retries and deletes 10,000 jobs a thousand per call with exact counts, leaving another tenant alone', async () => {
    const key = await api.keyFor('acme')
    const acmeJobs = await insertExecutions(t.db, JOBS, { state: 'pending', job: { tenant: 'acme', queue: 'bulk' } })
    await insertExecutions(t.db, 300, { state: 'pending', job: { tenant: 'globex', queue: 'bulk' } })

    const cancels = await untilDone(key, { action: 'cancel', filter: { queue: 'bulk' } })
    expect(cancels.map((c) => c.changed)).toEqual(Array(10).fill(1000))
    expect(cancels.map((c) => c.remaining)).toEqual([9000, 8000, 7000, 6000, 5000, 4000, 3000, 2000, 1000, 0])
    expect(await count(sql`j.tenant = 'acme' and j.state = 'cancelled'`)).toBe(JOBS)
    expect(
      Number(
        (await sql<{ n: string }>`select count(*)::text as n from pgsched.executions where tenant = 'acme' and state = 'cancelled'`.execute(t.db)).rows[0]?.n,
      ),
    ).toBe(JOBS)
    expect(await count(sql`j.tenant = 'globex' and j.state = 'active'`)).toBe(300)

    // repeating a finished call is safe: nothing matches any more
    const repeat = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'cancel', filter: { queue: 'bulk' } })
    expect(repeat.json()).toEqual({ action: 'cancel', matched: 0, changed: 0, remaining: 0, lastId: null })

    const retries = await untilDone(key, { action: 'retry', filter: { queue: 'bulk', status: 'CANCELLED' }, limit: 1000 })
    expect(retries.reduce((n, c) => n + c.changed, 0)).toBe(JOBS)
    expect(retries.every((c) => c.matched === c.changed)).toBe(true)
    const pending = await sql<{ n: string }>`select count(*)::text as n from pgsched.executions where tenant = 'acme' and state = 'pending'`.execute(t.db)
    expect(Number(pending.rows[0]?.n)).toBe(JOBS)
    expect(await count(sql`j.tenant = 'acme' and j.state = 'active'`)).toBe(JOBS)

    // the workers finish them all; then delete
    expect(await setExecutionState(t.db, { jobIds: acmeJobs.map((j) => j.jobId), state: 'succeeded' })).toBe(2 * JOBS)
    const deletes = await untilDone(key, { action: 'delete', filter: { queue: 'bulk' } })
    expect(deletes.reduce((n, c) => n + c.changed, 0)).toBe(JOBS)
    expect(deletes.length).toBe(10)
    expect(await count(sql`j.tenant = 'acme'`)).toBe(0)
    const left = await sql<{ tenant: string; n: string }>`select tenant, count(*)::text as n from pgsched.executions group by tenant`.execute(t.db)
    expect(left.rows).toEqual([{ tenant: 'globex', n: '300' }])
  }, 120_000)

  it('acts on at most `limit` jobs, by ids or by error, and reports what is left', async () => {
    const key = await api.keyFor('initech')
    const failed = await insertExecutions(t.db, 5, {
      state: 'failed',
      error: { message: 'connection refused', name: 'NetError', attempt: 1 },
      job: { tenant: 'initech', queue: 'mail' },
    })
    await insertExecutions(t.db, 2, { state: 'failed', error: { message: 'other', name: 'NetError', attempt: 1 }, job: { tenant: 'initech', queue: 'mail' } })
    const first = await api.call(key, 'POST', '/v1/jobs/bulk', {
      action: 'retry',
      filter: { errorType: 'NetError', errorMessage: 'connection refused' },
      limit: 2,
    })
    expect(first.json()).toEqual({ action: 'retry', matched: 2, changed: 2, remaining: 3, lastId: expect.any(String) })
    const byIds = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { ids: failed.map((f) => f.jobId) } })
    expect(byIds.json()).toEqual({ action: 'retry', matched: 3, changed: 3, remaining: 0, lastId: expect.any(String) })
    const all = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { all: true } })
    expect(all.json()).toEqual({ action: 'retry', matched: 2, changed: 2, remaining: 0, lastId: expect.any(String) })
  })

  it('acts on a failures group whose message is longer than 4,000 characters, by the message GET /v1/failures gives', async () => {
    const key = await api.keyFor('umbrella')
    const message = `${'stack frame; '.repeat(400)}end` // 5,203 characters
    const failed = await insertExecutions(t.db, 3, {
      state: 'failed',
      error: { message, name: 'LongError', attempt: 1 },
      job: { tenant: 'umbrella', queue: 'long' },
    })
    const groups = (await api.call(key, 'GET', '/v1/failures?queue=long')).json().items as Array<{ errorType: string; message: string; count: number }>
    const group = groups.find((g) => g.errorType === 'LongError')
    expect(group?.message).toBe(message)
    const listed = await api.call(key, 'GET', `/v1/jobs?${new URLSearchParams({ errorType: 'LongError', errorMessage: message })}`)
    expect(listed.statusCode, listed.body.slice(0, 200)).toBe(200)
    expect(
      listed
        .json()
        .items.map((j: { id: string }) => j.id)
        .sort(),
    ).toEqual(failed.map((f) => f.jobId).sort())
    const retried = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { errorType: 'LongError', errorMessage: group?.message } })
    expect(retried.statusCode, retried.body.slice(0, 200)).toBe(200)
    expect(retried.json()).toEqual({ action: 'retry', matched: 3, changed: 3, remaining: 0, lastId: expect.any(String) })
  })

  it('lists and acts on the failures groups of an empty message (throw new Error()) and of a long error name, as GET /v1/failures gives them', async () => {
    const key = await api.keyFor('groups')
    const name = `${'Very'.repeat(75)}Error` // 305 characters
    const empty = await insertExecutions(t.db, 2, { state: 'failed', error: { message: '', name: 'Error', attempt: 1 }, job: { tenant: 'groups' } })
    await insertExecution(t.db, { state: 'failed', error: { message: 'other', name: 'Error', attempt: 1 }, job: { tenant: 'groups' } })
    const long = await insertExecution(t.db, { state: 'failed', error: { message: 'x', name, attempt: 1 }, job: { tenant: 'groups' } })
    const groups = (await api.call(key, 'GET', '/v1/failures')).json().items as Array<{ errorType: string; message: string; count: number }>
    expect(groups).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ errorType: 'Error', message: '', count: 2 }),
        expect.objectContaining({ errorType: name, message: 'x', count: 1 }),
      ]),
    )
    const listed = await api.call(key, 'GET', '/v1/jobs?errorType=Error&errorMessage=')
    expect(listed.statusCode, listed.body).toBe(200)
    expect(
      listed
        .json()
        .items.map((j: { id: string }) => j.id)
        .sort(),
    ).toEqual(empty.map((e) => e.jobId).sort())
    const retried = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { errorType: 'Error', errorMessage: '' } })
    expect(retried.statusCode, retried.body).toBe(200)
    expect(retried.json()).toMatchObject({ matched: 2, changed: 2 })
    const byName = await api.call(key, 'POST', '/v1/jobs/bulk', { action: 'retry', filter: { errorType: name, errorMessage: 'x' } })
    expect(byName.statusCode, byName.body).toBe(200)
    expect(byName.json()).toMatchObject({ matched: 1, changed: 1, lastId: long.jobId })
  })

  it('refuses an empty filter, a bad action, a limit over 1000 and more than 1000 ids, naming the field', async () => {
    const key = await api.keyFor('acme')
    const cases: Array<[unknown, string]> = [
      [{ action: 'cancel', filter: {} }, 'filter'],
      [{ action: 'cancel', filter: { all: false } }, 'filter'],
      [{ action: 'explode', filter: { all: true } }, 'action'],
      [{ action: 'cancel', filter: { all: true }, limit: 1001 }, 'limit'],
      [{ action: 'cancel', filter: { ids: Array.from({ length: 1001 }, () => '00000000-0000-7000-8000-000000000001') } }, 'filter.ids'],
      [{ action: 'cancel', filter: { createdAfter: 'yesterday' } }, 'filter.createdAfter'],
    ]
    for (const [body, path] of cases) {
      const res = await api.call(key, 'POST', '/v1/jobs/bulk', body)
      expect(res.statusCode, JSON.stringify(body).slice(0, 80)).toBe(400)
      expect(res.json().details?.map((d: { path: string }) => d.path) ?? [], JSON.stringify(res.json())).toContain(path)
    }
  })

  it('lets an operator key act on every tenant, or on one named by filter.tenant', async () => {
    const operator = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    await insertExecutions(t.db, 3, { state: 'pending', job: { tenant: 'umbrella', queue: 'op' } })
    await insertExecutions(t.db, 4, { state: 'pending', job: { tenant: 'hooli', queue: 'op' } })
    const one = await api.call(operator, 'POST', '/v1/jobs/bulk', { action: 'cancel', filter: { queue: 'op', tenant: 'hooli' } })
    expect(one.json()).toEqual({ action: 'cancel', matched: 4, changed: 4, remaining: 0, lastId: expect.any(String) })
    const rest = await api.call(operator, 'POST', '/v1/jobs/bulk', { action: 'cancel', filter: { queue: 'op' } })
    expect(rest.json()).toEqual({ action: 'cancel', matched: 3, changed: 3, remaining: 0, lastId: expect.any(String) })
  })
})

describe('the jobs a bulk call reads', () => {
  it('retry reads the candidates of its statuses and counts a job with several failed runs once', async () => {
    const client = createClient({ db: t.db, tenant: 'cand' })
    await client.submitJobs(Array.from({ length: 2_000 }, () => ({ type: 'x' })))
    const error = { message: 'refused', name: 'NetError', attempt: 1 }
    const { jobId: twice } = await insertExecution(t.db, { state: 'failed', error, scheduledFor: new Date(Date.now() - 2_000), job: { tenant: 'cand' } })
    await insertExecution(t.db, { jobId: twice, state: 'failed', error, scheduledFor: new Date(Date.now() - 1_000) })
    const { jobId: expired } = await insertExecution(t.db, { state: 'failed', attempt: 0, error, job: { tenant: 'cand' } })
    const cancelled = (await client.submitJob({ type: 'x', schedule: { at: new Date(Date.now() + 3_600_000) } })).job.id
    await client.cancelJob(cancelled)
    await sql`analyze`.execute(t.db)
    const one = createDb({ databaseUrl: t.url, poolSize: 1 })
    try {
      const filter = { tenant: 'cand' }
      const before = await jobRowsRead(one.db)
      expect(await jobIdsForAction(one.db, { filter, action: 'retry', limit: 10 })).toEqual([twice, expired, cancelled].sort())
      expect(await jobCountForAction(one.db, { filter, action: 'retry' })).toBe(3)
      expect(await jobCountForAction(one.db, { filter: { ...filter, status: 'EXPIRED' }, action: 'retry' })).toBe(1)
      expect((await jobRowsRead(one.db)) - before).toBeLessThan(100)
      // an action with a status that has no candidates reads the jobs (COMPLETED: delete)
      expect(await jobCountForAction(one.db, { filter, action: 'delete' })).toBe(3)
    } finally {
      await one.db.destroy()
    }
  })
})
