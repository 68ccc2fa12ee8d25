/** The shapes of the API's JSON the dashboard reads (see the OpenAPI document at /openapi.json). */
export interface ExecutionError {
  message: string
  name: string
  fatal?: boolean
  timedOut?: boolean
  attempt: number
  workerId?: string
  at?: string
}

export interface Attempt {
  attempt: number
  startedAt: string | null
  endedAt: string | null
  workerId: string | null
  host: string | null
  outcome: string
  error: ExecutionError | null
}

export interface Execution {
  id: string
  jobId: string
  state: string
  attempt: number
  maxAttempts: number
  scheduledFor: string
  runAt: string
  startedAt: string | null
  finishedAt: string | null
  workerId: string | null
  result: unknown
  error: ExecutionError | null
  outputUrl: string | null
  /** The attempt whose output outputUrl streams (the latest that stored any); null with none, or unknown. */
  outputAttempt: number | null
  attempts: Attempt[]
}

export interface Schedule {
  kind: 'cron' | 'interval'
  cron: string | null
  timezone: string
  intervalMs: number | null
  paused: boolean
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
  idempotencyKey: string | null
  state: string
  status: string
  attempts: number
  createdAt: string
  schedule: Schedule | null
  nextRunAt: string | null
  lastExecution: Execution | null
  unserved: string | null
  /** Whether the job's queue is paused (told to every key, though the queue itself is for operator keys). */
  queuePaused: boolean
  queuePausedAt: string | null
}

export interface Page<T> {
  items: T[]
  nextCursor: string | null
}

/** A tenant's fair-share weight and admission quotas, with its live figures (GET /v1/tenants). */
export interface Tenant {
  name: string
  weight: number
  maxPending: number | null
  maxSubmitsPerSecond: number | null
  pending: number
  running: number
}

/** An API key as GET /v1/keys lists it: never its secret. */
export interface ApiKey {
  id: string
  tenant: string
  name: string | null
  keyPrefix: string
  operator: boolean
  createdAt: string
  lastUsedAt: string | null
  revokedAt: string | null
}

export interface Queue {
  name: string
  paused: boolean
  pausedAt: string | null
  concurrencyLimit: number | null
  keyConcurrencyLimit: number | null
  rateLimit: number | null
  ratePeriodMs: number | null
  keyRateLimit: number | null
  keyRatePeriodMs: number | null
  fairShare: boolean
  due: number
  scheduled: number
  running: number
  oldestDueLagMs: number | null
  unserved: number
  liveWorkers: number
}

export interface StatsRow {
  minute: string
  queue: string
  started: number
  succeeded: number
  failed: number
  lagP50Ms: number | null
  lagP95Ms: number | null
}

export interface FailureGroup {
  errorType: string
  message: string
  count: number
  firstSeenAt: string
  lastSeenAt: string
  types: string[]
  queues: string[]
  sampleJobId: string
  samplePayload: unknown
}

export interface WorkerInfo {
  id: string
  host: string
  pid: number
  queues: string[]
  types: string[]
  concurrency: number
  inFlight: number
  /** Running at its last heartbeat; null for a worker that does not report it. */
  running: number | null
  state: 'alive' | 'stale' | 'stopped'
  startedAt: string
  lastSeenAt: string
  stoppedAt: string | null
}

export interface ScheduleInfo {
  jobId: string
  tenant: string
  type: string
  queue: string
  kind: 'cron' | 'interval'
  /** The cron expression, or the interval as a duration (90s, 5m, 1h). */
  schedule: string
  timezone: string | null
  paused: boolean
  /** The job's state: a cancelled job's schedule stays listed, with no fire times. */
  state: 'active' | 'paused' | 'cancelled'
  nextFireTimes: string[]
  /** Why the schedule stopped when its fire times could not be computed; else null. */
  error: string | null
  lastRun: { status?: string; finishedAt?: string | null; scheduledFor?: string } | null
}

export interface BulkResult {
  action: string
  matched: number
  changed: number
  remaining: number
  lastId: string | null
}

export const JOB_STATUSES = ['SCHEDULED', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'] as const

/** A webhook subscription of the signed-in tenant (its secret is never returned). */
export interface Webhook {
  id: string
  /** Whose events it is sent (an operator's list holds every tenant's). */
  tenant: string
  url: string
  /** The event types sent; empty: every event. */
  events: string[]
  queue: string
  createdAt: string
  /** False once disabled (its delivery attempts kept failing, or an update), until enabled again. */
  enabled: boolean
  /** When its first failed delivery attempt since the last successful one was made; null while not failing. */
  failingSince: string | null
  disabledAt: string | null
  /** Why it was disabled; null while enabled. */
  disabledReason: string | null
}

/** One delivery attempt of a webhook subscription. */
export interface WebhookDelivery {
  id: string
  eventId: string
  eventType: string
  /** The delivery job (type pgsched.webhook). */
  jobId: string
  attempt: number
  at: string
  statusCode: number | null
  ok: boolean
  error: string | null
  durationMs: number
  /** Whether another attempt follows; null for attempts recorded before the API said so. */
  willRetry: boolean | null
}
