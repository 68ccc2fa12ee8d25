/**
 * `scheduler webhooks list|create|update|delete|deliveries --tenant <name>`: a tenant's webhook
 * subscriptions and their delivery logs (as /v1/webhooks does for an API key; this command needs
 * DATABASE_URL). `create` prints the secret, once; `create` and `update` refuse a URL that
 * SCHEDULER_HTTP_ALLOW, as the workers have it, would refuse every delivery to (exit code 2), and a
 * URL another subscription of the tenant sends to in that queue (a conflict, exit code 1, naming it).
 * `list` shows whether each is enabled, failing or disabled (with why); `update --enable` enables
 * again one disabled because its deliveries kept failing.
 */
import type { Command } from 'commander'
import { deliveryToJson, webhookToJson } from '../../api/json.ts'
import { isEventType, type EventType } from '../../core/events.ts'
import { NotFoundError, ValidationError } from '../../errors.ts'
import type { UpdateWebhookInput, WebhookAdmin, WebhookSubscription } from '../../events/webhook-admin.ts'
import { createClient } from '../../client.ts'
import { formatTable, withDatabase } from '../shared.ts'

// The workers' address rules (SCHEDULER_HTTP_ALLOW, from this environment): create and update
// refuse a URL every delivery would be refused; create refuses a subscription beyond
// SCHEDULER_WEBHOOK_MAX_PER_TENANT.
// A subscription is its tenant's: one not found is named with the tenant looked in.
const run = <T>(tenant: string, fn: (webhooks: WebhookAdmin) => Promise<T>) =>
  withDatabase('pgsched-webhooks', ({ db }, config) =>
    fn(
      createClient({
        db,
        tenant,
        createdBy: 'cli',
        batchSubmits: false,
        httpAllow: config.worker.httpAllow,
        webhookMaxPerTenant: config.api.webhookMaxPerTenant,
      }).webhooks,
    ).catch((err: unknown) => {
      if (err instanceof NotFoundError) throw new NotFoundError(`${err.message} for tenant ${tenantWords(tenant)}`)
      throw err
    }),
  )

/** `"acme"`, or for the default tenant a word on --tenant: a subscription is found only in its own tenant. */
function tenantWords(tenant: string): string {
  return tenant === 'default' ? '"default" (give --tenant <name> for another tenant\'s)' : JSON.stringify(tenant)
}
const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

/** enabled, failing since <time>, or disabled <time>: <reason>. */
function statusOf(s: WebhookSubscription): string {
  if (!s.enabled) return `disabled ${s.disabledAt?.toISOString() ?? ''}: ${s.disabledReason ?? ''}`
  return s.failingSince ? `failing since ${s.failingSince.toISOString()}` : 'enabled'
}

function eventList(text: string | undefined): EventType[] {
  const names = (text ?? '').split(',').filter((s) => s.trim() !== '')
  const bad = names.find((n) => !isEventType(n))
  if (bad !== undefined) throw new ValidationError(`--events: unknown event type "${bad}"`, [{ path: 'events', message: 'unknown event type' }])
  return names as EventType[]
}

export function registerWebhooks(program: Command): void {
  const webhooks = program.command('webhooks').description("a tenant's webhook subscriptions (events POSTed, signed, to a URL) and their deliveries")
  const tenant = ['--tenant <name>', 'the tenant', 'default'] as const
  const json = ['--json', 'print JSON (as the REST API answers)'] as const

  webhooks
    .command('list')
    .description("the tenant's subscriptions")
    .option(...tenant)
    .option(...json)
    .action(async (opts: { tenant: string; json?: boolean }) => {
      const list = await run(opts.tenant, (w) => w.list())
      if (opts.json) return print({ items: list.map(webhookToJson) })
      process.stdout.write(
        list.length === 0
          ? `no webhooks for tenant ${tenantWords(opts.tenant)}\n`
          : `${formatTable([
              ['ID', 'URL', 'EVENTS', 'QUEUE', 'STATUS'],
              ...list.map((s) => [s.id, s.url, s.events.length === 0 ? 'all' : s.events.join(','), s.queue, statusOf(s)]),
            ])}\n`,
      )
    })
  webhooks
    .command('create')
    .description('subscribe a URL to the tenant’s events; prints the signing secret once')
    .argument('<url>')
    .option(...tenant)
    .option('--events <types>', 'comma-separated event types (default: all)')
    .option('--secret <secret>', 'the signing secret, 16-256 characters (default: generated)')
    .option('--queue <queue>', 'queue of the delivery jobs', 'default')
    .action(async (url: string, opts: { tenant: string; events?: string; secret?: string; queue: string }) => {
      const created = await run(opts.tenant, (w) => w.create({ url, events: eventList(opts.events), secret: opts.secret, queue: opts.queue }))
      print({ ...webhookToJson(created), secret: created.secret })
    })
  webhooks
    .command('update')
    .description(
      'change a subscription in place (options left out stay as they are); a new secret signs every delivery attempt from now on, retries among them',
    )
    .argument('<id>')
    .option(...tenant)
    .option('--url <url>', 'the URL events are POSTed to')
    .option('--events <types>', 'comma-separated event types, for events from now on ("" for all)')
    .option('--secret <secret>', 'the new signing secret, 16-256 characters')
    .option('--enable', 'enable it again once disabled (its deliveries kept failing): the events from now on are sent')
    .option('--disable', 'disable it: no event is sent to it until it is enabled again')
    .action(async (id: string, opts: { tenant: string; url?: string; events?: string; secret?: string; enable?: boolean; disable?: boolean }) => {
      const input: UpdateWebhookInput = {}
      if (opts.url !== undefined) input.url = opts.url
      if (opts.events !== undefined) input.events = eventList(opts.events)
      if (opts.secret !== undefined) input.secret = opts.secret
      if (opts.enable && opts.disable) {
        const message = '--enable and --disable contradict each other: give one'
        throw new ValidationError(message, [{ path: 'enabled', message }])
      }
      if (opts.enable) input.enabled = true
      if (opts.disable) input.enabled = false
      if (Object.keys(input).length === 0) {
        const message = 'nothing to change: give at least one of --url, --events, --secret, --enable and --disable'
        throw new ValidationError(message, [{ path: '', message }])
      }
      print(webhookToJson(await run(opts.tenant, (w) => w.update(id, input))))
    })
  webhooks
    .command('delete')
    .description('delete a subscription (and its delivery log); its deliveries still to come are cancelled')
    .argument('<id>')
    .option(...tenant)
    .action(async (id: string, opts: { tenant: string }) => {
      await run(opts.tenant, (w) => w.delete(id))
      process.stdout.write(`deleted webhook ${id}\n`)
    })
  webhooks
    .command('deliveries')
    .description("a subscription's delivery attempts, newest first")
    .argument('<id>')
    .option(...tenant)
    .option('--limit <n>', 'page size (1-1000)', '100')
    .option('--cursor <cursor>', 'the next-page cursor printed by the previous page')
    .option(...json)
    .action(async (id: string, opts: { tenant: string; limit: string; cursor?: string; json?: boolean }) => {
      // decimal digits only (Number() would take "0x10" and "1e2"); the range is the deliveries' own check
      if (!/^\d+$/.test(opts.limit)) {
        const message = `--limit must be an integer from 1 to 1000, got "${opts.limit}"`
        throw new ValidationError(message, [{ path: 'limit', message }])
      }
      const page = await run(opts.tenant, (w) => w.deliveries(id, { limit: Number(opts.limit), cursor: opts.cursor }))
      const list = page.items
      if (opts.json) return print({ items: list.map(deliveryToJson), nextCursor: page.nextCursor })
      process.stdout.write(
        `${formatTable([
          ['AT', 'EVENT', 'TYPE', 'ATTEMPT', 'STATUS', 'MS', 'ERROR'],
          ...list.map((d) => [
            d.at.toISOString(),
            d.eventId,
            d.eventType,
            String(d.attempt),
            d.statusCode === null ? '-' : String(d.statusCode),
            String(d.durationMs),
            d.error ?? '',
          ]),
        ])}\n`,
      )
      if (page.nextCursor) process.stdout.write(`more: --cursor ${page.nextCursor}\n`)
    })
}
