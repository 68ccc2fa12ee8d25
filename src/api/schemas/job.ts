/**
 * Route schemas for jobs: the submit body, the list query and the JSON form
 * of a job with its mapping from the domain type. The submit body carries
 * every constraint normalizeSubmit (core/job.ts) enforces on a single field —
 * patterns, lengths in characters, ranges, enums and the formats of
 * core/formats.ts (date-time, cron, time-zone, pgsched-duration, pgsched-job-type), which the
 * API validates with the same functions — so a value valid per the schema is
 * refused only for a cross-field reason the descriptions name (endAt after
 * startAt, backoffMaxMs at least backoffBaseMs, startAt/endAt only with a
 * recurring schedule, a cron expression that never fires, the
 * payload's size as JSON, an idempotency key reused for another request).
 */
import { Type, type Static } from '@fastify/type-provider-typebox'
import { JOB_STATUSES, RUN_STATUSES } from '../../core/job-status.ts'
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  CONCURRENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  MAX_ATTEMPTS,
  MAX_PAYLOAD_BYTES,
  MISFIRE_MAX_RUNS,
  PRIORITY,
  MAX_PAYLOAD_DEPTH,
  NO_NUL_PATTERN,
  QUEUE_MAX_LENGTH,
  QUEUE_PATTERN,
  QUEUE_RULE,
  START_DEADLINE_MS,
  TIMEOUT_MS,
  TYPE_MAX_LENGTH,
  TYPE_PATTERN,
  TYPE_RULE,
  type IntRange,
} from '../../core/names.ts'
import { CRON_MAX_LENGTH, CRON_PATTERN, DURATION_PATTERN, INTERVAL_RULE, TIME_ZONE_PATTERN } from '../../core/formats.ts'
import { INTERVAL_MS } from '../../core/names.ts'
import { Cursor, DateTime, Instant, Limit, Nullable, TenantFilter, Uuid } from './common.ts'
import { ExecutionRef } from './execution.ts'

export const JobStatusSchema = Type.Enum(JOB_STATUSES, {
  description:
    "The job's lifecycle, apart from its last run's outcome (`lastRun.status`): SCHEDULED (work to come: a pending execution, or a " +
    'recurring schedule that still fires, whatever its last run did), RUNNING (its latest execution runs), PAUSED, CANCELLED, and, once ' +
    'nothing is to come (a one-time job, or a recurring one past its endAt), COMPLETED, FAILED or EXPIRED after the outcome of its ' +
    'last run (FAILED also when the schedule stopped: `schedule.error`).',
})

/** The latest run of a job. */
export const LastRunSchema = Type.Object(
  {
    executionId: Uuid('The execution.'),
    status: Type.Enum(RUN_STATUSES, {
      description: 'Its outcome: PENDING or RUNNING while it has none yet; EXPIRED when it missed its start deadline.',
    }),
    attempt: Type.Integer({ minimum: 0, description: 'Attempts made (0: none started).' }),
    scheduledFor: DateTime('Its time: the run-at, or the fire time of a recurring job.'),
    finishedAt: Nullable(DateTime('When it ended; null until then.')),
  },
  { description: "The job's latest run (by its time)." },
)

const MisfirePolicySchema = Type.Enum(['fire_once', 'skip', 'fire_all'], {
  description: 'Recurring jobs only. After downtime: run once for all missed fire times (default), skip them, or run each (capped by misfireMaxRuns).',
})
const OverlapPolicySchema = Type.Enum(['allow', 'skip', 'queue'], {
  description: 'Recurring jobs only. When a fire time comes while the previous run is still going (default allow).',
})

/** An integer in `range`, worded for error messages. */
const int = ({ min, max }: IntRange, description: string) =>
  Type.Integer({ minimum: min, maximum: max, 'x-expected': `an integer from ${min} to ${max}`, description })

/** The longest error message a filter takes: about the API's default body limit (1 MiB). */
const ERROR_MESSAGE_FILTER_MAX_LENGTH = 1_048_576

/** A string of 1 (or `min`) to `max` characters (code points) without NUL, worded for error messages. */
const text = (max: number, options: { description?: string; min?: number } = {}) => {
  const { min = 1, ...rest } = options
  return Type.String({ minLength: min, maxLength: max, pattern: NO_NUL_PATTERN, 'x-expected': `a string of ${min} to ${max} characters`, ...rest })
}

/** A job type (handler name). */
const TypeName = (description: string) =>
  Type.String({ minLength: 1, maxLength: TYPE_MAX_LENGTH, pattern: TYPE_PATTERN, 'x-expected': TYPE_RULE, description, examples: ['email.send'] })

/** A queue name. */
const QueueName = (description: string) =>
  Type.String({ minLength: 1, maxLength: QUEUE_MAX_LENGTH, pattern: QUEUE_PATTERN, 'x-expected': QUEUE_RULE, description, examples: ['default'] })

/** `schedule` of a submit: one of three shapes. */
export const ScheduleInputSchema = Type.Union(
  [
    Type.Object(
      {
        at: Instant(
          'ISO-8601 instant with a time zone; a past instant runs now. A `startDeadlineMs` counts from this instant: one that has already passed at the submit expires the run instead.',
        ),
      },
      { additionalProperties: false, title: 'At' },
    ),
    Type.Object(
      {
        // at most CRON_MAX_LENGTH characters without the white space around it, which the format
        // check (cronProblem) counts, as the client and SQL do: not a maxLength of the text as sent
        cron: Type.String({
          minLength: 1,
          pattern: CRON_PATTERN,
          format: 'cron',
          description: `Cron expression: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or an @alias (@hourly, @daily, …), at most ${CRON_MAX_LENGTH} characters without the white space around it. Refused when it never fires.`,
          examples: ['0 9 * * 1-5'],
        }),
        timezone: Type.Optional(
          Type.String({ pattern: TIME_ZONE_PATTERN, format: 'time-zone', description: 'IANA time zone, default UTC.', examples: ['Europe/Berlin'] }),
        ),
      },
      { additionalProperties: false, title: 'Cron' },
    ),
    Type.Object(
      {
        every: Type.Unsafe<string | number>({
          type: ['string', 'integer'],
          // minimum and maximum apply to numbers; pattern and format to strings
          minimum: INTERVAL_MS.min,
          maximum: INTERVAL_MS.max,
          pattern: DURATION_PATTERN,
          format: 'pgsched-duration',
          'x-expected': INTERVAL_RULE,
          description: `Interval between fire times: ${INTERVAL_RULE}; whole milliseconds (a fraction of one, as in 1.0005s, is refused).`,
          examples: ['10s', '1h30m', 'PT5M', 60000],
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
      minLength: 1,
      maxLength: TYPE_MAX_LENGTH,
      pattern: TYPE_PATTERN,
      format: 'pgsched-job-type',
      'x-expected': TYPE_RULE,
      description: `Handler name: ${TYPE_RULE}; not starting with \`pgsched.\` (format pgsched-job-type: reserved for pgsched's own jobs).`,
      examples: ['email.send'],
    }),
    payload: Type.Optional(
      Type.Unknown({
        description:
          `Any JSON value given to the handler; default {}. At most ${MAX_PAYLOAD_BYTES} bytes as JSON and ${MAX_PAYLOAD_DEPTH} levels deep; ` +
          'no NUL character (\\u0000) or lone surrogate in any string or key; over HTTP, no `__proto__` key and no `constructor` object ' +
          'with a `prototype` key (the request body is refused: 400), and no integer beyond ±9007199254740991, whose digits a JSON ' +
          "reader may change (RFC 7493; send such numbers as strings; 400 naming it). For type `http`, the built-in handler's " +
          '{url, method?, headers?, body?, timeoutMs?}: another key, or a value it cannot send as given (a URL that is not http or https, ' +
          'a method it does not know, a header value that is not a string, a timeoutMs outside 1 to 86400000), is refused (400 naming it).',
      }),
    ),
    queue: Type.Optional(QueueName(`Queue name, ${QUEUE_RULE}; default \`default\`.`)),
    priority: Type.Optional(int(PRIORITY, 'Higher runs first; default 0.')),
    schedule: Type.Optional(ScheduleInputSchema),
    maxAttempts: Type.Optional(int(MAX_ATTEMPTS, 'Attempts per execution; default 5.')),
    timeoutMs: Type.Optional(int(TIMEOUT_MS, 'Time limit of one attempt in milliseconds; default 300000.')),
    backoffBaseMs: Type.Optional(int(BACKOFF_BASE_MS, 'Retry delay base in milliseconds; default 1000.')),
    backoffMaxMs: Type.Optional(
      int(BACKOFF_MAX_MS, 'Retry delay cap in milliseconds, at least backoffBaseMs; default 3600000 (or backoffBaseMs when larger).'),
    ),
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
    startAt: Type.Optional(Instant('Recurring jobs only: first possible fire time (ISO-8601 instant).')),
    endAt: Type.Optional(Instant('Recurring jobs only: last possible fire time (ISO-8601 instant), after startAt.')),
    misfirePolicy: Type.Optional(MisfirePolicySchema),
    misfireMaxRuns: Type.Optional(int(MISFIRE_MAX_RUNS, 'Recurring jobs only. Cap on catch-up runs for misfirePolicy fire_all; default 100.')),
    overlapPolicy: Type.Optional(OverlapPolicySchema),
  },
  { $id: 'SubmitJobRequest', additionalProperties: false, description: 'A job to run now, at a time, or on a schedule.' },
)

export type SubmitJobBodyJson = Static<typeof SubmitJobBody>

/** Reference to the shared `SubmitJobRequest` schema. */
export const SubmitJobBodyRef = Type.Unsafe<SubmitJobBodyJson>(Type.Ref('SubmitJobRequest'))

/** Headers of POST /v1/jobs that the API reads. */
export const SubmitJobHeaders = Type.Object({
  'idempotency-key': Type.Optional(text(IDEMPOTENCY_KEY_MAX_LENGTH, { description: 'Alternative to body `idempotencyKey`.' })),
})

/** The filters of GET /v1/jobs, its export and a bulk operation: every one given must match. */
export const JobFilterProperties = {
  status: Type.Optional(JobStatusSchema),
  type: Type.Optional(TypeName('Only jobs of this type.')),
  queue: Type.Optional(QueueName('Only jobs of this queue.')),
  tenant: Type.Optional(TenantFilter('jobs')),
  idempotencyKey: Type.Optional(text(IDEMPOTENCY_KEY_MAX_LENGTH, { description: 'Only the job submitted with this idempotency key.' })),
  // as long as a stored name or message can be (a handler's are kept whole), and empty (`throw new
  // Error()`): a group of GET /v1/failures must be usable here whatever it holds (a long one fits a bulk
  // body, not a URL)
  errorType: Type.Optional(
    text(ERROR_MESSAGE_FILTER_MAX_LENGTH, {
      min: 0,
      description: "Only jobs whose latest execution's error has this `name` (exact, as `GET /v1/failures` groups it).",
    }),
  ),
  errorMessage: Type.Optional(
    text(ERROR_MESSAGE_FILTER_MAX_LENGTH, {
      min: 0,
      description:
        "Only jobs whose latest execution's error has this `message` (exact, as `GET /v1/failures` groups it). A message too long for a URL can be given in the body of `POST /v1/jobs/bulk`.",
    }),
  ),
  createdAfter: Type.Optional(Instant('Only jobs created after this instant.')),
  createdBefore: Type.Optional(Instant('Only jobs created before this instant.')),
}

/** Query string of GET /v1/jobs. */
export const ListJobsQuery = Type.Object(
  {
    ...JobFilterProperties,
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
    state: Type.Enum(['active', 'paused', 'cancelled'], {
      description:
        "The job definition's own state: `active` unless it was paused (a recurring job) or cancelled. It stays `active` when its run completes or fails: what a job's runs did is `status`, which the list filters by (`?status=`).",
    }),
    status: JobStatusSchema,
    lastRun: Nullable(LastRunSchema),
    attempts: Type.Integer({ description: 'Attempts of the latest execution.' }),
    createdAt: DateTime('When the job was accepted.'),
    createdBy: Nullable(Type.String()),
    schedule: Nullable(ScheduleSchema),
    nextRunAt: Nullable(
      DateTime(
        'When it runs next; null when nothing is due. For a recurring job whose fire times passed while no dispatcher ran (an outage), the next one its misfire policy runs: a past fire time still owed (fire_once, fire_all), or for skip the next one to come.',
      ),
    ),
    lastExecution: Nullable(ExecutionRef),
    unserved: Nullable(
      Type.String({ description: 'Set when the job has work to run and no live worker serves its type in its queue: it waits until one starts.' }),
    ),
    queuePaused: Type.Boolean({
      description:
        "Whether the job's queue is paused: workers claim nothing from it, so its pending executions wait until the queue is resumed " +
        '(running ones finish). Told to any key that may read the job; the queue itself (`GET /v1/queues/{name}`) is for operator keys.',
    }),
    queuePausedAt: Nullable(DateTime("When the job's queue was paused; null while it is active.")),
  },
  { $id: 'Job', description: 'A job with its status, next run and latest execution.' },
)

export type JobJson = Static<typeof JobSchema>

/** Reference to the shared `Job` schema. */
export const JobRef = Type.Unsafe<JobJson>(Type.Ref('Job'))

/** A page of GET /v1/jobs. */
export const JobPageSchema = Type.Object(
  {
    items: Type.Array(JobRef),
    nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
  },
  { $id: 'JobPage', description: 'A page of jobs, newest first.' },
)

/** Reference to the shared `JobPage` schema. */
export const JobPageRef = Type.Unsafe<Static<typeof JobPageSchema>>(Type.Ref('JobPage'))

/** The JSON body for a job (api/json.ts: loaded without the schemas, by the CLI). */
export { jobToJson } from '../json.ts'
