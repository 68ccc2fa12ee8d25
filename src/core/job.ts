/**
 * Domain types of jobs and executions, and `normalizeSubmit`, the one place
 * where a submit request is validated and given its defaults (used by the
 * TypeScript client and, through it, the REST API).
 *
 * Execution states (ATF's machine):
 *   pending ──claim──▶ running ──▶ succeeded | failed | cancelled
 *      ▲                  │ retriable error / lease expired (attempts left)
 *      └──────────────────┘
 * A job's status (its lifecycle) and its last run's outcome are derived in job-status.ts.
 */
import { createHash } from 'node:crypto'
import { ValidationError, type ErrorDetail } from '../errors.ts'
import { cronNextFireAt } from './cron.ts'
import {
  FORMAT_PROBLEMS,
  INSTANT_RANGE_RULE,
  instantInRange,
  instantProblem,
  intervalProblem,
  parseInstant,
  parseIntervalMs,
  submitTypeProblem,
} from './formats.ts'
import { HTTP_JOB_TYPE, httpPayloadProblems } from './http-payload.ts'
import { jsonValueProblem } from './json-value.ts'
import { unknownFields, type FieldSet } from './known-fields.ts'
import type { ExecutionError } from './execution-error.ts'
import type { JobStatus, LastRun } from './job-status.ts'
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  CONCURRENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  MAX_ATTEMPTS,
  MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_DEPTH,
  MISFIRE_MAX_RUNS,
  PRIORITY,
  QUEUE_RULE,
  START_DEADLINE_MS,
  TIMEOUT_MS,
  TYPE_RULE,
  codePointLength,
  isQueueName,
  isTypeName,
  textProblem,
  type IntRange,
} from './names.ts'

export type ExecutionState = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled'
export type JobState = 'active' | 'paused' | 'cancelled'
export type MisfirePolicy = 'fire_once' | 'skip' | 'fire_all'
export type OverlapPolicy = 'allow' | 'skip' | 'queue'

export type ScheduleInput = { at: string | Date } | { cron: string; timezone?: string } | { every: string | number }

export interface SubmitJobInput {
  /** Handler name. */
  type: string
  /** Any JSON value; for type `http`, the built-in handler's {url, method?, headers?, body?, timeoutMs?} (checked: core/http-payload.ts). */
  payload?: unknown
  /** Default `default`. */
  queue?: string
  /** −1000…1000, higher first; default 0. */
  priority?: number
  /** Absent = run now. */
  schedule?: ScheduleInput
  /** Attempts per execution, default 5. */
  maxAttempts?: number
  /** Per-attempt time limit, default 300000 (5 min). */
  timeoutMs?: number
  /** Retry delay = random(0, min(backoffMaxMs, backoffBaseMs · 2^(attempt−1))). Defaults 1000 / 3600000. */
  backoffBaseMs?: number
  backoffMaxMs?: number
  idempotencyKey?: string
  /**
   * Jobs with the same key in a queue with a per-key concurrency limit run at most that many at
   * once, across every worker (a customer id, say). 1 to 255 characters.
   */
  concurrencyKey?: string
  /**
   * Each execution must start within this many ms after its time (its run-at or fire time), or it
   * expires: it ends failed without running and the job's status is EXPIRED. 1000 to 604800000.
   */
  startDeadlineMs?: number
  /** Recurring jobs: first and last possible fire time. */
  startAt?: string | Date
  endAt?: string | Date
  misfirePolicy?: MisfirePolicy
  /** Cap on catch-up runs for misfirePolicy fire_all; default 100. */
  misfireMaxRuns?: number
  overlapPolicy?: OverlapPolicy
}

export type ScheduleKind = 'now' | 'at' | 'cron' | 'interval'

/** A submit request validated and with every default applied. */
export interface NormalizedSubmit {
  type: string
  payloadJson: string
  queue: string
  priority: number
  maxAttempts: number
  timeoutMs: number
  backoffBaseMs: number
  backoffMaxMs: number
  idempotencyKey: string | null
  concurrencyKey: string | null
  startDeadlineMs: number | null
  kind: ScheduleKind
  runAt: Date | null
  cron: string | null
  timezone: string
  intervalMs: number | null
  startAt: Date | null
  endAt: Date | null
  /** First fire time of a cron schedule (interval schedules compute it in SQL). */
  firstFireAt: Date | null
  misfirePolicy: MisfirePolicy
  misfireMaxRuns: number
  overlapPolicy: OverlapPolicy
  /** SHA-256 of the normalised request, to compare idempotent retries; null without an idempotency key. */
  requestHash: string | null
  /**
   * The job's id, its first execution's and the submit's W3C traceparent, set by the client just
   * before the insert ('' and null until then): one object per submitted job, not a copy with ids.
   */
  id: string
  executionId: string
  traceparent: string | null
}

/** One attempt of an execution: ended (from the attempt log) or the latest (from the execution). */
export interface AttemptRecord {
  attempt: number
  startedAt: Date | null
  /** null while it runs. */
  endedAt: Date | null
  workerId: string | null
  /** The worker's host, when known. */
  host: string | null
  outcome: 'running' | 'succeeded' | 'failed' | 'lease expired' | 'cancelled'
  error: ExecutionError | null
}

export interface Execution {
  id: string
  jobId: string
  state: ExecutionState
  attempt: number
  maxAttempts: number
  scheduledFor: Date
  runAt: Date
  startedAt: Date | null
  finishedAt: Date | null
  workerId: string | null
  leaseExpiresAt: Date | null
  result: unknown
  error: ExecutionError | null
  outputUri: string | null
  /** Every attempt, oldest first: those that failed or lost their lease, then the latest. */
  attempts: AttemptRecord[]
}

export interface Schedule {
  kind: 'cron' | 'interval'
  cron: string | null
  timezone: string
  intervalMs: number | null
  startAt: Date | null
  endAt: Date | null
  misfirePolicy: MisfirePolicy
  misfireMaxRuns: number
  overlapPolicy: OverlapPolicy
  paused: boolean
  /** Why the dispatcher stopped the schedule (its fire times could not be computed); null while it runs. */
  error: string | null
}

export interface Job {
  id: string
  tenant: string
  type: string
  queue: string
  priority: number
  payload: unknown
  maxAttempts: number
  timeoutMs: number
  backoffBaseMs: number
  backoffMaxMs: number
  idempotencyKey: string | null
  /** Jobs with the same key run at most the queue's per-key limit at once. */
  concurrencyKey: string | null
  /** Its executions must start within this many ms after their time, or they expire; null: no deadline. */
  startDeadlineMs: number | null
  state: JobState
  /** Its lifecycle: SCHEDULED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED or EXPIRED (job-status.ts). */
  status: JobStatus
  /** Its latest run's outcome; null before the first. */
  lastRun: LastRun | null
  createdAt: Date
  createdBy: string | null
  schedule: Schedule | null
  nextRunAt: Date | null
  lastExecution: Execution | null
  /**
   * Why its work waits, when something other than time holds it: no live worker (LIVE_WORKER_WORDS)
   * serves its type in its queue. Null otherwise, and when the job has no work to run.
   */
  unserved: string | null
  /**
   * Whether its queue is paused: workers claim nothing from it, so its pending work waits until the
   * queue is resumed. A fact of the queue alone, told to every key that may read the job.
   */
  queuePaused: boolean
  /** When its queue was paused; null while the queue is active (and when a paused queue has no time). */
  queuePausedAt: Date | null
}

const MISFIRE: readonly MisfirePolicy[] = ['fire_once', 'skip', 'fire_all']
const OVERLAP: readonly OverlapPolicy[] = ['allow', 'skip', 'queue']

/** What a live worker is, in words (pgsched.worker_live, migration 0053). */
export const LIVE_WORKER_WORDS = 'a live worker is one running now, not stopped and seen within its lease length (SCHEDULER_LEASE_MS, 30 s by default)'

/** The `unserved` text of a job of `type` in `queue`. */
export const unservedMessage = (type: string, queue: string): string =>
  `no live worker serves type "${type}" in queue "${queue}" (${LIVE_WORKER_WORDS}): start one with a handler for it and --queues ${queue}`

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value instanceof Date) return JSON.stringify(value.toISOString())
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The fields of SubmitJobInput: any other is refused. */
const SUBMIT_FIELDS: FieldSet<SubmitJobInput> = {
  type: true,
  payload: true,
  queue: true,
  priority: true,
  schedule: true,
  maxAttempts: true,
  timeoutMs: true,
  backoffBaseMs: true,
  backoffMaxMs: true,
  idempotencyKey: true,
  concurrencyKey: true,
  startDeadlineMs: true,
  startAt: true,
  endAt: true,
  misfirePolicy: true,
  misfireMaxRuns: true,
  overlapPolicy: true,
}

/** The submit's fields about a recurring schedule that go at its top level, beside `schedule` (a job shows them inside it). */
const SCHEDULE_SIBLINGS = new Set(['startAt', 'endAt', 'misfirePolicy', 'misfireMaxRuns', 'overlapPolicy'])

/**
 * Where a field refused at `path` of a submit belongs, when it is a known field in the wrong place:
 * `schedule.startAt` (as a job shows it) goes beside `schedule`, and `schedule.timezone` is only a
 * cron schedule's. Undefined for any other path.
 */
export function misplacedSubmitField(path: string): string | undefined {
  if (!path.startsWith('schedule.')) return undefined
  const key = path.slice('schedule.'.length)
  if (SCHEDULE_SIBLINGS.has(key)) return `${key} goes at the top level of the submit, beside schedule; a job shows it inside schedule`
  if (key === 'timezone') return 'timezone applies only to cron schedules, {cron, timezone}'
  return undefined
}

/**
 * Validates a submit request and applies defaults.
 * @param now fire-time computations start here (the caller's clock).
 * @param options.internal pgsched's own jobs (the webhook dispatcher's): the only ones that may
 *   have a type starting with `pgsched.`.
 * @throws ValidationError whose details name every bad field.
 */
export function normalizeSubmit(input: SubmitJobInput, now: Date, options: { internal?: boolean } = {}): NormalizedSubmit {
  const problems: ErrorDetail[] = []
  const bad = (path: string, message: string) => problems.push({ path, message })
  const int = (path: string, value: unknown, def: number, { min, max }: IntRange): number => {
    if (value === undefined) return def
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      bad(path, `${path} must be an integer from ${min} to ${max}`)
      return def
    }
    return value
  }
  // rounding: a fraction finer than a millisecond goes up for a start (no run before it), down for an end
  const instant = (path: string, value: unknown, rounding: 'down' | 'up' = 'down'): Date | null => {
    if (value === undefined || value === null) return null
    if (value instanceof Date && !Number.isNaN(value.getTime())) {
      if (instantInRange(value)) return value
      bad(path, `${path} ${JSON.stringify(value.toISOString())} must be ${INSTANT_RANGE_RULE}`)
      return null
    }
    const parsed = typeof value === 'string' ? parseInstant(value, rounding) : undefined
    if (parsed) return parsed
    bad(path, instantProblem(typeof value === 'string' ? value : '', path, rounding) as string)
    return null
  }

  if (!isRecord(input)) throw new ValidationError('job must be an object', [{ path: '', message: 'job must be an object' }])
  // a misspelt field (maxAttemps) would otherwise be dropped and its default used, as REST refuses it
  for (const d of unknownFields(input, SUBMIT_FIELDS)) bad(d.path, d.message)
  if (input.type === undefined || input.type === null) bad('type', 'type is required')
  else if (typeof input.type !== 'string') bad('type', 'type must be a string')
  else if (!isTypeName(input.type)) bad('type', `type must be ${TYPE_RULE}`)
  else if (options.internal !== true) {
    const problem = submitTypeProblem(input.type, 'type')
    if (problem) bad('type', problem)
  }
  const queue = input.queue ?? 'default'
  if (!isQueueName(queue)) bad('queue', `queue must be ${QUEUE_RULE}`)
  const payload = input.payload === undefined ? {} : input.payload
  // checked before JSON.stringify, which recurses
  const payloadProblem = jsonValueProblem(payload, { root: 'payload', maxDepth: MAX_PAYLOAD_DEPTH })
  if (payloadProblem) bad(payloadProblem.path, `${payloadProblem.path} ${payloadProblem.problem}`)
  const payloadJson = payloadProblem ? 'null' : (JSON.stringify(payload) ?? 'null')
  if (Buffer.byteLength(payloadJson) > MAX_PAYLOAD_BYTES) bad('payload', `payload must be at most ${MAX_PAYLOAD_BYTES} bytes as JSON`)
  // the built-in handler's payload, as stored (after toJSON): a misspelt key or a wrong value would fail the job when it runs
  if (input.type === HTTP_JOB_TYPE && !payloadProblem) for (const d of httpPayloadProblems(JSON.parse(payloadJson))) bad(d.path, d.message)
  const priority = int('priority', input.priority, 0, PRIORITY)
  const maxAttempts = int('maxAttempts', input.maxAttempts, 5, MAX_ATTEMPTS)
  const timeoutMs = int('timeoutMs', input.timeoutMs, 300_000, TIMEOUT_MS)
  const backoffBaseMs = int('backoffBaseMs', input.backoffBaseMs, 1000, BACKOFF_BASE_MS)
  const backoffMaxMs = int('backoffMaxMs', input.backoffMaxMs, Math.max(3_600_000, backoffBaseMs), { min: backoffBaseMs, max: BACKOFF_MAX_MS.max })
  const misfireMaxRuns = int('misfireMaxRuns', input.misfireMaxRuns, 100, MISFIRE_MAX_RUNS)
  /** A key: 1 to `max` characters (code points, as the database counts them) it can store. */
  const key = (path: string, value: unknown, max: number): string | null => {
    if (value === undefined) return null
    const length = typeof value === 'string' ? codePointLength(value) : 0
    if (typeof value !== 'string' || length < 1 || length > max) bad(path, `${path} must be a string of 1 to ${max} characters`)
    else {
      const problem = textProblem(value)
      if (!problem) return value
      bad(path, `${path} ${problem}`)
    }
    return null
  }
  const idempotencyKey = key('idempotencyKey', input.idempotencyKey, IDEMPOTENCY_KEY_MAX_LENGTH)
  const concurrencyKey = key('concurrencyKey', input.concurrencyKey, CONCURRENCY_KEY_MAX_LENGTH)
  const startDeadlineMs = input.startDeadlineMs === undefined ? null : int('startDeadlineMs', input.startDeadlineMs, 0, START_DEADLINE_MS)
  const misfirePolicy = input.misfirePolicy ?? 'fire_once'
  if (!MISFIRE.includes(misfirePolicy)) bad('misfirePolicy', `misfirePolicy must be one of ${MISFIRE.join(', ')}`)
  const overlapPolicy = input.overlapPolicy ?? 'allow'
  if (!OVERLAP.includes(overlapPolicy)) bad('overlapPolicy', `overlapPolicy must be one of ${OVERLAP.join(', ')}`)
  const startAt = instant('startAt', input.startAt, 'up')
  const endAt = instant('endAt', input.endAt)
  if (startAt && endAt && endAt <= startAt) bad('endAt', 'endAt must be after startAt')

  let kind: ScheduleKind = 'now'
  let runAt: Date | null = null
  let cron: string | null = null
  let timezone = 'UTC'
  let intervalMs: number | null = null
  let firstFireAt: Date | null = null
  const schedule: unknown = input.schedule
  if (schedule !== undefined && schedule !== null) {
    if (!isRecord(schedule)) {
      bad('schedule', 'schedule must be an object: {at}, {cron, timezone?} or {every}')
    } else {
      const keys = Object.keys(schedule).filter((k) => schedule[k] !== undefined)
      const shape = keys.includes('at') ? 'at' : keys.includes('cron') ? 'cron' : keys.includes('every') ? 'every' : null
      const allowed = shape === 'cron' ? ['cron', 'timezone'] : shape ? [shape] : []
      const extra = keys.filter((k) => !allowed.includes(k))
      if (!shape || extra.length > 0) {
        const hints = extra.map((k) => misplacedSubmitField(`schedule.${k}`)).filter((h): h is string => h !== undefined)
        bad(
          'schedule',
          `schedule must be exactly one of {at}, {cron, timezone?} or {every}${extra.length ? `; unexpected: ${extra.join(', ')}` : ''}${hints.length ? ` (${hints.join('; ')})` : ''}`,
        )
      } else if (shape === 'at') {
        kind = 'at'
        runAt = instant('schedule.at', schedule.at, 'up')
      } else if (shape === 'cron') {
        kind = 'cron'
        if (typeof schedule.cron !== 'string') bad('schedule.cron', 'schedule.cron must be a string')
        else {
          const problem = FORMAT_PROBLEMS.cron(schedule.cron, 'schedule.cron')
          if (problem) bad('schedule.cron', problem)
          else cron = schedule.cron.trim()
        }
        if (schedule.timezone !== undefined) {
          const problem =
            typeof schedule.timezone === 'string'
              ? FORMAT_PROBLEMS['time-zone'](schedule.timezone, 'schedule.timezone')
              : `schedule.timezone ${JSON.stringify(schedule.timezone)} is not a known IANA time zone (such as Europe/Berlin)`
          if (problem) bad('schedule.timezone', problem)
          else timezone = schedule.timezone as string
        }
        if (cron) {
          const from = startAt && startAt > now ? new Date(startAt.getTime() - 1) : now
          firstFireAt = cronNextFireAt(cron, timezone, from)
          if (!firstFireAt) bad('schedule.cron', `cron expression "${cron}" never fires`)
          // a window that ends before the first fire time, or a first fire time after the last
          // instant pgsched takes (INSTANT_RANGE): nothing to come (the job is COMPLETED)
          else if ((endAt && firstFireAt > endAt) || !instantInRange(firstFireAt)) firstFireAt = null
        }
      } else {
        kind = 'interval'
        const problem = intervalProblem(schedule.every, 'schedule.every')
        if (problem) bad('schedule.every', problem)
        else intervalMs = parseIntervalMs(schedule.every) ?? null
      }
    }
  }
  if (kind === 'now' || kind === 'at') {
    if (input.startAt !== undefined || input.endAt !== undefined) {
      bad(input.startAt !== undefined ? 'startAt' : 'endAt', 'startAt and endAt apply only to recurring schedules ({cron} or {every})')
    }
    // a one-time job has no fire times to miss or to overlap: a policy given for it would be ignored
    for (const field of ['misfirePolicy', 'misfireMaxRuns', 'overlapPolicy'] as const) {
      if (input[field] !== undefined) bad(field, `${field} applies only to recurring schedules ({cron} or {every})`)
    }
  }
  if (problems.length > 0) {
    throw new ValidationError(problems.map((p) => p.message).join('; '), problems)
  }
  const normalized: NormalizedSubmit = {
    type: input.type,
    payloadJson,
    queue,
    priority,
    maxAttempts,
    timeoutMs,
    backoffBaseMs,
    backoffMaxMs,
    idempotencyKey,
    concurrencyKey,
    startDeadlineMs,
    kind,
    runAt,
    cron,
    timezone,
    intervalMs,
    startAt,
    endAt,
    firstFireAt,
    misfirePolicy,
    misfireMaxRuns,
    overlapPolicy,
    requestHash: null,
    id: '',
    executionId: '',
    traceparent: null,
  }
  if (idempotencyKey !== null) {
    normalized.requestHash = createHash('sha256')
      // concurrencyKey and startDeadlineMs only when given: requests from before they existed hash as they did
      .update(
        canonicalJson({
          ...normalized,
          requestHash: undefined,
          id: undefined,
          executionId: undefined,
          traceparent: undefined,
          payloadJson: undefined,
          firstFireAt: undefined,
          concurrencyKey: concurrencyKey ?? undefined,
          startDeadlineMs: startDeadlineMs ?? undefined,
          payload,
        }),
      )
      .digest('hex')
  }
  // one object per submit: a batch of thousands keeps them all until its statement returns
  return normalized
}
