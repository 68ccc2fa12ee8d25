/**
 * `scheduler webhooks`, run as the real bin against this file's database: create and update check
 * the URL against SCHEDULER_HTTP_ALLOW from its environment (the workers' rules), as the REST API does.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { webhookDeliveryInsert } from '../../src/db/queries/webhooks.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { useTestDb } from '../db.ts'

const exec = promisify(execFile)
const t = useTestDb()

const scheduler = (env: Record<string, string>, ...args: string[]) =>
  exec('node', ['bin/scheduler', ...args], { env: { ...process.env, DATABASE_URL: t.url, SCHEDULER_HTTP_ALLOW: '', ...env } })

describe('scheduler webhooks create', () => {
  it('refuses a URL every delivery would be refused, unless SCHEDULER_HTTP_ALLOW admits it', async () => {
    const refused = await scheduler({}, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'acme').then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )
    expect(refused?.code).toBe(2)
    expect(refused?.stderr).toContain('url: 127.0.0.1 is a loopback address, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it')
    const { rows } = await t.pool.query('select count(*)::int as n from pgsched.webhook_subscriptions')
    expect(rows[0].n).toBe(0)

    const created = JSON.parse(
      (await scheduler({ SCHEDULER_HTTP_ALLOW: '127.0.0.1' }, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'acme')).stdout,
    )
    expect(created).toMatchObject({ url: 'http://127.0.0.1:9/hook', secret: expect.any(String) })
    const listed = JSON.parse((await scheduler({}, 'webhooks', 'list', '--tenant', 'acme', '--json')).stdout)
    // the REST API's shape, as --json says: GET /v1/webhooks answers {items}
    expect(Object.keys(listed)).toEqual(['items'])
    expect(listed.items.map((w: { id: string }) => w.id)).toEqual([created.id])
  })
})

describe('scheduler webhooks update', () => {
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )
  const row = async (id: string) =>
    (await t.pool.query('select url, events, secret from pgsched.webhook_subscriptions where id = $1', [id])).rows[0] as {
      url: string
      events: string[]
      secret: string
    }
  const allow = { SCHEDULER_HTTP_ALLOW: '127.0.0.1' }

  it('changes the URL, the event types and the secret given, each alone, and prints the subscription without its secret', async () => {
    const created = JSON.parse((await scheduler(allow, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'up', '--events', 'failed')).stdout)
    const update = (...args: string[]) => scheduler(allow, 'webhooks', 'update', created.id, '--tenant', 'up', ...args)

    const moved = JSON.parse((await update('--url', 'http://127.0.0.1:9/moved')).stdout)
    expect(moved).toEqual({
      id: created.id,
      tenant: 'up',
      url: 'http://127.0.0.1:9/moved',
      events: ['failed'],
      queue: 'default',
      createdAt: created.createdAt,
      enabled: true,
      failingSince: null,
      disabledAt: null,
      disabledReason: null,
    })
    expect(JSON.parse((await update('--events', 'succeeded,failed')).stdout).events).toEqual(['succeeded', 'failed'])
    const rotated = JSON.parse((await update('--secret', 'a-rotated-secret-01')).stdout)
    expect(rotated).not.toHaveProperty('secret')
    expect(await row(created.id)).toEqual({ url: 'http://127.0.0.1:9/moved', events: ['succeeded', 'failed'], secret: 'a-rotated-secret-01' })
    // "" for every event type
    expect(JSON.parse((await update('--events', '')).stdout).events).toEqual([])
  })

  it("refuses what create refuses, nothing to change, and another tenant's subscription, changing nothing", async () => {
    const created = JSON.parse(
      (await scheduler(allow, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'own', '--events', 'failed', '--secret', 'the-first-secret-1'))
        .stdout,
    )
    const before = await row(created.id)
    const refused = async (env: Record<string, string>, ...args: string[]) => {
      const err = await failure(scheduler(env, 'webhooks', 'update', created.id, ...args))
      return [err?.code, err?.stderr.trim()]
    }
    // without SCHEDULER_HTTP_ALLOW, as create refuses it
    expect(await refused({}, '--tenant', 'own', '--url', 'http://127.0.0.1:9/moved')).toEqual([
      2,
      "scheduler: url: 127.0.0.1 is a loopback address, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it (on the workers, and where the subscription is made: the API's or the CLI's environment, or createClient's httpAllow)",
    ])
    expect(await refused(allow, '--tenant', 'own', '--events', 'finished')).toEqual([2, 'scheduler: --events: unknown event type "finished"'])
    expect(await refused(allow, '--tenant', 'own', '--secret', 'short')).toEqual([2, 'scheduler: secret must be 16-256 characters'])
    expect(await refused(allow, '--tenant', 'own', '--url', 'http://127.0.0.1:9/ok', '--secret', 'short')).toEqual([
      2,
      'scheduler: secret must be 16-256 characters',
    ])
    expect(await refused(allow, '--tenant', 'own')).toEqual([
      2,
      'scheduler: nothing to change: give at least one of --url, --events, --secret, --enable and --disable',
    ])
    expect(await refused(allow, '--tenant', 'own', '--enable', '--disable')).toEqual([2, 'scheduler: --enable and --disable contradict each other: give one'])
    expect(await refused(allow, '--tenant', 'other', '--secret', 'the-thief-secret-1')).toEqual([
      1,
      `scheduler: webhook ${created.id} not found for tenant "other"`,
    ])
    expect(await row(created.id)).toEqual(before)
  })
})

describe('scheduler webhooks list and update --enable/--disable', () => {
  it('lists whether each subscription is enabled, failing (since when) or disabled (and why), and disables and enables one', async () => {
    const allow = { SCHEDULER_HTTP_ALLOW: '127.0.0.1' }
    const create = async (target: string) => JSON.parse((await scheduler(allow, 'webhooks', 'create', target, '--tenant', 'st')).stdout) as { id: string }
    const quiet = await create('http://127.0.0.1:9/quiet')
    const failing = await create('http://127.0.0.1:9/failing')
    const off = await create('http://127.0.0.1:9/off')
    // a failed attempt recorded, as the pgsched.webhook handler records one
    await webhookDeliveryInsert(t.db, {
      subscriptionId: failing.id,
      eventId: '1-0',
      eventType: 'succeeded',
      jobId: uuidV7(),
      attempt: 1,
      statusCode: 500,
      ok: false,
      error: 'POST answered 500',
      durationMs: 3,
      willRetry: true,
      disable: { afterMs: 3_600_000, afterFailures: 20 },
    })
    const disabled = JSON.parse((await scheduler({}, 'webhooks', 'update', off.id, '--tenant', 'st', '--disable')).stdout)
    expect(disabled).toMatchObject({ enabled: false, disabledReason: 'disabled by an update', disabledAt: expect.any(String) })

    const table = (await scheduler({}, 'webhooks', 'list', '--tenant', 'st')).stdout.split('\n')
    expect(table[0]).toMatch(/^ID +URL +EVENTS +QUEUE +STATUS$/)
    const line = (id: string) => table.find((l) => l.startsWith(id)) ?? ''
    expect(line(quiet.id)).toMatch(/ enabled$/)
    expect(line(failing.id)).toMatch(/ failing since \d{4}-\d\d-\d\dT[\d:.]+Z$/)
    expect(line(off.id)).toMatch(/ disabled \d{4}-\d\d-\d\dT[\d:.]+Z: disabled by an update$/)

    const enabled = JSON.parse((await scheduler({}, 'webhooks', 'update', off.id, '--tenant', 'st', '--enable')).stdout)
    expect(enabled).toMatchObject({ enabled: true, disabledAt: null, disabledReason: null })
    expect((await scheduler({}, 'webhooks', 'list', '--tenant', 'st')).stdout.split('\n').find((l) => l.startsWith(off.id))).toMatch(/ enabled$/)

    // without --tenant, the default tenant is looked in, and the answers say so
    expect((await scheduler({}, 'webhooks', 'list')).stdout).toBe('no webhooks for tenant "default" (give --tenant <name> for another tenant\'s)\n')
    const missing = await scheduler({}, 'webhooks', 'deliveries', off.id).then(
      () => undefined,
      (err: { code: number; stderr: string }) => [err.code, err.stderr.trim()],
    )
    expect(missing).toEqual([1, `scheduler: webhook ${off.id} not found for tenant "default" (give --tenant <name> for another tenant's)`])
  })
})

describe('scheduler webhooks create and update, onto a URL the tenant already subscribed in that queue', () => {
  const allow = { SCHEDULER_HTTP_ALLOW: '127.0.0.1' }
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )

  it('refuses it naming the subscription that sends there, exit code 1 as for other conflicts, and writes nothing', async () => {
    const create = (...args: string[]) => scheduler(allow, 'webhooks', 'create', ...args, '--tenant', 'dup')
    const first = JSON.parse((await create('http://127.0.0.1:9/hook', '--events', 'failed')).stdout)
    const refused = await failure(create('http://127.0.0.1:9/hook', '--events', 'succeeded'))
    expect([refused?.code, refused?.stderr.trim()]).toEqual([
      1,
      `scheduler: webhook ${first.id} already sends this tenant's events to this url in queue default: change its event types (an update) rather than subscribing the url again`,
    ])
    // in another queue it is another subscription
    const other = JSON.parse((await create('http://127.0.0.1:9/hook', '--queue', 'hooks')).stdout)
    const second = JSON.parse((await create('http://127.0.0.1:9/second')).stdout)
    const moved = await failure(scheduler(allow, 'webhooks', 'update', second.id, '--tenant', 'dup', '--url', 'http://127.0.0.1:9/hook'))
    expect([moved?.code, moved?.stderr.trim()]).toEqual([1, `scheduler: webhook ${first.id} already sends this tenant's events to this url in queue default`])
    const { rows } = await t.pool.query("select id, url, queue from pgsched.webhook_subscriptions where tenant = 'dup' order by id")
    expect(rows).toEqual([
      { id: first.id, url: 'http://127.0.0.1:9/hook', queue: 'default' },
      { id: other.id, url: 'http://127.0.0.1:9/hook', queue: 'hooks' },
      { id: second.id, url: 'http://127.0.0.1:9/second', queue: 'default' },
    ])
  })
})

describe('scheduler webhooks create, past the cap', () => {
  it('refuses a subscription beyond SCHEDULER_WEBHOOK_MAX_PER_TENANT with exit code 1, naming the cap', async () => {
    const env = { SCHEDULER_WEBHOOK_MAX_PER_TENANT: '1' }
    await scheduler(env, 'webhooks', 'create', 'https://example.com/one', '--tenant', 'capped')
    const refused = await scheduler(env, 'webhooks', 'create', 'https://example.com/two', '--tenant', 'capped').then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )
    expect(refused?.code).toBe(1)
    expect(refused?.stderr).toContain('tenant "capped" has 1 webhook subscriptions, the most a tenant may have (SCHEDULER_WEBHOOK_MAX_PER_TENANT')
    const { rows } = await t.pool.query("select url from pgsched.webhook_subscriptions where tenant = 'capped'")
    expect(rows).toEqual([{ url: 'https://example.com/one' }])
  })
})
