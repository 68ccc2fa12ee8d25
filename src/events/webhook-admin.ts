/**
 * Webhook subscriptions of one tenant (client.webhooks; REST /v1/webhooks and `scheduler webhooks`
 * over it): list, view, create, update (its URL, event types or secret, in place, or enable again
 * one disabled because its deliveries kept failing), delete (which
 * cancels the deliveries still to come), and each one's delivery log, a page at a time. The secret
 * is shown once, when the subscription is created (generated when not given); lists never show it.
 * A tenant has at most `maxPerTenant` subscriptions (each multiplies its events into deliveries).
 */
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { EVENT_TYPES, isEventType, type EventType } from '../core/events.ts'
import { isQueueName, QUEUE_RULE } from '../core/names.ts'
import { ConflictError, NotFoundError, ValidationError, WebhookExistsError } from '../errors.ts'
import { refusedUrlHost, type AddressPolicy } from '../lib/address-policy.ts'
import { assertUuid, decodeCursor, encodeCursor, type Page } from '../paging.ts'
import { assertKnownFields, assertNoMoreArguments, RUNS_ON_CLIENT, type FieldSet } from '../core/known-fields.ts'
import {
  webhookDeliveryJobsLeft,
  webhookDeliveryList,
  webhookSubscriptionDelete,
  webhookSubscriptionInsert,
  webhookSubscriptionList,
  webhookSubscriptionUpdate,
  type WebhookDeliveryRow,
  type WebhookSubscriptionRow,
} from '../db/queries/webhooks.ts'
import { jobCancelMany } from '../db/queries/job-operations.ts'
import { jobCancelSweep } from '../db/queries/jobs.ts'

export type WebhookSubscription = Omit<WebhookSubscriptionRow, 'secret'>
export type WebhookDelivery = WebhookDeliveryRow

export interface CreateWebhookInput {
  /** http or https; the worker's address rules apply when it is called (SCHEDULER_HTTP_ALLOW). */
  url: string
  /** Event types to send; empty or absent: all. */
  events?: readonly EventType[]
  /** 16-256 characters; generated (32 random bytes, hex) when absent. */
  secret?: string
  /** The queue of the delivery jobs (type pgsched.webhook); default `default`. */
  queue?: string
}

/** The fields an update may change; those left out (or undefined) stay as they are. */
export interface UpdateWebhookInput {
  /** As at creation: http or https, and refused when every delivery to it would be refused. */
  url?: string
  /** Event types to send from now on; empty: all. */
  events?: readonly EventType[]
  /** The new signing secret, 16-256 characters: every delivery attempt from now on is signed with it. */
  secret?: string
  /**
   * true: a disabled subscription is enabled again (the tenant's events from now on are sent, its
   * failures forgotten); false: disabled (no event is sent, its deliveries still to come end unsent).
   */
  enabled?: boolean
}

export interface WebhookAdmin {
  list(): Promise<WebhookSubscription[]>
  /**
   * The new subscription with its secret (the only time it is returned).
   * @throws ValidationError when a field is unknown or invalid; WebhookExistsError (a ConflictError)
   * when another of the tenant's subscriptions sends to `url` in the same queue, whatever its event
   * types (change those with update); ConflictError when the tenant has its most subscriptions
   * already (`maxPerTenant`, enabled or not, naming it): nothing is written.
   */
  create(input: CreateWebhookInput): Promise<WebhookSubscription & { secret: string }>
  /** One subscription (without its secret). @throws NotFoundError when the tenant has no such subscription. */
  view(id: string): Promise<WebhookSubscription>
  /**
   * Changes the fields given, in place (the same checks as create): each delivery attempt reads the
   * subscription's URL and secret when it is made, so retries still to come use the new ones; new
   * event types apply to events from now on. Returns the subscription (without its secret).
   * @throws ValidationError when no field is given, or one is unknown or invalid (nothing changed);
   * NotFoundError when the tenant has no such subscription; WebhookExistsError when another of its
   * subscriptions sends to the new `url` in the same queue (nothing changed).
   */
  update(id: string, input: UpdateWebhookInput): Promise<WebhookSubscription>
  /**
   * Deletes the subscription and cancels its delivery jobs that have work left (a delivery running
   * is told to stop); returns the deleted subscription. @throws NotFoundError when the tenant has no
   * such subscription.
   */
  delete(id: string): Promise<WebhookSubscription>
  /**
   * Delivery attempts, newest first, a page at a time (`limit` 1-1000, default 100; `cursor`: the
   * previous page's nextCursor). @throws NotFoundError when the tenant has no such subscription.
   */
  deliveries(id: string, params?: { limit?: number; cursor?: string }): Promise<Page<WebhookDelivery>>
}

/**
 * The fields of a subscription and of a deliveries page call; any other is refused
 * (core/known-fields.ts), as REST refuses it: a misspelt `event` would subscribe to every event.
 */
const CREATE_FIELDS: FieldSet<CreateWebhookInput> = { url: true, events: true, secret: true, queue: true }
const UPDATE_FIELDS: FieldSet<UpdateWebhookInput> = { url: true, events: true, secret: true, enabled: true }
const DELIVERIES_FIELDS: FieldSet<{ limit?: number; cursor?: string }> = { limit: true, cursor: true }

/** Where the setting must admit a webhook URL for it to be created. */
const WHERE_ALLOWED = "(on the workers, and where the subscription is made: the API's or the CLI's environment, or createClient's httpAllow)"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function invalid(path: string, message: string): ValidationError {
  return new ValidationError(message, [{ path, message }])
}

function withoutSecret(row: WebhookSubscriptionRow): WebhookSubscription {
  const { secret: _secret, ...rest } = row
  return rest
}

/**
 * The URL rules of a subscription (create and update alike): kept as given, so held to what REST
 * and the table take, and refused when every delivery to it would be refused.
 */
function checkUrl(text: string, policy: AddressPolicy): void {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw invalid('url', 'url must be an absolute http or https URL')
  }
  // a URL parser would also read `HTTP://…` or ` http://…` (refused by the table's check, the
  // database's error rather than a 400), and drop a tab or line break (the subscription would show
  // one URL and call another)
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || text.length > 2048) {
    throw invalid('url', 'url must be an http or https URL of at most 2048 characters')
  }
  if (!/^https?:\/\//.test(text))
    throw invalid('url', `url must begin with http:// or https://, in lower case (it begins ${JSON.stringify(text.slice(0, url.protocol.length + 2))})`)
  if ([...text].some((c) => c <= ' ' || c === '\u007f')) throw invalid('url', 'url must not contain white space or control characters')
  // a target every delivery would be refused (a loopback or private address literal): refused
  // now, rather than a failed delivery job per event
  const refused = refusedUrlHost(url, policy)
  if (refused) throw invalid('url', `url: ${refused}, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it ${WHERE_ALLOWED}`)
  // written otherwise than as it is sent, one receiver would be two URLs to the one-per-queue check
  // (pgsched.webhook_url_key) and get every event twice: a backslash is read as a slash, and a host
  // is sent lower-cased, percent-decoded and in its ASCII (punycode) form
  if (text.includes('\\')) throw invalid('url', 'url must not contain a backslash (a URL parser reads it as a slash): write / instead')
  const typedHost = /^https?:\/\/(?:[^/?#@]*@)?(\[[^\]]*\]|[^/?#:]*)/i.exec(text)?.[1] ?? ''
  if (typedHost.toLowerCase() !== url.hostname) {
    throw invalid('url', `url must name its host as it is sent, ${JSON.stringify(url.hostname)}, not ${JSON.stringify(typedHost)}`)
  }
}

/** The event types to send, each once; empty (or absent): all. */
function checkEvents(events: readonly EventType[] | undefined): EventType[] {
  // from JavaScript a string would be read letter by letter ("failed": got "f"), and null as every event
  if (events !== undefined && !Array.isArray(events)) {
    throw invalid('events', `events must be an array of event types (${EVENT_TYPES.join(', ')}); absent or empty: all`)
  }
  const unique = [...new Set(events ?? [])]
  const bad = unique.find((e) => !isEventType(e))
  if (bad !== undefined) throw invalid('events', `events must be among ${EVENT_TYPES.join(', ')} (got ${JSON.stringify(bad)})`)
  return unique
}

function checkSecret(secret: unknown): asserts secret is string {
  if (typeof secret !== 'string' || secret.length < 16 || secret.length > 256) throw invalid('secret', 'secret must be 16-256 characters')
  // a secret of blanks only is no secret; one with blanks at its ends is easily mistyped by a receiver
  if (secret.trim() !== secret || /^\s*$/.test(secret)) throw invalid('secret', 'secret must not be blank nor begin or end with white space')
}

/**
 * `policy`: the workers' address rules (SCHEDULER_HTTP_ALLOW), to refuse a URL no delivery could reach;
 * `maxPerTenant`: the most subscriptions the tenant may have (SCHEDULER_WEBHOOK_MAX_PER_TENANT);
 */
export function webhookAdmin(db: Kysely<DB>, tenant: string, limits: { policy: AddressPolicy; maxPerTenant: number }): WebhookAdmin {
  const { policy, maxPerTenant } = limits
  // an id that is not a UUID is named as such, as for jobs (not "not found")
  const own = async (id: string): Promise<void> => {
    assertUuid(id, 'id')
    if ((await webhookSubscriptionList(db, { tenant, id })).length === 0) throw new NotFoundError(`webhook ${id} not found`)
  }
  /** Refuses an argument past those `call` takes (`{ trx }` among them: these calls run on the client's connections). */
  const takesOnly = (call: string, takes: readonly string[], extra: readonly unknown[]) =>
    assertNoMoreArguments(`webhooks.${call}`, takes, extra, RUNS_ON_CLIENT)
  return {
    async list(...extra: unknown[]) {
      takesOnly('list', [], extra)
      return (await webhookSubscriptionList(db, { tenant })).map(withoutSecret)
    },
    async create(input, ...extra: unknown[]) {
      takesOnly('create', ['input'], extra)
      assertKnownFields(input, CREATE_FIELDS, 'webhook')
      checkUrl(input.url, policy)
      const events = checkEvents(input.events)
      const secret = input.secret ?? randomBytes(32).toString('hex')
      checkSecret(secret)
      const queue = input.queue ?? 'default'
      if (!isQueueName(queue)) throw invalid('queue', `queue must be ${QUEUE_RULE}`)
      const written = await webhookSubscriptionInsert(db, { tenant, url: input.url, events, queue, secret, maxPerTenant })
      if ('full' in written) {
        throw new ConflictError(
          `tenant ${JSON.stringify(tenant)} has ${written.max} webhook subscriptions, the most a tenant may have ` +
            `(SCHEDULER_WEBHOOK_MAX_PER_TENANT, createClient's webhookMaxPerTenant: ${written.max}; disabled ones count too): ` +
            'delete one, or change the event types or URL of one, rather than creating another',
        )
      }
      const { row, existingId } = written
      if (existingId !== undefined) {
        throw new WebhookExistsError(
          `webhook ${existingId} already sends this tenant's events to this url in queue ${queue}: change its event types (an update) rather than subscribing the url again`,
          existingId,
        )
      }
      return { ...withoutSecret(row), secret }
    },
    async view(id, ...extra: unknown[]) {
      takesOnly('view', ['id'], extra)
      assertUuid(id, 'id')
      const [row] = await webhookSubscriptionList(db, { tenant, id })
      if (!row) throw new NotFoundError(`webhook ${id} not found`)
      return withoutSecret(row)
    },
    async update(id, input, ...extra: unknown[]) {
      takesOnly('update', ['id', 'input'], extra)
      assertUuid(id, 'id')
      assertKnownFields(input, UPDATE_FIELDS, 'webhook update')
      if (input.url === undefined && input.events === undefined && input.secret === undefined && input.enabled === undefined) {
        throw invalid('', 'give at least one of url, events, secret and enabled')
      }
      if (input.enabled !== undefined && typeof input.enabled !== 'boolean') throw invalid('enabled', 'enabled must be true or false')
      if (input.url !== undefined) checkUrl(input.url, policy)
      const events = input.events === undefined ? undefined : checkEvents(input.events)
      if (input.secret !== undefined) checkSecret(input.secret)
      const written = await webhookSubscriptionUpdate(db, { tenant, id, url: input.url, events, secret: input.secret, enabled: input.enabled })
      if (!written) throw new NotFoundError(`webhook ${id} not found`)
      if (written.existingId !== undefined) {
        throw new WebhookExistsError(
          `webhook ${written.existingId} already sends this tenant's events to this url in queue ${written.queue}`,
          written.existingId,
        )
      }
      return withoutSecret(written.row)
    },
    async delete(id, ...extra: unknown[]) {
      takesOnly('delete', ['id'], extra)
      assertUuid(id, 'id')
      // its deliveries still to come would only fail (their subscription is gone): cancelled instead, in
      // the same transaction, so that no attempt starts between the two and finds the subscription gone
      // with its job still active (a failure of the tenant's)
      const deleteAndCancel = async (trx: Kysely<DB>) => {
        const row = await webhookSubscriptionDelete(trx, { tenant, id })
        if (!row) return undefined
        const cancelled = (await jobCancelMany(trx, { tenant, ids: await webhookDeliveryJobsLeft(trx, { tenant, subscriptionId: id }) })).jobIds
        return { row, cancelled }
      }
      const deleted = await (db.isTransaction ? deleteAndCancel(db) : db.transaction().execute(deleteAndCancel))
      if (!deleted) throw new NotFoundError(`webhook ${id} not found`)
      // once committed: what claims and retries in flight moved where the cancel could not see
      await jobCancelSweep(db, deleted.cancelled)
      return withoutSecret(deleted.row)
    },
    async deliveries(id, params = {}, ...extra: unknown[]) {
      takesOnly('deliveries', ['id', 'params'], extra)
      assertKnownFields(params, DELIVERIES_FIELDS, 'deliveries params')
      await own(id)
      const limit = params.limit ?? 100
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalid('limit', 'limit must be an integer from 1 to 1000')
      const beforeId = params.cursor === undefined ? undefined : decodeCursor(params.cursor, UUID)
      const rows = await webhookDeliveryList(db, { subscriptionId: id, limit: limit + 1, beforeId })
      const items = rows.slice(0, limit)
      const last = items[items.length - 1]
      return { items, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null }
    },
  }
}
