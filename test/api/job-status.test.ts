/**
 * The status model (core/job-status.ts): a recurring job's `status` is its
 * lifecycle — SCHEDULED while the schedule fires, whatever its last run did —
 * and its last run's outcome is `lastRun.status`; once the schedule has
 * ended, COMPLETED or FAILED after that outcome. The `status` list filter
 * (SQL) agrees with the status each job reads.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { FatalError } from '../../src/errors.ts'
import { TriggerScheduler } from '../../src/maintenance/trigger-scheduler.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { jobReads, useTestDb } from '../db.ts'
import { insertExecution, insertExecutions, insertJob, insertTrigger } from '../factories.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from '../worker/harness.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)
const startWorker = useWorkers(t)

interface JobJson {
  id: string
  status: string
  state: string
  nextRunAt: string | null
  lastRun: { status: string; attempt: number } | null
}

const handlers = [
  defineHandler('tick.ok', async () => ({ ok: true })),
  defineHandler('tick.fail', async () => {
    throw new FatalError('tick failed')
  }),
]

describe('the status of a recurring job', () => {
  it('reads SCHEDULED after a successful run and after a failed one while it keeps firing, with the outcome in lastRun', async () => {
    const key = await api.keyFor('acme')
    await startWorker(handlers)
    const dispatcher = new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000 })
    const submit = async (type: string) => (await api.call(key, 'POST', '/v1/jobs', { type, schedule: { every: '1h' }, maxAttempts: 1 })).json<JobJson>()
    const ok = await submit('tick.ok')
    const failing = await submit('tick.fail')
    expect(ok).toMatchObject({ status: 'SCHEDULED', lastRun: null })
    await dispatcher.runOnce()
    const view = async (id: string) => (await api.call(key, 'GET', `/v1/jobs/${id}`)).json<JobJson>()
    const afterRun = async (id: string, outcome: string) =>
      waitFor(
        async () => {
          const v = await view(id)
          return v.lastRun?.status === outcome ? v : null
        },
        { what: `job ${id}'s first run to end ${outcome}`, timeoutMs: 30_000 },
      )
    const succeeded = await afterRun(ok.id, 'SUCCEEDED')
    expect(succeeded).toMatchObject({ status: 'SCHEDULED', state: 'active', lastRun: { status: 'SUCCEEDED', attempt: 1 } })
    expect(Date.parse(succeeded.nextRunAt ?? '')).toBeGreaterThan(Date.now() + 50 * 60_000)
    const failed = await afterRun(failing.id, 'FAILED')
    expect(failed).toMatchObject({ status: 'SCHEDULED', state: 'active', lastRun: { status: 'FAILED', attempt: 1 } })

    const listed = async (status: string) =>
      ((await api.call(key, 'GET', `/v1/jobs?status=${status}`)).json() as { items: JobJson[] }).items.map((j) => j.id).sort()
    expect(await listed('SCHEDULED')).toEqual([ok.id, failing.id].sort())
    expect(await listed('COMPLETED')).toEqual([])
    expect(await listed('FAILED')).toEqual([])
  })

  it('reads COMPLETED or FAILED after the outcome of its last run once the schedule has ended', async () => {
    const key = await api.keyFor('acme')
    await startWorker(handlers)
    const dispatcher = new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000 })
    const endAt = new Date(Date.now() + 1500).toISOString()
    const submit = async (type: string) => (await api.call(key, 'POST', '/v1/jobs', { type, schedule: { every: '1s' }, endAt, maxAttempts: 1 })).json<JobJson>()
    const ok = await submit('tick.ok')
    const failing = await submit('tick.fail')
    const ended = async (id: string) =>
      waitFor(
        async () => {
          await dispatcher.runOnce()
          const v = (await api.call(key, 'GET', `/v1/jobs/${id}`)).json<JobJson>()
          return v.status !== 'SCHEDULED' && v.status !== 'RUNNING' ? v : null
        },
        { what: `job ${id}'s schedule to end`, timeoutMs: 30_000 },
      )
    expect(await ended(ok.id)).toMatchObject({ status: 'COMPLETED', nextRunAt: null, lastRun: { status: 'SUCCEEDED' } })
    expect(await ended(failing.id)).toMatchObject({ status: 'FAILED', nextRunAt: null, lastRun: { status: 'FAILED' } })
    const listed = async (status: string) => ((await api.call(key, 'GET', `/v1/jobs?status=${status}`)).json() as { items: JobJson[] }).items.map((j) => j.id)
    expect(await listed('COMPLETED')).toEqual([ok.id])
    expect(await listed('FAILED')).toEqual([failing.id])
    expect(await listed('SCHEDULED')).toEqual([])
  })

  it("reads SCHEDULED, not COMPLETED, while the last fire time's execution, created ahead of it, waits for it", async () => {
    const key = await api.keyFor('acme')
    // one fire time, 2 s from now: the dispatcher (ahead by 3 s, as by default by 1 s) creates its
    // execution now and the schedule has no fire time left after it
    const fireAt = new Date(Math.ceil((Date.now() + 2000) / 1000) * 1000)
    const job = (
      await api.call(key, 'POST', '/v1/jobs', {
        type: 'last.one',
        schedule: { every: '1h' },
        startAt: fireAt.toISOString(),
        endAt: new Date(fireAt.getTime() + 1000).toISOString(),
      })
    ).json<JobJson>()
    const dispatcher = new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000, aheadMs: 3000 })
    await dispatcher.runOnce()
    const { rows } = await sql<{ next_fire_at: Date | null; ahead: number }>`
      select t.next_fire_at, (select count(*)::int from pgsched.due d where d.job_id = t.job_id) as ahead
        from pgsched.triggers t where t.job_id = ${job.id}::uuid`.execute(t.db)
    // (the premise: the execution exists ahead and the trigger has nothing more)
    expect(rows).toEqual([{ next_fire_at: null, ahead: 1 }])
    expect((await api.call(key, 'GET', `/v1/jobs/${job.id}`)).json()).toMatchObject({
      status: 'SCHEDULED',
      nextRunAt: fireAt.toISOString(),
      lastRun: null,
    })
    const listed = async (status: string) => ((await api.call(key, 'GET', `/v1/jobs?status=${status}`)).json() as { items: JobJson[] }).items.map((j) => j.id)
    expect(await listed('SCHEDULED')).toEqual([job.id])
    expect(await listed('COMPLETED')).toEqual([])
  })

  it('reads PAUSED while paused and CANCELLED once cancelled, and a one-time job SCHEDULED until its run ends', async () => {
    const key = await api.keyFor('acme')
    const recurring = (await api.call(key, 'POST', '/v1/jobs', { type: 'later', schedule: { cron: '0 9 * * *' } })).json<JobJson>()
    expect((await api.call(key, 'POST', `/v1/jobs/${recurring.id}/pause`)).json()).toMatchObject({ status: 'PAUSED' })
    expect((await api.call(key, 'POST', `/v1/jobs/${recurring.id}/cancel`)).json()).toMatchObject({ status: 'CANCELLED', lastRun: null })
    const once = (await api.call(key, 'POST', '/v1/jobs', { type: 'later', schedule: { at: '2031-01-01T00:00:00Z' } })).json<JobJson>()
    expect(once).toMatchObject({ status: 'SCHEDULED', lastRun: { status: 'PENDING', attempt: 0 } })
    expect((await api.call(key, 'GET', `/v1/jobs/${once.id}`)).json()).toMatchObject({ status: 'SCHEDULED', lastRun: { status: 'PENDING' } })
    expect((await api.call(key, 'GET', '/v1/jobs?status=CANCELLED')).json().items.map((j: JobJson) => j.id)).toEqual([recurring.id])
  })
})

describe('the SCHEDULED filter', () => {
  it('reads the jobs with a pending execution or a firing schedule, not every job, and pages through them', async () => {
    const tenant = 'plans'
    const client = createClient({ db: t.db, tenant })
    await insertExecutions(t.db, 20_000, { state: 'succeeded', job: { tenant } })
    const hour = 3_600_000
    const later = (await client.submitJob({ type: 'x', schedule: { at: new Date(Date.now() + hour) } })).job.id
    const firing = (await insertTrigger(t.db, { job: { tenant }, nextFireAt: new Date(Date.now() + hour) })).jobId
    // a recurring job with a pending run and a firing schedule: listed once
    const both = (await insertTrigger(t.db, { job: { tenant }, nextFireAt: new Date(Date.now() + hour) })).jobId
    await insertExecution(t.db, { jobId: both, state: 'pending', runAt: new Date(Date.now() + 60_000) })
    await insertExecution(t.db, { jobId: both, state: 'pending', runAt: new Date(Date.now() + 70_000) })
    // a retry waiting for its backoff
    const error = { message: 'refused', name: 'NetError', attempt: 1 }
    const retrying = (await insertExecution(t.db, { state: 'pending', attempt: 1, error, runAt: new Date(Date.now() + 60_000), job: { tenant } })).jobId
    // not SCHEDULED: running; a schedule that ended; a schedule that stopped; paused; another tenant's
    const running = (await insertExecution(t.db, { state: 'running', job: { tenant } })).jobId
    await insertTrigger(t.db, { job: { tenant }, nextFireAt: null })
    const stopped = (await insertTrigger(t.db, { job: { tenant }, nextFireAt: null })).jobId
    await sql`update pgsched.triggers set error = 'bad schedule' where job_id = ${stopped}::uuid`.execute(t.db)
    const paused = (await insertTrigger(t.db, { job: { tenant, state: 'paused' }, nextFireAt: new Date(Date.now() + hour) })).jobId
    await insertExecution(t.db, { jobId: paused, state: 'pending', runAt: new Date(Date.now() + 60_000) })
    await insertExecution(t.db, { state: 'pending', job: { tenant: 'elsewhere' } })
    // a job with neither an execution nor a schedule (written with SQL alone): nothing to come
    const bare = (await insertJob(t.db, { tenant })).id
    await sql`analyze`.execute(t.db)

    const expected = [later, firing, both, retrying].sort().reverse()
    const one = createDb({ databaseUrl: t.url, poolSize: 1 })
    const reader = createClient({ db: one.db, tenant })
    try {
      const before = await jobReads(one.db)
      const page = await reader.listJobs({ status: 'SCHEDULED' })
      const reads = { rows: (await jobReads(one.db)).rows - before.rows, indexScans: (await jobReads(one.db)).indexScans - before.indexScans }
      expect(page.items.map((j) => j.id)).toEqual(expected)
      expect(page.items.every((j) => j.status === 'SCHEDULED')).toBe(true)
      // each candidate is looked up by id: a few reads, not the 20,000 finished jobs
      expect(reads.rows, JSON.stringify(reads)).toBeLessThan(100)
      // pages of two: the same jobs, each once, newest first
      const paged: string[] = []
      let cursor: string | undefined
      do {
        const p = await reader.listJobs({ status: 'SCHEDULED', limit: 2, cursor })
        paged.push(...p.items.map((j) => j.id))
        cursor = p.nextCursor ?? undefined
      } while (cursor)
      expect(paged).toEqual(expected)
    } finally {
      await one.db.destroy()
    }
    const status = async (id: string) => (await client.viewJob(id)).status
    expect(await status(running)).toBe('RUNNING')
    expect(await status(stopped)).toBe('FAILED')
    expect(await status(paused)).toBe('PAUSED')
    expect(await status(bare)).toBe('COMPLETED')
    expect((await client.listJobs({ status: 'COMPLETED', limit: 1 })).items.map((j) => j.id)).toEqual([bare])
  })
})
