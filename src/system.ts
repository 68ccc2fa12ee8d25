/**
 * Composition root for long-running processes: builds the database pool and
 * the services a `scheduler worker` runs (worker, reaper, dispatcher, pruner), starts them
 * and stops them in order. Only this file and bin/ see the whole graph.
 */
import { assertConfigFields, type Config } from './config.ts'
import { ConfigError, InvalidStateError } from './errors.ts'
import type { Kysely } from 'kysely'
import { pendingMigrations } from './db/migrate.ts'
import { assertKnownFields, type FieldSet } from './core/known-fields.ts'
import type { Logger } from './logger.ts'
import { quietDuringOutages } from './db/outage.ts'
import { ANSWERED_WITHIN_MS, createDb, type Database } from './db/pool.ts'
import { builtInHandler, HandlerRegistry, type Handler } from './worker/handlers.ts'
import { createHttpHandler } from './worker/http-handler.ts'
import { STOP_DATABASE_WAIT_MS, Worker } from './worker/worker.ts'
import { settlesWithin } from './lib/service.ts'
import { createOutputStore } from './worker/output-stores.ts'
import type { OutputStore } from './worker/output-store.ts'
import { WorkerMetrics } from './worker/metrics.ts'
import { MetricsServer } from './worker/metrics-server.ts'
import { Reaper } from './maintenance/reaper.ts'
import { Pruner } from './maintenance/pruner.ts'
import { TriggerScheduler } from './maintenance/trigger-scheduler.ts'
import { WebhookDispatcher } from './maintenance/webhook-dispatcher.ts'
import { createWebhookHandler } from './worker/webhook-handler.ts'

/** Connections for the reaper, the trigger scheduler and the pruner. */
export const MAINTENANCE_POOL_SIZE = 2

export interface WorkerSystem {
  worker: Worker
  database: Database
  /** The process's metrics; undefined when SCHEDULER_WORKER_METRICS_PORT is off. */
  metrics: WorkerMetrics | undefined
  /** The port /metrics is served on once started; undefined when off or not opened. */
  metricsPort(): number | undefined
  /** Turns events into webhook deliveries; undefined with SCHEDULER_HTTP_HANDLER=off (nothing here could deliver them). */
  webhookDispatcher: WebhookDispatcher | undefined
  start(): Promise<void>
  /** Graceful: the worker hands back what it could not finish. Idempotent. */
  stop(): Promise<void>
}

export interface CreateWorkerSystemParams {
  /** As loadConfig returns it; its databaseUrl must be set (ConfigError otherwise). */
  config: Config
  log: Logger
  handlers: readonly Handler[]
  /** Where handlers' ctx.output goes; default: the store config.output selects (Postgres unless set). */
  outputStore?: OutputStore
}

/** Any other parameter is refused: a misspelt `outputstore` would send handlers' output to the default store. */
const PARAMS_FIELDS: FieldSet<CreateWorkerSystemParams> = { config: true, log: true, handlers: true, outputStore: true }

/** What the refusal of an application's handler of a built-in type says of the built-in. */
const HTTP_BUILT_IN = "the built-in http handler's (give yours another type, or leave the built-in out with SCHEDULER_HTTP_HANDLER=off)"
const WEBHOOK_BUILT_IN = "the built-in webhook delivery handler's (give yours another type)"

/**
 * Refuses to run on a schema older than this version: its statements would fail on what a pending
 * migration adds, some of them only in a loop that logs and retries (webhook deliveries, pruning),
 * so the worker would run half-working. A newer schema is not refused (rolling upgrades run the
 * previous version's workers on it until they are replaced).
 * @throws InvalidStateError naming the pending migrations, or saying there is no schema at all.
 */
async function assertSchemaCurrent(db: Kysely<unknown>): Promise<void> {
  const pending = await pendingMigrations(db)
  if (pending.length === 0) return
  if (pending.includes(FIRST_MIGRATION)) throw new InvalidStateError('the database has no pgsched schema: run "scheduler migrate"')
  throw new InvalidStateError(`the database's pgsched schema is older than this version (migrations pending: ${pending.join(', ')}): run "scheduler migrate"`)
}

/** The migration that creates the schema: pending, there is none. */
const FIRST_MIGRATION = '0001_init'

/**
 * The worker process's services on their pools, not started.
 * @throws ValidationError naming a parameter, or a key of config or of one of its sections, it does not know
 *   (from JavaScript); ConfigError without config.databaseUrl. Its start() throws InvalidStateError
 *   on a database whose schema lacks migrations of this version (run `scheduler migrate`).
 */
export function createWorkerSystem(params: CreateWorkerSystemParams): WorkerSystem {
  assertKnownFields(params, PARAMS_FIELDS, 'createWorkerSystem params')
  // a config changed by hand: a misspelt setting (worker.concurency) would run with its default
  assertConfigFields(params.config, 'createWorkerSystem config', 'config.')
  const databaseUrl = params.config.databaseUrl
  if (!databaseUrl) throw new ConfigError('createWorkerSystem: config.databaseUrl must be set (DATABASE_URL, a postgres:// URL)')
  const config = { ...params.config, databaseUrl }
  const w = config.worker
  // An outage is logged in two lines (gone, back), not once per retry of every loop.
  const quiet = quietDuringOutages(params.log)
  const { log } = quiet
  // The worker's statements (the hot path: claim, heartbeat, outcome writes) on one pool, the reaper,
  // dispatcher and pruner on a small one; both plan each prepared statement once per connection.
  // Every statement of both runs with a statement_timeout of ANSWERED_WITHIN_MS, and is given up, its
  // connection replaced, when no answer came a little after it: a host that vanished without closing
  // its connections would otherwise hold the claims, the dispatcher and the reaper until TCP gave up
  // (pool.ts).
  const hot = createDb({
    databaseUrl: config.databaseUrl,
    poolSize: config.db.poolSize,
    applicationName: 'pgsched-worker',
    log,
    answers: quiet,
    genericPlans: true,
    indexPlans: true,
    statementBoundMs: ANSWERED_WITHIN_MS,
  })
  const database = createDb({
    databaseUrl: config.databaseUrl,
    poolSize: MAINTENANCE_POOL_SIZE,
    applicationName: 'pgsched-worker-maintenance',
    log,
    answers: quiet,
    genericPlans: true,
    indexPlans: true,
    statementBoundMs: ANSWERED_WITHIN_MS,
    // A dispatcher pass holds the dispatch lock for its transaction: if its process freezes or its
    // host vanishes mid-pass, the server ends the session (IDLE_TRANSACTION_TIMEOUT_MS, as on every
    // pool), and a standby takes over.
  })
  // Off (port 0): no registry at all, and the worker reports no events.
  const metrics = w.metricsPort > 0 ? new WorkerMetrics() : undefined
  // the webhook deliveries go through the http handler's rules: off with it
  const registry = new HandlerRegistry(
    w.httpHandler === 'on'
      ? [
          builtInHandler(createHttpHandler({ allow: w.httpAllow }), HTTP_BUILT_IN),
          builtInHandler(
            createWebhookHandler({
              db: database.db,
              allow: w.httpAllow,
              disable: { afterMs: w.webhookDisableAfterMs, afterFailures: w.webhookDisableAfterFailures },
              onDisabled: metrics?.webhookDisabled,
            }),
            WEBHOOK_BUILT_IN,
          ),
        ]
      : [],
  )
  for (const h of params.handlers) registry.add(h)
  const outputStore = params.outputStore ?? createOutputStore({ settings: config.output, db: hot.db, log })
  const worker = new Worker({
    events: metrics,
    db: hot.db,
    databaseUrl: config.databaseUrl,
    log,
    handlers: registry,
    queues: w.queues,
    concurrency: w.concurrency,
    prefetch: w.prefetch,
    leaseMs: w.leaseMs,
    heartbeatMs: w.heartbeatMs,
    pollIntervalMs: w.pollIntervalMs,
    shutdownGraceMs: w.shutdownGraceMs,
    outputStore,
    sandbox: w.sandbox,
    sandboxMemoryMb: w.sandboxMemoryMb,
    sandboxGraceMs: w.sandboxGraceMs,
  })
  // Expiries are counted for the queues and types this worker serves only: the reaper ends any
  // tenant's late executions, and a label per arbitrary submitted name would grow without bound.
  const onExpired =
    metrics && ((queue: string, type: string, n: number) => (w.queues.includes(queue) && registry.get(type) ? metrics.expired(queue, type, n) : undefined))
  // Rescues are counted whatever the queue: an expired lease was a claim, by a worker serving its queue and type.
  const reaper = new Reaper({ db: database.db, log, intervalMs: w.reaperIntervalMs, batchSize: w.reaperBatchSize, onExpired, onRescued: metrics?.rescued })
  metrics?.observe({
    holding: () => worker.holding,
    pools: [
      { name: 'worker', pool: hot.pool },
      { name: 'maintenance', pool: database.pool },
    ],
  })
  const metricsServer = metrics && new MetricsServer({ registry: metrics.registry, port: w.metricsPort, host: w.metricsHost, log })
  let metricsPort: number | undefined
  const triggerScheduler = new TriggerScheduler({
    db: database.db,
    log,
    intervalMs: w.dispatcherIntervalMs,
    windowMs: w.dispatcherWindowMs,
    aheadMs: w.dispatcherAheadMs,
    batchSize: w.dispatcherBatchSize,
    misfireThresholdMs: w.misfireThresholdMs,
    workerId: worker.id,
  })
  const pruner = new Pruner({
    db: database.db,
    log,
    retentionMs: w.retentionMs,
    eventRetentionMs: config.events.retentionMs,
    intervalMs: w.pruneIntervalMs,
    batchSize: w.pruneBatchSize,
  })
  // only where pgsched.webhook runs: a worker without the http handler leaves the events to one with it
  const webhookDispatcher = w.httpHandler === 'on' ? new WebhookDispatcher({ db: database.db, log }) : undefined
  let stopping: Promise<void> | undefined
  let started = false
  /** The start in progress or done (settled either way for stop, which waits for it). */
  let starting: Promise<void> | undefined
  /** Graceful: the worker hands back what it could not finish. Idempotent. */
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // a stop asked for while the start is still going (a SIGTERM just after launch) waits for it, so
      // that nothing it starts comes up after the stop, on destroyed pools
      // (bounded: a start stuck on a database that stopped answering must not hold the stop for ever)
      if (starting !== undefined) await settlesWithin(starting, STOP_DATABASE_WAIT_MS)
      await Promise.all([worker.stop(), reaper.stop(), triggerScheduler.stop(), pruner.stop(), webhookDispatcher?.stop()])
      // What the runs handed back at shutdown had written.
      await outputStore.stop()
      await metricsServer?.stop()
      await Promise.all([database.db.destroy(), hot.db.destroy()])
    })()
    return stopping
  }
  return {
    worker,
    database,
    metrics,
    metricsPort: () => metricsPort,
    webhookDispatcher,
    async start() {
      if (started) throw new InvalidStateError('this worker system was started already (a stopped one is not started again: create another)')
      started = true
      starting = (async () => {
        await outputStore.start()
        metricsPort = await metricsServer?.start()
        await assertSchemaCurrent(hot.db as unknown as Kysely<unknown>)
        await worker.start()
        reaper.start()
        triggerScheduler.start()
        pruner.start()
        webhookDispatcher?.start()
      })()
      try {
        await starting
      } catch (err: unknown) {
        // what had started (the pools, the metrics port, the LISTEN connection) would keep the
        // process alive, doing nothing: released, so that the failure is the caller's to handle
        await stop().catch((stopErr: unknown) => log.warn({ err: stopErr }, 'stopping after a failed start failed'))
        throw err
      }
    },
    stop,
  }
}
