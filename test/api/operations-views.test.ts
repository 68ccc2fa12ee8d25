/**
 * The dashboard's reads: GET /v1/workers, /v1/schedules, /v1/failures, /v1/stats, the new
 * GET /v1/jobs filters, /v1/jobs/export as CSV and JSON, and GET /v1/queues for a tenant key.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { failureGroupList } from '../../src/db/queries/failures.ts'
import { workerRegister } from '../../src/db/queries/workers.ts'
import { jobReads, useTestDb } from '../db.ts'
import { insertExecution, insertExecutions, insertTrigger, msAgo } from '../factories.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

/** RFC 4180 rows of a CSV text. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let field = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"'
        i++
      } else if (c === '"') quoted = false
      else field += c
    } else if (c === '"') quoted = true
    else if (c === ',') {
      row.push(field)
      field = ''
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field)
      rows.push(row)
      row = []
      field = ''
      i++
    } else field += c
  }
  return rows
}

describe('GET /v1/workers', () => {
  it('lists workers as alive (seen within their own lease length), stale or stopped with what they hold, to any key', async () => {
    const key = await api.keyFor('acme')
    const alive = '00000000-0000-7000-8000-00000000d001'
    const stale = '00000000-0000-7000-8000-00000000d002'
    const stopped = '00000000-0000-7000-8000-00000000d003'
    const longLease = '00000000-0000-7000-8000-00000000d004'
    const beforeLeases = '00000000-0000-7000-8000-00000000d005'
    for (const id of [alive, stale, stopped])
      await workerRegister(t.db, { id, host: 'h1', pid: 42, queues: ['default'], types: ['noop'], concurrency: 4, leaseMs: 30_000 })
    await workerRegister(t.db, { id: longLease, host: 'h1', pid: 43, queues: ['default'], types: ['noop'], concurrency: 4, leaseMs: 120_000 })
    await workerRegister(t.db, { id: beforeLeases, host: 'h1', pid: 44, queues: ['default'], types: ['noop'], concurrency: 4, leaseMs: 30_000 })
    // killed 40 s ago: past a 30 s lease, within a 120 s one; a row from before migration 0053 (no lease length) has 60 s
    await t.db
      .updateTable('pgsched.workers')
      .set({ last_seen_at: msAgo(40_000) })
      .where('id', 'in', [stale, longLease, beforeLeases])
      .execute()
    await t.db.updateTable('pgsched.workers').set({ lease_ms: null }).where('id', '=', beforeLeases).execute()
    await t.db.updateTable('pgsched.workers').set({ stopped_at: new Date() }).where('id', '=', stopped).execute()
    await insertExecution(t.db, { state: 'running', workerId: alive, job: { tenant: 'globex' } })

    const res = await api.call(key, 'GET', '/v1/workers')
    expect(res.statusCode).toBe(200)
    const byId = new Map(res.json().items.map((w: { id: string }) => [w.id, w]))
    expect(byId.get(alive)).toMatchObject({
      state: 'alive',
      inFlight: 1,
      // registered, no heartbeat yet: not reported
      running: null,
      host: 'h1',
      pid: 42,
      queues: ['default'],
      types: ['noop'],
      concurrency: 4,
      stoppedAt: null,
    })
    expect(byId.get(stale)).toMatchObject({ state: 'stale', inFlight: 0 })
    expect(byId.get(longLease)).toMatchObject({ state: 'alive' })
    expect(byId.get(beforeLeases)).toMatchObject({ state: 'alive' })
    expect(byId.get(stopped)).toMatchObject({ state: 'stopped', stoppedAt: expect.any(String) })
  })
})

describe('GET /v1/schedules', () => {
  it('lists recurring jobs with their next five fire times and their latest run', async () => {
    const key = await api.keyFor('sched')
    const client = createClient({ db: t.db, tenant: 'sched' })
    const cron = (await client.submitJob({ type: 'report', schedule: { cron: '0 9 * * *', timezone: 'Europe/Berlin' } })).job
    const every = (await client.submitJob({ type: 'tick', schedule: { every: '90s' } })).job
    const paused = (await client.submitJob({ type: 'tick', schedule: { every: '1h' } })).job
    await client.pauseJob(paused.id)
    await client.submitJob({ type: 'once' })

    const res = await api.call(key, 'GET', '/v1/schedules?limit=2')
    expect(res.statusCode).toBe(200)
    const page2 = await api.call(key, 'GET', `/v1/schedules?cursor=${res.json().nextCursor}`)
    const items = [...res.json().items, ...page2.json().items]
    expect(page2.json().nextCursor).toBeNull()
    expect(items.map((s: { jobId: string }) => s.jobId)).toEqual([cron.id, every.id, paused.id])

    const [c, e, p] = items
    expect(c).toMatchObject({ kind: 'cron', schedule: '0 9 * * *', timezone: 'Europe/Berlin', paused: false, lastRun: null })
    expect(c.nextFireTimes).toHaveLength(5)
    for (const at of c.nextFireTimes) {
      expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(new Date(at))).toBe('09:00')
    }
    expect(e).toMatchObject({ kind: 'interval', schedule: '90s', intervalMs: 90_000 })
    const times = e.nextFireTimes.map((s: string) => Date.parse(s))
    expect(times.slice(1).map((x: number, i: number) => x - (times[i] as number))).toEqual([90_000, 90_000, 90_000, 90_000])
    expect(p).toMatchObject({ schedule: '1h', paused: true, nextFireTimes: [] })
    expect(items.map((s: { state: string; error: string | null }) => [s.state, s.error])).toEqual([
      ['active', null],
      ['active', null],
      ['paused', null],
    ])
  })

  it("lists one job's schedule alone with jobId, and none for a one-time job or another tenant's", async () => {
    const key = await api.keyFor('one-sched')
    const client = createClient({ db: t.db, tenant: 'one-sched' })
    const first = (await client.submitJob({ type: 'tick', schedule: { every: '1h' } })).job
    const wanted = (await client.submitJob({ type: 'report', schedule: { cron: '0 9 * * *', timezone: 'Europe/Berlin' } })).job
    const once = (await client.submitJob({ type: 'once' })).job
    const theirs = (await createClient({ db: t.db, tenant: 'one-sched-other' }).submitJob({ type: 'tick', schedule: { every: '1h' } })).job

    // with limit=1 the first page holds the other schedule: the filter is no search of one page
    expect((await api.call(key, 'GET', '/v1/schedules?limit=1')).json().items.map((s: { jobId: string }) => s.jobId)).toEqual([first.id])
    const res = await api.call(key, 'GET', `/v1/schedules?limit=1&jobId=${wanted.id}`)
    expect(res.statusCode).toBe(200)
    expect(res.json().nextCursor).toBeNull()
    expect(res.json().items).toHaveLength(1)
    expect(res.json().items[0]).toMatchObject({ jobId: wanted.id, kind: 'cron', schedule: '0 9 * * *' })
    expect(res.json().items[0].nextFireTimes).toHaveLength(5)
    expect((await client.listSchedules({ jobId: wanted.id })).items.map((s) => s.jobId)).toEqual([wanted.id])

    expect((await api.call(key, 'GET', `/v1/schedules?jobId=${once.id}`)).json()).toEqual({ items: [], nextCursor: null })
    expect((await api.call(key, 'GET', `/v1/schedules?jobId=${theirs.id}`)).json()).toEqual({ items: [], nextCursor: null })
    const bad = await api.call(key, 'GET', '/v1/schedules?jobId=nope')
    expect(bad.statusCode).toBe(400)
    await expect(client.listSchedules({ jobId: 'nope' })).rejects.toThrow('jobId must be a UUID')
  })

  it('tells a cancelled schedule and one stopped by an error from one that ended', async () => {
    const key = await api.keyFor('stopped')
    const client = createClient({ db: t.db, tenant: 'stopped' })
    const cancelled = (await client.submitJob({ type: 'tick', schedule: { every: '1h' } })).job
    await client.cancelJob(cancelled.id)
    const ended = (await client.submitJob({ type: 'tick', schedule: { every: '1h' }, endAt: new Date(Date.now() + 1_000) })).job
    const broken = (await client.submitJob({ type: 'tick', schedule: { every: '1h' } })).job
    // as the dispatcher records a schedule whose fire times cannot be computed, and one past its end
    await sql`update pgsched.triggers set next_fire_at = null, error = 'cron "0 9 * * *" in time zone "Mars/Olympus" is invalid'
               where job_id = ${broken.id}`.execute(t.db)
    await sql`update pgsched.triggers set next_fire_at = null where job_id = ${ended.id}`.execute(t.db)
    const items = (await api.call(key, 'GET', '/v1/schedules')).json<{ items: Array<Record<string, unknown>> }>().items
    const of = (id: string) => items.find((i) => i.jobId === id)
    expect(of(cancelled.id)).toMatchObject({ state: 'cancelled', error: null, nextFireTimes: [] })
    expect(of(ended.id)).toMatchObject({ state: 'active', error: null, nextFireTimes: [] })
    expect(of(broken.id)).toMatchObject({ state: 'active', error: 'cron "0 9 * * *" in time zone "Mars/Olympus" is invalid', nextFireTimes: [] })
    expect((await client.viewJob(broken.id)).status).toBe('FAILED')
  })
})

describe('recurring jobs after an outage (no dispatcher ran since their next fire time)', () => {
  it('shows as next what each misfire policy will run: skip none of the missed fire times, fire_once the latest, fire_all the oldest kept', async () => {
    const key = await api.keyFor('outage')
    const client = createClient({ db: t.db, tenant: 'outage' })
    const submit = async (misfirePolicy: 'skip' | 'fire_once' | 'fire_all') =>
      (await client.submitJob({ type: 'tick', schedule: { every: '10m' }, misfirePolicy, misfireMaxRuns: 2 })).job
    const [skip, once, all] = [await submit('skip'), await submit('fire_once'), await submit('fire_all')]
    // the stored next fire time an hour and 5 minutes ago, as after an outage (nothing dispatched since)
    const { rows } = await sql<{ stored: Date; now: Date }>`
      update pgsched.triggers set next_fire_at = now() - interval '65 minutes' where job_id in (${skip.id}, ${once.id}, ${all.id})
      returning date_trunc('milliseconds', next_fire_at + interval '999 microseconds') as stored, now() as now`.execute(t.db)
    const stored = (rows[0] as { stored: Date }).stored.getTime()
    const now = (rows[0] as { now: Date }).now.getTime()
    const step = 600_000
    // the fire times of the schedule: stored (up to the millisecond, as the dispatcher takes it) + k·10 min;
    // the missed ones are those before now
    const lastMissed = stored + 6 * step
    const nextToCome = stored + 7 * step

    const view = async (id: string) => (await api.call(key, 'GET', `/v1/jobs/${id}`)).json<{ nextRunAt: string }>().nextRunAt
    expect(Date.parse(await view(skip.id))).toBe(nextToCome)
    expect(Date.parse(await view(once.id))).toBe(lastMissed)
    expect(Date.parse(await view(all.id))).toBe(stored + 5 * step)
    expect(nextToCome).toBeGreaterThan(now)

    const items = (await api.call(key, 'GET', '/v1/schedules')).json<{ items: Array<{ jobId: string; nextFireTimes: string[] }> }>().items
    const times = (id: string) => items.find((i) => i.jobId === id)?.nextFireTimes.map((x) => Date.parse(x))
    expect(times(skip.id)).toEqual([7, 8, 9, 10, 11].map((k) => stored + k * step))
    expect(times(once.id)).toEqual([6, 7, 8, 9, 10].map((k) => stored + k * step))
    expect(times(all.id)).toEqual([5, 6, 7, 8, 9].map((k) => stored + k * step))
  })
})

describe('GET /v1/failures', () => {
  it('groups FAILED and EXPIRED jobs by their latest error, largest group first', async () => {
    const key = await api.keyFor('fail')
    const refused = { message: 'connection refused', name: 'NetError', attempt: 3 }
    await insertExecutions(t.db, 2, { state: 'failed', error: refused, finishedAt: msAgo(60_000), job: { tenant: 'fail', queue: 'a', type: 'mail.send' } })
    const newest = await insertExecution(t.db, { state: 'failed', error: refused, job: { tenant: 'fail', queue: 'b', type: 'sms.send', payload: { to: 'x' } } })
    await insertExecution(t.db, {
      state: 'failed',
      attempt: 0,
      error: { message: 'missed its start deadline', name: 'ExpiredError', attempt: 0 },
      job: { tenant: 'fail' },
    })
    await insertExecution(t.db, { state: 'succeeded', job: { tenant: 'fail' } })

    const res = await api.call(key, 'GET', '/v1/failures')
    expect(res.statusCode).toBe(200)
    const [net, expired, ...rest] = res.json().items
    expect(rest).toEqual([])
    expect(net).toMatchObject({
      errorType: 'NetError',
      message: 'connection refused',
      count: 3,
      types: ['mail.send', 'sms.send'],
      queues: ['a', 'b'],
      sampleJobId: newest.jobId,
      samplePayload: { to: 'x' },
    })
    expect(Date.parse(net.firstSeenAt)).toBeLessThan(Date.parse(net.lastSeenAt))
    expect(expired).toMatchObject({ errorType: 'ExpiredError', count: 1 })
    expect((await api.call(key, 'GET', '/v1/failures?queue=b')).json().items.map((g: { count: number }) => g.count)).toEqual([1])
    const recent = await api.call(key, 'GET', `/v1/failures?since=${new Date(Date.now() - 30_000).toISOString()}`)
    expect(recent.json().items.find((g: { errorType: string }) => g.errorType === 'NetError').count).toBe(1)
  })
})

describe('GET /v1/failures, each job once', () => {
  it("counts a job by its latest execution only, and a stopped schedule's job once", async () => {
    const key = await api.keyFor('once')
    const refused = { message: 'connection refused', name: 'NetError', attempt: 3 }
    const timeout = { message: 'timed out', name: 'TimeoutError', attempt: 3 }
    // failed twice, then failed again: one job, grouped by its latest error
    const { jobId: thrice } = await insertExecution(t.db, { state: 'failed', error: refused, scheduledFor: msAgo(3_000), job: { tenant: 'once' } })
    await insertExecution(t.db, { jobId: thrice, state: 'failed', error: refused, scheduledFor: msAgo(2_000) })
    await insertExecution(t.db, { jobId: thrice, state: 'failed', error: timeout, scheduledFor: msAgo(1_000) })
    // failed, then succeeded: not failed any more
    const { jobId: recovered } = await insertExecution(t.db, { state: 'failed', error: refused, scheduledFor: msAgo(2_000), job: { tenant: 'once' } })
    await insertExecution(t.db, { jobId: recovered, state: 'succeeded', scheduledFor: msAgo(1_000) })
    // a schedule stopped by an error whose latest run failed too: once, as the schedule's error
    const { jobId: stopped } = await insertTrigger(t.db, { job: { tenant: 'once' }, nextFireAt: null })
    await t.db.updateTable('pgsched.triggers').set({ error: 'the time zone Mars/Base is unknown' }).where('job_id', '=', stopped).execute()
    await insertExecution(t.db, { jobId: stopped, state: 'failed', error: refused, scheduledFor: msAgo(1_000) })

    const groups = (await api.call(key, 'GET', '/v1/failures')).json().items as Array<{ errorType: string; count: number; sampleJobId: string }>
    expect(groups.map((g) => [g.errorType, g.count, g.sampleJobId])).toEqual([
      ['ScheduleError', 1, stopped],
      ['TimeoutError', 1, thrice],
    ])
  })

  it("reads the tenant's failed executions and the stopped schedules, not every job", async () => {
    await createClient({ db: t.db, tenant: 'few' }).submitJobs(Array.from({ length: 2_000 }, () => ({ type: 'x' })))
    await insertExecution(t.db, { state: 'failed', error: { message: 'no', name: 'NoError', attempt: 1 }, job: { tenant: 'few' } })
    // another tenant's failures are not looked up either
    await insertExecutions(t.db, 200, { state: 'failed', error: { message: 'no', name: 'NoError', attempt: 1 }, job: { tenant: 'many' } })
    await sql`analyze`.execute(t.db)
    // one connection, so that its statistics can be flushed before they are read
    const one = createDb({ databaseUrl: t.url, poolSize: 1 })
    try {
      const before = await jobReads(one.db)
      expect(await failureGroupList(one.db, { tenant: 'few', limit: 10 })).toMatchObject([{ errorType: 'NoError', count: 1 }])
      const after = await jobReads(one.db)
      expect(after.rows - before.rows).toBeLessThan(50)
      // a look-up of a job is an index scan of jobs, whether it finds the job or not
      expect(after.indexScans - before.indexScans).toBeLessThan(50)
    } finally {
      await one.db.destroy()
    }
  })
})

describe('a failure group as a filter', () => {
  it("reaches exactly the group's jobs, a stopped schedule's (ScheduleError) as well as an execution's", async () => {
    const key = await api.keyFor('grp')
    const refused = { message: 'connection refused', name: 'NetError', attempt: 3 }
    await insertExecutions(t.db, 2, { state: 'failed', error: refused, job: { tenant: 'grp' } })
    await insertExecution(t.db, { state: 'succeeded', job: { tenant: 'grp' } })
    const { jobId: stopped } = await insertTrigger(t.db, { job: { tenant: 'grp' }, nextFireAt: null })
    await t.db.updateTable('pgsched.triggers').set({ error: 'the time zone Mars/Base is unknown' }).where('job_id', '=', stopped).execute()

    const groups = (await api.call(key, 'GET', '/v1/failures')).json().items as Array<{ errorType: string; message: string; count: number }>
    expect(groups.map((g) => [g.errorType, g.count])).toEqual([
      ['NetError', 2],
      ['ScheduleError', 1],
    ])
    for (const g of groups) {
      const q = new URLSearchParams({ errorType: g.errorType, errorMessage: g.message })
      const listed = (await api.call(key, 'GET', `/v1/jobs?${q}`)).json().items
      expect(listed).toHaveLength(g.count)
    }
    const schedule = groups.find((g) => g.errorType === 'ScheduleError')
    const listed = await api.call(key, 'GET', `/v1/jobs?${new URLSearchParams({ errorType: 'ScheduleError', errorMessage: schedule?.message ?? '' })}`)
    expect(listed.json().items.map((j: { id: string }) => j.id)).toEqual([stopped])
  })
})

describe('GET /v1/stats', () => {
  it('counts starts, successes and failures per minute and queue with the schedule lag', async () => {
    const key = await api.keyFor('stats')
    await insertExecution(t.db, { state: 'succeeded', runAt: msAgo(2000), job: { tenant: 'stats', queue: 'q' } })
    await insertExecution(t.db, { state: 'failed', runAt: msAgo(2000), job: { tenant: 'stats', queue: 'q' } })
    await insertExecution(t.db, { state: 'succeeded', job: { tenant: 'other', queue: 'q' } })
    const res = await api.call(key, 'GET', '/v1/stats?minutes=5&queue=q')
    expect(res.statusCode).toBe(200)
    const items = res.json().items as Array<{ started: number; succeeded: number; failed: number; lagP50Ms: number }>
    const sum = (f: (x: (typeof items)[number]) => number) => items.reduce((n, x) => n + f(x), 0)
    expect([sum((x) => x.started), sum((x) => x.succeeded), sum((x) => x.failed)]).toEqual([2, 1, 1])
    for (const x of items) expect(x.lagP50Ms).toBeGreaterThanOrEqual(2000)
    expect((await api.call(key, 'GET', '/v1/stats?minutes=0')).statusCode).toBe(400)
    expect((await api.call(key, 'GET', '/v1/stats?minutes=1441')).statusCode).toBe(400)
  })
})

describe('GET /v1/jobs filters and /v1/jobs/export', () => {
  it('filters by idempotency key, latest error and creation time', async () => {
    const key = await api.keyFor('filt')
    const client = createClient({ db: t.db, tenant: 'filt' })
    const keyed = (await client.submitJob({ type: 'k', idempotencyKey: 'order-7' })).job
    const err = await insertExecution(t.db, { state: 'failed', error: { message: 'disk full', name: 'IOError', attempt: 1 }, job: { tenant: 'filt' } })
    const old = await insertExecution(t.db, { state: 'succeeded', job: { tenant: 'filt', createdAt: new Date('2020-01-01T00:00:00Z') } })
    const ids = async (query: string) => (await api.call(key, 'GET', `/v1/jobs?${query}`)).json().items.map((j: { id: string }) => j.id)
    expect(await ids('idempotencyKey=order-7')).toEqual([keyed.id])
    expect(await ids('errorType=IOError')).toEqual([err.jobId])
    expect(await ids('errorMessage=disk%20full')).toEqual([err.jobId])
    expect(await ids('createdBefore=2021-01-01T00:00:00Z')).toEqual([old.jobId])
    expect((await ids('createdAfter=2021-01-01T00:00:00Z')).sort()).toEqual([keyed.id, err.jobId].sort())
    expect((await api.call(key, 'GET', '/v1/jobs?createdAfter=soon')).statusCode).toBe(400)
  })

  it('exports every matching job as a JSON array and as CSV with quoting', async () => {
    const key = await api.keyFor('exp')
    await insertExecutions(t.db, 1200, { state: 'succeeded', job: { tenant: 'exp', queue: 'bulk' } })
    const json = await api.call(key, 'GET', '/v1/jobs/export?queue=bulk')
    expect(json.statusCode).toBe(200)
    expect(json.headers['content-disposition']).toBe('attachment; filename="jobs.json"')
    const all = json.json() as Array<{ id: string }>
    expect(all).toHaveLength(1200)
    expect(new Set(all.map((j) => j.id)).size).toBe(1200)
    expect(all.map((j) => j.id)).toEqual([...all.map((j) => j.id)].sort().reverse())

    const client = createClient({ db: t.db, tenant: 'exp' })
    const tricky = { note: 'a, "quoted"\nline', '=cmd': 1 }
    const { job } = await client.submitJob({ type: 'k', queue: 'odd', payload: tricky, idempotencyKey: 'x,"y"' })
    const csv = await api.call(key, 'GET', '/v1/jobs/export?format=csv&queue=odd')
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8')
    expect(csv.headers['content-disposition']).toBe('attachment; filename="jobs.csv"')
    const [header, row, ...rest] = parseCsv(csv.body)
    expect(rest).toEqual([])
    const record = Object.fromEntries((header ?? []).map((h, i) => [h, row?.[i]]))
    expect(record).toMatchObject({ id: job.id, tenant: 'exp', queue: 'odd', status: 'SCHEDULED', idempotencyKey: 'x,"y"' })
    expect(JSON.parse(record.payload as string)).toEqual(tricky)

    // text that a spreadsheet would run as a formula is exported with a leading quote
    await client.submitJob({ type: 'k', queue: 'formula', idempotencyKey: '=HYPERLINK("http://example.com")' })
    const formula = parseCsv((await api.call(key, 'GET', '/v1/jobs/export?format=csv&queue=formula')).body)
    expect(formula[1]?.[(header ?? []).indexOf('idempotencyKey')]).toBe(`'=HYPERLINK("http://example.com")`)

    const empty = await api.call(key, 'GET', '/v1/jobs/export?queue=none')
    expect(empty.json()).toEqual([])
    expect(parseCsv((await api.call(key, 'GET', '/v1/jobs/export?format=csv&queue=none')).body)).toHaveLength(1)
  })
})

describe('GET /v1/queues for a tenant key', () => {
  it("counts only the tenant's own executions", async () => {
    const key = await api.keyFor('qten')
    await insertExecutions(t.db, 2, { state: 'pending', job: { tenant: 'qten', queue: 'shared' } })
    await insertExecutions(t.db, 5, { state: 'pending', job: { tenant: 'qother', queue: 'shared' } })
    await insertExecutions(t.db, 1, { state: 'pending', job: { tenant: 'qother', queue: 'theirs' } })
    const res = await api.call(key, 'GET', '/v1/queues')
    expect(res.statusCode).toBe(200)
    const shared = res.json().items.find((q: { name: string }) => q.name === 'shared')
    expect(shared).toMatchObject({ due: 2, running: 0 })
    expect(res.json().items.find((q: { name: string }) => q.name === 'theirs')).toBeUndefined()
  })
})
