import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { ValidationError } from '../../src/errors.ts'
import { compareEventIds, eventToJson, type JobEvent } from '../../src/core/events.ts'
import { normalizeSubmit } from '../../src/core/job.ts'
import { MESSAGE_CHUNK_CHARS, eventListAfter, eventListenerOpen, eventMessagePageAfter, eventPageAfter, eventPruneOld } from '../../src/db/queries/events.ts'
import { jobInsertMany } from '../../src/db/queries/jobs.ts'
import { webhookCursorAdvance, webhookSubscriptionInsert } from '../../src/db/queries/webhooks.ts'
import type { DB } from '../../src/db/schema.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany, executionFailMany } from '../../src/db/queries/lease.ts'
import { executionExpireLate, executionRescueExpired } from '../../src/db/queries/rescue.ts'
import { sequenceEvents, streamEvents } from '../../src/events/event-stream.ts'
import { Pruner } from '../../src/maintenance/pruner.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000e1'

async function eventCount(): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.events`.execute(t.db)
  return rows[0]?.n ?? 0
}

async function allEvents(tenant: string | null): Promise<JobEvent[]> {
  await sequenceEvents(t.db)
  return eventListAfter(t.db, { after: '0', tenant, filter: {}, limit: 10_000 })
}

async function claim(limit = 10) {
  return executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['t'], limit, leaseMs: 30_000 })
}

describe('event capture', () => {
  it('writes nothing while nobody listens', async () => {
    const client = createClient({ db: t.db, tenant: 'a' })
    await client.submitJobs([{ type: 't' }, { type: 't' }])
    const claimed = await claim()
    await executionCompleteMany(t.db, { workerId: WORKER, completions: claimed.map((c) => ({ ...c, resultJson: 'null', outputUri: null })) })
    expect(await eventCount()).toBe(0)
  })

  it('records each state change of a listened tenant, in order, and nothing of other tenants', async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const b = createClient({ db: t.db, tenant: 'b' })
    const [ok, bad, last] = await a.submitJobs([{ type: 't' }, { type: 't', maxAttempts: 2 }, { type: 't', maxAttempts: 1 }])
    await b.submitJob({ type: 't' })
    const first = await claim(3)
    const byJob = (id: string | undefined) => first.find((c) => c.jobId === id) as (typeof first)[number]
    await executionCompleteMany(t.db, { workerId: WORKER, completions: [{ ...byJob(ok?.id), resultJson: '1', outputUri: null }] })
    await executionFailMany(t.db, {
      workerId: WORKER,
      failures: [bad, last].map((j) => ({ ...byJob(j?.id), errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
    })
    const events = await allEvents(null)
    expect(events.every((e) => e.tenant === 'a')).toBe(true)
    const of = (id: string | undefined) => events.filter((e) => e.jobId === id).map((e) => `${e.type}:${e.attempt}`)
    expect(of(ok?.id)).toEqual(['submitted:0', 'started:1', 'succeeded:1'])
    expect(of(bad?.id)).toEqual(['submitted:0', 'started:1', 'retrying:1'])
    expect(of(last?.id)).toEqual(['submitted:0', 'started:1', 'failed:1'])
    const ids = events.map((e) => e.id)
    expect(ids).toEqual([...ids].sort(compareEventIds))
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("carries each failed attempt's error on its retrying, failed and expired events, the message cut to 1,000 characters, and no array for batches without one", async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const [retried, fatal, timedOut, long, cancelled] = await a.submitJobs([
      { type: 't', maxAttempts: 3 },
      { type: 't' },
      { type: 't', maxAttempts: 1 },
      { type: 't', maxAttempts: 1 },
      { type: 't', maxAttempts: 3 },
    ])
    const claimed = await claim(5)
    // cancelled while its attempt ran, the cancel's sweep of its lease not yet done: the failure ends it cancelled
    await sql`update pgsched.jobs set state = 'cancelled' where id = ${cancelled?.id}::uuid`.execute(t.db)
    const byJob = (id: string | undefined) => claimed.find((c) => c.jobId === id) as (typeof claimed)[number]
    const message = `${'é'.repeat(999)}xyz`
    const errors: Array<[string | undefined, object]> = [
      [retried?.id, { message: 'connection refused', name: 'FetchError', attempt: 1, workerId: WORKER, at: new Date().toISOString() }],
      [fatal?.id, { message: 'bad payload', name: 'FatalError', fatal: true, attempt: 1 }],
      [timedOut?.id, { message: 'timed out after 10 ms', name: 'TimeoutError', timedOut: true, attempt: 1 }],
      [long?.id, { message, name: 'Error', attempt: 1 }],
      [cancelled?.id, { message: 'interrupted', name: 'Error', attempt: 1 }],
    ]
    await executionFailMany(t.db, {
      workerId: WORKER,
      failures: errors.map(([id, e]) => ({ ...byJob(id), errorJson: JSON.stringify(e), fatal: id === fatal?.id, outputUri: null })),
    })
    const { job: late } = await a.submitJob({ type: 't', startDeadlineMs: 1_000 })
    await executionExpireLate(t.db, { limit: 10, now: new Date(Date.now() + 60_000) })
    const { job: lost } = await a.submitJob({ type: 'u' })
    await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['u'], limit: 1, leaseMs: 1_000 })
    await executionRescueExpired(t.db, { limit: 10, now: new Date(Date.now() + 60_000) })

    const events = await allEvents('a')
    const last = (id: string | undefined) => events.filter((e) => e.jobId === id).at(-1)
    expect(last(retried?.id)).toMatchObject({ type: 'retrying', error: { message: 'connection refused', name: 'FetchError' } })
    expect(last(retried?.id)?.error).toEqual({ message: 'connection refused', name: 'FetchError' })
    expect(last(fatal?.id)).toMatchObject({ type: 'failed', error: { message: 'bad payload', name: 'FatalError', fatal: true } })
    expect(last(timedOut?.id)).toMatchObject({ type: 'failed', error: { message: 'timed out after 10 ms', name: 'TimeoutError', timedOut: true } })
    expect(last(long?.id)?.error).toEqual({ message: message.slice(0, 1000), name: 'Error' })
    expect(last(late.id)).toMatchObject({ type: 'expired', error: { name: 'StartDeadlineError', fatal: true } })
    expect(last(lost.id)).toMatchObject({ type: 'retrying', error: { name: 'LeaseExpiredError' } })
    expect(last(lost.id)?.error?.message).toMatch(/^lease expired: worker /)
    // a cancelled event says no error, though the attempt's failure was recorded as the execution's
    expect(last(cancelled?.id)).toMatchObject({ type: 'cancelled', error: null })
    // every other event has none, and the batches of submits and claims store no array of errors
    expect(events.filter((e) => !['retrying', 'failed', 'expired'].includes(e.type)).every((e) => e.error === null)).toBe(true)
    const { rows } = await sql<{ types: string[]; errors: unknown }>`select types, errors from pgsched.event_batches order by id`.execute(t.db)
    for (const r of rows) {
      const failing = r.types.some((x) => ['retrying', 'failed', 'expired'].includes(x))
      expect(r.errors === null, r.types.join()).toBe(!failing)
    }
    // the SSE text carries the same JSON, key for key, and so do the events of the SQL view
    const page = await eventMessagePageAfter(t.db, { after: '0', tenant: 'a', filter: {}, limit: 100 })
    const data = page.chunks
      .join('')
      .split('\n\n')
      .filter((m) => m !== '')
      .map((m) => m.split('\n')[1])
    expect(data).toEqual(events.map((e) => `data: ${JSON.stringify(eventToJson(e))}`))
    const { rows: viewed } = await sql<{ error: { name: string } | null }>`
      select error from pgsched.events where job_id = ${fatal?.id}::uuid and type = 'failed'`.execute(t.db)
    expect(viewed).toEqual([{ error: { message: 'bad payload', name: 'FatalError', fatal: true } }])
  })

  it('records cancel, pause, resume, rescue and expiry', async () => {
    await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const { job: cron } = await a.submitJob({ type: 't', schedule: { cron: '0 0 1 1 *' } })
    await a.pauseJob(cron.id)
    await a.resumeJob(cron.id)
    await a.cancelJob(cron.id)
    const { job: late } = await a.submitJob({ type: 't', startDeadlineMs: 1_000 })
    await executionExpireLate(t.db, { limit: 10, now: new Date(Date.now() + 60_000) })
    const { job: lost } = await a.submitJob({ type: 'u' })
    await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['u'], limit: 1, leaseMs: 1_000 })
    await executionRescueExpired(t.db, { limit: 10, now: new Date(Date.now() + 60_000) })
    const events = await allEvents(null)
    const of = (id: string) => events.filter((e) => e.jobId === id).map((e) => e.type)
    expect(of(cron.id)).toEqual(['submitted', 'paused', 'resumed', 'cancelled'])
    expect(of(late.id)).toEqual(['submitted', 'expired'])
    expect(of(lost.id)).toEqual(['submitted', 'started', 'retrying'])
    expect(events.find((e) => e.jobId === cron.id)?.executionId).toBeNull()
    // a change of the job alone has no attempt, its submit included (as the Event schema says)
    expect(events.filter((e) => e.jobId === cron.id).map((e) => e.attempt)).toEqual([null, null, null, null])
    // submitted in a batch of the plain form too
    const [batched] = await a.submitJobs([{ type: 't', schedule: { every: '1h' } }])
    expect((await allEvents(null)).find((e) => e.jobId === batched?.id)).toMatchObject({ type: 'submitted', executionId: null, attempt: null })
  })

  it('records a pause or resume only where it changed the schedule: not a repeated one, nor the resume of one not paused', async () => {
    await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const { job } = await a.submitJob({ type: 't', schedule: { cron: '0 0 1 1 *' } })
    for (const action of ['resume', 'pause', 'pause', 'resume', 'resume'] as const) {
      const viewed = action === 'pause' ? await a.pauseJob(job.id) : await a.resumeJob(job.id)
      expect(viewed.status).toBe(action === 'pause' ? 'PAUSED' : 'SCHEDULED')
    }
    expect((await allEvents(null)).filter((e) => e.jobId === job.id).map((e) => e.type)).toEqual(['submitted', 'paused', 'resumed'])
  })

  it('answers a pause or resume that a cancel overtook with InvalidStateError, not the cancelled job', async () => {
    const a = createClient({ db: t.db, tenant: 'a' })
    const { job } = await a.submitJob({ type: 't', schedule: { cron: '0 0 1 1 *' } })
    // the cancel commits after the pause looked at the job, while the pause waits for the schedule's lock
    const outcome = await t.db.transaction().execute(async (trx) => {
      await sql`select 1 from pgsched.triggers where job_id = ${job.id}::uuid for update`.execute(trx)
      const pausing = a.pauseJob(job.id).then(
        (viewed) => ({ answered: viewed.status }),
        (err: unknown) => ({ refused: (err as Error).name, message: (err as Error).message }),
      )
      await waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`
            select count(*)::int as n from pg_stat_activity
             where datname = current_database() and wait_event_type = 'Lock' and query like '%pgsched.triggers%for update%'`.execute(t.db)
          return (rows[0]?.n ?? 0) > 0
        },
        { what: 'the pause to wait for the schedule lock' },
      )
      await sql`update pgsched.jobs set state = 'cancelled' where id = ${job.id}::uuid`.execute(trx)
      return { pausing } // not awaited here: the pause waits for this transaction's commit
    })
    expect(await outcome.pausing).toEqual({
      refused: 'InvalidStateError',
      message: `job ${job.id} is CANCELLED: a cancelled job is neither paused nor resumed`,
    })
  })

  it('pages through batches of any size, small pages stopping inside a batch and resuming there, every event once in order', async () => {
    await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const b = createClient({ db: t.db, tenant: 'b' })
    for (const size of [5, 1, 7, 3]) {
      await a.submitJobs(Array.from({ length: size }, () => ({ type: 't' })))
      await b.submitJobs([{ type: 't' }, { type: 't' }])
    }
    // a long run of single-event batches of another queue, past what one page looks at
    for (let k = 0; k < 30; k++) await a.submitJob({ type: 't', queue: 'other' })
    const everything = await allEvents('a')
    expect(everything).toHaveLength(16 + 30)
    for (const limit of [1, 4, 6, 100]) {
      const seen: string[] = []
      let after = '0'
      for (let pages = 0; pages < 100; pages++) {
        const page = await eventPageAfter(t.db, { after, tenant: 'a', filter: {}, limit })
        seen.push(...page.events.map((e) => e.id))
        if (page.upTo === after) break
        after = page.upTo
      }
      expect(seen, `pages of ${limit}`).toEqual(everything.map((e) => e.id))
      // where the last page left the reader, nothing is read again
      expect((await eventPageAfter(t.db, { after, tenant: 'a', filter: {}, limit })).events, `after ${after}`).toEqual([])
    }
    // a page that ends inside the last batch, then its rest: the reader goes on after the whole batch
    const lastBatch = String(everything.at(-1)?.id).split('-')[0] as string
    await a.submitJobs(Array.from({ length: 5 }, () => ({ type: 't' })))
    await sequenceEvents(t.db)
    const [batch] = String((await allEvents('a')).at(-1)?.id).split('-')
    const inside = await eventPageAfter(t.db, { after: lastBatch, tenant: 'a', filter: {}, limit: 3 })
    expect(inside.upTo).toBe(`${batch}-2`)
    const rest = await eventPageAfter(t.db, { after: inside.upTo, tenant: 'a', filter: {}, limit: 3 })
    expect(rest.events.map((e) => e.id)).toEqual([`${batch}-3`, `${batch}-4`])
    expect(rest.upTo).toBe(batch)
    expect((await eventPageAfter(t.db, { after: rest.upTo, tenant: 'a', filter: {}, limit: 3 })).events).toEqual([])
    // a filter matching only the last event moves past the rest and finds it
    const rare = await eventPageAfter(t.db, { after: '0', tenant: 'a', filter: { queue: 'default', events: ['submitted'] }, limit: 2 })
    expect(rare.events.map((e) => e.id)).toEqual(everything.slice(0, 2).map((e) => e.id))
  })

  it('stores large batches compressed with lz4 where the server has it, and reads every event of one back', async () => {
    // whether this server can compress with lz4 (PostgreSQL 14 or later, built with it)
    const { rows: probe } = await sql<{ lz4: boolean }>`
      select coalesce(bool_or('lz4' = any(enumvals)), false) as lz4 from pg_settings where name = 'default_toast_compression'`.execute(t.db)
    const lz4 = probe[0]?.lz4 === true
    const { rows: columns } = await sql<{ attname: string; attcompression: string }>`
      select attname, attcompression from pg_attribute
       where attrelid = 'pgsched.event_batches'::regclass
         and attname in ('types', 'tenants', 'job_ids', 'execution_ids', 'queues', 'job_types', 'attempts', 'errors')`.execute(t.db)
    expect(columns).toHaveLength(8)
    for (const c of columns) expect(c.attcompression, c.attname).toBe(lz4 ? 'l' : '')
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const jobs = await createClient({ db: t.db, tenant: 'a' }).submitJobs(Array.from({ length: 500 }, () => ({ type: 't' })))
    const { rows: stored } = await sql<{ size: number; types: string | null; tenants: string | null }>`
      select size, pg_column_compression(types) as types, pg_column_compression(tenants) as tenants
        from pgsched.event_batches`.execute(t.db)
    // one batch: its arrays of repeated words compressed, with lz4 where the server has it
    expect(stored).toEqual([{ size: 500, types: lz4 ? 'lz4' : 'pglz', tenants: lz4 ? 'lz4' : 'pglz' }])
    const events = await allEvents('a')
    expect(events.map((e) => `${e.type}:${e.jobId}`)).toEqual(jobs.map((j) => `submitted:${j.id}`))
  })

  it('prunes events older than the retention', async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    await createClient({ db: t.db, tenant: 'a' }).submitJobs([{ type: 't' }, { type: 't' }])
    await sequenceEvents(t.db)
    await sql`update pgsched.event_batches set at = now() - interval '2 hours'`.execute(t.db)
    const pruner = new Pruner({ db: t.db, log: t.log, retentionMs: 86_400_000, eventRetentionMs: 3_600_000, intervalMs: 60_000, batchSize: 100 })
    expect((await pruner.runOnce()).events).toBe(2)
    expect(await eventCount()).toBe(0)
  })

  it('records nothing of pgsched.* jobs (webhook deliveries)', async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const internal = { ...normalizeSubmit({ type: 'pgsched.webhook' }, new Date(), { internal: true }), id: uuidV7(), executionId: uuidV7() }
    await jobInsertMany(t.db, { tenant: 'a', createdBy: 'test', jobs: [internal] })
    const { job } = await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 't' })
    expect((await allEvents('a')).map((e) => e.jobId)).toEqual([job.id])
  })

  it('keeps one stream listener row per tenant (and one for every tenant), renewed to the later end', async () => {
    const first = await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const again = await eventListenerOpen(t.db, { tenant: 'a', keepMs: 600_000 })
    const shorter = await eventListenerOpen(t.db, { tenant: 'a', keepMs: 1_000 })
    const all = await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
    expect(await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })).toBe(all)
    expect([again, shorter]).toEqual([first, first])
    const { rows } = await sql<{ tenant: string | null; left_s: number }>`
      select tenant, extract(epoch from until - now())::float8 as left_s from pgsched.event_listeners order by tenant nulls first`.execute(t.db)
    expect(rows.map((r) => r.tenant)).toEqual([null, 'a'])
    expect(rows[1]?.left_s).toBeGreaterThan(500)
  })

  it('keeps events the webhook dispatcher has not read while a subscription exists (up to the bound)', async () => {
    await webhookSubscriptionInsert(t.db, {
      tenant: 'a',
      url: 'http://127.0.0.1:9/hook',
      events: [],
      queue: 'default',
      secret: 'sixteen-chars-ok!',
      maxPerTenant: 100,
    })
    for (let k = 0; k < 3; k++) await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 't' }) // a batch each
    await sequenceEvents(t.db)
    await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 't' }) // never numbered
    await sql`update pgsched.event_batches set at = now() - interval '2 hours'`.execute(t.db)
    const prune = () => eventPruneOld(t.db, { olderThanMs: 3_600_000, limit: 100 })
    expect(await prune()).toBe(0)
    const numbered = (await allEvents('a')).map((e) => e.id)
    await sql`update pgsched.event_batches set at = now() - interval '2 hours'`.execute(t.db)
    // the cursor is a batch number: the second batch read
    await t.db.transaction().execute((trx) => webhookCursorAdvance(trx, { to: (numbered[1] as string).split('-')[0] as string }))
    expect(await prune()).toBe(2)
    expect(await eventCount()).toBe(2)
    // a dispatcher that never comes does not keep them for ever
    await sql`update pgsched.event_batches set at = now() - interval '8 days'`.execute(t.db)
    expect(await prune()).toBe(2)
  })

  it('writes each SSE message as the id and Event JSON of the event, with a tenant name that needs escaping', async () => {
    // a name no API key can have now, which rows of an earlier version (or of pgsched.submit_job) may hold
    const tenant = 'te"n\\ant ü'
    await eventListenerOpen(t.db, { tenant: 'escaped', keepMs: 60_000 })
    const c = createClient({ db: t.db, tenant: 'escaped' })
    await c.submitJob({ type: 'a.b/c:d', queue: 'q-1_x' })
    const { job } = await c.submitJob({ type: 'plain' })
    await c.cancelJob(job.id)
    await sql`update pgsched.event_batches set tenants = array_replace(tenants, 'escaped', ${tenant})`.execute(t.db)
    await sequenceEvents(t.db)
    const params = { after: '0', tenant, filter: {}, limit: 10 }
    const events = (await eventPageAfter(t.db, params)).events
    expect(events.map((e) => e.type)).toEqual(['submitted', 'submitted', 'cancelled'])
    const page = await eventMessagePageAfter(t.db, params)
    expect(page.count).toBe(3)
    const messages = page.chunks
      .join('')
      .split('\n\n')
      .filter((m) => m !== '')
    expect(messages.map((m) => m.split('\n')[0])).toEqual(events.map((e) => `id: ${e.id}`))
    // key for key, in the same order, as the TypeScript client's events carry them
    expect(messages.map((m) => m.split('\n')[1])).toEqual(events.map((e) => `data: ${JSON.stringify(eventToJson(e))}`))
  })

  it("writes the messages of a batch mixing tenants, queues and types as each event's own JSON", async () => {
    await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
    const tenants = ['a', 'b"q', 'a', 'c', 'c']
    // 'b"q' (a name no API key can have now, as rows of an earlier version may hold) is written as 'bq', then renamed
    for (const [k, tenant] of tenants.entries()) {
      await createClient({ db: t.db, tenant: tenant.replace('"', '') }).submitJob({ type: 't', queue: k % 2 === 0 ? 'default' : 'other' })
    }
    // one claim of both queues: one batch of started events, its tenants and queues alternating
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default', 'other'], types: ['t'], limit: 10, leaseMs: 30_000 })
    expect(claimed).toHaveLength(5)
    await sql`update pgsched.event_batches set tenants = array_replace(tenants, 'bq', 'b"q')`.execute(t.db)
    await sequenceEvents(t.db)
    const params = { after: '0', tenant: null, filter: {}, limit: 100 }
    const events = (await eventPageAfter(t.db, params)).events
    expect(
      events
        .filter((e) => e.type === 'started')
        .map((e) => e.tenant)
        .sort(),
    ).toEqual([...tenants].sort())
    const page = await eventMessagePageAfter(t.db, params)
    expect(page.chunks.join('')).toBe(events.map((e) => `id: ${e.id}\ndata: ${JSON.stringify(eventToJson(e))}\n\n`).join(''))
  })

  it('cuts a large page between messages into texts of about 32 kB, a batch mixing attempts written as each event', async () => {
    await eventListenerOpen(t.db, { tenant: 'big', keepMs: 60_000 })
    const c = createClient({ db: t.db, tenant: 'big' })
    const job = { type: 't', maxAttempts: 3, payload: { pad: 'x'.repeat(10) } }
    await c.submitJobs(Array.from({ length: 200 }, () => job))
    const first = await claim(200)
    expect(first).toHaveLength(200)
    await executionFailMany(t.db, {
      workerId: WORKER,
      failures: first.slice(0, 100).map((r) => ({ ...r, errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
    })
    await c.submitJobs(Array.from({ length: 200 }, () => job))
    // one claim of the 100 retries (attempt 2, due after their backoff) and the 200 new jobs (attempt 1)
    const later = new Date(Date.now() + 86_400_000)
    const second = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['t'], limit: 1000, leaseMs: 30_000, now: later })
    expect(new Set(second.map((r) => r.attempt))).toEqual(new Set([1, 2]))
    await sequenceEvents(t.db)
    const params = { after: '0', tenant: 'big', filter: {}, limit: 2_000 }
    const events = (await eventPageAfter(t.db, params)).events
    expect(events).toHaveLength(200 + 200 + 100 + 200 + 300)
    const page = await eventMessagePageAfter(t.db, params)
    expect(page.count).toBe(events.length)
    expect(page.chunks.join('')).toBe(events.map((e) => `id: ${e.id}\ndata: ${JSON.stringify(eventToJson(e))}\n\n`).join(''))
    expect(page.chunks.length).toBeGreaterThan(3)
    for (const [k, chunk] of page.chunks.entries()) {
      expect(chunk.startsWith('id: ')).toBe(true)
      expect(chunk.endsWith('}\n\n')).toBe(true)
      // each cut at the first message end past the bound
      if (k < page.chunks.length - 1) expect(chunk.length).toBeGreaterThanOrEqual(MESSAGE_CHUNK_CHARS)
      expect(chunk.length).toBeLessThan(MESSAGE_CHUNK_CHARS + 400)
    }
  })

  it('matches a job id in any case, and reads a position with leading zeros as its number', async () => {
    await eventListenerOpen(t.db, { tenant: 'z', keepMs: 60_000 })
    const c = createClient({ db: t.db, tenant: 'z' })
    const { job } = await c.submitJob({ type: 't' })
    await c.submitJob({ type: 't' })
    await c.cancelJob(job.id)
    await sequenceEvents(t.db)
    const page = (after: string, jobId?: string) => eventPageAfter(t.db, { after, tenant: 'z', filter: { jobId }, limit: 10 })
    const own = (await page('0', job.id)).events
    expect(own.map((e) => e.type)).toEqual(['submitted', 'cancelled'])
    expect((await page('0', job.id.toUpperCase())).events).toEqual(own)
    // after the first event, its batch number written with leading zeros: the same position
    const [batch, index] = (own[0] as JobEvent).id.split('-')
    const next = (await page(`${batch}-${index}`)).events
    expect(next.length).toBeGreaterThan(0)
    expect((await page(`00${batch}-${index}`)).events).toEqual(next)
  })

  it("chooses a page's batches by size, of every tenant: a tenant's page among others' batches is short, says there is more, and its stream reads on at once", async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    await eventListenerOpen(t.db, { tenant: 'b', keepMs: 60_000 })
    const b = createClient({ db: t.db, tenant: 'b' })
    for (let k = 0; k < 5; k++) await b.submitJobs(Array.from({ length: 10 }, () => ({ type: 't' })))
    const { job } = await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 't' })
    await sequenceEvents(t.db)
    const batchOf = (e: JobEvent | undefined) => String(e?.id).split('-')[0]
    const bBatches = [...new Set((await allEvents('b')).map(batchOf))]
    expect(bBatches).toHaveLength(5)
    // 20 events a page: two of b's batches of 10, none of a's events, and more after them
    const page = (after: string) => eventPageAfter(t.db, { after, tenant: 'a', filter: {}, limit: 20 })
    const first = await page('0')
    expect(first).toEqual({ events: [], upTo: bBatches[1], more: true })
    const second = await page(first.upTo)
    expect(second).toEqual({ events: [], upTo: bBatches[3], more: true })
    const third = await page(second.upTo)
    expect(third.events.map((e) => e.jobId)).toEqual([job.id])
    expect(third.more).toBe(false)
    const messages = await eventMessagePageAfter(t.db, { after: '0', tenant: 'a', filter: {}, limit: 20 })
    expect(messages).toEqual({ chunks: [], count: 0, upTo: bBatches[1], more: true })
    // the stream does not wait its poll interval after a short page that says there is more
    const controller = new AbortController()
    const stream = await streamEvents(t.db, 'a', { after: '0', signal: controller.signal, pollIntervalMs: 600_000 })
    const started = Date.now()
    try {
      const { value } = await stream.next()
      expect((value as JobEvent).jobId).toBe(job.id)
      expect(Date.now() - started).toBeLessThan(30_000)
    } finally {
      controller.abort()
      await stream.return()
    }
  })

  it('starts a stream opened without a position after the events that committed before it, even while capture was already on', async () => {
    // capture on for the tenant, nobody reading (what a closed stream leaves for the retention)
    await eventListenerOpen(t.db, { tenant: 's', keepMs: 60_000 })
    const client = createClient({ db: t.db, tenant: 's' })
    const before = await client.submitJob({ type: 'x' })
    const controller = new AbortController()
    const stream = await streamEvents(t.db, 's', { signal: controller.signal, pollIntervalMs: 20 })
    const after = await client.submitJob({ type: 'x' })
    const seen: string[] = []
    try {
      for await (const event of stream) {
        seen.push(event.jobId)
        if (event.jobId === after.job.id) break
      }
    } finally {
      controller.abort()
    }
    expect(seen).toEqual([after.job.id])
    expect(seen).not.toContain(before.job.id)
  })

  it("reads no more than a page of a batch: a tenant's small pages through a claim mixing tenants stop inside it and get each of its events once, in order", async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    await eventListenerOpen(t.db, { tenant: 'b', keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const b = createClient({ db: t.db, tenant: 'b' })
    for (let k = 0; k < 20; k++) await (k % 5 === 0 ? a : b).submitJob({ type: 't' })
    // one batch of 20 started events, a's one in five: some slices of 4 hold none of a's
    expect(await claim(20)).toHaveLength(20)
    await sequenceEvents(t.db)
    // the reference: one row per event, from the view, not through the pages
    const { rows: all } = await sql<{ id: string; type: string }>`select id, type from pgsched.events where tenant = 'a' order by seq, index`.execute(t.db)
    expect(all).toHaveLength(8)
    const read: JobEvent[] = []
    const cuts: string[] = []
    let after = '0'
    for (let pages = 0; pages < 100; pages++) {
      const page = await eventPageAfter(t.db, { after, tenant: 'a', filter: {}, limit: 4 })
      read.push(...page.events)
      if (page.events.length < 4 && page.more) cuts.push(page.upTo)
      after = page.upTo
      if (!page.more && page.events.length < 4) break
    }
    expect(read.map((e) => e.id)).toEqual(all.map((e) => e.id))
    // short pages that ended inside the claim's batch, at the last event they read of it
    const started = all.filter((e) => e.type === 'started').map((e) => e.id.split('-')[0])
    expect(cuts.some((c) => c.includes('-') && c.split('-')[0] === started[0])).toBe(true)
  })

  it('refuses, as GET /v1/events does, a client stream whose filter no event can match, before opening it', async () => {
    const client = createClient({ db: t.db, tenant: 'f' })
    const cases: Array<[Parameters<typeof client.events>[0], string, string]> = [
      [{ jobId: 'zzz' }, 'jobId', 'jobId must be a UUID'],
      [{ type: 'bad type' }, 'type', 'type must be a job type'],
      [{ queue: 'bad queue' }, 'queue', 'queue must be a queue name'],
      [{ events: ['started', 'bogus' as never] }, 'events.1', 'events.1 must be one of submitted, started,'],
    ]
    for (const [filter, path, message] of cases) {
      const err = await client.events(filter).catch((e: unknown) => e)
      expect(err, path).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).details?.[0]?.path, path).toBe(path)
      expect((err as Error).message, path).toContain(message)
    }
    // no listener was opened for them: capture stays off for the tenant
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.event_listeners where tenant = 'f'`.execute(t.db)
    expect(rows[0]?.n).toBe(0)
  })

  it('a stream whose filter matches nothing moves past the events it read', async () => {
    const afters: unknown[] = []
    const pool = new pg.Pool({ connectionString: t.url, max: 2 })
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool }),
      log: (e) => {
        if (e.level === 'query' && e.query.sql.includes('array_to_string(b.job_ids')) afters.push(e.query.parameters[0])
      },
    })
    const controller = new AbortController()
    try {
      const stream = await streamEvents(db, 'a', { queue: 'rare', signal: controller.signal, pollIntervalMs: 20 })
      const reading = (async () => {
        for await (const _ of stream) expect.unreachable('no event matches')
      })()
      await createClient({ db: t.db, tenant: 'a' }).submitJobs([{ type: 't' }, { type: 't' }])
      await sequenceEvents(t.db)
      // the stream goes on after the latest batch, all of it read (the batch number of the latest event's id)
      const latest = (await allEvents('a')).at(-1)?.id.split('-')[0]
      await waitFor(() => afters.includes(latest), { timeoutMs: 30_000, what: 'the stream to read after the latest event' })
      controller.abort()
      await reading
    } finally {
      controller.abort()
      await db.destroy()
    }
  })
})
