/**
 * `scheduler api [--port N] [--host H]` (also `scheduler-api`): serves the
 * REST API until SIGTERM/SIGINT, then stops accepting connections, lets
 * requests in flight finish and closes the pool. `startApiServer` is the
 * composition of database, client and app, reusable by other commands.
 */
import type { Command } from 'commander'
import type { Kysely } from 'kysely'
import { loadConfig, type Config } from '../../config.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger, type Logger } from '../../logger.ts'
import { createDb } from '../../db/pool.ts'
import type { DB } from '../../db/schema.ts'
import { apiKeyList, apiKeyRevoke } from '../../db/queries/api-keys.ts'
import { createClient } from '../../client.ts'
import { apiHandlersSettled, buildApp, type App } from '../../api/app.ts'
import { createApiKey } from '../../api/auth.ts'
import { onShutdownSignal } from '../signals.ts'

export interface ApiServer {
  app: App
  /** The server's pool (closed by close()). */
  db: Kysely<DB>
  /** Where it listens, such as http://127.0.0.1:8080. */
  url: string
  /** Graceful: stops listening, waits for requests in flight, closes the pool. */
  close(): Promise<void>
}

export interface StartApiServerParams {
  config: Config
  databaseUrl: string
  log: Logger
}

/** Connects to the database and listens on config.api.host:port. */
export async function startApiServer(params: StartApiServerParams): Promise<ApiServer> {
  const { config, log } = params
  const database = createDb({ databaseUrl: params.databaseUrl, poolSize: config.db.poolSize, applicationName: 'pgsched-api', log })
  const app = buildApp({
    db: database.db,
    log,
    client: createClient({ db: database.db }),
    bodyLimitBytes: config.api.bodyLimitBytes,
    eventsRetentionMs: config.events.retentionMs,
  })
  try {
    await app.listen({ port: config.api.port, host: config.api.host })
  } catch (err: unknown) {
    await app.close()
    await database.db.destroy()
    throw err
  }
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.api.port
  const host = config.api.host === '0.0.0.0' || config.api.host === '::' ? '127.0.0.1' : config.api.host
  let closing: Promise<void> | undefined
  return {
    app,
    db: database.db,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close() {
      closing ??= (async () => {
        await app.close()
        // A request whose client hung up may still be running after close(): let it finish its writes.
        if (!(await apiHandlersSettled(app, HANDLERS_GRACE_MS))) {
          log.warn({ graceMs: HANDLERS_GRACE_MS }, 'request handlers still running at shutdown; closing the pool under them')
        }
        await database.db.destroy()
      })()
      return closing
    },
  }
}

/** How long a close waits for request handlers whose clients hung up. */
const HANDLERS_GRACE_MS = 10_000

const DEV_KEY_NAME = 'scheduler dev'

/**
 * For `scheduler dev`: a fresh key for tenant `dev`, revoking the keys
 * earlier dev runs made (their secret was printed and is not needed again),
 * and a ready-to-paste curl line.
 */
export async function createDevApiKey(server: ApiServer): Promise<{ key: string; curl: string }> {
  for (const old of await apiKeyList(server.db, { tenant: 'dev', includeRevoked: false })) {
    if (old.name === DEV_KEY_NAME) await apiKeyRevoke(server.db, { id: old.id })
  }
  const { key } = await createApiKey(server.db, { tenant: 'dev', name: DEV_KEY_NAME })
  const body = JSON.stringify({ type: 'http', payload: { url: 'https://example.com/' } })
  const curl = `curl -i -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '${body}' ${server.url}/v1/jobs`
  return { key, curl }
}

export function registerApi(program: Command): void {
  program
    .command('api')
    .description('serve the REST API (OpenAPI document at /openapi.json, UI at /docs)')
    .option('--port <n>', 'port to listen on (default 8080, or PORT)')
    .option('--host <address>', 'address to listen on (default 0.0.0.0, or HOST)')
    .action(async (opts: { port?: string; host?: string }) => {
      const config = loadConfig(process.env, { 'api.port': opts.port, 'api.host': opts.host })
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      const server = await startApiServer({ config, databaseUrl: config.databaseUrl, log })
      log.info({ url: server.url }, 'api listening')
      onShutdownSignal(async (signal) => {
        log.info({ signal }, 'api stopping')
        await server.close()
        log.info('api stopped')
      })
    })
}
