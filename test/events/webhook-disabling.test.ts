/**
 * A webhook subscription whose receiver keeps failing is disabled, so that its deliveries do not
 * pile up for as long as the receiver is down: driven end to end with a local receiver answering
 * 500 (short thresholds given to the worker's handler, as SCHEDULER_WEBHOOK_DISABLE_AFTER_* would),
 * then enabled again over REST (the disabling logged and counted in the worker's metrics). And
 * subscriptions compare URLs as the same receiver when they differ only in the case of the scheme or
 * host, a default port, dot segments or a fragment.
 */
import { createServer, type Server } from 'node:http'
import { sql } from 'kysely'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { WebhookDispatcher } from '../../src/maintenance/webhook-dispatcher.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { WorkerMetrics } from '../../src/worker/metrics.ts'
import { createWebhookHandler } from '../../src/worker/webhook-handler.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { useWorkers } from '../worker/harness.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const api = useTestApi(t, { httpAllow: '127.0.0.1' })
const startWorker = useWorkers(t)

interface Received {
  path: string
  jobId: string
  status: number
}

let server: Server
let base: string
/** What the receiver answers on /down; /up always answers 200. */
let downStatus = 500
const received: Received[] = []

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const status = req.url === '/down' ? downStatus : 200
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { jobId: string }
      received.push({ path: req.url ?? '', jobId: event.jobId, status })
      res.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

let dispatcher: WebhookDispatcher | undefined
afterEach(async () => {
  await dispatcher?.stop()
  dispatcher = undefined
  received.length = 0
  downStatus = 500
})

interface Hook {
  id: string
  url: string
  enabled: boolean
  failingSince: string | null
  disabledAt: string | null
  disabledReason: string | null
}

const view = async (key: string, id: string) => (await api.call(key, 'GET', `/v1/webhooks/${id}`)).json<Hook>()

/** The delivery jobs of a subscription, with the state and error of their execution. */
async function deliveryJobs(subscriptionId: string): Promise<Array<{ id: string; state: string; error: string | null }>> {
  const { rows } = await sql<{ id: string; state: string; error: string | null }>`
    select j.id, e.state, e.error ->> 'message' as error
      from pgsched.jobs j
      cross join lateral (select x.state, x.error from pgsched.executions x where x.job_id = j.id order by x.id desc limit 1) e
     where j.type = 'pgsched.webhook' and j.payload ->> 'subscriptionId' = ${subscriptionId}
     order by j.id`.execute(t.db)
  return rows
}

describe('webhook subscriptions whose deliveries keep failing', () => {
  it('disables one whose attempts keep failing, cancels its deliveries still to come, sends it no new event until enabled again, and says so', async () => {
    const key = await api.keyFor('busy')
    const down = (await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/down`, events: ['succeeded'] })).json<Hook>()
    expect(down).toMatchObject({ enabled: true, failingSince: null, disabledAt: null, disabledReason: null })

    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    const { log, lines } = capturingLogger<{ level: number; msg: string; subscriptionId?: string; reason?: string; count?: number }>('warn')
    const metrics = new WorkerMetrics()
    await startWorker(
      [
        defineHandler('work', () => 'done'),
        createWebhookHandler({ db: t.db, allow: '127.0.0.1', disable: { afterMs: 0, afterFailures: 3 }, onDisabled: metrics.webhookDisabled }),
      ],
      { log },
    )
    const disabledCount = async () => /^pgsched_worker_webhook_subscriptions_disabled_total (\d+)$/m.exec(await metrics.registry.metrics())?.[1]
    expect(await disabledCount()).toBe('0')
    const client = createClient({ db: t.db, tenant: 'busy' })
    for (let i = 0; i < 3; i++) await client.submitJob({ type: 'work' })

    const disabled = await waitFor(
      async () => {
        const h = await view(key, down.id)
        return h.enabled ? undefined : h
      },
      { timeoutMs: 30_000, what: 'the subscription disabled' },
    )
    expect(disabled.disabledAt).not.toBeNull()
    expect(disabled.failingSince).not.toBeNull()
    expect(disabled.disabledReason).toMatch(
      /^its delivery attempts failed for \S+ with none succeeding \(3 or more failed attempts since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); the last: POST http:\/\/127\.0\.0\.1:\d+\/down answered 500/,
    )
    // the list shows it as well, and the disabling was logged
    const listed = (await api.call(key, 'GET', '/v1/webhooks')).json<{ items: Hook[] }>().items
    expect(listed).toEqual([expect.objectContaining({ id: down.id, enabled: false, disabledReason: disabled.disabledReason })])
    expect(lines.filter((l) => l.msg === 'webhook subscription disabled: its deliveries kept failing')).toEqual([
      expect.objectContaining({ level: 40, subscriptionId: down.id, reason: disabled.disabledReason, count: 2 }),
    ])
    // and counted in the worker's metrics, once
    expect(await disabledCount()).toBe('1')

    // the attempt that disabled it ended its delivery, with the receiver's error; the deliveries
    // still to come were cancelled in the same statement: nothing more is sent, and the tenant's
    // failures show the one delivery, not one per event
    const sentBefore = received.filter((r) => r.path === '/down').length
    const jobs = await waitFor(
      async () => {
        const all = await deliveryJobs(down.id)
        return all.length === 3 && all.every((j) => j.state === 'failed' || j.state === 'cancelled') ? all : undefined
      },
      { timeoutMs: 30_000, what: 'the three deliveries ended' },
    )
    expect(jobs.map((j) => j.state).sort()).toEqual(['cancelled', 'cancelled', 'failed'])
    expect(jobs.find((j) => j.state === 'failed')?.error).toMatch(
      new RegExp(
        `^POST http://127\\.0\\.0\\.1:\\d+/down answered 500.*; webhook subscription ${down.id} is now disabled \\(its delivery attempts failed .*\\), so this delivery is not retried$`,
      ),
    )
    const failures = (await api.call(key, 'GET', '/v1/failures')).json<{ items: Array<{ types: string[]; count: number }> }>().items
    expect(failures.filter((g) => g.types.includes('pgsched.webhook')).map((g) => g.count)).toEqual([1])
    // the delivery log says the disabling attempt was not retried
    const failedJob = jobs.find((j) => j.state === 'failed')?.id
    const attempts = (await api.call(key, 'GET', `/v1/webhooks/${down.id}/deliveries`)).json<{ items: Array<{ jobId: string; willRetry: boolean }> }>().items
    expect(attempts.filter((a) => a.jobId === failedJob).map((a) => a.willRetry)[0]).toBe(false)
    // each attempt's time is its insert's, and its id (uuid_v7: milliseconds, then the fraction of the
    // millisecond in 1/4096 steps) is made of that same time: the log, newest first by id, is newest first by time
    const { rows: times } = await sql<{ apart_ms: number }>`
      select abs(extract(epoch from at) * 1000
                 - (('x' || substr(h, 1, 12))::bit(48)::bigint + ('x' || substr(h, 14, 3))::bit(12)::int / 4096.0))::float8 as apart_ms
        from (select at, replace(id::text, '-', '') as h from pgsched.webhook_deliveries where subscription_id = ${down.id}::uuid) d`.execute(t.db)
    expect(times.length).toBeGreaterThanOrEqual(3)
    for (const { apart_ms } of times) expect(apart_ms).toBeLessThan(1 / 4096)
    expect(received.filter((r) => r.path === '/down').length).toBe(sentBefore)

    // its listener ended: nothing is captured for it
    const { rows: listener } = await sql<{ live: boolean }>`select until > now() as live from pgsched.event_listeners where id = ${down.id}::uuid`.execute(t.db)
    expect(listener).toEqual([{ live: false }])

    // a new event of the tenant, captured for another subscription, is delivered there and not turned into a delivery for it
    await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/up`, events: ['succeeded'] })
    const { job: whileDisabled } = await client.submitJob({ type: 'work' })
    await waitFor(() => received.some((r) => r.path === '/up' && r.jobId === whileDisabled.id), { timeoutMs: 30_000, what: 'the event delivered to /up' })
    await dispatcher.runOnce()
    expect(await deliveryJobs(down.id)).toHaveLength(3)

    // enabled again: failures forgotten, and the events from then on are sent (not those of the time it was disabled)
    downStatus = 200
    const enabled = await api.call(key, 'PATCH', `/v1/webhooks/${down.id}`, { enabled: true })
    expect(enabled.statusCode).toBe(200)
    expect(enabled.json()).toMatchObject({ enabled: true, failingSince: null, disabledAt: null, disabledReason: null })
    const { job: afterwards } = await client.submitJob({ type: 'work' })
    await waitFor(() => received.some((r) => r.path === '/down' && r.status === 200), { timeoutMs: 30_000, what: 'a delivery after enabling' })
    await waitFor(() => received.some((r) => r.path === '/up' && r.jobId === afterwards.id), { timeoutMs: 30_000, what: 'the same event at /up' })
    await dispatcher.runOnce()
    expect(received.filter((r) => r.path === '/down' && r.status === 200).map((r) => r.jobId)).toEqual([afterwards.id])
  }, 120_000)

  it('shows since when one is failing, forgets it on a successful attempt, and disables none before the time threshold', async () => {
    const key = await api.keyFor('flaky')
    const hook = (await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/down`, events: ['succeeded'] })).json<Hook>()
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    dispatcher.start()
    // one failed attempt would be enough, but only after an hour of failing
    await startWorker([
      defineHandler('work', () => 'done'),
      createWebhookHandler({ db: t.db, allow: '127.0.0.1', disable: { afterMs: 3_600_000, afterFailures: 1 } }),
    ])
    await createClient({ db: t.db, tenant: 'flaky' }).submitJob({ type: 'work' })
    const failing = await waitFor(
      async () => {
        const h = await view(key, hook.id)
        return h.failingSince ? h : undefined
      },
      { timeoutMs: 30_000, what: 'the subscription failing' },
    )
    expect(failing).toMatchObject({ enabled: true, disabledAt: null, disabledReason: null })

    downStatus = 200
    await waitFor(() => received.some((r) => r.status === 200), { timeoutMs: 30_000, what: 'the retry delivered' })
    const recovered = await waitFor(
      async () => {
        const h = await view(key, hook.id)
        return h.failingSince === null ? h : undefined
      },
      { what: 'failingSince cleared' },
    )
    expect(recovered.enabled).toBe(true)
  }, 60_000)

  it('cancels the deliveries still to come of one disabled by an update, and of no other subscription', async () => {
    const key = await api.keyFor('switch')
    const off = (await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/down`, events: ['cancelled'] })).json<Hook>()
    const kept = (await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/up`, events: ['cancelled'] })).json<Hook>()
    const client = createClient({ db: t.db, tenant: 'switch' })
    // two events, turned into deliveries for each subscription; no worker runs them yet
    for (let i = 0; i < 2; i++) await client.cancelJob((await client.submitJob({ type: 'work' })).job.id)
    dispatcher = new WebhookDispatcher({ db: t.db, log: t.log, intervalMs: 100 })
    await dispatcher.runOnce()
    expect((await deliveryJobs(off.id)).map((j) => j.state)).toEqual(['pending', 'pending'])

    const res = await api.call(key, 'PATCH', `/v1/webhooks/${off.id}`, { enabled: false })
    expect(res.statusCode).toBe(200)
    expect((await deliveryJobs(off.id)).map((j) => j.state)).toEqual(['cancelled', 'cancelled'])
    expect((await deliveryJobs(kept.id)).map((j) => j.state)).toEqual(['pending', 'pending'])

    // a worker now: the other subscription's deliveries are sent, none of the disabled one's, and no failure shows
    await startWorker([defineHandler('work', () => 'done'), createWebhookHandler({ db: t.db, allow: '127.0.0.1' })])
    await waitFor(() => received.filter((r) => r.path === '/up').length === 2, { timeoutMs: 30_000, what: 'the two deliveries to /up' })
    expect(received.filter((r) => r.path === '/down')).toEqual([])
    expect((await api.call(key, 'GET', '/v1/failures')).json<{ items: unknown[] }>().items).toEqual([])
  })

  it('disables and enables one by an update, refusing an enabled that is not a boolean', async () => {
    const key = await api.keyFor('manual')
    const hook = (await api.call(key, 'POST', '/v1/webhooks', { url: `${base}/down` })).json<Hook>()
    const off = await api.call(key, 'PATCH', `/v1/webhooks/${hook.id}`, { enabled: false })
    expect(off.json()).toMatchObject({ enabled: false, disabledReason: 'disabled by an update', disabledAt: expect.any(String) })
    const bad = await api.call(key, 'PATCH', `/v1/webhooks/${hook.id}`, { enabled: 'yes' })
    expect(bad.statusCode).toBe(400)
    await expect(createClient({ db: t.db, tenant: 'manual' }).webhooks.update(hook.id, { enabled: 'yes' as never })).rejects.toThrow(
      'enabled must be true or false',
    )
    const on = await createClient({ db: t.db, tenant: 'manual' }).webhooks.update(hook.id, { enabled: true })
    expect(on).toMatchObject({ enabled: true, disabledAt: null, disabledReason: null })
    const { rows } = await sql<{ live: boolean }>`select until > now() as live from pgsched.event_listeners where id = ${hook.id}::uuid`.execute(t.db)
    expect(rows).toEqual([{ live: true }])
  })
})

describe('webhook URLs compared as receivers', () => {
  it('refuses a second subscription of a URL differing only in scheme or host case, a default port, dot segments or a fragment, keeping each URL as given', async () => {
    const key = await api.keyFor('urls')
    const first = await api.call(key, 'POST', '/v1/webhooks', { url: 'https://Example.COM/Hooks/pgsched?A=1' })
    expect(first.statusCode).toBe(201)
    const { id, url } = first.json<Hook>()
    // kept (and so sent) as given
    expect(url).toBe('https://Example.COM/Hooks/pgsched?A=1')
    for (const same of [
      'https://example.com/Hooks/pgsched?A=1',
      'https://EXAMPLE.com:443/Hooks/pgsched?A=1',
      'https://example.com:/Hooks/pgsched?A=1',
      'https://example.com:0000443/Hooks/pgsched?A=1',
      'https://example.com/Hooks/pgsched?A=1#top',
      'https://example.com/Hooks/./x/../pgsched?A=1',
      'https://example.com/Hooks/%2E/x/%2e%2E/pgsched?A=1',
    ]) {
      const refused = await api.call(key, 'POST', '/v1/webhooks', { url: same })
      expect(refused.statusCode, same).toBe(409)
      expect(refused.headers.location).toBe(`/v1/webhooks/${id}`)
    }
    // the path and query are compared as they are, and another scheme or port is another receiver
    for (const other of [
      'https://example.com/hooks/pgsched?A=1',
      'https://example.com/Hooks/pgsched?a=1',
      'http://example.com/Hooks/pgsched?A=1',
      'https://example.com:8443/Hooks/pgsched?A=1',
      'https://example.com/Hooks/x/pgsched?A=1#x/../..',
    ]) {
      expect((await api.call(key, 'POST', '/v1/webhooks', { url: other })).statusCode, other).toBe(201)
    }
    // another port written with leading zeros is that port
    expect((await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.com:08443/Hooks/pgsched?A=1' })).statusCode).toBe(409)
    // http's default port too, and an empty path is "/"
    const plain = (await api.call(key, 'POST', '/v1/webhooks', { url: 'http://hooks.example.org' })).json<Hook>()
    const moved = await api.call(key, 'POST', '/v1/webhooks', { url: 'http://HOOKS.example.org:80/' })
    expect(moved.statusCode).toBe(409)
    expect(moved.headers.location).toBe(`/v1/webhooks/${plain.id}`)
    // an update moving another onto the receiver is refused; one re-spelling its own URL is not
    const other = (await api.call(key, 'POST', '/v1/webhooks', { url: 'https://example.net/h' })).json<Hook>()
    expect((await api.call(key, 'PATCH', `/v1/webhooks/${other.id}`, { url: 'https://EXAMPLE.com/Hooks/pgsched?A=1' })).statusCode).toBe(409)
    const respelt = await api.call(key, 'PATCH', `/v1/webhooks/${id}`, { url: 'https://example.com:443/Hooks/pgsched?A=1' })
    expect(respelt.statusCode).toBe(200)
    expect(respelt.json<Hook>().url).toBe('https://example.com:443/Hooks/pgsched?A=1')
  })
})
