/**
 * GET /v1/events over a real HTTP connection to a listening API, with in-process workers running
 * the jobs: a client that disconnects for 5 s during a burst and reconnects with Last-Event-ID gets
 * every event once and in order per job; another tenant's client sees none of them.
 */
import { get, request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import pg from 'pg'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { compareEventIds, eventToJson } from '../../src/core/events.ts'
import { apiKeyRevoke } from '../../src/db/queries/api-keys.ts'
import { eventListAfter } from '../../src/db/queries/events.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { useWorkers } from '../worker/harness.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
let app: App
let base: string

beforeAll(async () => {
  app = buildApp({ db: t.db, log: t.log })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
})
afterAll(async () => {
  await app?.close()
})

interface Received {
  id: string
  type: string
  jobId: string
  tenant: string
}

/** An SSE client: collects events until stopped; `opened` resolves on the `: open` comment. */
function connect(key: string, query = '', lastEventId?: string) {
  const controller = new AbortController()
  const events: Received[] = []
  let resolveOpen: () => void = () => {}
  let rejectOpen: (err: unknown) => void = () => {}
  const opened = new Promise<void>((resolve, reject) => {
    resolveOpen = resolve
    rejectOpen = reject
  })
  opened.catch(() => {}) // a test may never await it
  const done = (async () => {
    try {
      const res = await fetch(`${base}/v1/events${query}`, {
        headers: { authorization: `Bearer ${key}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
        signal: controller.signal,
      })
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
      const decoder = new TextDecoder()
      let buffer = ''
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true })
        let end = buffer.indexOf('\n\n')
        while (end >= 0) {
          const message = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          if (message === ': open') resolveOpen()
          const data = message.split('\n').find((l) => l.startsWith('data: '))
          const id = message.split('\n').find((l) => l.startsWith('id: '))
          if (data && id) {
            const event = JSON.parse(data.slice(6)) as Received
            expect(event.id).toBe(id.slice(4))
            events.push(event)
          }
          end = buffer.indexOf('\n\n')
        }
      }
    } catch (err: unknown) {
      // only the abort of close() ends the reader quietly; a failed assertion fails the test
      if (!(controller.signal.aborted && err instanceof Error && err.name === 'AbortError')) throw err
    }
  })()
  done.catch(rejectOpen) // handled here too: a failure before close() also fails `opened`, and close() rethrows it
  return {
    events,
    opened,
    async close() {
      controller.abort()
      await done
    },
  }
}

describe('GET /v1/events', () => {
  it('resumes with Last-Event-ID after a 5 s disconnect during a burst of 1,000 jobs: every event once, in order per job; tenant B sees none', async () => {
    const keyA = (await createApiKey(t.db, { tenant: 'a' })).key
    const keyB = (await createApiKey(t.db, { tenant: 'b' })).key
    const first = connect(keyA)
    const other = connect(keyB)
    await Promise.all([first.opened, other.opened])
    // 1,000 jobs of 20 ms each on 10 slots: about 2 s of work, submitted over about 3 s
    await startWorker([defineHandler('work', () => sleep(20))], { concurrency: 10 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const submitted: string[] = []
    const submitting = (async () => {
      for (let batch = 0; batch < 20; batch++) {
        const ids = await a.submitJobs(Array.from({ length: 50 }, () => ({ type: 'work' })))
        submitted.push(...ids.map((j) => j.id))
        await sleep(150)
      }
    })()
    await waitFor(() => first.events.length >= 100, { timeoutMs: 60_000, what: 'the first 100 events' })
    await first.close()
    const lastSeen = first.events[first.events.length - 1] as Received
    await sleep(5_000) // the disconnect itself, not a wait for a condition
    const second = connect(keyA, '', lastSeen.id)
    await submitting
    const all = () => [...first.events, ...second.events]
    await waitFor(() => all().filter((e) => e.type === 'succeeded').length >= 1_000, { timeoutMs: 120_000, what: '1,000 succeeded events' })
    await second.close()

    const events = all()
    const ids = events.map((e) => e.id)
    for (let i = 1; i < ids.length; i++) expect(compareEventIds(ids[i] as string, ids[i - 1] as string)).toBeGreaterThan(0)
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length)
    expect(events.every((e) => e.tenant === 'a')).toBe(true)
    const byJob = new Map<string, string[]>()
    for (const e of events) byJob.set(e.jobId, [...(byJob.get(e.jobId) ?? []), e.type])
    expect(byJob.size).toBe(1_000)
    for (const id of submitted) expect(byJob.get(id)).toEqual(['submitted', 'started', 'succeeded'])

    // tenant B's stream works (it gets B's own event) and never carried A's
    const { job } = await createClient({ db: t.db, tenant: 'b' }).submitJob({ type: 'work' })
    await waitFor(() => other.events.some((e) => e.jobId === job.id && e.type === 'succeeded'), { timeoutMs: 30_000, what: "B's own event" })
    await other.close()
    expect(other.events.every((e) => e.tenant === 'b')).toBe(true)
  }, 180_000)

  it('filters by job, job type, queue and event type', async () => {
    const key = (await createApiKey(t.db, { tenant: 'f' })).key
    const stream = connect(key, '?type=wanted&queue=q1&events=submitted,cancelled')
    await stream.opened
    const f = createClient({ db: t.db, tenant: 'f' })
    const { job } = await f.submitJob({ type: 'wanted', queue: 'q1' })
    await f.submitJob({ type: 'other', queue: 'q1' })
    await f.submitJob({ type: 'wanted', queue: 'q2' })
    await f.cancelJob(job.id)
    await waitFor(() => stream.events.length >= 2, { timeoutMs: 30_000, what: 'the filtered events' })
    await sleep(300)
    await stream.close()
    expect(stream.events.map((e) => [e.jobId, e.type])).toEqual([
      [job.id, 'submitted'],
      [job.id, 'cancelled'],
    ])
    // each message is the Event JSON the TypeScript client's events carry (eventToJson), key for key
    const same = await eventListAfter(t.db, { after: '0', tenant: 'f', filter: { jobId: job.id }, limit: 10 })
    expect(stream.events).toEqual(same.map(eventToJson))
  })

  it('refuses a bad filter with 400', async () => {
    const key = (await createApiKey(t.db, { tenant: 'f' })).key
    const res = await fetch(`${base}/v1/events?events=finished`, { headers: { authorization: `Bearer ${key}` } })
    expect(res.status).toBe(400)
  })

  it('refuses a position beyond the largest batch number with 400, from the query or Last-Event-ID, before the stream opens', async () => {
    const key = (await createApiKey(t.db, { tenant: 'f' })).key
    const huge = '9999999999999999999-0'
    const tries: Array<{ query: string; headers: Record<string, string>; name: string }> = [
      { query: `?after=${huge}`, headers: {}, name: 'after' },
      { query: '', headers: { 'last-event-id': huge }, name: 'Last-Event-ID' },
    ]
    for (const init of tries) {
      const res = await fetch(`${base}/v1/events${init.query}`, { headers: { authorization: `Bearer ${key}`, ...init.headers } })
      expect(res.status).toBe(400)
      expect(res.headers.get('content-type')).toMatch(/json/)
      expect(((await res.json()) as { message: string }).message).toMatch(new RegExp(`^${init.name}: batch number 9999999999999999999 is beyond`))
    }
  })

  it('refuses a malformed Last-Event-ID with 400 naming it, rather than starting from now', async () => {
    const key = (await createApiKey(t.db, { tenant: 'f' })).key
    for (const bad of ['abc', '5-', '-1', '5-3-2']) {
      const res = await fetch(`${base}/v1/events`, { headers: { authorization: `Bearer ${key}`, 'last-event-id': bad } })
      expect(res.status).toBe(400)
      expect(((await res.json()) as { message: string }).message).toContain(`Last-Event-ID: not an event id: ${JSON.stringify(bad)}`)
    }
  })

  it('refuses an id after the newest event with 400 (a stream from it would never catch up)', async () => {
    const key = (await createApiKey(t.db, { tenant: 'f' })).key
    // after the last number the stream gave (the batches of it may be gone)
    const { rows } = await sql<{ seq: string }>`select coalesce(pg_sequence_last_value('pgsched.event_seq'), 0)::text as seq`.execute(t.db)
    const beyond = `${BigInt(rows[0]?.seq ?? '0') + 1000n}-0`
    const res = await fetch(`${base}/v1/events`, { headers: { authorization: `Bearer ${key}`, 'last-event-id': beyond } })
    expect(res.status).toBe(400)
    // named as the client sent it: the header, or the query parameter
    expect(((await res.json()) as { message: string }).message).toMatch(new RegExp(`^Last-Event-ID: event ${beyond} comes after the newest event`))
    const byQuery = await fetch(`${base}/v1/events?after=${beyond}`, { headers: { authorization: `Bearer ${key}` } })
    expect(byQuery.status).toBe(400)
    expect(((await byQuery.json()) as { message: string }).message).toMatch(new RegExp(`^after: event ${beyond} comes after the newest event`))
  })

  it('resumes from a Last-Event-ID whose batch, and every later one, the retention pruned (a reconnect after a quiet spell)', async () => {
    const key = (await createApiKey(t.db, { tenant: 'quiet' })).key
    const client = createClient({ db: t.db, tenant: 'quiet' })
    const ac = new AbortController()
    const stream = await client.events({ signal: ac.signal })
    await client.submitJob({ type: 'work' })
    const first = await stream.next()
    ac.abort()
    await stream.return()
    const lastId = (first.value as { id: string }).id
    // the pruner, an idle hour later: no batch left
    await sql`delete from pgsched.event_batches`.execute(t.db)
    const ctl = new AbortController()
    const res = await fetch(`${base}/v1/events`, { headers: { authorization: `Bearer ${key}`, 'last-event-id': lastId }, signal: ctl.signal })
    expect(res.status).toBe(200)
    ctl.abort()
  })

  it('counts a stream answered 200 in pgsched_http_requests_total once it ends, as any request', async () => {
    const key = (await createApiKey(t.db, { tenant: 'counted' })).key
    const counted = async (status: number) => {
      const text = await (await fetch(`${base}/metrics`)).text()
      const line = text.split('\n').find((l) => l.startsWith(`pgsched_http_requests_total{method="GET",route="/v1/events",status_code="${status}"}`))
      return line === undefined ? 0 : Number(line.split(' ').pop())
    }
    const before = await counted(200)
    for (let i = 0; i < 3; i++) {
      const ctl = new AbortController()
      const res = await fetch(`${base}/v1/events`, { headers: { authorization: `Bearer ${key}` }, signal: ctl.signal })
      expect(res.status).toBe(200)
      await (res.body as ReadableStream<Uint8Array>).getReader().read() // ": open"
      ctl.abort()
    }
    await waitFor(async () => (await counted(200)) === before + 3, { what: 'the three streams counted' })
  })

  it('ends an open stream once its API key is revoked, and its reconnect is refused', async () => {
    const app3 = buildApp({ db: t.db, log: t.log, apiKeyCacheMs: 1_000 })
    await app3.listen({ host: '127.0.0.1', port: 0 })
    const address = app3.server.address()
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/v1/events`
    const created = await createApiKey(t.db, { tenant: 'revoked' })
    const headers = { authorization: `Bearer ${created.key}` }
    try {
      const res = await fetch(url, { headers })
      expect(res.status).toBe(200)
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      let ended = false
      const reading = (async () => {
        for (;;) if ((await reader.read()).done) break
        ended = true
      })()
      await apiKeyRevoke(t.db, { id: created.id })
      await waitFor(() => ended, { timeoutMs: 10_000, what: 'the stream to end after the revocation' })
      await reading
      expect((await fetch(url, { headers })).status).toBe(401)
    } finally {
      await app3.close()
    }
  })

  it('ends the stream of a client that left while it was opening', async () => {
    const lines: string[] = []
    const log = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) })
    const app2 = buildApp({ db: t.db, log })
    await app2.listen({ host: '127.0.0.1', port: 0 })
    const address = app2.server.address()
    const key = (await createApiKey(t.db, { tenant: 'g' })).key
    const blocker = new pg.Client({ connectionString: t.url })
    await blocker.connect()
    try {
      // the stream's listener insert waits on this lock: the client leaves while the stream opens
      await blocker.query('begin')
      await blocker.query('lock table pgsched.event_listeners in share mode')
      const req = get({
        host: '127.0.0.1',
        port: typeof address === 'object' && address ? address.port : 0,
        path: '/v1/events',
        headers: { authorization: `Bearer ${key}` },
      })
      req.on('error', () => {})
      await waitFor(
        async () =>
          (
            await sql`select 1 from pg_stat_activity
                       where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into pgsched.event_listeners%'`.execute(t.db)
          ).rows.length > 0,
        { what: 'the stream opening, waiting on the lock' },
      )
      req.destroy()
      await waitFor(() => new Promise<boolean>((resolve) => app2.server.getConnections((_, n) => resolve(n === 0))), {
        what: 'the server to see the client leave',
      })
      await blocker.query('commit')
      await waitFor(() => lines.some((l) => l.includes('event stream ended')), { timeoutMs: 30_000, what: 'the handler to end' })
    } finally {
      await blocker.end()
      await app2.close()
    }
  })

  it('holds each tenant to SCHEDULER_MAX_STREAMS_PER_TENANT open streams and output follows (429 with Retry-After), other tenants and operators apart', async () => {
    const app3 = buildApp({ db: t.db, log: t.log, maxStreamsPerTenant: 2 })
    await app3.listen({ host: '127.0.0.1', port: 0 })
    const address = app3.server.address()
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
    const keyA = (await createApiKey(t.db, { tenant: 'capped' })).key
    const keyB = (await createApiKey(t.db, { tenant: 'uncapped' })).key
    const operator = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const open: AbortController[] = []
    const request = async (key: string, path = '/v1/events') => {
      const controller = new AbortController()
      const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: controller.signal })
      // a stream stays open until the test ends it; a refusal's body is read, or dropped at the end
      open.push(controller)
      return res
    }
    try {
      expect((await request(keyA)).status).toBe(200)
      expect((await request(keyA)).status).toBe(200)
      const refused = await request(keyA)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('5')
      expect(await refused.json()).toMatchObject({
        statusCode: 429,
        message: expect.stringContaining(
          'tenant capped already has 2 event streams and output follows open on this API process, the most it may (SCHEDULER_MAX_STREAMS_PER_TENANT=2)',
        ),
      })
      // an output follow counts too (a pending execution: the follow would wait for it to start)
      const { job } = await createClient({ db: t.db, tenant: 'capped' }).submitJob({ type: 'never-run' })
      const [execution] = (await createClient({ db: t.db, tenant: 'capped' }).listExecutions(job.id)).items
      expect((await request(keyA, `/v1/executions/${execution?.id}/output?follow=true`)).status).toBe(429)
      // another tenant, and an operator key, are not held back by it
      expect((await request(keyB)).status).toBe(200)
      for (let i = 0; i < 3; i++) expect((await request(operator)).status).toBe(200)
      // a stream that ends gives its slot back
      open[0]?.abort()
      await waitFor(async () => (await request(keyA)).status === 200, { what: 'a slot given back' })
    } finally {
      for (const c of open) c.abort()
      await app3.close()
    }
  })

  it('answers HEAD of a stream at once with its headers, taking no slot: a probe does not hold the tenant back', async () => {
    const app4 = buildApp({ db: t.db, log: t.log, maxStreamsPerTenant: 1 })
    await app4.listen({ host: '127.0.0.1', port: 0 })
    const address = app4.server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const key = (await createApiKey(t.db, { tenant: 'probed' })).key
    const { job } = await createClient({ db: t.db, tenant: 'probed' }).submitJob({ type: 'never-run' })
    const [execution] = (await createClient({ db: t.db, tenant: 'probed' }).listExecutions(job.id)).items
    const head = (path: string) =>
      new Promise<{ status: number; type: string | undefined } | 'no answer within 3 s'>((resolve) => {
        const req = request({ host: '127.0.0.1', port, method: 'HEAD', path, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.resume()
          resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] })
        })
        req.setTimeout(3000, () => {
          req.destroy()
          resolve('no answer within 3 s')
        })
        req.on('error', () => {})
        req.end()
      })
    const streams: AbortController[] = []
    const stream = async () => {
      const controller = new AbortController()
      streams.push(controller)
      return (await fetch(`http://127.0.0.1:${port}/v1/events`, { headers: { authorization: `Bearer ${key}` }, signal: controller.signal })).status
    }
    try {
      for (let i = 0; i < 3; i++) expect(await head('/v1/events')).toEqual({ status: 200, type: 'text/event-stream; charset=utf-8' })
      // the tenant's one slot is still free for a stream
      expect(await stream()).toBe(200)
      streams.pop()?.abort()
      // a follow's HEAD takes a slot while it answers, and gives it back once answered
      for (let i = 0; i < 3; i++) expect(await head(`/v1/executions/${execution?.id}/output?follow=true`)).toMatchObject({ status: 200 })
      await waitFor(async () => (await stream()) === 200, { what: 'the slot free after the HEADs of a follow' })
    } finally {
      for (const c of streams) c.abort()
      await app4.close()
    }
  })
})
