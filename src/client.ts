/**
 * The TypeScript client: submit, view, list, cancel, pause and resume jobs (and, through
 * job-operations.ts and operations-views.ts, retry, rerun, delete, bulk operations and the views).
 * The REST API is a thin layer over this module. Every call can run inside the
 * caller's own transaction (a Kysely transaction or a `pg` client), so a job
 * commits or rolls back together with the caller's data.
 */
import { setMaxListeners } from 'node:events'
import type pg from 'pg'
import type { Context } from '@opentelemetry/api'
import { tracedSubmit } from './lib/tracing.ts'
import { Kysely, PostgresDialect, type Transaction } from 'kysely'
import { callerKysely, isCallerKysely, kyselyOnClient, type CallerKysely } from './db/kysely-on-client.ts'
import { markCallerConnection } from './db/queries/plain-forms.ts'
import { uuidV7 } from './lib/uuid-v7.ts'
import { settlesWithin } from './lib/service.ts'
import { systemClock, type Clock } from './clock.ts'
import { ConflictError, InvalidStateError, NotFoundError, QuotaExceededError, ValidationError } from './errors.ts'
import { tenantHasQuota, type QuotaRejection } from './db/queries/admission.ts'
import { normalizeSubmit, type Execution, type Job, type NormalizedSubmit, type SubmitJobInput } from './core/job.ts'
import { newJob } from './core/new-job.ts'
import { TENANT_RULE, isTenantName } from './core/names.ts'
import { workerServes } from './db/queries/workers.ts'
import { queuePauseOf } from './db/queries/queues.ts'
import { createDb, type Database } from './db/pool.ts'
import { isSchemaMissing, SCHEMA_MISSING_MESSAGE } from './db/outage.ts'
import type { DB } from './db/schema.ts'
import { jobCancel, jobCancelSweep, jobCancelSweepNow, jobSetPaused, type JobInsertOutcome } from './db/queries/jobs.ts'
import { jobGetById } from './db/queries/job-views.ts'
import { jobOperations, type JobOperations, type ListJobsParams } from './job-operations.ts'
import { operationsViews, type OperationsViews } from './operations-views.ts'
import { queueAdmin, type QueueAdmin } from './queue-admin.ts'
import { tenantAdmin, type TenantAdmin } from './tenant-admin.ts'
import { insertRows, SubmitBatcher, withSyncStandby, type SubmitRow } from './submit-batcher.ts'
import { executionGetById, executionListByJob } from './db/queries/executions.ts'
import { assertUuid, decodeCursor, encodeCursor, fireTimeUsInRange, limitOf, type Page } from './paging.ts'
import { type JobEvent, WEBHOOK_MAX_PER_TENANT_DEFAULT } from './core/events.ts'
import { streamEvents, type StreamEventsParams } from './events/event-stream.ts'
import { webhookAdmin, type WebhookAdmin } from './events/webhook-admin.ts'
import { parseAddressPolicy, type AddressPolicy } from './lib/address-policy.ts'
import { assertKnownFields, assertNoMoreArguments, RUNS_ON_CLIENT, type FieldSet } from './core/known-fields.ts'

/**
 * Where a call runs: the client's pool (default), a Kysely instance or transaction of the
 * application's (typed with its own tables, from its own copy of kysely, with its plugins: pgsched
 * runs its statements on it without them), or a pg client.
 */
// biome-ignore lint/suspicious/noExplicitAny: the application's own table types
export type Executor = Kysely<any> | Transaction<any> | CallerKysely | pg.ClientBase

export interface CallOptions {
  /** Run inside this transaction / on this connection. */
  trx?: Executor
  /** The OpenTelemetry context a submit's span is a child of; default the active context. */
  traceContext?: Context
}

export interface SubmitResult {
  job: Job
  /** False when an earlier submit with the same idempotency key and body is returned. */
  created: boolean
}

export type { ListJobsParams, Page }

export interface CreateClientOptions {
  /** Either a URL (the client owns a pool; call close()) … */
  databaseUrl?: string
  poolSize?: number
  /**
   * … or an existing Kysely instance (the application's: its tables, its copy of kysely; pgsched
   * runs its statements on it without its plugins).
   */
  // biome-ignore lint/suspicious/noExplicitAny: the application's own table types
  db?: Kysely<any> | CallerKysely
  /** … or an existing `pg` Pool (the application's: close() leaves it open). */
  pool?: pg.Pool
  /** Tenant the client acts for; default `default`. */
  tenant?: string
  /** Recorded in jobs.created_by. */
  createdBy?: string
  /**
   * The time a submit's checks go by (default the system clock): whether a cron schedule fires at all
   * within its window. Fire times themselves, the first included, go by the database's clock.
   */
  clock?: Clock
  /**
   * Group commit: concurrent submitJob calls (outside a caller's transaction)
   * share one insert statement while another is in flight. Default true.
   */
  batchSubmits?: boolean
  /**
   * The workers' SCHEDULER_HTTP_ALLOW (same syntax): a webhook whose URL every delivery would be
   * refused under it (a loopback or private address literal, `localhost`) is refused at creation.
   * Default: nothing beyond the public internet.
   */
  httpAllow?: string
  /**
   * Most webhook subscriptions one tenant may have (as SCHEDULER_WEBHOOK_MAX_PER_TENANT for the API
   * and the CLI): webhooks.create beyond it throws a ConflictError naming it. Default 100.
   */
  webhookMaxPerTenant?: number
  /**
   * Acknowledge a submit only from a primary that replicates synchronously now
   * (synchronous_standby_names set); otherwise submitJob/submitJobs throw UnreplicatedError (a
   * BusyError, HTTP 503), the job perhaps written: retry with the same idempotency key. Not
   * applied to a submit given a `trx` (the caller's executor). Default false.
   */
  requireSyncStandby?: boolean
}

/**
 * Besides its own calls, a client has the job operations (job-operations.ts) and the dashboard's
 * views (operations-views.ts) for its tenant; `allTenants()` has them for every tenant.
 */
export interface Client extends Omit<JobOperations, 'listJobs'>, OperationsViews {
  readonly tenant: string
  submitJob(input: SubmitJobInput, options?: CallOptions): Promise<SubmitResult>
  /** Submits many jobs in one statement; returns ids in input order. */
  submitJobs(inputs: readonly SubmitJobInput[], options?: CallOptions): Promise<Array<{ id: string; created: boolean }>>
  viewJob(id: string, options?: CallOptions): Promise<Job>
  listJobs(params?: ListJobsParams, options?: CallOptions): Promise<Page<Job>>
  listExecutions(jobId: string, params?: { limit?: number; cursor?: string }, options?: CallOptions): Promise<Page<Execution>>
  viewExecution(id: string, options?: CallOptions): Promise<Execution>
  cancelJob(id: string, options?: CallOptions): Promise<Job>
  pauseJob(id: string, options?: CallOptions): Promise<Job>
  resumeJob(id: string, options?: CallOptions): Promise<Job>
  /** Queue settings and figures; they act on the queue for every tenant (see queue-admin.ts). */
  readonly queues: QueueAdmin
  /** Tenant settings: fair-share weight and admission quotas, for every tenant (see tenant-admin.ts). */
  readonly tenants: TenantAdmin
  /** The tenant's job and execution events as they happen (`allTenants`: every tenant's; events/event-stream.ts). */
  events(params?: StreamEventsParams & { allTenants?: boolean }): Promise<AsyncGenerator<JobEvent, void, undefined>>
  /** The tenant's webhook subscriptions and their delivery logs (events/webhook-admin.ts). */
  readonly webhooks: WebhookAdmin
  /** The job operations and views over every tenant (what operator keys use); a `tenant` filter narrows them. */
  allTenants(): JobOperations & OperationsViews
  /** The same client acting for another tenant (shares the pool). */
  withTenant(tenant: string, createdBy?: string): Client
  /**
   * Closes the pool if the client created it, once the calls in flight have ended (at most 30 s);
   * a submit made after close() began is refused.
   */
  close(): Promise<void>
}

const MAX_BATCH = 50_000
/** The JSON text (UTF-16 units) of a batch's payloads together: one statement's parameter. */
const MAX_BATCH_PAYLOAD_CHARS = 64 * 1_048_576

/** The fields of the client's own list calls; any other is refused (core/known-fields.ts), as REST refuses it. */
const PAGE_FIELDS: FieldSet<{ limit?: number; cursor?: string }> = { limit: true, cursor: true }
const EVENTS_FIELDS: FieldSet<StreamEventsParams & { allTenants?: boolean }> = {
  jobId: true,
  type: true,
  queue: true,
  events: true,
  after: true,
  signal: true,
  retentionMs: true,
  pollIntervalMs: true,
  allTenants: true,
}

/** The options of createClient; any other is refused: `batchSubmit: false` would leave group commit on. */
const CREATE_CLIENT_FIELDS: FieldSet<CreateClientOptions> = {
  databaseUrl: true,
  poolSize: true,
  db: true,
  pool: true,
  tenant: true,
  createdBy: true,
  clock: true,
  batchSubmits: true,
  httpAllow: true,
  webhookMaxPerTenant: true,
  requireSyncStandby: true,
}

/** The per-call options; any other key is refused: `{ tx: trx }` would run the call outside the caller's transaction. */
const CALL_OPTIONS_FIELDS: FieldSet<CallOptions> = { trx: true, traceContext: true }

/**
 * Refuses call options with a key they do not know, or a transaction or pg client given in place of
 * `{ trx }`: a Kysely instance has no own keys, so it would pass for empty options and the call would
 * run outside it. Absent options (undefined, or null from JavaScript) are none.
 */
function assertCallOptions(options: CallOptions | undefined): void {
  if (options === undefined || options === null) return
  if (isCallerKysely(options) || typeof (options as { query?: unknown }).query === 'function') {
    const message = 'options must be an object such as { trx }, not the transaction or client itself'
    throw new ValidationError(message, [{ path: 'options', message }])
  }
  assertKnownFields(options, CALL_OPTIONS_FIELDS, 'options', 'options.')
  if (isPgPool(options.trx)) {
    const message =
      'trx must be a transaction or a connection in one, not a pg Pool: on a pool each statement runs on any of its connections and commits on its own; pass a client from pool.connect() inside your begin … commit, or give the pool to createClient({ pool })'
    throw new ValidationError(message, [{ path: 'trx', message }])
  }
}

/**
 * Whether `value` is a `pg` Pool (of any copy of pg: by its shape, not `instanceof`). It has `query`
 * as a client has, but runs each statement on whichever connection is free, so a call's statements
 * (a batch and its checks, a cancel and its lock) would each commit alone, in no transaction.
 */
function isPgPool(value: unknown): boolean {
  const v = value as { connect?: unknown; totalCount?: unknown; idleCount?: unknown; release?: unknown } | null | undefined
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.connect === 'function' &&
    typeof v.totalCount === 'number' &&
    typeof v.idleCount === 'number' &&
    typeof v.release !== 'function'
  )
}

/** What a value given for a list of jobs is, for the refusal of one that is not an array. */
function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  return typeof value === 'object' ? 'an object (for one job, use submitJob)' : `a ${typeof value}`
}

/** How long close() waits for the calls in flight before it closes the pool under them. */
const CLOSE_WAIT_MS = 30_000

/** Counts the calls of a client that owns its pool, so that close() can wait for them. */
class CallGate {
  closing = false
  private running = 0
  private waiters: Array<() => void> = []
  enter(): void {
    this.running++
  }
  leave(): void {
    this.running--
    if (this.running === 0) for (const w of this.waiters.splice(0)) w()
  }
  /** Resolves once no call is running, or after `timeoutMs`. */
  settled(timeoutMs: number): Promise<void> {
    if (this.running === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs)
      this.waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}

/**
 * `stream` with each step counted by `gate` while it runs (its statements, its wait for events), not
 * while the caller holds what it yielded: close() ends the stream (its signal) and waits for the step
 * under way, so no statement of it meets a pool already closed.
 */
function counted<T>(stream: AsyncGenerator<T, void, undefined>, gate: CallGate): AsyncGenerator<T, void, undefined> {
  const step = async <R>(fn: () => Promise<R>): Promise<R> => {
    gate.enter()
    try {
      return await fn()
    } finally {
      gate.leave()
    }
  }
  return (async function* () {
    try {
      for (;;) {
        const next = await step(() => stream.next())
        if (next.done) return
        yield next.value
      }
    } finally {
      await step(() => stream.return(undefined))
    }
  })()
}

/**
 * `reading` (an export's generator) with each step counted by `gate` while it runs, as counted does:
 * close() waits for the step under way, and a step after close() fails with InvalidStateError (an
 * export cut short must not look complete), not with the driver's error of a pool already closed.
 */
function countedSteps<T>(reading: AsyncGenerator<T, void, undefined>, gate: CallGate, name: string): AsyncGenerator<T, void, undefined> {
  return (async function* () {
    let done = false
    try {
      for (;;) {
        if (gate.closing) throw new InvalidStateError(`the pgsched client is closed: ${name} was read after close()`)
        gate.enter()
        let next: IteratorResult<T, void>
        try {
          next = await reading.next()
        } finally {
          gate.leave()
        }
        if (next.done) {
          done = true
          return
        }
        yield next.value
      }
    } finally {
      if (!done && !gate.closing) {
        gate.enter()
        try {
          await reading.return(undefined)
        } finally {
          gate.leave()
        }
      }
    }
  })()
}

/** The methods that answer at once (not with a promise): refused after close() by a throw, not a rejected promise. */
const SYNC_METHODS = new Set(['withTenant', 'allTenants', 'exportJobs'])

interface ClientSettings {
  webhookPolicy: AddressPolicy
  webhookMaxPerTenant: number
  requireSyncStandby: boolean
  /** For a client that owns its pool: what ends its event streams at close(), and counts their steps. */
  streams: { closing: AbortSignal; gate: CallGate } | undefined
}

/** Methods that hand out an object whose calls use the same pool (counted too). */
const GATED_RESULTS = new Set(['withTenant', 'allTenants'])
/** Objects of the client whose methods use its pool. */
const GATED_OBJECTS = new Set(['queues', 'tenants', 'webhooks'])

/**
 * A call's error when the database has no pgsched schema, or one older than this client (a table,
 * column, function or the schema missing: isSchemaMissing): the driver's error, its message ending
 * with what to do (SCHEMA_MISSING_MESSAGE). Its code stays the SQLSTATE, so callers that map codes
 * (the API's 503) still can. Any other error is returned as it is.
 */
function withSchemaHint(err: unknown): unknown {
  if (isSchemaMissing(err) && !(err as Error).message.includes(SCHEMA_MISSING_MESSAGE)) (err as Error).message += ` (${SCHEMA_MISSING_MESSAGE})`
  return err
}

/**
 * `target` with every method's failure passed through withSchemaHint, and, with a `gate` (a
 * client that owns its pool), every method counted by it from its call until its promise settles
 * and refused once the client is closing (close() itself passes).
 */
function gated<T extends object>(target: T, gate: CallGate | undefined): T {
  return new Proxy(target, {
    get(obj, key, receiver) {
      const value = Reflect.get(obj, key, receiver)
      if (typeof key !== 'string' || key === 'close') return value
      if (GATED_OBJECTS.has(key) && typeof value === 'object' && value !== null) return gated(value, gate)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (gate?.closing) {
          const closed = new InvalidStateError(`the pgsched client is closed: ${key} was called after close()`)
          if (SYNC_METHODS.has(key)) throw closed
          return Promise.reject(closed)
        }
        const result = (value as (...a: unknown[]) => unknown).apply(obj, args)
        if (GATED_RESULTS.has(key) && typeof result === 'object' && result !== null) return gated(result, gate)
        if (gate && key === 'exportJobs') return countedSteps(result as AsyncGenerator<unknown, void, undefined>, gate, key)
        if (!(result instanceof Promise)) return result
        gate?.enter()
        const mapped = result.catch((err: unknown) => {
          throw withSchemaHint(err)
        })
        return gate ? mapped.finally(() => gate.leave()) : mapped
      }
    },
  })
}

/**
 * A client on a pool it owns (`databaseUrl`), the application's Kysely (`db`) or pg Pool (`pool`).
 * @throws ValidationError naming an option it does not know (from JavaScript), or a bad one.
 */
export function createClient(options: CreateClientOptions): Client {
  assertKnownFields(options, CREATE_CLIENT_FIELDS, 'createClient options')
  let owned: Database | undefined
  let db: Kysely<DB>
  const poolSize = options.poolSize ?? 10
  if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000) {
    const message = `poolSize must be an integer from 1 to 1000 (got ${typeof poolSize === 'number' ? String(poolSize) : JSON.stringify(poolSize)})`
    throw new ValidationError(message, [{ path: 'poolSize', message }])
  }
  if (options.poolSize !== undefined && !options.databaseUrl) {
    const message = 'poolSize applies to the pool the client opens from databaseUrl; size your own pool or Kysely instance yourself'
    throw new ValidationError(message, [{ path: 'poolSize', message }])
  }
  if (options.db) {
    if (!isCallerKysely(options.db)) throw new ValidationError('createClient: db must be a Kysely instance (or give databaseUrl)')
    db = callerKysely(options.db, { callerConnection: false })
  } else if (options.pool) {
    db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: options.pool }) })
  } else if (options.databaseUrl) {
    owned = createDb({ databaseUrl: options.databaseUrl, poolSize, applicationName: 'pgsched-client' })
    db = owned.db
  } else throw new ValidationError('createClient needs databaseUrl, db or pool')
  let webhookPolicy: AddressPolicy
  try {
    webhookPolicy = parseAddressPolicy(options.httpAllow ?? '')
  } catch (err: unknown) {
    const message = `httpAllow: ${(err as Error).message}`
    throw new ValidationError(message, [{ path: 'httpAllow', message }])
  }
  const webhookMaxPerTenant = options.webhookMaxPerTenant ?? WEBHOOK_MAX_PER_TENANT_DEFAULT
  if (!Number.isInteger(webhookMaxPerTenant) || webhookMaxPerTenant < 1) {
    const message = `webhookMaxPerTenant must be a positive integer (got ${String(webhookMaxPerTenant)})`
    throw new ValidationError(message, [{ path: 'webhookMaxPerTenant', message }])
  }
  const requireSyncStandby = options.requireSyncStandby === true
  const batcher = options.batchSubmits === false ? undefined : new SubmitBatcher(db, { requireSyncStandby })
  const gate = new CallGate()
  // close() ends the event streams still open (an owned pool only: the caller's pool is the caller's)
  const closing = new AbortController()
  // every stream waiting for its next poll listens on it: more than ten at once are no leak
  setMaxListeners(0, closing.signal)
  const settings: ClientSettings = { webhookPolicy, webhookMaxPerTenant, requireSyncStandby, streams: owned ? { closing: closing.signal, gate } : undefined }
  const client = makeClient(db, batcher, options.tenant ?? 'default', options.createdBy ?? null, options.clock ?? systemClock, settings, async () => {
    if (!owned) return
    // the calls in flight end first: a submit waiting in the group commit, or a statement waiting for
    // a connection, would otherwise never settle once the pool is gone
    gate.closing = true
    closing.abort()
    batcher?.close()
    const deadline = performance.now() + CLOSE_WAIT_MS
    const left = () => Math.max(0, deadline - performance.now())
    await gate.settled(CLOSE_WAIT_MS)
    if (batcher) await settlesWithin(batcher.drained(), left())
    // then the connections still out are ended: their calls fail (a server that stopped answering)
    await owned.end(left())
  })
  return gated(client, owned ? gate : undefined)
}

function makeClient(
  db: Kysely<DB>,
  batcher: SubmitBatcher | undefined,
  tenant: string,
  createdBy: string | null,
  clock: Clock,
  settings: ClientSettings,
  close: () => Promise<void>,
): Client {
  const { webhookPolicy, webhookMaxPerTenant, requireSyncStandby } = settings
  // a tenant no API key can have would own jobs no one sees over REST
  if (!isTenantName(tenant)) {
    throw new ValidationError(`tenant must be ${TENANT_RULE}, got ${JSON.stringify(tenant)}`, [{ path: 'tenant', message: `tenant must be ${TENANT_RULE}` }])
  }
  /** Runs `fn` on the right executor; wraps multi-statement work in a transaction when asked. */
  async function run<T>(options: CallOptions | undefined, fn: (ex: Kysely<DB>) => Promise<T>, transactional = false): Promise<T> {
    const trx = options?.trx
    if (trx === undefined) return transactional ? db.transaction().execute(fn) : fn(db)
    // a Kysely instance given as `trx` that is not a transaction gets one when the work needs it;
    // the caller's may be on a connection in a transaction of theirs, which a plain form's refusal
    // would abort: only full forms run on it (callerKysely marks it so)
    if (isCallerKysely(trx)) {
      // the client's own instance given as trx runs as the client does
      const onCaller = (k: CallerKysely) => {
        const ex = callerKysely(k, { callerConnection: false })
        if (ex !== db) markCallerConnection(ex)
        return ex
      }
      if (transactional && !trx.isTransaction) return trx.transaction().execute((t) => fn(onCaller(t)))
      return fn(onCaller(trx))
    }
    if (typeof (trx as { query?: unknown }).query !== 'function') {
      throw new ValidationError('trx must be a Kysely instance or transaction, or a pg client (pg.Client or a pool client)', [
        { path: 'trx', message: 'a Kysely instance or transaction, or a pg client' },
      ])
    }
    const onClient = kyselyOnClient(trx as pg.ClientBase)
    return fn(onClient)
  }

  /**
   * `run` for submits: with requireSyncStandby (and no `trx` of the caller's), checked by
   * withSyncStandby, which gives `fn` whether the tenant has quotas.
   */
  async function runSubmit<T>(options: CallOptions | undefined, fn: (ex: Kysely<DB>, hasQuota?: boolean) => Promise<T>, transactional = false): Promise<T> {
    if (options?.trx !== undefined) return run(options, fn, transactional)
    if (!requireSyncStandby) {
      if (!transactional) return fn(db)
      // looked up before the transaction holds a connection: the lookup would want a second one of
      // the pool, and a pool of one would wait for itself
      const hasQuota = await tenantHasQuota(db, tenant)
      return db.transaction().execute((trx) => fn(trx, hasQuota))
    }
    return withSyncStandby(db, tenant, (conn, hasQuota) => (transactional ? conn.transaction().execute((trx) => fn(trx, hasQuota)) : fn(conn, hasQuota)))
  }

  /** Gives each submit (normalised for this call) its ids and the traceparent, in place. */
  const withIds = (inputs: readonly NormalizedSubmit[], traceparent: string | null): readonly SubmitRow[] => {
    const nowMs = Date.now()
    for (const n of inputs) {
      n.id = uuidV7(nowMs)
      n.executionId = uuidV7(nowMs)
      n.traceparent = traceparent
    }
    return inputs
  }

  /** Inserts within the tenant's admission quotas, all or none; `inTransaction`: `ex` is a transaction. */
  async function insert(ex: Kysely<DB>, inputs: readonly NormalizedSubmit[], inTransaction: boolean, traceparent: string | null, hasQuota?: boolean) {
    const rows = withIds(inputs, traceparent)
    return { rows, ...(await insertRows(ex, tenant, createdBy, rows, { quotaDb: db, partial: false, inTransaction, hasQuota })) }
  }

  const conflict = (key: string | null) => new ConflictError(`idempotency key "${key}" was already used for a different job request`)
  const refused = (r: QuotaRejection) => new QuotaExceededError(r.message, r.quota, r.limit, r.retryAfterMs)

  async function viewJob(id: string, options?: CallOptions, ...extra: unknown[]): Promise<Job> {
    assertNoMoreArguments('viewJob', ['id', 'options'], extra)
    assertCallOptions(options)
    assertUuid(id, 'id')
    const job = await run(options, (ex) => jobGetById(ex, { tenant, id }))
    if (!job) throw new NotFoundError(`job ${id} not found`)
    return job
  }

  /** One submit: grouped with concurrent ones by the batcher, unless in the caller's transaction. */
  async function submitOne(n: NormalizedSubmit, traceparent: string | null, options?: CallOptions): Promise<SubmitResult> {
    let row: SubmitRow
    let outcome: JobInsertOutcome
    let now: Date
    if (batcher && options?.trx === undefined) {
      row = withIds([n], traceparent)[0] as SubmitRow
      ;({ outcome, now } = await batcher.insert(tenant, createdBy, row))
    } else {
      const res = await runSubmit(options, (ex, hasQuota) => insert(ex, [n], options?.trx !== undefined, traceparent, hasQuota))
      row = res.rows[0] as SubmitRow
      outcome = res.outcomes[0] as JobInsertOutcome
      now = res.now
    }
    if (outcome.created) {
      const [served, queuePause] = await Promise.all([workerServes(db, n.queue, n.type), queuePauseOf(db, n.queue)])
      return { job: newJob(n, row.id, row.executionId, tenant, createdBy, now, served, queuePause, outcome.submittedAt, outcome.fireTimesFrom), created: true }
    }
    if (outcome.rejected) throw refused(outcome.rejected)
    if (outcome.existingRequestHash !== n.requestHash || !outcome.existingJobId) throw conflict(n.idempotencyKey)
    return { job: await viewJob(outcome.existingJobId, options), created: false }
  }

  /** A batch in one statement, all or none. */
  function submitMany(normalized: readonly NormalizedSubmit[], traceparent: string | null, options?: CallOptions) {
    return runSubmit(
      options,
      async (ex, hasQuota) => {
        const { rows, outcomes } = await insert(ex, normalized, true, traceparent, hasQuota)
        const rejected = outcomes.find((o) => o.rejected)?.rejected
        if (rejected) throw refused(rejected)
        return outcomes.map((o, i) => {
          const n = normalized[i] as NormalizedSubmit
          if (o.created) return { id: (rows[i] as { id: string }).id, created: true }
          if (o.existingRequestHash !== n.requestHash || !o.existingJobId) throw conflict(n.idempotencyKey)
          return { id: o.existingJobId, created: false }
        })
      },
      true,
    )
  }

  const operations = jobOperations(db, tenant)
  const client: Client = {
    ...operations,
    ...operationsViews(db, tenant),
    allTenants: (...extra: unknown[]) => {
      assertNoMoreArguments('allTenants', [], extra)
      return { ...jobOperations(db, null), ...operationsViews(db, null) }
    },
    tenant,
    queues: queueAdmin(db),
    tenants: tenantAdmin(db),
    events: async (params = {}, ...extra: unknown[]) => {
      assertNoMoreArguments('events', ['params'], extra, RUNS_ON_CLIENT)
      assertKnownFields(params, EVENTS_FIELDS, 'events params')
      const streams = settings.streams
      if (!streams) return streamEvents(db, params.allTenants === true ? null : tenant, params)
      const signal = params.signal ? AbortSignal.any([params.signal, streams.closing]) : streams.closing
      return counted(await streamEvents(db, params.allTenants === true ? null : tenant, { ...params, signal }), streams.gate)
    },
    webhooks: webhookAdmin(db, tenant, { policy: webhookPolicy, maxPerTenant: webhookMaxPerTenant }),

    async submitJob(input, options, ...extra: unknown[]) {
      assertNoMoreArguments('submitJob', ['input', 'options'], extra)
      assertCallOptions(options)
      const n = normalizeSubmit(input, clock.now())
      return tracedSubmit(
        n.queue,
        1,
        options?.traceContext,
        (traceparent) => submitOne(n, traceparent, options),
        (r) => r.job.id,
      )
    },

    async submitJobs(inputs, options, ...extra: unknown[]) {
      assertNoMoreArguments('submitJobs', ['inputs', 'options'], extra)
      assertCallOptions(options)
      if (!Array.isArray(inputs)) {
        const message = `submitJobs takes an array of jobs, got ${describeValue(inputs)}`
        throw new ValidationError(message, [{ path: '', message }])
      }
      if (inputs.length > MAX_BATCH) throw new ValidationError(`at most ${MAX_BATCH} jobs per batch, got ${inputs.length}`)
      const now = clock.now()
      const normalized = inputs.map((input, i) => {
        try {
          return normalizeSubmit(input, now)
        } catch (err: unknown) {
          if (err instanceof ValidationError) {
            throw new ValidationError(
              `jobs[${i}]: ${err.message}`,
              err.details?.map((d) => ({ ...d, path: `${i}.${d.path}` })),
            )
          }
          throw err
        }
      })
      if (normalized.length === 0) return []
      // Sent as one statement: its payloads' text past a few hundred MB is more than a string holds
      let payloadChars = 0
      for (const n of normalized) payloadChars += n.payloadJson.length
      if (payloadChars > MAX_BATCH_PAYLOAD_CHARS) {
        const message = `the payloads of a batch are at most ${MAX_BATCH_PAYLOAD_CHARS / 1_048_576} MiB of JSON together; these ${normalized.length} jobs have ${Math.ceil(payloadChars / 1_048_576)} MiB: submit them in smaller batches`
        throw new ValidationError(message, [{ path: '', message }])
      }
      // One span for the batch, named after its queue; a batch into several queues has no one
      // destination, so the messaging conventions leave its name and attribute out: `submit`.
      const first = (normalized[0] as NormalizedSubmit).queue
      const queue = normalized.every((n) => n.queue === first) ? first : null
      return tracedSubmit(queue, normalized.length, options?.traceContext, (traceparent) => submitMany(normalized, traceparent, options))
    },

    viewJob,

    listJobs: async (params = {}, options, ...extra: unknown[]) => {
      assertNoMoreArguments('listJobs', ['params', 'options'], extra)
      assertCallOptions(options)
      return run(options, (ex) => jobOperations(ex, tenant).listJobs(params))
    },

    async listExecutions(jobId, params = {}, options, ...extra: unknown[]) {
      assertNoMoreArguments('listExecutions', ['jobId', 'params', 'options'], extra)
      assertCallOptions(options)
      assertKnownFields(params, PAGE_FIELDS, 'listExecutions params')
      const limit = limitOf(params.limit)
      await viewJob(jobId, options)
      const before = params.cursor === undefined ? undefined : decodeCursor(params.cursor, /^-?\d{1,19}$/, fireTimeUsInRange)
      const items = await run(options, (ex) => executionListByJob(ex, { jobId, limit: limit + 1, beforeScheduledForUs: before }))
      const page = items.slice(0, limit)
      const last = page[page.length - 1]
      return {
        items: page.map(({ cursor: _cursor, ...execution }) => execution),
        nextCursor: items.length > limit && last ? encodeCursor(last.cursor) : null,
      }
    },

    async viewExecution(id, options, ...extra: unknown[]) {
      assertNoMoreArguments('viewExecution', ['id', 'options'], extra)
      assertCallOptions(options)
      assertUuid(id, 'id')
      const execution = await run(options, (ex) => executionGetById(ex, { id, tenant }))
      if (!execution) throw new NotFoundError(`execution ${id} not found`)
      return execution
    },

    async cancelJob(id, options, ...extra: unknown[]) {
      assertNoMoreArguments('cancelJob', ['id', 'options'], extra)
      assertCallOptions(options)
      const job = await viewJob(id, options)
      if (job.state === 'cancelled') return job
      // finished: a one-time job's execution ended, or a recurring job has nothing to come (its schedule
      // ended or stopped, its last run ended)
      const finished = job.status === 'COMPLETED' || job.status === 'FAILED' || job.status === 'EXPIRED'
      if (finished || (!job.schedule && job.lastExecution && ['succeeded', 'failed', 'cancelled'].includes(job.lastExecution.state))) {
        throw new InvalidStateError(`job ${id} has already finished (${job.status}); nothing to cancel`)
      }
      // checked again under the job's locks: a run may have ended since the read above
      const cancelled = await run(options, (ex) => jobCancel(ex, { tenant, id }), true)
      if (cancelled === undefined) throw new NotFoundError(`job ${id} not found`)
      if (cancelled.outcome === 'finished') throw new InvalidStateError(`job ${id} has already finished (${cancelled.status}); nothing to cancel`)
      // once committed; in the caller's transaction, a statement of its own sweeps what the cancel waited
      // for (an outcome write's retry), and the reaper what claims in flight at its commit take
      if (options?.trx === undefined) await jobCancelSweep(db, [id])
      else await run(options, (ex) => jobCancelSweepNow(ex, [id]))
      return viewJob(id, options)
    },

    async pauseJob(id, options, ...extra: unknown[]) {
      assertNoMoreArguments('pauseJob', ['id', 'options'], extra)
      return setPaused(id, true, options)
    },

    async resumeJob(id, options, ...extra: unknown[]) {
      assertNoMoreArguments('resumeJob', ['id', 'options'], extra)
      return setPaused(id, false, options)
    },

    withTenant(other, by, ...extra: unknown[]) {
      assertNoMoreArguments('withTenant', ['tenant', 'createdBy'], extra)
      return makeClient(db, batcher, other, by ?? createdBy, clock, settings, async () => {})
    },

    // Arguments are ignored: close is handed to callbacks as it is (process.once('SIGTERM', client.close)).
    async close() {
      return close()
    },
  }

  async function setPaused(id: string, paused: boolean, options?: CallOptions): Promise<Job> {
    assertCallOptions(options)
    const job = await viewJob(id, options)
    if (!job.schedule) throw new InvalidStateError(`job ${id} is not recurring; only recurring jobs can be paused or resumed`)
    if (job.state === 'cancelled') throw new InvalidStateError(`job ${id} is CANCELLED: a cancelled job is neither paused nor resumed`)
    // a schedule with nothing more to come (past its endAt, or stopped by an error) has nothing to pause
    if (paused && (job.status === 'COMPLETED' || job.status === 'FAILED' || job.status === 'EXPIRED')) {
      throw new InvalidStateError(`job ${id} is ${job.status}: its schedule has no fire time to come, so there is nothing to pause`)
    }
    const changed = await run(options, (ex) => jobSetPaused(ex, { tenant, id, paused }), true)
    const after = await viewJob(id, options)
    // cancelled between the look above and the change (which then changed nothing): not a 200
    if (!changed) throw new InvalidStateError(`job ${id} is ${after.status}: a cancelled job is neither paused nor resumed`)
    return after
  }

  return client
}
