/** The JSON of an event (each SSE `data:` of GET /v1/events, and a webhook's body) and the stream's query. */
import { Type } from '@fastify/type-provider-typebox'
import { EVENT_ERROR_MESSAGE_MAX, EVENT_ID_PATTERN, EVENT_TYPES, type EventType } from '../../core/events.ts'
import { QUEUE_PATTERN, TYPE_PATTERN } from '../../core/names.ts'
import { DateTime, Nullable, Uuid } from './common.ts'

export const EventSchema = Type.Object(
  {
    id: Type.String({
      pattern: '^[0-9]+-[0-9]+$',
      description:
        'The event id, `<batch>-<index>` (the batch: the events of one statement, numbered in commit order): increasing along the stream; the SSE `id` (send it back as Last-Event-ID).',
    }),
    type: Type.Unsafe<EventType>({
      type: 'string',
      enum: [...EVENT_TYPES],
      description: 'retrying: an attempt failed (or its lease expired) with attempts left; expired: not started by its start deadline.',
    }),
    at: DateTime('When the change was written (database clock).'),
    tenant: Type.String(),
    jobId: Uuid('The job'),
    executionId: Nullable(Uuid('The execution that changed; null for a change of the job alone (submitted recurring job, paused, resumed, cancelled).')),
    queue: Type.String(),
    jobType: Type.String({ description: 'The job type (handler name).' }),
    attempt: Nullable(Type.Integer({ description: 'The attempt after the change (0: not started); null for a change of the job alone.' })),
    error: Nullable(
      Type.Object(
        {
          message: Type.String({ description: `The error's message, cut to ${EVENT_ERROR_MESSAGE_MAX} characters (the execution's error keeps it whole).` }),
          name: Type.String({ description: "The error's class name: the handler's own, or FatalError, TimeoutError, LeaseExpiredError, StartDeadlineError." }),
          fatal: Type.Optional(Type.Literal(true, { description: 'No retry follows it (absent when false).' })),
          timedOut: Type.Optional(Type.Literal(true, { description: 'The attempt ran out of its timeout (absent when false).' })),
        },
        { additionalProperties: false, description: 'Why the attempt ended, on retrying, failed and expired events; null on the others.' },
      ),
    ),
  },
  { $id: 'Event', description: 'A state change of a job or an execution.' },
)

const EVENT_LIST = `^(${EVENT_TYPES.join('|')})(,(${EVENT_TYPES.join('|')}))*$`

export const EventStreamQuery = Type.Object(
  {
    jobId: Type.Optional(Uuid('Only this job’s events')),
    type: Type.Optional(Type.String({ pattern: TYPE_PATTERN, 'x-expected': 'a job type', description: 'Only events of jobs of this type.' })),
    queue: Type.Optional(Type.String({ pattern: QUEUE_PATTERN, 'x-expected': 'a queue name', description: 'Only events in this queue.' })),
    events: Type.Optional(
      Type.String({
        pattern: EVENT_LIST,
        'x-expected': `a comma-separated list of ${EVENT_TYPES.join(', ')}`,
        description: 'Only these event types (comma-separated).',
      }),
    ),
    after: Type.Optional(
      Type.String({
        pattern: EVENT_ID_PATTERN,
        'x-expected': 'an event id',
        description:
          'Resume after this event id (as the Last-Event-ID header does; the header wins); a bare batch number `<batch>` resumes after that whole batch.',
      }),
    ),
  },
  { additionalProperties: false },
)
