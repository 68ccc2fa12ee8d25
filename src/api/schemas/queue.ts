/** The JSON of a queue (GET /v1/queues and the queue operations) and the bodies they take. */
import { Type, type Static } from '@fastify/type-provider-typebox'
import { QUEUE_PATTERN, QUEUE_RULE } from '../../core/names.ts'
import { CONCURRENCY_LIMIT_MAX, RATE_LIMIT_MAX, RATE_PERIOD_MS_MAX } from '../../queue-admin.ts'
import { DateTime, Nullable } from './common.ts'

export const QueueSchema = Type.Object(
  {
    name: Type.String(),
    paused: Type.Boolean({ description: 'Workers claim nothing from a paused queue; running executions finish; submits are accepted.' }),
    pausedAt: Nullable(DateTime('When it was paused.')),
    concurrencyLimit: Nullable(
      Type.Integer({ minimum: 1, maximum: CONCURRENCY_LIMIT_MAX, description: 'Most executions running at once across all workers; null: no limit.' }),
    ),
    keyConcurrencyLimit: Nullable(
      Type.Integer({
        minimum: 1,
        maximum: CONCURRENCY_LIMIT_MAX,
        description: 'Most executions of one concurrency key running at once; null: no limit per key.',
      }),
    ),
    rateLimit: Nullable(
      Type.Integer({ minimum: 1, maximum: RATE_LIMIT_MAX, description: 'Most starts per ratePeriodMs across all workers; null: no rate limit.' }),
    ),
    ratePeriodMs: Nullable(Type.Integer({ minimum: 1, maximum: RATE_PERIOD_MS_MAX, description: 'The period of rateLimit, ms.' })),
    keyRateLimit: Nullable(
      Type.Integer({
        minimum: 1,
        maximum: RATE_LIMIT_MAX,
        description: 'Most starts of one concurrency key per keyRatePeriodMs across all workers; null: no rate limit per key.',
      }),
    ),
    keyRatePeriodMs: Nullable(Type.Integer({ minimum: 1, maximum: RATE_PERIOD_MS_MAX, description: 'The period of keyRateLimit, ms.' })),
    fairShare: Type.Boolean({
      description: 'Claims take turns between the tenants with due work (strict priority first, then round-robin weighted by tenant weight).',
    }),
    due: Type.Integer({ description: 'Pending executions due now.' }),
    scheduled: Type.Integer({ description: 'Pending executions due later (scheduled, or a retry waiting for its backoff).' }),
    running: Type.Integer({ description: 'Executions running (claimed by a worker) now.' }),
    oldestDueLagMs: Nullable(Type.Integer({ description: 'How long the oldest due execution has waited, ms; null when none is due.' })),
    unserved: Type.Integer({
      minimum: 0,
      description:
        'Pending executions whose type no live worker serves in this queue (no such worker seen within its lease length): they wait until one starts.',
    }),
    unservedTypes: Type.Array(Type.String(), { description: 'The types of those executions.' }),
    liveWorkers: Type.Integer({
      minimum: 0,
      description:
        'Live workers serving this queue (seen within their lease length), whatever types they take. 0 with no work either: a queue name nothing uses (a misspelt one, perhaps).',
    }),
  },
  { $id: 'Queue', description: 'A queue: its settings and live figures.' },
)

export type QueueJson = Static<typeof QueueSchema>

export const QueueRef = Type.Unsafe<QueueJson>(Type.Ref('Queue'))

export const QueueListSchema = Type.Object({ items: Type.Array(QueueRef) }, { $id: 'QueueList', description: 'Every queue with settings or work.' })

export const QueueListRef = Type.Unsafe<Static<typeof QueueListSchema>>(Type.Ref('QueueList'))

export const QueueParams = Type.Object(
  { name: Type.String({ pattern: QUEUE_PATTERN, 'x-expected': `a queue name (${QUEUE_RULE})`, description: 'Queue name.' }) },
  { additionalProperties: false },
)

const limit = (description: string) =>
  Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: CONCURRENCY_LIMIT_MAX,
        'x-expected': `an integer from 1 to ${CONCURRENCY_LIMIT_MAX}, or null for no limit`,
        description,
      }),
    ),
  )

export const QueuePatchBody = Type.Object(
  {
    concurrencyLimit: limit('Most executions of the queue running at once across all workers; null removes the limit.'),
    keyConcurrencyLimit: limit("Most executions of one concurrency key (a job's `concurrencyKey`) running at once; null removes the limit."),
    rateLimit: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 1,
          maximum: RATE_LIMIT_MAX,
          'x-expected': `an integer from 1 to ${RATE_LIMIT_MAX}, or null for no rate limit`,
          description: 'Most starts (claims, reruns included) per ratePeriodMs across all workers, evenly spaced at 93 % of it; null removes it.',
        }),
      ),
    ),
    ratePeriodMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: RATE_PERIOD_MS_MAX,
        'x-expected': `an integer from 1 to ${RATE_PERIOD_MS_MAX}`,
        description: 'The period of rateLimit in ms. Used with rateLimit; left out, the queue keeps the period it has (1000 when it has none).',
      }),
    ),
    keyRateLimit: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 1,
          maximum: RATE_LIMIT_MAX,
          'x-expected': `an integer from 1 to ${RATE_LIMIT_MAX}, or null for no rate limit per key`,
          description:
            "Most starts of one concurrency key (a job's `concurrencyKey`; claims, reruns included) per keyRatePeriodMs across all workers, " +
            'evenly spaced at 93 % of it; executions without a key are not limited by it; null removes it.',
        }),
      ),
    ),
    keyRatePeriodMs: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: RATE_PERIOD_MS_MAX,
        'x-expected': `an integer from 1 to ${RATE_PERIOD_MS_MAX}`,
        description: 'The period of keyRateLimit in ms. Used with keyRateLimit; left out, the queue keeps the period it has (1000 when it has none).',
      }),
    ),
    fairShare: Type.Optional(
      Type.Boolean({
        'x-expected': 'true or false',
        description: 'Take turns between tenants (strict priority first, then round-robin weighted by tenant weight) instead of oldest due first.',
      }),
    ),
  },
  { $id: 'UpdateQueueRequest', additionalProperties: false, minProperties: 1, description: 'The settings to change; at least one.' },
)

export const QueuePatchBodyRef = Type.Unsafe<Static<typeof QueuePatchBody>>(Type.Ref('UpdateQueueRequest'))

export { queueToJson } from '../json.ts'
