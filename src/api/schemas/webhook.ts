/** The JSON of webhook subscriptions and deliveries (/v1/webhooks) and the bodies they take. */
import { type Static, Type } from '@fastify/type-provider-typebox'
import { EVENT_TYPES, type EventType as EventTypeName } from '../../core/events.ts'
import { QUEUE_PATTERN } from '../../core/names.ts'
import { Cursor, DateTime, Nullable, TenantFilter, Uuid } from './common.ts'

const EventType = Type.Unsafe<EventTypeName>({ type: 'string', enum: [...EVENT_TYPES] })

const subscriptionFields = {
  id: Uuid('The subscription'),
  tenant: Type.String({ description: 'The tenant whose events it is sent.' }),
  url: Type.String({ description: 'Where events are POSTed.' }),
  events: Type.Array(EventType, { description: 'The event types sent; empty: all.' }),
  queue: Type.String({
    description: "The queue of the delivery jobs (type pgsched.webhook). Not an event filter: the tenant's events of every queue are sent.",
  }),
  createdAt: DateTime('When it was created; events from then on are sent.'),
  enabled: Type.Boolean({
    description:
      'False once disabled: its delivery attempts kept failing (none succeeding for SCHEDULER_WEBHOOK_DISABLE_AFTER_MS, at least SCHEDULER_WEBHOOK_DISABLE_AFTER_FAILURES of them), or an update disabled it. No event is sent to it until an update sets `enabled: true`.',
  }),
  failingSince: Nullable(DateTime('When its first failed delivery attempt since the last successful one was made; null while not failing.')),
  disabledAt: Nullable(DateTime('When it was disabled; null while enabled.')),
  disabledReason: Nullable(Type.String({ description: 'Why it was disabled (its failures and the last error); null while enabled.' })),
}

export const WebhookSchema = Type.Object(subscriptionFields, { $id: 'Webhook', description: 'A webhook subscription (its secret is shown only when created).' })
export const WebhookRef = Type.Ref('Webhook')

export const CreatedWebhookSchema = Type.Object(
  { ...subscriptionFields, secret: Type.String({ description: 'The signing secret: shown this once.' }) },
  { description: 'The new subscription, with its secret.' },
)

export const WebhookListSchema = Type.Object({
  items: Type.Array(WebhookRef),
  nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
})

/** Query string of GET /v1/webhooks. */
export const WebhookListQuery = Type.Object(
  {
    tenant: Type.Optional(TenantFilter('subscriptions')),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 500, default: 100, 'x-expected': 'an integer from 1 to 500', description: 'Page size, 1-500 (default 100).' }),
    ),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
)

const urlField = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: '^https?://',
  'x-expected': 'an http or https URL of at most 2048 characters (the scheme in lower case)',
  description: 'An http or https URL of at most 2048 characters, its scheme in lower case.',
})
const secretField = (description: string) => Type.String({ minLength: 16, maxLength: 256, 'x-expected': '16-256 characters', description })

export const CreateWebhookBody = Type.Object(
  {
    url: urlField,
    events: Type.Optional(Type.Array(EventType, { maxItems: EVENT_TYPES.length, description: 'Event types to send; absent or empty: all.' })),
    secret: Type.Optional(secretField('The signing secret; generated when absent.')),
    queue: Type.Optional(
      Type.String({
        pattern: QUEUE_PATTERN,
        'x-expected': 'a queue name',
        description: "Queue of the delivery jobs; default `default`. Not an event filter: the tenant's events of every queue are sent.",
      }),
    ),
  },
  { additionalProperties: false },
)

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(urlField),
    events: Type.Optional(Type.Array(EventType, { maxItems: EVENT_TYPES.length, description: 'Event types to send, for events from now on; empty: all.' })),
    secret: Type.Optional(secretField('The new signing secret: every delivery attempt from now on, retries among them, is signed with it.')),
    enabled: Type.Optional(
      Type.Boolean({
        'x-expected': 'true or false',
        description:
          '`true` enables a disabled subscription again: the events from now on are sent and its failures are forgotten (those of the time it was disabled are not sent). `false` disables it.',
      }),
    ),
  },
  {
    $id: 'UpdateWebhookRequest',
    additionalProperties: false,
    minProperties: 1,
    description: 'The fields to change; at least one. Those left out stay as they are.',
  },
)
export const UpdateWebhookBodyRef = Type.Unsafe<Static<typeof UpdateWebhookBody>>(Type.Ref('UpdateWebhookRequest'))

export const WebhookParams = Type.Object({ id: Uuid('The subscription') }, { additionalProperties: false })

export const DeliveryListSchema = Type.Object({
  items: Type.Array(
    Type.Object({
      id: Uuid('The delivery attempt'),
      eventId: Type.String({ description: 'The event delivered (its stream id).' }),
      eventType: EventType,
      jobId: Uuid('The delivery job (type pgsched.webhook)'),
      attempt: Type.Integer({ description: 'The delivery job’s attempt.' }),
      at: DateTime('When the attempt ended.'),
      statusCode: Nullable(Type.Integer({ description: 'The receiver’s HTTP status; null when no answer came.' })),
      ok: Type.Boolean({ description: 'A 2xx answer.' }),
      error: Nullable(Type.String()),
      durationMs: Type.Integer(),
      willRetry: Nullable(
        Type.Boolean({
          description:
            'Whether another attempt follows: false when delivered, refused for good (a 4xx other than 408 and 429, a refused address) or the last attempt; null for attempts recorded before this was.',
        }),
      ),
    }),
  ),
  nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next (older) page; null on the last page.' })),
})

export const DeliveryQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100, 'x-expected': 'an integer from 1 to 1000' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The previous page’s nextCursor.' })),
  },
  { additionalProperties: false },
)

export { deliveryToJson, webhookToJson } from '../json.ts'
