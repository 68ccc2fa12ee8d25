/**
 * `scheduler api [--port N] [--host H]` (also `scheduler-api`): waits for the
 * database at start (backoff, no bound: wait-for-database.ts), then serves the
 * REST API until SIGTERM/SIGINT, then stops accepting connections, lets
 * requests in flight finish and closes the pool. `startApiServer` is the
 * composition of database, client and app, reusable by other commands.
 */
import { networkInterfaces } from 'node:os'
import type { Command } from 'commander'
import type { Kysely } from 'kysely'
import { listenSettingsBut, loadConfig, type Config } from '../../config.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger, type Logger } from '../../logger.ts'
import { createDb } from '../../db/pool.ts'
import type { DB } from '../../db/schema.ts'
import { createClient } from '../../client.ts'
import { apiHandlersSettled, buildApp, type App } from '../../api/app.ts'
import { waitForDatabase } from '../../db/wait-for-database.ts'
import { onShutdownSignal } from '../signals.ts'
import { warnOfUnknownVariables } from '../shared.ts'

export interface ApiServer {
  app: App
  /** The server's pool (closed by close()). */
  db: Kysely<DB>
  /** Where it listens, such as http://127.0.0.1:8080 (for a wildcard host: 127.0.0.1). */
  url: string
  /** Every URL it answers at: each address of this machine for a wildcard host (0.0.0.0, ::), loopback first. */
  urls: string[]
  /** Graceful: stops listening, waits for requests in flight, closes the pool. */
  close(): Promise<void>
}

export interface StartApiServerParams {
  config: Config
  databaseUrl: string
  log: Logger
}

/**
 * A failure to listen that the settings explain (a host that does not resolve or is not this
 * machine's, a port taken or not allowed) as the configuration error it is: exit code 2, naming the
 * settings. Any other failure as it came.
 */
function listenProblem(err: unknown, host: string, port: number): unknown {
  const code = (err as { code?: unknown }).code
  const why =
    // (not EAI_AGAIN: a resolver failing for now is no setting's fault, and a restart may do)
    code === 'ENOTFOUND'
      ? `the host ${JSON.stringify(host)} does not resolve`
      : code === 'EADDRNOTAVAIL'
        ? `${host} is not an address of this machine`
        : code === 'EADDRINUSE'
          ? `port ${port} is taken on ${host}`
          : code === 'EACCES'
            ? `port ${port} needs privileges this process does not have`
            : undefined
  if (why === undefined) return err
  const message = `cannot listen on ${host}:${port}: ${why} (SCHEDULER_HOST / --host, SCHEDULER_PORT / --port)`
  return new ConfigError(message, [{ path: code === 'EADDRINUSE' || code === 'EACCES' ? 'api.port' : 'api.host', message }])
}

function httpUrl(address: string, port: number): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`
}

/**
 * The URLs of every address the server listens on: a wildcard address stands for each of this
 * machine's (IPv4 ones for 0.0.0.0; IPv4 and IPv6 ones for ::, but the link-local IPv6 ones, which
 * need a zone to be reached), loopback first.
 */
function listeningUrls(app: App): string[] {
  const interfaces = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((i) => !(i.family === 'IPv6' && /^fe[89ab]/i.test(i.address)))
    .sort((a, b) => Number(b.internal) - Number(a.internal))
  const urls = app.addresses().flatMap((bound) => {
    // (a string: a Unix socket's path, never ours: the API listens on a host and port)
    if (typeof bound === 'string') return []
    const { address, port } = bound
    if (address === '0.0.0.0') return interfaces.filter((i) => i.family === 'IPv4').map((i) => httpUrl(i.address, port))
    if (address === '::') return interfaces.map((i) => httpUrl(i.address, port))
    return [httpUrl(address, port)]
  })
  return [...new Set(urls)]
}

/** Connects to the database and listens on config.api.host:port. */
export async function startApiServer(params: StartApiServerParams): Promise<ApiServer> {
  const { config, log } = params
  const database = createDb({ databaseUrl: params.databaseUrl, poolSize: config.db.poolSize, applicationName: 'pgsched-api', log })
  const app = buildApp({
    db: database.db,
    log,
    client: createClient({
      db: database.db,
      httpAllow: config.worker.httpAllow,
      webhookMaxPerTenant: config.api.webhookMaxPerTenant,
      requireSyncStandby: config.api.requireSyncStandby === 'on',
    }),
    bodyLimitBytes: config.api.bodyLimitBytes,
    outputS3: { endpoint: config.output.s3Endpoint, region: config.output.s3Region },
    eventsRetentionMs: config.events.retentionMs,
    maxStreamsPerTenant: config.api.maxStreamsPerTenant,
    httpAllow: config.worker.httpAllow,
  })
  try {
    await app.ready()
    // Fastify logs "Server listening at …" once per address; the caller logs one line with all of
    // them (`urls`), so its own are kept quiet while it listens (nothing else logs meanwhile: the
    // plugins are ready, and no request arrives before it listens).
    const level = app.log.level
    app.log.level = 'warn'
    try {
      await app.listen({ port: config.api.port, host: config.api.host })
    } finally {
      app.log.level = level
    }
  } catch (err: unknown) {
    await app.close()
    await database.db.destroy()
    throw listenProblem(err, config.api.host, config.api.port)
  }
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.api.port
  const host = config.api.host === '0.0.0.0' || config.api.host === '::' ? '127.0.0.1' : config.api.host
  let closing: Promise<void> | undefined
  return {
    app,
    db: database.db,
    url: httpUrl(host, port),
    urls: listeningUrls(app),
    close() {
      closing ??= (async () => {
        // The server's close waits for every connection; one a client left open (an aborted
        // streaming response) is cut once the grace is over, so a shutdown always ends.
        const cut = setTimeout(() => app.server.closeAllConnections(), HANDLERS_GRACE_MS)
        await app.close()
        clearTimeout(cut)
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

/** How long a close waits for connections, then for request handlers whose clients hung up. */
const HANDLERS_GRACE_MS = 10_000

export function registerApi(program: Command): void {
  program
    .command('api')
    .description('serve the REST API (OpenAPI document at /openapi.json, UI at /docs) and the dashboard at /ui')
    .option('--port <n>', 'port to listen on (default 8080, or SCHEDULER_PORT, or PORT)')
    .option('--host <address>', 'address to listen on (default 0.0.0.0, or SCHEDULER_HOST, or HOST)')
    .action(async (opts: { port?: string; host?: string }) => {
      const config = loadConfig(process.env, { 'api.port': opts.port, 'api.host': opts.host }, { unread: listenSettingsBut('api') })
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      warnOfUnknownVariables(log)
      const waiting = new AbortController()
      let server: ApiServer | undefined
      onShutdownSignal(async (signal) => {
        log.info({ signal }, 'api stopping')
        waiting.abort()
        await server?.close()
        log.info('api stopped')
      })
      // Not listening until the database answers: a load balancer sees no API rather than one answering 503.
      if (!(await waitForDatabase({ databaseUrl: config.databaseUrl, log, signal: waiting.signal }))) return
      server = await startApiServer({ config, databaseUrl: config.databaseUrl, log })
      // (url last: a line whose "url" ends it is what scripts waiting for the API have matched)
      log.info({ urls: server.urls, url: server.url }, 'api listening')
    })
}
