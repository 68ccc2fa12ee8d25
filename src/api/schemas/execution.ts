/**
 * JSON form of an execution (one run of a job) and the mapping from the
 * domain type: dates as ISO strings, plus `outputUrl`, the API link to the
 * stored output when there is one, and `outputAttempt`, the attempt that stored it.
 */
import { Type, type Static } from '@fastify/type-provider-typebox'
import { DateTime, Nullable, Uuid } from './common.ts'

export const ExecutionStateSchema = Type.Enum(['pending', 'running', 'succeeded', 'failed', 'cancelled'], {
  description: 'pending → running → succeeded | failed | cancelled; a retriable failure returns to pending.',
})

/** `ExecutionError` of core/execution-error.ts, every field of it (a test holds them equal). */
export const ExecutionErrorSchema = Type.Object(
  {
    message: Type.String({ description: 'What went wrong.' }),
    name: Type.String({ description: "The error class: the handler's own, or FatalError, TimeoutError, LeaseExpiredError, CancelledError." }),
    fatal: Type.Optional(Type.Boolean({ description: 'No retry follows.' })),
    timedOut: Type.Optional(Type.Boolean({ description: 'The attempt ran out of its timeoutMs.' })),
    attempt: Type.Integer({ description: 'The attempt this error ended.' }),
    workerId: Type.Optional(Type.String({ description: 'The worker that ran the attempt, when one did.' })),
    at: Type.Optional(DateTime('When the failure was recorded.')),
  },
  { description: 'Why the latest attempt failed.' },
)

/** One attempt of an execution. */
export const AttemptSchema = Type.Object(
  {
    attempt: Type.Integer({ minimum: 1 }),
    startedAt: Nullable(DateTime('When the attempt was claimed.')),
    endedAt: Nullable(DateTime('When it ended; null while it runs.')),
    workerId: Nullable(Type.String({ description: 'The worker that ran it.' })),
    host: Nullable(Type.String({ description: "That worker's host, when known." })),
    outcome: Type.Enum(['running', 'succeeded', 'failed', 'lease expired', 'cancelled']),
    error: Nullable(ExecutionErrorSchema),
  },
  { description: 'One attempt of an execution.' },
)

/** An execution as returned (component `Execution`). */
export const ExecutionSchema = Type.Object(
  {
    id: Uuid('Execution id'),
    jobId: Uuid('Job id'),
    state: ExecutionStateSchema,
    attempt: Type.Integer({ description: 'Attempts started so far (0 before the first).' }),
    maxAttempts: Type.Integer(),
    scheduledFor: DateTime('The fire time this execution belongs to.'),
    runAt: DateTime('When it may run next (pushed back by retries).'),
    startedAt: Nullable(DateTime('Start of the latest attempt.')),
    finishedAt: Nullable(DateTime('When it reached a final state.')),
    workerId: Nullable(Type.String()),
    leaseExpiresAt: Nullable(DateTime("End of the running attempt's lease.")),
    result: Type.Unknown({ description: 'What the handler returned (JSON), or null.' }),
    error: Nullable(ExecutionErrorSchema),
    outputUri: Nullable(
      Type.String({
        description:
          'Where the worker stored the output: `pgsched:output/<execution>/<attempt>` (PostgreSQL), `s3://bucket/prefix/…/` or `file:///…`; read it through `outputUrl`.',
      }),
    ),
    outputUrl: Nullable(Type.String({ description: 'API path that streams the stored output.' })),
    outputAttempt: Nullable(
      Type.Integer({
        description:
          "The attempt whose output `outputUrl` streams: the latest attempt that stored any, which is not the latest attempt when that one wrote none. Null with no output, or where the store's name for it does not say (a `file:` path named otherwise). Earlier attempts: `outputUrl` with `?attempt=N`.",
      }),
    ),
    attempts: Type.Array(AttemptSchema, {
      description: 'Every attempt, oldest first: those that failed or lost their lease, then the latest (running, succeeded or cancelled).',
    }),
  },
  { $id: 'Execution', description: 'One run of a job.' },
)

export type ExecutionJson = Static<typeof ExecutionSchema>

/** Reference to the shared `Execution` schema. */
export const ExecutionRef = Type.Unsafe<ExecutionJson>(Type.Ref('Execution'))

/** A page of GET /v1/jobs/{id}/executions. */
export const ExecutionPageSchema = Type.Object(
  {
    items: Type.Array(ExecutionRef),
    nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
  },
  { $id: 'ExecutionPage', description: "A page of a job's executions, latest fire time first." },
)

/** Reference to the shared `ExecutionPage` schema. */
export const ExecutionPageRef = Type.Unsafe<Static<typeof ExecutionPageSchema>>(Type.Ref('ExecutionPage'))

/** The JSON body for an execution (api/json.ts). */
export { executionToJson } from '../json.ts'
