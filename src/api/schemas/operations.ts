/**
 * Route schemas of the job operations and the dashboard's views: the bulk request and its
 * counts, failure groups, workers, schedules and per-minute figures, with their JSON mappings.
 */
import { Type, type Static } from '@fastify/type-provider-typebox'
import type { BulkJobsResult } from '../../job-operations.ts'
import type { FailureGroup, MinuteStats, ScheduleView } from '../../operations-views.ts'
import { lastRunOf } from '../../core/job-status.ts'
import { Cursor, DateTime, Limit, Nullable, Uuid } from './common.ts'
import { JobFilterProperties, LastRunSchema } from './job.ts'

const BulkAction = Type.Enum(['cancel', 'retry', 'delete'], {
  description: 'cancel: SCHEDULED, RUNNING or PAUSED jobs; retry: FAILED, EXPIRED or CANCELLED ones; delete: finished ones.',
})

/** Body of POST /v1/jobs/bulk. */
export const BulkJobsBody = Type.Object(
  {
    action: BulkAction,
    filter: Type.Object(
      {
        ...JobFilterProperties,
        ids: Type.Optional(
          Type.Array(Uuid('A job id.'), { maxItems: 1000, 'x-expected': 'an array of at most 1000 job ids', description: 'Only these jobs.' }),
        ),
        all: Type.Optional(Type.Boolean({ description: 'Must be true when no other filter field is given: the action then covers every job in scope.' })),
      },
      { additionalProperties: false, description: 'Which jobs: every field given must match. An empty filter is refused unless `all` is true.' },
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 1000, 'x-expected': 'an integer from 1 to 1000', description: 'Most jobs acted on in this call.' }),
    ),
    after: Type.Optional(
      Uuid(
        "Only jobs after this one in id order: the previous call's `lastId`. Repeating the call with it acts on each job once, " +
          'even when a retried job fails again and matches the filter again; `remaining` then counts the jobs after `lastId`.',
      ),
    ),
  },
  { $id: 'BulkJobsRequest', additionalProperties: false, description: 'An action on the jobs of a filter, at most `limit` per call.' },
)

export const BulkJobsBodyRef = Type.Unsafe<Static<typeof BulkJobsBody>>(Type.Ref('BulkJobsRequest'))

export const BulkJobsResultSchema = Type.Object(
  {
    action: BulkAction,
    matched: Type.Integer({ minimum: 0, description: 'Jobs of the filter the action applied to when this call looked (at most `limit`).' }),
    changed: Type.Integer({ minimum: 0, description: 'Jobs this call changed (fewer than matched when some changed meanwhile).' }),
    remaining: Type.Integer({
      minimum: 0,
      description: 'Jobs of the filter the action still applies to (with `after`: after `lastId`); 0 when done. Repeat the call until then.',
    }),
    lastId: Nullable(Uuid('The last job (id order) this call looked at: `after` for the next call; null when it found none.')),
  },
  { $id: 'BulkJobsResult', description: 'What one bulk call did.' },
)

export const BulkJobsResultRef = Type.Unsafe<BulkJobsResult>(Type.Ref('BulkJobsResult'))

/** Query string of GET /v1/jobs/export. */
export const ExportJobsQuery = Type.Object(
  {
    format: Type.Optional(Type.Enum(['csv', 'json'], { default: 'json', description: 'csv (RFC 4180, a header row) or json (one array).' })),
    ...JobFilterProperties,
  },
  { additionalProperties: false },
)

export const FailureGroupListSchema = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        errorType: Type.String({ description: "The latest error's name (ScheduleError when the schedule stopped)." }),
        message: Type.String(),
        count: Type.Integer({ minimum: 1, description: 'Jobs in the group.' }),
        firstSeenAt: DateTime('The earliest failure of the group.'),
        lastSeenAt: DateTime('The latest failure of the group.'),
        types: Type.Array(Type.String()),
        queues: Type.Array(Type.String()),
        sampleJobId: Uuid('The newest job of the group.'),
        samplePayload: Type.Unknown({ description: "That job's payload." }),
      }),
    ),
  },
  { $id: 'FailureGroupList', description: 'FAILED and EXPIRED jobs grouped by their latest error (type and message), largest groups first.' },
)

export const FailuresQuery = Type.Object(
  {
    // the names a job can have, checked as the job list checks them (a name no job can have is a 400, not an empty list)
    queue: JobFilterProperties.queue,
    type: JobFilterProperties.type,
    since: Type.Optional(Type.String({ format: 'date-time', description: 'Only failures at or after this instant.' })),
    tenant: JobFilterProperties.tenant,
  },
  { additionalProperties: false },
)

export const WorkerListSchema = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        id: Uuid('The worker.'),
        host: Type.String(),
        pid: Type.Integer(),
        queues: Type.Array(Type.String()),
        types: Type.Array(Type.String()),
        concurrency: Type.Integer(),
        inFlight: Type.Integer({
          minimum: 0,
          description: 'Executions it holds a lease on: running, or claimed ahead of a free slot and waiting in its local queue.',
        }),
        running: Nullable(
          Type.Integer({
            minimum: 0,
            description:
              'Of those, how many had their handler running at its last heartbeat (lastSeenAt; every SCHEDULER_HEARTBEAT_MS). 0 once stopped; null for a worker of a version that did not report it.',
          }),
        ),
        state: Type.Enum(['alive', 'stale', 'stopped'], {
          description:
            'alive: seen within its lease length (SCHEDULER_LEASE_MS, 30 s by default; 60 s for a worker registered before migration 0053); stale: not seen since and not stopped; stopped: shut down.',
        }),
        startedAt: DateTime('When it started.'),
        lastSeenAt: DateTime('Its last heartbeat.'),
        stoppedAt: Nullable(DateTime('When it stopped; null while it runs.')),
      }),
    ),
  },
  { $id: 'WorkerList', description: 'Workers, most recently seen first (at most 500).' },
)

export const ScheduleListSchema = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        jobId: Uuid('The recurring job.'),
        tenant: Type.String(),
        type: Type.String(),
        queue: Type.String(),
        state: Type.Enum(['active', 'paused', 'cancelled'], {
          description: "The job's state: a cancelled job's schedule lists here with no fire times, as one that ended or failed does.",
        }),
        kind: Type.Enum(['cron', 'interval']),
        schedule: Type.String({ description: 'The cron expression, or the interval as a duration (90s, 5m, 1h).' }),
        intervalMs: Nullable(Type.Integer()),
        timezone: Type.String(),
        paused: Type.Boolean(),
        nextFireTimes: Type.Array(DateTime('A fire time.'), {
          maxItems: 5,
          description:
            'The next fire times that get a run; empty while paused or once stopped. After an outage the first may be past: the fire times its misfire policy still runs (none for skip).',
        }),
        error: Nullable(
          Type.String({ description: 'Why the schedule stopped, when its fire times could not be computed (the job is FAILED); null otherwise.' }),
        ),
        lastRun: Nullable(LastRunSchema),
      }),
    ),
    nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
  },
  { $id: 'ScheduleList', description: 'Recurring jobs with their schedules, by job id.' },
)

export const SchedulesQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    tenant: JobFilterProperties.tenant,
    jobId: Type.Optional(Uuid("Only this job's schedule: one item, or none when the job has no recurring schedule (or is another tenant's).")),
  },
  { additionalProperties: false },
)

export const MinuteStatsListSchema = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        minute: DateTime('The start of the minute.'),
        queue: Type.String(),
        started: Type.Integer({ minimum: 0 }),
        succeeded: Type.Integer({ minimum: 0 }),
        failed: Type.Integer({ minimum: 0 }),
        lagP50Ms: Nullable(Type.Number({ description: 'Median of start time minus due time of the executions started.' })),
        lagP95Ms: Nullable(Type.Number({ description: 'Its 95th percentile.' })),
      }),
    ),
  },
  { $id: 'MinuteStatsList', description: 'Per-minute figures per queue, oldest minute first; minutes without activity are left out.' },
)

export const StatsQuery = Type.Object(
  {
    minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 1440, default: 60, 'x-expected': 'an integer from 1 to 1440', description: 'The window.' })),
    queue: JobFilterProperties.queue,
    tenant: JobFilterProperties.tenant,
  },
  { additionalProperties: false },
)

export const OPERATIONS_SCHEMAS = [BulkJobsBody, BulkJobsResultSchema, FailureGroupListSchema, WorkerListSchema, ScheduleListSchema, MinuteStatsListSchema]

const iso = (d: Date | null) => d?.toISOString() ?? null

export const failureToJson = (f: FailureGroup) => ({ ...f, firstSeenAt: f.firstSeenAt.toISOString(), lastSeenAt: f.lastSeenAt.toISOString() })

export { workerToJson } from '../json.ts'

export function scheduleToJson(s: ScheduleView) {
  const last = lastRunOf(s.lastExecution)
  return {
    jobId: s.jobId,
    tenant: s.tenant,
    type: s.type,
    queue: s.queue,
    state: s.state,
    kind: s.kind,
    schedule: s.schedule,
    intervalMs: s.intervalMs,
    timezone: s.timezone,
    paused: s.paused,
    nextFireTimes: s.nextFireTimes.map((d) => d.toISOString()),
    error: s.error,
    lastRun: last ? { ...last, scheduledFor: last.scheduledFor.toISOString(), finishedAt: iso(last.finishedAt) } : null,
  }
}

export const statsToJson = (m: MinuteStats) => ({ ...m, minute: m.minute.toISOString() })
