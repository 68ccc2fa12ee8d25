/**
 * /v1/webhooks: the tenant's webhook subscriptions (list, create, view, update, delete) and each one's delivery
 * log. Every event of the tenant whose type a subscription wants is POSTed to its URL by a job of
 * type pgsched.webhook (at least once, retried with backoff), signed in the Pgsched-Signature header.
 * An operator key lists every tenant's subscriptions (or one tenant's) and addresses any by id.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { CommonErrors, documented, ErrorRef, ErrorResponses } from '../schemas/error.ts'
import {
  CreatedWebhookSchema,
  CreateWebhookBody,
  DeliveryListSchema,
  UpdateWebhookBodyRef,
  DeliveryQuery,
  deliveryToJson,
  WebhookListQuery,
  WebhookListSchema,
  WebhookParams,
  WebhookRef,
  webhookToJson,
} from '../schemas/webhook.ts'
import type { FastifyRequest } from 'fastify'
import type { Client } from '../../client.ts'
import type { RouteDeps } from './deps.ts'
import { operationsFor } from './job-operations.ts'
import { decodeCursor, encodeCursor, UUID } from '../../paging.ts'

const security = [{ apiKey: [] }]

/** 409: the URL is subscribed already in that queue (WebhookExistsError; api/error-handler.ts sets Location). */
const subscribedAlready = (what: string) =>
  documented(ErrorRef, `Another subscription of the tenant already sends to this url in this queue, whatever its event types: ${what}. The message names it.`, {
    Location: { type: 'string', description: 'That subscription: `/v1/webhooks/{id}`.' },
  })

/**
 * The client for a route addressing one subscription: the key's tenant's, or for an operator key the
 * subscription's own tenant's (so operators see and manage every tenant's subscriptions by id).
 */
async function clientForWebhook(deps: RouteDeps, request: FastifyRequest, id: string): Promise<Client> {
  const client = deps.clientFor(request)
  if (!request.identity?.operator) return client
  const tenant = await client.allTenants().tenantOfWebhook(id)
  return tenant === undefined || tenant === client.tenant ? client : client.withTenant(tenant, `api-key:${request.identity.keyId}`)
}

export const webhookRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.get(
    '/webhooks',
    {
      schema: {
        operationId: 'listWebhooks',
        tags: ['webhooks'],
        summary: 'List webhook subscriptions',
        description:
          "The tenant's subscriptions, oldest first, a page at a time (`limit`, default 100; pass `nextCursor` as `cursor` for the next) (an operator key: every tenant's, or one named by `tenant`), " +
          'each with whether it is enabled: a subscription whose delivery attempts have failed, none succeeding, for SCHEDULER_WEBHOOK_DISABLE_AFTER_MS (1 hour), at least SCHEDULER_WEBHOOK_DISABLE_AFTER_FAILURES (20) of them, is disabled until an update enables it (`failingSince`, `disabledAt`, `disabledReason`).',
        security,
        querystring: WebhookListQuery,
        response: { 200: documented(WebhookListSchema, 'The subscriptions, without their secrets.'), ...CommonErrors, 403: ErrorResponses[403] },
      },
    },
    async (request) => {
      const { tenant, limit = 100, cursor } = request.query
      const afterId = cursor === undefined ? undefined : decodeCursor(cursor, UUID)
      const rows = await operationsFor(deps, request).listWebhooks({ tenant, limit: limit + 1, afterId })
      const items = rows.slice(0, limit)
      const last = items[items.length - 1]
      return { items: items.map(webhookToJson), nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null }
    },
  )

  app.post(
    '/webhooks',
    {
      schema: {
        operationId: 'createWebhook',
        tags: ['webhooks'],
        summary: 'Create a webhook subscription',
        description:
          'From now on each event of the tenant of a chosen type is POSTed to `url` as JSON (the Event), signed: ' +
          '`Pgsched-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>`. The answer carries the secret, once. ' +
          'A tenant subscribes a URL once per queue (URLs compared as receivers: the case of the scheme and host, a default port, dot segments and the fragment aside): a second subscription is refused with 409, ' +
          'naming the existing one, whose event types an update changes. ' +
          'A tenant has at most SCHEDULER_WEBHOOK_MAX_PER_TENANT subscriptions (default 100, disabled ones included): one more is refused with 409 naming the cap (no Location).',
        security,
        body: CreateWebhookBody,
        response: {
          201: documented(CreatedWebhookSchema, 'The subscription, with its secret (shown only here).', {
            Location: { type: 'string', description: 'The subscription: `/v1/webhooks/{id}`.' },
          }),
          ...CommonErrors,
          409: subscribedAlready(
            'nothing was written (each event would be delivered twice); change the event types of that one instead. ' +
              'Also: the tenant has its most subscriptions already (SCHEDULER_WEBHOOK_MAX_PER_TENANT), without Location',
          ),
        },
      },
    },
    async (request, reply) => {
      const client = deps.clientFor(request)
      const created = await client.webhooks.create(request.body)
      reply.code(201).header('location', `/v1/webhooks/${created.id}`)
      return { ...webhookToJson(created), secret: created.secret }
    },
  )

  app.get(
    '/webhooks/:id',
    {
      schema: {
        operationId: 'viewWebhook',
        tags: ['webhooks'],
        summary: 'View a webhook subscription',
        description: 'The subscription, without its secret (shown only when it was created).',
        security,
        params: WebhookParams,
        response: { 200: documented(WebhookRef, 'The subscription, without its secret.'), ...CommonErrors, 404: ErrorResponses[404] },
      },
    },
    async (request) => webhookToJson(await (await clientForWebhook(deps, request, request.params.id)).webhooks.view(request.params.id)),
  )

  app.patch(
    '/webhooks/:id',
    {
      schema: {
        operationId: 'updateWebhook',
        tags: ['webhooks'],
        summary: 'Update a webhook subscription',
        description:
          'Changes the fields given (JSON merge: those left out stay as they are), under the same rules as a creation; an invalid field changes nothing. ' +
          'Each delivery attempt reads the URL and secret when it is made: a new secret signs every attempt from now on, retries of earlier events among them. ' +
          'New `events` apply to events from now on. A new `url` that another subscription of the tenant sends to in the same queue is refused with 409. ' +
          '`enabled: true` enables again a subscription disabled because its delivery attempts kept failing (the events from now on are sent; its failures are forgotten); `enabled: false` disables one, cancelling its deliveries still to come. ' +
          'The answer is the subscription, without its secret.',
        security,
        params: WebhookParams,
        body: UpdateWebhookBodyRef,
        response: {
          200: documented(WebhookRef, 'The subscription as changed, without its secret.'),
          ...CommonErrors,
          404: ErrorResponses[404],
          409: subscribedAlready('nothing was changed'),
        },
      },
      // no body, or an empty one, is none (json-body.ts): an empty patch, refused naming the fields it takes
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {}
      },
    },
    async (request) => webhookToJson(await (await clientForWebhook(deps, request, request.params.id)).webhooks.update(request.params.id, request.body)),
  )

  app.delete(
    '/webhooks/:id',
    {
      schema: {
        operationId: 'deleteWebhook',
        tags: ['webhooks'],
        summary: 'Delete a webhook subscription',
        description:
          'No further deliveries start: its delivery jobs with work left are cancelled (a delivery running is told to stop). The delivery log goes with it.',
        security,
        params: WebhookParams,
        response: { 200: documented(WebhookRef, 'The subscription deleted, without its secret.'), ...CommonErrors, 404: ErrorResponses[404] },
      },
    },
    async (request) => webhookToJson(await (await clientForWebhook(deps, request, request.params.id)).webhooks.delete(request.params.id)),
  )

  app.get(
    '/webhooks/:id/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['webhooks'],
        summary: 'List a webhook’s delivery attempts',
        description:
          'Every delivery attempt, newest first, a page at a time (pass `nextCursor` as `cursor` for the next): the event, the attempt, the receiver’s status code or the error.',
        security,
        params: WebhookParams,
        querystring: DeliveryQuery,
        response: { 200: documented(DeliveryListSchema, 'A page of delivery attempts, newest first.'), ...CommonErrors, 404: ErrorResponses[404] },
      },
    },
    async (request) => {
      const client = await clientForWebhook(deps, request, request.params.id)
      const page = await client.webhooks.deliveries(request.params.id, { limit: request.query.limit, cursor: request.query.cursor })
      return { items: page.items.map(deliveryToJson), nextCursor: page.nextCursor }
    },
  )
}
