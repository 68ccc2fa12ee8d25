/**
 * Webhooks end to end: a subscription made over REST, a job run by a worker, the dispatcher
 * submitting the delivery, the built-in pgsched.webhook handler POSTing it to a local receiver
 * (allowed as the http handler's allowlist allows it) that answers 500 three times, then 200.
 */
import { createServer, type Server } from 'node:http'
import { sql } from 'kysely'
import pg from 'pg'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { signWebhook, verifyWebhookSignature } from '../../src/index.ts'
import { createClient } from '../../src/client.ts'
import { ConflictError, ValidationError, WebhookExistsError } from '../../src/errors.ts'
import { normalizeSubmit } from '../../src/core/job.ts'
import { jobInsertMany } from '../../src/db/queries/jobs.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { readFileSync } from 'node:fs'
import { retryWindowMaxMs } from '../../src/core/backoff.ts'
import { WEBHOOK_DELIVERY, WebhookDispatcher } from '../../src/maintenance/webhook-dispatcher.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { createWebhookHandler } from '../../src/worker/webhook-handler.ts'
import { webhookDeliveryInsert } from '../../src/db/queries/webhooks.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { useTestApi } from '../api/helpers.ts'
import { lockWaiters, useTestDb } from '../db.ts'
import { useWorkers } from '../worker/harness.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000c0de'
// the receiver is on 127.0.0.1: admitted as the workers' SCHEDULER_HTTP_ALLOW admits it
const api = useTestApi(t, { httpAllow: '127.0.0.1' })
const startWorker = useWorkers(t)

interface Delivery {
  method: string | undefined
  path: string | undefined
  body: string
  signature: string | undefined
  subscription: string | undefined
  status: number
}

let server: Server
let url: string
let answers: number[] = []
/** Run when a request has been read, before it is answered (a change the next attempt must see). */
let beforeAnswer: ((d: Delivery) => Promise<void>) | undefined
const received: Delivery[] = []

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const status = answers.shift() ?? 200
      const body = Buffer.concat(chunks).toString('utf8')
      const delivery: Delivery = {
        method: req.method,
        path: req.url,
        body,
        signature: req.headers['pgsched-signature'] as string | undefined,
        subscription: req.headers['pgsched-subscription-id'] as string | undefined,
        status,
      }
      await beforeAnswer?.(delivery)
      received.push(delivery)
      res.writeHead(status, status === 301 || status === 302 ? { location: '/moved' } : {}).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

let dispatcher: WebhookDispatcher | undefined
afterEach(async () => {
  await dispatcher?.stop()
  dispatcher = undefined
  received.length = 0
  answers = []
  beforeAnswer = undefined
})

/** A `work` job of `client`'s tenant that succeeds, claimed and completed here (no worker runs): one `succeeded` event. */
async function succeededWithoutWorker(client: ReturnType<typeof createClient>): Promise<void> {
  await client.submitJob({ type: 'work' })
  const [claimed] = await executionClaimBatch(t.db, { workerId: W, queues: ['default'], types: ['work'], limit: 1, leaseMs: 60_000 })
  if (!claimed) throw new Error('nothing claimed')
  await executionCompleteMany(t.db, { workerId: W, completions: [{ ...claimed, resultJson: 'null', outputUri: null }] })
}

describe('webhooks', () => {
  it('delivers an event four times to a receiver that answers 500 three times, each validly signed, and logs all four', async () => {
    const key = await api.keyFor('a')
    const created = await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })
    expect(created.statusCode).toBe(201)
    const sub = created.json<{ id: string; secret: string; events: string[] }>()
    expect(sub.secret).toMatch(/^[0-9a-f]{64}$/)
    expect((await api.call(key, 'GET', '/v1/webhooks')).json()).toEqual({
      items: [expect.not.objectContaining({ secret: expect.anything() })],
      nextCursor: null,
    })

    answers = [500, 500, 500]
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    const { job } = await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 'work' })

    await waitFor(() => received.length >= 4, { timeoutMs: 60_000, what: 'four deliveries' })
    expect(received.map((d) => d.status)).toEqual([500, 500, 500, 200])
    for (const d of received) {
      expect(verifyWebhookSignature({ secret: sub.secret, body: d.body, header: d.signature })).toBe(true)
      expect(JSON.parse(d.body)).toMatchObject({ type: 'succeeded', jobId: job.id, tenant: 'a', jobType: 'work' })
    }
    expect(new Set(received.map((d) => JSON.parse(d.body).id)).size).toBe(1)
    // the subscription is named, so a receiver of several knows which secret to verify with
    expect(received.map((d) => d.subscription)).toEqual(Array(4).fill(sub.id))

    const log = await waitFor(
      async () => {
        const res = await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries`)
        const items = res.json<{ items: Array<{ attempt: number; statusCode: number; ok: boolean; willRetry: boolean | null }> }>().items
        return items.length >= 4 ? items : undefined
      },
      { what: 'the delivery log' },
    )
    // each failed attempt says another follows; the delivered one ends it
    expect(log.map((d) => [d.attempt, d.statusCode, d.ok, d.willRetry])).toEqual([
      [4, 200, true, false],
      [3, 500, false, true],
      [2, 500, false, true],
      [1, 500, false, true],
    ])

    // another tenant sees neither the subscription nor its log
    const other = await api.keyFor('b')
    expect((await api.call(other, 'GET', `/v1/webhooks/${sub.id}/deliveries`)).statusCode).toBe(404)
    expect((await api.call(other, 'GET', '/v1/webhooks')).json()).toEqual({ items: [], nextCursor: null })
  }, 90_000)

  it("tells the receiver why an attempt failed: the retrying and failed events carry the handler's error", async () => {
    const key = await api.keyFor('a')
    const created = await api.call(key, 'POST', '/v1/webhooks', { url, events: ['retrying', 'failed'] })
    expect(created.statusCode).toBe(201)
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    class QuotaError extends Error {
      override name = 'QuotaError'
    }
    await startWorker([
      defineHandler('flaky', () => {
        throw new QuotaError('the upstream answered 429')
      }),
      createWebhookHandler({ db: t.db, allow: '127.0.0.1' }),
    ])
    const { job } = await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 'flaky', maxAttempts: 2, backoffBaseMs: 0, backoffMaxMs: 0 })

    await waitFor(() => received.length >= 2, { timeoutMs: 60_000, what: 'two deliveries' })
    const bodies = received.map((d) => JSON.parse(d.body)).sort((x, y) => x.attempt - y.attempt)
    expect(bodies.map((b) => [b.type, b.jobId, b.attempt, b.error])).toEqual([
      ['retrying', job.id, 1, { message: 'the upstream answered 429', name: 'QuotaError' }],
      ['failed', job.id, 2, { message: 'the upstream answered 429', name: 'QuotaError' }],
    ])
  }, 90_000)

  it('does not follow a redirect, which would turn the POST into a GET without the event: the attempt fails and is retried', async () => {
    const key = await api.keyFor('r')
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })).json<{ id: string }>()
    answers = [301, 302, 200]
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await createClient({ db: t.db, tenant: 'r' }).submitJob({ type: 'work' })
    await waitFor(() => received.length >= 3, { timeoutMs: 60_000, what: 'three deliveries' })
    // every request was the POST of the event to the subscription's URL: nothing went to /moved
    expect(received.map((d) => [d.method, d.path, d.status])).toEqual([
      ['POST', '/hook', 301],
      ['POST', '/hook', 302],
      ['POST', '/hook', 200],
    ])
    expect(new Set(received.map((d) => JSON.parse(d.body).type))).toEqual(new Set(['succeeded']))
    const log = await waitFor(
      async () => {
        const items = (await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries`)).json<{
          items: Array<{ attempt: number; statusCode: number; ok: boolean; error: string | null }>
        }>().items
        return items.length >= 3 ? items : undefined
      },
      { what: 'the delivery log' },
    )
    expect(log.map((d) => [d.attempt, d.statusCode, d.ok])).toEqual([
      [3, 200, true],
      [2, 302, false],
      [1, 301, false],
    ])
    expect(log[2]?.error).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/hook answered 301 to http:\/\/127\.0\.0\.1:\d+\/moved: redirects are not followed$/)
  }, 90_000)

  it('views a subscription at the Location its creation gave, and pages through its delivery log, newest first', async () => {
    const key = await api.keyFor('p')
    const created = await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })
    const sub = created.json<{ id: string }>()
    const viewed = await api.call(key, 'GET', created.headers.location as string)
    expect(viewed.statusCode).toBe(200)
    expect(viewed.json()).toEqual({
      id: sub.id,
      tenant: 'p',
      url,
      events: ['succeeded'],
      queue: 'default',
      createdAt: expect.any(String),
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })
    expect((await api.call(await api.keyFor('other-p'), 'GET', `/v1/webhooks/${sub.id}`)).statusCode).toBe(404)
    for (let attempt = 1; attempt <= 5; attempt++) {
      await webhookDeliveryInsert(t.db, {
        subscriptionId: sub.id,
        eventId: `${attempt}-0`,
        eventType: 'succeeded',
        jobId: uuidV7(),
        attempt,
        statusCode: 500,
        ok: false,
        error: 'POST answered 500',
        durationMs: 3,
        willRetry: true,
      })
    }
    const seen: number[] = []
    let cursor: string | null = null
    for (let page = 0; page < 5; page++) {
      const res = await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
      const body = res.json<{ items: Array<{ attempt: number }>; nextCursor: string | null }>()
      seen.push(...body.items.map((d) => d.attempt))
      cursor = body.nextCursor
      if (cursor === null) break
    }
    expect(seen).toEqual([5, 4, 3, 2, 1])
    expect(cursor).toBeNull()
    expect((await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries?cursor=bogus`)).statusCode).toBe(400)
  })

  it('cancels the deliveries still to come when their subscription is deleted, rather than failing them', async () => {
    const key = await api.keyFor('d')
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })).json<{ id: string }>()
    answers = Array(20).fill(500)
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await createClient({ db: t.db, tenant: 'd' }).submitJob({ type: 'work' })
    await waitFor(() => received.length >= 1, { timeoutMs: 30_000, what: 'a first delivery' })
    const delivery = await waitFor(
      async () => (await api.call(key, 'GET', '/v1/jobs?type=pgsched.webhook')).json<{ items: Array<{ id: string; status: string }> }>().items[0],
      { what: 'the delivery job' },
    )
    expect((await api.call(key, 'DELETE', `/v1/webhooks/${sub.id}`)).statusCode).toBe(200)
    const job = (await api.call(key, 'GET', `/v1/jobs/${delivery.id}`)).json<{ status: string }>()
    expect(job.status).toBe('CANCELLED')
    // nothing shows as a failure of the tenant's
    expect((await api.call(key, 'GET', '/v1/failures')).json()).toEqual({ items: [] })
  }, 60_000)

  it('deletes a subscription and cancels its deliveries in one transaction: none can start in between and find it gone', async () => {
    const key = await api.keyFor('g')
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })).json<{ id: string }>()
    // a job of the tenant ends; the dispatcher submits its delivery, which waits in pgsched.due (no worker runs it)
    const g = createClient({ db: t.db, tenant: 'g' })
    await succeededWithoutWorker(g)
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    const delivery = await waitFor(async () => (await g.listJobs({ type: 'pgsched.webhook' })).items[0], { what: 'the delivery job' })
    // another transaction holds the delivery's job row: the cancel waits for it
    const holder = new pg.Client({ connectionString: t.url })
    await holder.connect()
    try {
      await holder.query('begin')
      await holder.query('select id from pgsched.jobs where id = $1 for update', [delivery.id])
      const deleting = api.call(key, 'DELETE', `/v1/webhooks/${sub.id}`)
      await waitFor(async () => (await lockWaiters(t.db)) > 0, { what: 'the delete waiting for the delivery job' })
      // meanwhile the subscription is still there for a delivery attempt that reads it
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.webhook_subscriptions where id = ${sub.id}::uuid`.execute(t.db)
      expect(rows[0]?.n).toBe(1)
      await holder.query('rollback')
      expect((await deleting).statusCode).toBe(200)
    } finally {
      await holder.end()
    }
    expect((await g.viewJob(delivery.id)).status).toBe('CANCELLED')
    expect((await api.call(key, 'GET', `/v1/webhooks/${sub.id}`)).statusCode).toBe(404)
  })

  it('submits no delivery for a subscription deleted while the dispatcher reads the events: it waits for the delete and leaves it out', async () => {
    const key = await api.keyFor('h')
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })).json<{ id: string }>()
    const h = createClient({ db: t.db, tenant: 'h' })
    await succeededWithoutWorker(h)
    // a delete of the subscription in progress: the dispatcher's read sees the subscription still there
    const holder = new pg.Client({ connectionString: t.url })
    await holder.connect()
    let submitted: number
    try {
      await holder.query('begin')
      await holder.query('delete from pgsched.webhook_subscriptions where id = $1', [sub.id])
      const pass = new WebhookDispatcher({ db: t.db, log: t.log }).runOnce()
      let settled = false
      void pass.finally(() => {
        settled = true
      })
      await waitFor(async () => settled || (await lockWaiters(t.db)) > 0, { what: 'the pass ending or waiting for the delete' })
      await holder.query('commit')
      submitted = await pass
    } finally {
      await holder.end()
    }
    expect(submitted).toBe(0)
    expect((await h.listJobs({ type: 'pgsched.webhook' })).items).toEqual([])
  })

  it('logs a delivery refused for good (a 404) as the end of it: no attempt follows', async () => {
    const key = await api.keyFor('f')
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'] })).json<{ id: string }>()
    answers = [404]
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await createClient({ db: t.db, tenant: 'f' }).submitJob({ type: 'work' })
    const log = await waitFor(
      async () =>
        (await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries`)).json<{
          items: Array<{ attempt: number; statusCode: number; ok: boolean; willRetry: boolean | null }>
        }>().items[0],
      { what: 'the delivery log', timeoutMs: 30_000 },
    )
    expect([log.attempt, log.statusCode, log.ok, log.willRetry]).toEqual([1, 404, false, false])
  }, 60_000)

  it('fails the documented verification for a forged, altered or stale signature', () => {
    const secret = 'a-secret-of-enough-length'
    const body = '{"id":"1","type":"succeeded"}'
    const nowS = Math.floor(Date.now() / 1000)
    const sign = (s: string, b: string, at: number) => signWebhook(s, b, at)
    expect(verifyWebhookSignature({ secret, body, header: sign(secret, body, nowS) })).toBe(true)
    expect(verifyWebhookSignature({ secret, body, header: sign('another-secret-of-length', body, nowS) })).toBe(false)
    expect(verifyWebhookSignature({ secret, body: body.replace('succeeded', 'failed'), header: sign(secret, body, nowS) })).toBe(false)
    expect(verifyWebhookSignature({ secret, body, header: sign(secret, body, nowS - 3600) })).toBe(false)
    expect(verifyWebhookSignature({ secret, body, header: `t=${nowS},v1=${'0'.repeat(64)}` })).toBe(false)
    expect(verifyWebhookSignature({ secret, body, header: undefined })).toBe(false)
    // a tolerance read from an unset setting (NaN) is refused, not taken as "any age"
    expect(() => verifyWebhookSignature({ secret, body, header: sign(secret, body, nowS - 3600), toleranceS: Number.NaN })).toThrow(
      /toleranceS must be a finite/,
    )
    expect(() => verifyWebhookSignature({ secret, body, header: sign(secret, body, nowS), toleranceS: -1 })).toThrow(RangeError)
  })

  it('refuses a parameter verification does not know, naming it and the known ones, rather than using the default tolerance', () => {
    const secret = 'a-secret-of-enough-length'
    const body = '{"id":"1","type":"succeeded"}'
    const nowS = Math.floor(Date.now() / 1000)
    const header = signWebhook(secret, body, nowS - 120)
    const refusal = (params: unknown) => {
      try {
        verifyWebhookSignature(params as never)
      } catch (err: unknown) {
        expect(err).toBeInstanceOf(ValidationError)
        return { message: (err as ValidationError).message, details: (err as ValidationError).details }
      }
      throw new Error('not refused')
    }
    // from JavaScript: a signature two minutes old would pass under the default 300 s, not the 60 s meant
    expect(refusal({ secret, body, header, tolerance: 60 })).toEqual({
      message: 'unknown field "tolerance" (known: secret, body, header, toleranceS, nowS)',
      details: [{ path: 'tolerance', message: 'unknown field "tolerance"' }],
    })
    // refused whatever the header, not only when the signature would be checked
    expect(refusal({ secret, body, header: undefined, tolerance: 60 }).details).toEqual([{ path: 'tolerance', message: 'unknown field "tolerance"' }])
    expect(refusal(undefined).message).toBe('verifyWebhookSignature params must be an object')
    expect(verifyWebhookSignature({ secret, body, header, toleranceS: 60 })).toBe(false)
    // a key left undefined is no parameter
    expect(verifyWebhookSignature({ secret, body, header, tolerance: undefined } as never)).toBe(true)
  })

  it('creates, lists and deletes subscriptions, and refuses bad ones with 400', async () => {
    const key = await api.keyFor('c')
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'ftp://x' })).statusCode).toBe(400)
    // a target every delivery would be refused is refused now, naming why (127.0.0.1 is admitted here)
    for (const [target, why] of [
      ['http://10.0.0.7/hook', '10.0.0.7 is a private address'],
      ['http://[::1]:8080/hook', '::1 is a loopback address'],
      ['http://127.2/hook', '127.0.0.2 is a loopback address'],
      ['http://localhost:9000/hook', 'localhost is a loopback name'],
      ['http://169.254.169.254/latest', '169.254.169.254 is a link-local (cloud metadata among them) address'],
      ['https://example.com:25/hook', "port 25 is on the Fetch standard's list of bad ports (mail, shell and other services a crafted request could talk to)"],
    ] as const) {
      const refused = await api.call(key, 'POST', '/v1/webhooks', { url: target })
      expect(refused.statusCode, target).toBe(400)
      expect(refused.json<{ message: string }>().message).toBe(
        `url: ${why}, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it (on the workers, and where the subscription is made: the API's or the CLI's environment, or createClient's httpAllow)`,
      )
    }
    // the TypeScript client checks the same, against its own httpAllow
    await expect(createClient({ db: t.db, tenant: 'c' }).webhooks.create({ url: 'http://10.0.0.7/hook' })).rejects.toThrow(
      'url: 10.0.0.7 is a private address, to which deliveries are refused',
    )
    await expect(createClient({ db: t.db, tenant: 'c' }).webhooks.create({ url: 'http://localhost:9000/hook' })).rejects.toThrow(ValidationError)
    const admitted = await createClient({ db: t.db, tenant: 'c', httpAllow: '10.0.0.0/8' }).webhooks.create({ url: 'http://10.0.0.7/hook' })
    expect(admitted.url).toBe('http://10.0.0.7/hook')
    await createClient({ db: t.db, tenant: 'c' }).webhooks.delete(admitted.id)
    expect(() => createClient({ db: t.db, tenant: 'c', httpAllow: 'not a range/99' })).toThrow(/httpAllow: /)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url, events: ['finished'] })).statusCode).toBe(400)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url, secret: 'short' })).statusCode).toBe(400)
    const blank = await api.call(key, 'POST', '/v1/webhooks', { url, secret: ' '.repeat(20) })
    expect(blank.statusCode).toBe(400)
    expect(blank.json<{ message: string }>().message).toBe('secret must not be blank nor begin or end with white space')
    const created = await api.call(key, 'POST', '/v1/webhooks', { url, secret: 'sixteen-chars-ok!' })
    const { id } = created.json<{ id: string }>()
    expect(created.headers.location).toBe(`/v1/webhooks/${id}`)
    const del = await api.app.inject({ method: 'DELETE', url: `/v1/webhooks/${id}`, headers: { authorization: `Bearer ${key}` } })
    expect(del.statusCode).toBe(200)
    expect(del.json()).toMatchObject({ id, url })
    const again = await api.app.inject({ method: 'DELETE', url: `/v1/webhooks/${id}`, headers: { authorization: `Bearer ${key}` } })
    expect(again.statusCode).toBe(404)
  })

  it('updates the URL, the event types and the secret in place, each alone, answering the subscription without its secret', async () => {
    const key = await api.keyFor('up')
    const created = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['failed'], secret: 'the-first-secret-1' })).json<{
      id: string
      createdAt: string
    }>()
    const path = `/v1/webhooks/${created.id}`
    const secretOf = async () =>
      (await sql<{ secret: string }>`select secret from pgsched.webhook_subscriptions where id = ${created.id}::uuid`.execute(t.db)).rows[0]?.secret

    const moved = await api.call(key, 'PATCH', path, { url: `${url}/moved` })
    expect(moved.statusCode).toBe(200)
    expect(moved.json()).toEqual({
      id: created.id,
      tenant: 'up',
      url: `${url}/moved`,
      events: ['failed'],
      queue: 'default',
      createdAt: created.createdAt,
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })
    const events = await api.call(key, 'PATCH', path, { events: ['succeeded', 'failed', 'succeeded'] })
    expect(events.json()).toMatchObject({ url: `${url}/moved`, events: ['succeeded', 'failed'] })
    expect(await secretOf()).toBe('the-first-secret-1')
    const rotated = await api.call(key, 'PATCH', path, { secret: 'the-second-secret-2' })
    expect(rotated.statusCode).toBe(200)
    expect(rotated.json()).toEqual({
      id: created.id,
      tenant: 'up',
      url: `${url}/moved`,
      events: ['succeeded', 'failed'],
      queue: 'default',
      createdAt: created.createdAt,
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })
    expect(await secretOf()).toBe('the-second-secret-2')
    // empty: every event type
    expect((await api.call(key, 'PATCH', path, { events: [] })).json()).toMatchObject({ events: [] })
    expect((await api.call(key, 'GET', path)).json()).toEqual({
      id: created.id,
      tenant: 'up',
      url: `${url}/moved`,
      events: [],
      queue: 'default',
      createdAt: created.createdAt,
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })

    // the TypeScript client: the same call, the same answer
    const client = createClient({ db: t.db, tenant: 'up', httpAllow: '127.0.0.1' })
    expect(await client.webhooks.update(created.id, { url, events: ['succeeded'], secret: 'the-third-secret-3' })).toEqual({
      id: created.id,
      tenant: 'up',
      url,
      events: ['succeeded'],
      queue: 'default',
      createdAt: new Date(created.createdAt),
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })
    expect(await secretOf()).toBe('the-third-secret-3')
  })

  it('refuses a bad update with the messages of a creation, an empty one naming the fields it takes, and changes nothing', async () => {
    const key = await api.keyFor('bad')
    const created = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['failed'], secret: 'the-first-secret-1' })).json<{ id: string }>()
    const path = `/v1/webhooks/${created.id}`
    const before = (await api.call(key, 'GET', path)).json()
    const secretOf = async () =>
      (await sql<{ secret: string }>`select secret from pgsched.webhook_subscriptions where id = ${created.id}::uuid`.execute(t.db)).rows[0]?.secret
    const refusal = async (body: unknown) => {
      const res = await api.call(key, 'PATCH', path, body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      return res.json<{ message: string; details: Array<{ path: string }> }>()
    }
    expect((await refusal({})).message).toBe('request body must give at least 1 of its fields (url, events, secret, enabled)')
    // no body, or an empty one, is an empty patch
    for (const none of [await api.call(key, 'PATCH', path), await api.call(key, 'PATCH', path, '', { 'content-type': 'application/json' })]) {
      expect(none.statusCode).toBe(400)
      expect(none.json<{ message: string }>().message).toBe('request body must give at least 1 of its fields (url, events, secret, enabled)')
    }
    expect((await refusal({ url: 'ftp://x' })).details[0]?.path).toBe('url')
    expect((await refusal({ url: 'http://10.0.0.7/hook' })).message).toBe(
      "url: 10.0.0.7 is a private address, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it (on the workers, and where the subscription is made: the API's or the CLI's environment, or createClient's httpAllow)",
    )
    expect((await refusal({ url: url.replace('/hook', '/ho\tok') })).message).toBe('url must not contain white space or control characters')
    expect((await refusal({ url, events: ['finished'] })).details[0]?.path).toMatch(/^events/)
    expect((await refusal({ url, secret: 'short' })).details[0]?.path).toBe('secret')
    expect((await refusal({ secret: ' '.repeat(20) })).message).toBe('secret must not be blank nor begin or end with white space')
    expect((await refusal({ url: null })).details[0]?.path).toBe('url')
    // a field an update does not take (the queue among them) is refused, not dropped
    expect((await refusal({ url, queue: 'other' })).details).toEqual([{ path: 'queue', message: 'unknown field "queue"' }])
    expect((await refusal({ secert: 'the-second-secret-2' })).details).toEqual([{ path: 'secert', message: 'unknown field "secert"' }])

    // the TypeScript client refuses the same, with a ValidationError naming the field
    const client = createClient({ db: t.db, tenant: 'bad', httpAllow: '127.0.0.1' })
    const refused = async (input: unknown) => {
      const err = await client.webhooks.update(created.id, input as never).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err, JSON.stringify(input)).toBeInstanceOf(ValidationError)
      return { message: (err as ValidationError).message, path: (err as ValidationError).details?.[0]?.path }
    }
    expect(await refused({})).toEqual({ message: 'give at least one of url, events, secret and enabled', path: '' })
    expect(await refused({ url: 'http://10.0.0.7/hook' })).toEqual({
      message:
        "url: 10.0.0.7 is a private address, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it (on the workers, and where the subscription is made: the API's or the CLI's environment, or createClient's httpAllow)",
      path: 'url',
    })
    expect(await refused({ url: url.replace('http://', 'HTTP://') })).toEqual({
      message: 'url must begin with http:// or https://, in lower case (it begins "HTTP://")',
      path: 'url',
    })
    expect(await refused({ url: 'ftp://example.com/hook' })).toEqual({ message: 'url must be an http or https URL of at most 2048 characters', path: 'url' })
    expect(await refused({ events: 'failed' })).toEqual({
      message:
        'events must be an array of event types (submitted, started, retrying, succeeded, failed, cancelled, expired, paused, resumed); absent or empty: all',
      path: 'events',
    })
    expect(await refused({ events: ['finished'] })).toEqual({
      message: 'events must be among submitted, started, retrying, succeeded, failed, cancelled, expired, paused, resumed (got "finished")',
      path: 'events',
    })
    // a valid field beside a bad one changes nothing either
    expect(await refused({ url: `${url}/other`, secret: 'short' })).toEqual({ message: 'secret must be 16-256 characters', path: 'secret' })
    expect(await refused({ secret: null })).toEqual({ message: 'secret must be 16-256 characters', path: 'secret' })
    expect(await refused({ event: ['succeeded'] })).toEqual({ message: 'unknown field "event" (known: url, events, secret, enabled)', path: 'event' })
    expect(await refused('https://example.com/hook')).toEqual({ message: 'webhook update must be an object', path: '' })
    expect(await refused(undefined)).toEqual({ message: 'webhook update must be an object', path: '' })

    expect((await api.call(key, 'GET', path)).json()).toEqual(before)
    expect(await secretOf()).toBe('the-first-secret-1')
  })

  it("answers 404 to an update of another tenant's subscription, or of none, and changes nothing", async () => {
    const key = await api.keyFor('own')
    const created = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['failed'], secret: 'the-first-secret-1' })).json<{ id: string }>()
    const before = (await api.call(key, 'GET', `/v1/webhooks/${created.id}`)).json()
    const other = await api.keyFor('other-own')
    const foreign = await api.call(other, 'PATCH', `/v1/webhooks/${created.id}`, { url: `${url}/theirs`, secret: 'the-thief-secret-1' })
    expect(foreign.statusCode).toBe(404)
    expect(foreign.json<{ message: string }>().message).toBe(`webhook ${created.id} not found`)
    await expect(createClient({ db: t.db, tenant: 'other-own' }).webhooks.update(created.id, { secret: 'the-thief-secret-1' })).rejects.toThrow(
      `webhook ${created.id} not found`,
    )
    expect((await api.call(key, 'PATCH', `/v1/webhooks/${uuidV7()}`, { secret: 'the-second-secret-2' })).statusCode).toBe(404)
    expect((await api.call(key, 'PATCH', '/v1/webhooks/not-a-uuid', { secret: 'the-second-secret-2' })).statusCode).toBe(400)
    expect((await api.call(key, 'GET', `/v1/webhooks/${created.id}`)).json()).toEqual(before)
    const { rows } = await sql<{ secret: string }>`select secret from pgsched.webhook_subscriptions where id = ${created.id}::uuid`.execute(t.db)
    expect(rows[0]?.secret).toBe('the-first-secret-1')
  })

  it("lists every tenant's subscriptions to an operator key, or one tenant's, and lets it view, update, page and delete them by id", async () => {
    const a = await api.keyFor('hooks-a')
    const b = await api.keyFor('hooks-b')
    const operator = (await createApiKey(t.db, { tenant: 'hooks-ops', operator: true })).key
    const ofA = (await api.call(a, 'POST', '/v1/webhooks', { url: `${url}/a`, events: ['failed'] })).json<{ id: string; tenant: string }>()
    const ofB = (await api.call(b, 'POST', '/v1/webhooks', { url: `${url}/b` })).json<{ id: string; tenant: string }>()
    expect([ofA.tenant, ofB.tenant]).toEqual(['hooks-a', 'hooks-b'])
    const ids = (res: { json<T>(): T }) => res.json<{ items: Array<{ id: string; tenant: string }> }>().items.map((w) => [w.tenant, w.id])
    // every tenant's, oldest first, whose each is
    const all = ids(await api.call(operator, 'GET', '/v1/webhooks'))
    expect(all.filter(([tenant]) => tenant === 'hooks-a' || tenant === 'hooks-b')).toEqual([
      ['hooks-a', ofA.id],
      ['hooks-b', ofB.id],
    ])
    expect(ids(await api.call(operator, 'GET', '/v1/webhooks?tenant=hooks-b'))).toEqual([['hooks-b', ofB.id]])
    // a page at a time: every one once, in order
    const paged: string[][] = []
    let cursor: string | null = null
    do {
      const page: { json<T>(): T } = await api.call(operator, 'GET', `/v1/webhooks?limit=1${cursor ? `&cursor=${cursor}` : ''}`)
      paged.push(...ids(page))
      cursor = page.json<{ nextCursor: string | null }>().nextCursor
    } while (cursor !== null && paged.length <= all.length)
    expect(paged).toEqual(all)
    expect((await api.call(operator, 'GET', '/v1/webhooks?limit=0')).statusCode).toBe(400)
    // a tenant key: its own only, naming another is refused
    expect(ids(await api.call(a, 'GET', '/v1/webhooks'))).toEqual([['hooks-a', ofA.id]])
    expect(ids(await api.call(a, 'GET', '/v1/webhooks?tenant=hooks-a'))).toEqual([['hooks-a', ofA.id]])
    const named = await api.call(a, 'GET', '/v1/webhooks?tenant=hooks-b')
    expect(named.statusCode).toBe(403)
    expect(named.json<{ message: string }>().message).toContain('only an operator key may name another')
    expect((await api.call(operator, 'GET', '/v1/webhooks?tenant=no%20such')).statusCode).toBe(400)
    // by id: view, update, deliveries and delete of another tenant's subscription
    expect((await api.call(operator, 'GET', `/v1/webhooks/${ofA.id}`)).json()).toMatchObject({ id: ofA.id, tenant: 'hooks-a', events: ['failed'] })
    const updated = await api.call(operator, 'PATCH', `/v1/webhooks/${ofA.id}`, { events: ['failed', 'expired'] })
    expect(updated.statusCode).toBe(200)
    expect((await api.call(a, 'GET', `/v1/webhooks/${ofA.id}`)).json()).toMatchObject({ events: ['failed', 'expired'] })
    expect((await api.call(operator, 'GET', `/v1/webhooks/${ofA.id}/deliveries`)).json()).toEqual({ items: [], nextCursor: null })
    expect((await api.call(operator, 'GET', `/v1/webhooks/${uuidV7()}`)).statusCode).toBe(404)
    expect((await api.call(operator, 'DELETE', `/v1/webhooks/${ofB.id}`)).json()).toMatchObject({ id: ofB.id, tenant: 'hooks-b' })
    expect(ids(await api.call(b, 'GET', '/v1/webhooks'))).toEqual([])
    // the other tenant's key still cannot reach it
    expect((await api.call(b, 'GET', `/v1/webhooks/${ofA.id}`)).statusCode).toBe(404)
  })

  it('signs the retry of a delivery with the secret rotated after its failed attempt, and sends it to the URL in force', async () => {
    const key = await api.keyFor('rot')
    const oldSecret = 'the-old-secret-0001'
    const newSecret = 'the-new-secret-0002'
    const sub = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['succeeded'], secret: oldSecret })).json<{ id: string }>()
    answers = [500]
    // the secret is rotated (and the URL moved) while the first attempt waits for its answer: a 500
    beforeAnswer = async () => {
      beforeAnswer = undefined
      const res = await api.call(key, 'PATCH', `/v1/webhooks/${sub.id}`, { secret: newSecret, url: `${url}/v2` })
      expect(res.statusCode).toBe(200)
    }
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await createClient({ db: t.db, tenant: 'rot' }).submitJob({ type: 'work' })

    await waitFor(() => received.length >= 2, { timeoutMs: 30_000, what: 'two deliveries' })
    expect(received.map((d) => [d.path, d.status])).toEqual([
      ['/hook', 500],
      ['/hook/v2', 200],
    ])
    const [first, retry] = received as [Delivery, Delivery]
    expect(JSON.parse(retry.body).id).toBe(JSON.parse(first.body).id)
    expect(verifyWebhookSignature({ secret: oldSecret, body: first.body, header: first.signature })).toBe(true)
    expect(verifyWebhookSignature({ secret: newSecret, body: retry.body, header: retry.signature })).toBe(true)
    expect(verifyWebhookSignature({ secret: oldSecret, body: retry.body, header: retry.signature })).toBe(false)
    const log = await waitFor(
      async () => {
        const items = (await api.call(key, 'GET', `/v1/webhooks/${sub.id}/deliveries`)).json<{ items: Array<{ attempt: number; statusCode: number }> }>().items
        return items.length >= 2 ? items : undefined
      },
      { what: 'the delivery log' },
    )
    expect(log.map((d) => [d.attempt, d.statusCode])).toEqual([
      [2, 200],
      [1, 500],
    ])
  }, 60_000)

  it('refuses with a ValidationError a URL it would store otherwise than it calls: an upper-case scheme, blanks, a tab', async () => {
    const client = createClient({ db: t.db, tenant: 'u', httpAllow: '127.0.0.1' })
    for (const target of [url.replace('http://', 'HTTP://'), ` ${url}`, `${url}\n`, url.replace('/hook', '/ho\tok')]) {
      const err = await client.webhooks.create({ url: target }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err, JSON.stringify(target)).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).details?.[0]?.path).toBe('url')
    }
    const key = await api.keyFor('u')
    const tab = await api.call(key, 'POST', '/v1/webhooks', { url: url.replace('/hook', '/ho\tok') })
    expect(tab.statusCode).toBe(400)
    expect(tab.json<{ message: string }>().message).toBe('url must not contain white space or control characters')
    expect(await client.webhooks.list()).toEqual([])
  })

  it('refuses events that are not an array from JavaScript, naming the field, rather than reading a string letter by letter', async () => {
    const client = createClient({ db: t.db, tenant: 'v', httpAllow: '127.0.0.1' })
    for (const events of ['failed', null, { 0: 'failed' }]) {
      await expect(client.webhooks.create({ url, events: events as never }), JSON.stringify(events)).rejects.toThrow(
        'events must be an array of event types (submitted, started, retrying, succeeded, failed, cancelled, expired, paused, resumed); absent or empty: all',
      )
    }
    expect(await client.webhooks.list()).toEqual([])
  })

  it('refuses pgsched.* job types from tenants (REST, client, SQL), and never signs for another tenant', async () => {
    const keyA = await api.keyFor('d')
    const sub = (await api.call(keyA, 'POST', '/v1/webhooks', { url })).json<{ id: string }>()
    const forged = { subscriptionId: sub.id, event: { id: '1', type: 'succeeded' } }

    const keyB = await api.keyFor('e')
    const rest = await api.call(keyB, 'POST', '/v1/jobs', { type: 'pgsched.webhook', payload: forged })
    expect(rest.statusCode).toBe(400)
    expect(rest.body).toContain('must not start with pgsched.')
    expect((await api.call(keyB, 'POST', '/v1/jobs', { type: 'pgsched-ok.webhook' })).statusCode).toBeLessThan(300)
    await expect(createClient({ db: t.db, tenant: 'e' }).submitJob({ type: 'pgsched.webhook', payload: forged })).rejects.toThrow(
      /must not start with pgsched\./,
    )
    await expect(sql`select pgsched.submit_job('pgsched.webhook', ${JSON.stringify(forged)}::jsonb, tenant => 'e')`.execute(t.db)).rejects.toThrow(/reserved/)

    // a delivery job of tenant e naming tenant d's subscription (as if it had got in): fails, nothing sent
    const insert = async (tenant: string) => {
      const job = {
        ...normalizeSubmit({ type: 'pgsched.webhook', payload: forged, maxAttempts: 1 }, new Date(), { internal: true }),
        id: uuidV7(),
        executionId: uuidV7(),
      }
      await jobInsertMany(t.db, { tenant, createdBy: 'test', jobs: [job] })
      return job.id
    }
    const stateOf = async (jobId: string) =>
      (await sql<{ state: string }>`select state from pgsched.executions where job_id = ${jobId}::uuid`.execute(t.db)).rows[0]?.state
    const foreign = await insert('e')
    const own = await insert('d')
    await startWorker([createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await waitFor(async () => (await stateOf(foreign)) === 'failed' && (await stateOf(own)) === 'succeeded', { what: 'both delivery jobs done' })
    expect(received).toHaveLength(1)
  }, 60_000)

  it('refuses a second subscription of the URL in the same queue with 409 naming the first, over REST and from the client, writing nothing', async () => {
    const key = await api.keyFor('twice')
    const first = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['failed'] })).json<{ id: string }>()
    const rows = async () =>
      (
        await sql<{ subs: number; listeners: number }>`
          select (select count(*)::int from pgsched.webhook_subscriptions) as subs,
                 (select count(*)::int from pgsched.event_listeners where kind = 'webhook') as listeners`.execute(t.db)
      ).rows[0]
    expect(await rows()).toEqual({ subs: 1, listeners: 1 })

    // overlapping events or not: each event it wants would be delivered once per subscription
    for (const events of [['failed'], ['succeeded'], []]) {
      const again = await api.call(key, 'POST', '/v1/webhooks', { url, events })
      expect(again.statusCode, JSON.stringify(events)).toBe(409)
      expect(again.headers.location).toBe(`/v1/webhooks/${first.id}`)
      expect(again.json()).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: `webhook ${first.id} already sends this tenant's events to this url in queue default: change its event types (an update) rather than subscribing the url again`,
      })
    }
    const client = createClient({ db: t.db, tenant: 'twice', httpAllow: '127.0.0.1' })
    const err = await client.webhooks.create({ url, queue: 'default' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(WebhookExistsError)
    expect(err).toBeInstanceOf(ConflictError)
    expect(err).toMatchObject({ code: 'conflict', existingId: first.id })
    expect(await rows()).toEqual({ subs: 1, listeners: 1 })

    // another queue, another URL or another tenant is another subscription
    expect((await api.call(key, 'POST', '/v1/webhooks', { url, queue: 'hooks' })).statusCode).toBe(201)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: `${url}/other` })).statusCode).toBe(201)
    expect((await api.call(await api.keyFor('someone-else'), 'POST', '/v1/webhooks', { url })).statusCode).toBe(201)
    // once the first is deleted, the URL may be subscribed again
    expect((await api.call(key, 'DELETE', `/v1/webhooks/${first.id}`)).statusCode).toBe(200)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url })).statusCode).toBe(201)
  })

  it('refuses a URL written otherwise than as it is sent (a backslash, a percent-encoded or non-ASCII host), which would be a second subscription of one receiver', async () => {
    const key = await api.keyFor('spelt')
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.org/hook' })).statusCode).toBe(201)
    const refusals: Array<[string, string]> = [
      ['https://example.org\\hook', 'url must not contain a backslash (a URL parser reads it as a slash): write / instead'],
      ['https://example.org/a\\b', 'url must not contain a backslash (a URL parser reads it as a slash): write / instead'],
      ['https://ex%61mple.org/hook', 'url must name its host as it is sent, "example.org", not "ex%61mple.org"'],
      ['https://例え.jp/hook', 'url must name its host as it is sent, "xn--r8jz45g.jp", not "例え.jp"'],
    ]
    for (const [spelt, message] of refusals) {
      expect(new URL(spelt).href).not.toBe(spelt) // what would be stored is not what is called
      const res = await api.call(key, 'POST', '/v1/webhooks', { url: spelt })
      expect(res.statusCode, spelt).toBe(400)
      expect(res.json<{ message: string }>().message).toBe(message)
    }
    // as it is sent, each is taken (an upper-case host and its port as the key reads them: the same receiver)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://xn--r8jz45g.jp/hook' })).statusCode).toBe(201)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://EXAMPLE.org:443/hook' })).statusCode).toBe(409)
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://user@example.org:8443/hook' })).statusCode).toBe(201)
    const client = createClient({ db: t.db, tenant: 'spelt' })
    await expect(client.webhooks.create({ url: 'https://ex%61mple.org/hook' })).rejects.toBeInstanceOf(ValidationError)
  })

  it('refuses to move a subscription onto the URL another sends to in its queue, with 409 naming that one, and changes nothing', async () => {
    const key = await api.keyFor('move')
    const a = (await api.call(key, 'POST', '/v1/webhooks', { url, events: ['failed'] })).json<{ id: string }>()
    const b = (await api.call(key, 'POST', '/v1/webhooks', { url: `${url}/b`, events: ['succeeded'], secret: 'the-first-secret-1' })).json<{
      id: string
    }>()
    const before = (await api.call(key, 'GET', `/v1/webhooks/${b.id}`)).json()
    const moved = await api.call(key, 'PATCH', `/v1/webhooks/${b.id}`, { url, secret: 'the-second-secret-2' })
    expect(moved.statusCode).toBe(409)
    expect(moved.headers.location).toBe(`/v1/webhooks/${a.id}`)
    expect(moved.json<{ message: string }>().message).toBe(`webhook ${a.id} already sends this tenant's events to this url in queue default`)
    const client = createClient({ db: t.db, tenant: 'move', httpAllow: '127.0.0.1' })
    await expect(client.webhooks.update(b.id, { url })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: a.id })
    expect((await api.call(key, 'GET', `/v1/webhooks/${b.id}`)).json()).toEqual(before)
    const { rows } = await sql<{ secret: string }>`select secret from pgsched.webhook_subscriptions where id = ${b.id}::uuid`.execute(t.db)
    expect(rows[0]?.secret).toBe('the-first-secret-1')
    // its own URL again is no move; another URL is
    expect((await api.call(key, 'PATCH', `/v1/webhooks/${a.id}`, { url, events: [] })).statusCode).toBe(200)
    expect((await api.call(key, 'PATCH', `/v1/webhooks/${b.id}`, { url: `${url}/c` })).statusCode).toBe(200)
    expect((await api.call(key, 'PATCH', `/v1/webhooks/${a.id}`, { url: `${url}/b` })).statusCode).toBe(200)
  })

  it('documents the 409 of a creation or a move onto a subscribed URL, with its Location, in the OpenAPI document', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { responses: Record<string, { description: string; headers?: Record<string, unknown> }> }>>
    }>()
    for (const [path, method] of [
      ['/v1/webhooks', 'post'],
      ['/v1/webhooks/{id}', 'patch'],
    ] as const) {
      const conflict = doc.paths[path]?.[method]?.responses['409']
      expect(conflict?.description, `${method} ${path}`).toMatch(/^Another subscription of the tenant already sends to this url in this queue/)
      expect(Object.keys(conflict?.headers ?? {}), `${method} ${path}`).toContain('Location')
    }
  })

  it('creates one subscription of concurrent creations of the same URL, refusing the others as conflicts', async () => {
    const client = createClient({ db: t.db, tenant: 'race', httpAllow: '127.0.0.1' })
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => client.webhooks.create({ url })))
    const created = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.id] : []))
    expect(created).toHaveLength(1)
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ name: 'WebhookExistsError', existingId: created[0] })
    expect((await client.webhooks.list()).map((w) => w.id)).toEqual(created)
  })

  it('states the real retry window of a delivery in the README', () => {
    const maxMs = retryWindowMaxMs(WEBHOOK_DELIVERY)
    expect(maxMs).toBe(1_623_000)
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ')
    expect(readme).toContain(`${WEBHOOK_DELIVERY.maxAttempts} attempts;`)
    expect(readme).toContain(`at most ${Math.round(maxMs / 60_000)} minutes after the first, about ${Math.round(maxMs / 2 / 60_000)} on average`)
  })
})
