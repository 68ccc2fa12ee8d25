/**
 * Route schemas for jobs: the submit body (structure and types; the
 * semantic checks — names, cron expressions, time zones, instants,
 * durations — stay in core/job.ts `normalizeSubmit`, reached through the
 * client), the list query and the JSON form of a job with its mapping
 * from the domain type.
 */
import { Type, type Static } from '@fastify/type-provider-typebox'
import type { Job } from '../../core/job.ts'
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  CONCURRENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  MAX_ATTEMPTS,
  MAX_PAYLOAD_BYTES,
  MISFIRE_MAX_RUNS,
  PRIORITY,
  QUEUE_MAX_LENGTH,
  QUEUE_RULE,
  START_DEADLINE_MS,
  TIMEOUT_MS,
  TYPE_MAX_LENGTH,
  TYPE_RULE,
  type IntRange,
} from '../../core/names.ts'
import { Cursor, DateTime, Limit, Nullable, Uuid } from './common.ts'
import { ExecutionRef, ExecutionStateSchema, executionToJson } from './execution.ts'

/** The user-facing statuses, in lifecycle order (the `status` filter of listJobs). */
export const JOB_STATUSES = ['NOT_STARTED', 'STARTED', 'COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED', 'PAUSED'] as const

export const JobStatusSchema = Type.Enum(JOB_STATUSES, {
  description: 'User-facing status, derived from the job state and its latest execution.',
})

const MisfirePolicySchema = Type.Enum(['fire_once', 'skip', 'fire_all'], {
  description: 'After downtime: run once for all missed fire times (default), skip them, or run each (capped by misfireMaxRuns).',
})
const OverlapPolicySchema = Type.Enum(['allow', 'skip', 'queue'], {
  description: 'When a fire time comes while the previous run is still going (default allow).',
})

/** An integer in `range`, worded for error messages. */
const int = ({ min, max }: IntRange, description: string) =>
  Type.Integer({ minimum: min, maximum: max, 'x-expected': `an integer from ${min} to ${max}`, description })

/** A string of 1 to `max` characters, worded for error messages. */
const text = (max: number, options: { description?: string } = {}) =>
  Type.String({ minLength: 1, maxLength: max, 'x-expected': `a string of 1 to ${max} characters`, ...options })

/** `schedule` of a submit: one of three shapes. */
export const ScheduleInputSchema = Type.Union(
  [
    Type.Object(
      { at: Type.String({ description: 'ISO-8601 instant with a time zone.', examples: ['2030-01-31T09:00:00Z'] }) },
      { additionalProperties: false, title: 'At' },
    ),
    Type.Object(
      {
        cron: Type.String({ description: 'Cron expression (5 fields, or 6 with seconds).', examples: ['0 9 * * 1-5'] }),
        timezone: Type.Optional(Type.String({ description: 'IANA time zone, default UTC.', examples: ['Europe/Berlin'] })),
      },
      { additionalProperties: false, title: 'Cron' },
    ),
    Type.Object(
      {
        every: Type.Unsafe<string | number>({
          type: ['string', 'integer'],
          'x-expected': 'an ISO-8601 duration (PT5M) or a number of milliseconds',
          description: 'ISO-8601 duration (PT5M, P1D) or milliseconds; 1 second to 366 days.',
          examples: ['PT5M', 60000],
        }),
      },
      { additionalProperties: false, title: 'Every' },
    ),
  ],
  {
    'x-expected': 'exactly one of {at}, {cron, timezone?} or {every}',
    description: 'Absent: run now. `{at}`: once at that instant. `{cron, timezone?}` or `{every}`: recurring.',
  },
)

/** Body of POST /v1/jobs. */
export const SubmitJobBody = Type.Object(
  {
    type: Type.String({
      description: `Handler name: ${TYPE_RULE}.`,
      examples: ['email.send'],
    }),
    payload: Type.Optional(Type.Unknown({ description: `Any JSON value given to the handler (at most ${MAX_PAYLOAD_BYTES} bytes as JSON); default {}.` })),
    queue: Type.Optional(Type.String({ description: `Queue name, ${QUEUE_RULE}; default \`default\`.` })),
    priority: Type.Optional(int(PRIORITY, 'Higher runs first; default 0.')),
    schedule: Type.Optional(ScheduleInputSchema),
    maxAttempts: Type.Optional(int(MAX_ATTEMPTS, 'Attempts per execution; default 5.')),
    timeoutMs: Type.Optional(int(TIMEOUT_MS, 'Time limit of one attempt in milliseconds; default 300000.')),
    backoffBaseMs: Type.Optional(int(BACKOFF_BASE_MS, 'Retry delay base in milliseconds; default 1000.')),
    backoffMaxMs: Type.Optional(int(BACKOFF_MAX_MS, 'Retry delay cap in milliseconds; default 3600000.')),
    idempotencyKey: Type.Optional(
      text(IDEMPOTENCY_KEY_MAX_LENGTH, {
        description: 'Same key and body → the same job (200); same key, other body → 409. Or the Idempotency-Key header.',
      }),
    ),
    startDeadlineMs: Type.Optional(
      int(
        START_DEADLINE_MS,
        'Each execution must start within this many ms after its time, or it expires without running (job status EXPIRED). No deadline when absent.',
      ),
    ),
    concurrencyKey: Type.Optional(
      text(CONCURRENCY_KEY_MAX_LENGTH, {
        description: "Jobs with the same key run at most the queue's per-key concurrency limit at once, across every worker (a customer id, say).",
      }),
    ),
    startAt: Type.Optional(Type.String({ description: 'Recurring jobs: first possible fire time (ISO-8601 instant).' })),
    endAt: Type.Optional(Type.String({ description: 'Recurring jobs: last possible fire time (ISO-8601 instant).' })),
    misfirePolicy: Type.Optional(MisfirePolicySchema),
    misfireMaxRuns: Type.Optional(int(MISFIRE_MAX_RUNS, 'Cap on catch-up runs for misfirePolicy fire_all; default 100.')),
    overlapPolicy: Type.Optional(OverlapPolicySchema),
  },
  { additionalProperties: false, description: 'A job to run now, at a time, or on a schedule.' },
)

export type SubmitJobBodyJson = Static<typeof SubmitJobBody>

/** Headers of POST /v1/jobs that the API reads. */
export const SubmitJobHeaders = Type.Object({
  'idempotency-key': Type.Optional(text(IDEMPOTENCY_KEY_MAX_LENGTH, { description: 'Alternative to body `idempotencyKey`.' })),
})

/** Query string of GET /v1/jobs. */
export const ListJobsQuery = Type.Object(
  {
    status: Type.Optional(JobStatusSchema),
    type: Type.Optional(text(TYPE_MAX_LENGTH)),
    queue: Type.Optional(text(QUEUE_MAX_LENGTH)),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
)

/** The schedule of a recurring job, as returned. */
export const ScheduleSchema = Type.Object({
  kind: Type.Enum(['cron', 'interval']),
  cron: Nullable(Type.String()),
  timezone: Type.String(),
  intervalMs: Nullable(Type.Integer()),
  startAt: Nullable(DateTime('First possible fire time.')),
  endAt: Nullable(DateTime('Last possible fire time.')),
  misfirePolicy: MisfirePolicySchema,
  misfireMaxRuns: Type.Integer(),
  overlapPolicy: OverlapPolicySchema,
  paused: Type.Boolean(),
  error: Nullable(Type.String({ description: 'Why the schedule stopped: its fire times could not be computed. Null while it runs.' })),
})

/** A job as returned (component `Job`). */
export const JobSchema = Type.Object(
  {
    id: Uuid('Job id (UUIDv7, time-ordered).'),
    tenant: Type.String(),
    type: Type.String(),
    queue: Type.String(),
    priority: Type.Integer(),
    payload: Type.Unknown(),
    maxAttempts: Type.Integer(),
    timeoutMs: Type.Integer(),
    backoffBaseMs: Type.Integer(),
    backoffMaxMs: Type.Integer(),
    idempotencyKey: Nullable(Type.String()),
    concurrencyKey: Nullable(Type.String()),
    startDeadlineMs: Nullable(Type.Integer({ description: 'How late after its time an execution may start before it expires; null: no deadline.' })),
    state: Type.Enum(['active', 'paused', 'cancelled'], { description: "The definition's own state." }),
    status: JobStatusSchema,
    executionStatus: Nullable(ExecutionStateSchema),
    attempts: Type.Integer({ description: 'Attempts of the latest execution.' }),
    createdAt: DateTime('When the job was accepted.'),
    createdBy: Nullable(Type.String()),
    schedule: Nullable(ScheduleSchema),
    nextRunAt: Nullable(DateTime('When it runs next; null when nothing is due.')),
    lastExecution: Nullable(ExecutionRef),
    unserved: Nullable(
      Type.String({ description: 'Set when the job has work to run and no live worker serves its type in its queue: it waits until one starts.' }),
    ),
  },
  { $id: 'Job', description: 'A job with its status, next run and latest execution.' },
)

export type JobJson = Static<typeof JobSchema>

/** Reference to the shared `Job` schema. */
export const JobRef = Type.Unsafe<JobJson>(Type.Ref('Job'))

/** A page of GET /v1/jobs. */
export const JobPageSchema = Type.Object({
  items: Type.Array(JobRef),
  nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
})

/** The JSON body for a job. */
export function jobToJson(job: Job): JobJson {
  const last = job.lastExecution
  return {
    id: job.id,
    tenant: job.tenant,
    type: job.type,
    queue: job.queue,
    priority: job.priority,
    payload: job.payload,
    maxAttempts: job.maxAttempts,
    timeoutMs: job.timeoutMs,
    backoffBaseMs: job.backoffBaseMs,
    backoffMaxMs: job.backoffMaxMs,
    idempotencyKey: job.idempotencyKey,
    concurrencyKey: job.concurrencyKey,
    startDeadlineMs: job.startDeadlineMs,
    state: job.state,
    status: job.status,
    executionStatus: last?.state ?? null,
    attempts: last?.attempt ?? 0,
    createdAt: job.createdAt.toISOString(),
    createdBy: job.createdBy,
    schedule: job.schedule
      ? {
          ...job.schedule,
          startAt: job.schedule.startAt?.toISOString() ?? null,
          endAt: job.schedule.endAt?.toISOString() ?? null,
        }
      : null,
    nextRunAt: job.nextRunAt?.toISOString() ?? null,
    lastExecution: last ? executionToJson(last) : null,
    unserved: job.unserved,
  }
}
