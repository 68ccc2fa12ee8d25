/**
 * `scheduler worker` (= `scheduler-worker`): runs handlers from a module.
 * A database unreachable at start is waited for, with backoff and without a bound (wait-for-database.ts).
 * SIGTERM/SIGINT: graceful stop (finish or hand back); a second signal exits at once.
 */
import type { Command } from 'commander'
import { listenSettingsBut, loadConfig } from '../../config.ts'
import { warnOfUnknownVariables } from '../shared.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger } from '../../logger.ts'
import { createWorkerSystem, type WorkerSystem } from '../../system.ts'
import { waitForDatabase } from '../../db/wait-for-database.ts'
import { loadHandlerModule, type Handler } from '../../worker/handlers.ts'
import { onShutdownSignal } from '../signals.ts'

interface WorkerFlags {
  handlers?: string
  queues?: string
  concurrency?: string
  prefetch?: string
  leaseMs?: string
  heartbeatMs?: string
  pollIntervalMs?: string
  shutdownGraceMs?: string
  sandbox?: string
  sandboxMemoryMb?: string
  metricsPort?: string
}

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('claim and run jobs (handlers from --handlers; the built-in "http" handler too, unless SCHEDULER_HTTP_HANDLER=off)')
    .option('--handlers <module>', 'module exporting handlers made with defineHandler (env SCHEDULER_HANDLERS)')
    .option('--queues <list>', 'comma-separated queues to serve (env SCHEDULER_QUEUES, default "default")')
    .option('--concurrency <n>', 'handlers run at once (env SCHEDULER_WORKER_CONCURRENCY, default 10)')
    .option('--prefetch <n>', 'most executions claimed ahead of free slots while handlers are short (env SCHEDULER_WORKER_PREFETCH, default 1000; 0 = off)')
    .option('--lease-ms <ms>', 'lease length (env SCHEDULER_LEASE_MS, default 30000)')
    .option('--heartbeat-ms <ms>', 'heartbeat interval (env SCHEDULER_HEARTBEAT_MS, default 5000)')
    .option('--poll-interval-ms <ms>', 'fallback poll interval (env SCHEDULER_POLL_INTERVAL_MS, default 1000)')
    .option('--shutdown-grace-ms <ms>', 'time running handlers get on SIGTERM (env SCHEDULER_SHUTDOWN_GRACE_MS, default 30000)')
    .option(
      '--sandbox <mode>',
      "run every handler from --handlers in-process (none), in a worker thread or in a child process (env SCHEDULER_SANDBOX; default: each handler's own)",
    )
    .option('--sandbox-memory-mb <mb>', 'JavaScript heap limit of a sandbox, for handlers that set none (env SCHEDULER_SANDBOX_MEMORY_MB)')
    .option(
      '--metrics-port <port>',
      'port serving Prometheus /metrics; "off" or 0: none; one per process, so several workers on a host need distinct ports (env SCHEDULER_WORKER_METRICS_PORT, default 9464)',
    )
    .action(async (flags: WorkerFlags) => {
      const config = loadConfig(
        process.env,
        {
          'worker.handlers': flags.handlers,
          'worker.queues': flags.queues?.split(',').map((q) => q.trim()),
          'worker.concurrency': flags.concurrency,
          'worker.prefetch': flags.prefetch,
          'worker.leaseMs': flags.leaseMs,
          'worker.heartbeatMs': flags.heartbeatMs,
          'worker.pollIntervalMs': flags.pollIntervalMs,
          'worker.shutdownGraceMs': flags.shutdownGraceMs,
          'worker.sandbox': flags.sandbox,
          'worker.sandboxMemoryMb': flags.sandboxMemoryMb,
          'worker.metricsPort': flags.metricsPort,
        },
        { unread: listenSettingsBut('worker') },
      )
      const databaseUrl = config.databaseUrl
      if (!databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      warnOfUnknownVariables(log)
      const handlers: Handler[] = config.worker.handlers ? await loadHandlerModule(config.worker.handlers) : []
      const waiting = new AbortController()
      let system: WorkerSystem | undefined
      onShutdownSignal(async (signal) => {
        log.info({ signal }, 'shutting down')
        waiting.abort()
        await system?.stop()
      })
      if (!(await waitForDatabase({ databaseUrl, log, signal: waiting.signal, writable: true }))) return
      system = createWorkerSystem({ config: { ...config, databaseUrl }, log, handlers })
      // a failed start releases what it had started, so that the failure ends the process (exit code 1)
      await system.start()
      await new Promise<never>(() => {})
    })
}
