/**
 * Applies migrations/*.sql in filename order with Kysely's Migrator (its
 * bookkeeping table pgsched.kysely_migration and its lock). Each file runs in
 * its own transaction, committed before the next begins. Its statements wait at most
 * `lockTimeoutMs` for a lock (lock_timeout): a migration that timed out is rolled back, and tried
 * again after a doubling delay, up to `attempts` tries (core/migrate-retry.ts), each retry logged
 * with the lock it waited for and the sessions holding it (read from a second connection while it
 * waits: lock-wait-watch.ts). The whole run holds a session advisory lock, so concurrent
 * `scheduler migrate` processes serialise and all succeed; a second run is a
 * no-op. The partition count is passed to the first migration through the
 * session setting `pgsched.partition_count`, always set (PARTITION_COUNT_DEFAULT
 * when not given). A count given for a schema installed with another one is
 * refused (ConfigError naming both): the count cannot change after the first run. A schema newer
 * than this version's migrations (a rollback) is left as it is, reported as `newer`.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { pgConnection } from './hosts.ts'
import { databaseUrlProblem } from './database-url.ts'
import { Kysely, Migrator, PostgresDialect, sql, type Migration, type MigrationProvider } from 'kysely'
import { packageRoot } from '../lib/package-root.ts'
import type { Logger } from '../logger.ts'
import { assertKnownFields, type FieldSet } from '../core/known-fields.ts'
import { PARTITION_COUNT_DEFAULT } from '../core/names.ts'
import { BusyError, ConfigError, InvalidStateError, ValidationError } from '../errors.ts'
import { MIGRATE_ATTEMPTS_DEFAULT, MIGRATE_LOCK_TIMEOUT_MS_DEFAULT, MIGRATE_RETRY_DELAY_MS_DEFAULT, migrateRetryDelayMs } from '../core/migrate-retry.ts'
import { watchLockWait } from './lock-wait-watch.ts'
import type { LockWait } from './queries/lock-waits.ts'

/** Arbitrary constant: the advisory lock key that serialises migrate runs. */
export const MIGRATE_LOCK_KEY = 7_215_004_317

export class SqlFileMigrationProvider implements MigrationProvider {
  private readonly dir: string

  constructor(dir: string) {
    this.dir = dir
  }

  async getMigrations(): Promise<Record<string, Migration>> {
    const files = (await readdir(this.dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort()
    const migrations: Record<string, Migration> = {}
    for (const file of files) {
      const text = await readFile(join(this.dir, file), 'utf8')
      migrations[file.replace(/\.sql$/, '')] = {
        up: async (db) => {
          await sql.raw(text).execute(db)
        },
      }
    }
    return migrations
  }
}

export interface MigrateParams {
  databaseUrl: string
  /**
   * Partition count for hash-partitioned tables (default PARTITION_COUNT_DEFAULT, 4); used only
   * by the first migration, fixed after it. Given for an installed schema, it must be its count.
   */
  partitions?: number
  log?: Logger
  migrationsDir?: string
  /** Default MIGRATE_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number
  /**
   * Longest wait, in ms, of a migration's statement for a lock (lock_timeout); 0: no bound.
   * Default MIGRATE_LOCK_TIMEOUT_MS_DEFAULT (5 s).
   */
  lockTimeoutMs?: number
  /** Tries of a migration whose statement timed out waiting for a lock, the first included. Default MIGRATE_ATTEMPTS_DEFAULT (5). */
  attempts?: number
  /** Delay in ms before the second try, doubling for each one after (at most 30 s). Default MIGRATE_RETRY_DELAY_MS_DEFAULT (1 s). */
  retryDelayMs?: number
}

/** How long `migrate` waits for its connection before it fails. */
export const MIGRATE_CONNECT_TIMEOUT_MS = 10_000

export interface MigrateResult {
  applied: string[]
  /**
   * Migrations the database has that this version does not know, all of them after its own: the
   * schema is newer (a later version migrated it). Nothing is applied then. Absent otherwise.
   */
  newer?: string[]
}

/** Any other parameter is refused: a misspelt `partition: 8` would install the default count, fixed for good. */
const MIGRATE_FIELDS: FieldSet<MigrateParams> = {
  databaseUrl: true,
  partitions: true,
  log: true,
  migrationsDir: true,
  connectTimeoutMs: true,
  lockTimeoutMs: true,
  attempts: true,
  retryDelayMs: true,
}

/** SQLSTATE lock_not_available: a statement cancelled by lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03'

/** How often the watch reads what a migration waits for: four times within the lock timeout, from every 50 ms to every second. */
const watchIntervalMs = (lockTimeoutMs: number) => Math.min(Math.max(Math.floor(lockTimeoutMs / 4), 50), 1_000)

/** Refuses a lock timeout, attempt count or delay that is not a whole number in its range, naming it. */
function assertRetrySettings(params: MigrateParams): void {
  const ranges = { lockTimeoutMs: [0, 3_600_000], attempts: [1, 100], retryDelayMs: [0, 600_000] } as const
  for (const [name, [min, max]] of Object.entries(ranges)) {
    const value = params[name as keyof typeof ranges]
    if (value === undefined || (Number.isInteger(value) && value >= min && value <= max)) continue
    const message = `migrate params.${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(value)})`
    throw new ValidationError(message, [{ path: name, message }])
  }
}

/**
 * Brings the schema up to date. Safe to run concurrently and repeatedly.
 * @throws ValidationError naming a parameter it does not know (from JavaScript), before connecting;
 *   ConfigError when `partitions` differs from the installed schema's count (nothing is applied);
 *   InvalidStateError when the database has migrations this version does not know while it lacks
 *   some of this version's (nothing is applied; a schema merely newer is no error: `newer`);
 *   BusyError when a migration timed out waiting for a lock in each of its `attempts` tries (it is
 *   rolled back; those before it stay applied), naming the lock and the sessions holding it;
 *   else the first failing migration's error (its transaction is rolled back; those before it stay applied).
 */
export async function migrate(params: MigrateParams): Promise<MigrateResult> {
  assertKnownFields(params, MIGRATE_FIELDS, 'migrate params')
  assertRetrySettings(params)
  // a URL that is none is the caller's setting, named as createClient and createDb name it
  const problem = typeof params.databaseUrl === 'string' ? databaseUrlProblem(params.databaseUrl) : 'must be a string'
  if (problem) throw new ConfigError(`database URL ${problem}`, [{ path: 'databaseUrl', message: `database URL ${problem}` }])
  // One connection: the advisory lock, the setting and the migrations share a session.
  // A connect timeout, as every pool of the product has: a host that drops packets is an error
  // naming it, not a command that never ends.
  const { Client, config } = pgConnection(params.databaseUrl, {
    application_name: 'pgsched-migrate',
    connectionTimeoutMillis: params.connectTimeoutMs ?? MIGRATE_CONNECT_TIMEOUT_MS,
  })
  // Never closed while idle (pg's default closes it after 10 s): the session holds the advisory
  // lock and the settings across the delays between tries.
  const pool = new pg.Pool({ ...config, Client, max: 1, idleTimeoutMillis: 0 })
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) })
  // The watch's own connection, opened only when a migration runs long enough to be watched.
  const watchPool = new pg.Pool({ ...config, Client, max: 1, application_name: 'pgsched-migrate-watch' })
  const watchDb = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: watchPool }) })
  try {
    const { rows: got } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${MIGRATE_LOCK_KEY}::bigint) as locked`.execute(db)
    if (got[0]?.locked !== true) {
      // another migrate runs (or its session has not ended): said, then waited for as long as it takes
      const { rows: holders } = await sql<{ pid: number; application_name: string; client_addr: string | null; since: Date | null }>`
        select a.pid, a.application_name, a.client_addr::text as client_addr, a.xact_start as since
          from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where l.locktype = 'advisory' and l.granted and l.objsubid = 1
           and l.classid = (${MIGRATE_LOCK_KEY}::bigint >> 32)::oid and l.objid = (${MIGRATE_LOCK_KEY}::bigint & 4294967295)::oid
           and l.database = (select oid from pg_database where datname = current_database())`.execute(db)
      params.log?.info({ holders }, 'waiting for another scheduler migrate to finish (it holds the migration lock)')
      await sql`select pg_advisory_lock(${MIGRATE_LOCK_KEY}::bigint)`.execute(db)
    }
    if (params.partitions !== undefined) await assertPartitionCount(db, params.partitions)
    // Always set: 0001_init.sql (frozen) falls back to 16 when the setting is unset, a default
    // that disagrees with ours; setting it here means that fallback is never reached through migrate().
    const partitions = params.partitions ?? PARTITION_COUNT_DEFAULT
    await sql`select set_config('pgsched.partition_count', ${String(partitions)}::text, false)`.execute(db)
    await sql`set client_min_messages = warning`.execute(db)
    const provider = new SqlFileMigrationProvider(params.migrationsDir ?? join(packageRoot(), 'migrations'))
    // A version older than the schema (a rollback that runs migrate, as every deploy does): Kysely
    // would call the migrations it does not know "missing" and the schema "corrupted".
    const newer = await migrationsUnknown(db, Object.keys(await provider.getMigrations()))
    if (newer) {
      params.log?.warn({ migrations: newer }, 'the schema is newer than this version: it has migrations this version does not know; nothing to apply')
      return { applied: [], newer }
    }
    const migrator = new Migrator({ db, provider, migrationTableSchema: 'pgsched' })
    // Set after the advisory lock, which waits for another migrate run as long as that one takes.
    const lockTimeoutMs = params.lockTimeoutMs ?? MIGRATE_LOCK_TIMEOUT_MS_DEFAULT
    await sql`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}::text, false)`.execute(db)
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db)
    const pid = rows[0]?.pid as number
    const applied: string[] = []
    let attempt = 1
    for (;;) {
      const watch = lockTimeoutMs > 0 ? watchLockWait(watchDb, { pid, intervalMs: watchIntervalMs(lockTimeoutMs), log: params.log }) : undefined
      // One migration per call, in its own transaction: a lock timeout rolls back that one only, and
      // the locks of those before it are not held while it waits.
      const { error, results } = await migrator.migrateUp()
      const wait = await watch?.stop()
      const result = results?.[0]
      if (result?.status === 'Success') {
        applied.push(result.migrationName)
        params.log?.info({ migration: result.migrationName }, 'migration applied')
        attempt = 1
        continue
      }
      if (!error) return { applied }
      if (result === undefined || (error as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw error instanceof Error ? error : new Error(String(error))
      const attempts = params.attempts ?? MIGRATE_ATTEMPTS_DEFAULT
      if (attempt >= attempts) throw lockTimeoutError({ migration: result.migrationName, lockTimeoutMs, attempts, wait, applied })
      const delayMs = migrateRetryDelayMs(attempt, params.retryDelayMs ?? MIGRATE_RETRY_DELAY_MS_DEFAULT)
      params.log?.warn(
        { migration: result.migrationName, attempt, attempts, lockTimeoutMs, delayMs, ...waitFields(wait) },
        'migration timed out waiting for a lock; rolled back, retrying',
      )
      await sleep(delayMs)
      attempt++
    }
  } finally {
    await watchDb.destroy()
    await db.destroy()
  }
}

/** The log fields of a lock wait: the lock, and each session blocking it. */
function waitFields(wait: LockWait | undefined): Record<string, unknown> {
  if (wait === undefined) return {}
  return { lock: { type: wait.lockType, relation: wait.relation, mode: wait.mode }, blockers: wait.holders }
}

/** A wait in words: `AccessExclusiveLock on pgsched.jobs, behind pid 42 (psql, idle in transaction since …)`. */
function describeWait(wait: LockWait | undefined): string {
  if (wait === undefined) return 'a lock'
  const what = `${wait.mode} on ${wait.relation ?? `a ${wait.lockType} lock`}`
  if (wait.holders.length === 0) return what
  const holders = wait.holders.map((h) => {
    if (h.pid === 0) return 'a prepared transaction (pg_prepared_xacts; COMMIT PREPARED or ROLLBACK PREPARED ends it)'
    const facts = [
      h.applicationName ? `application "${h.applicationName}"` : undefined,
      h.state ?? undefined,
      h.xactStartedAt ? `transaction started ${h.xactStartedAt.toISOString()}` : undefined,
      h.queryStartedAt ? `statement started ${h.queryStartedAt.toISOString()}` : undefined,
    ].filter((f) => f !== undefined)
    return `pid ${h.pid}${facts.length > 0 ? ` (${facts.join(', ')})` : ''}`
  })
  return `${what}, behind ${holders.join(' and ')}`
}

function lockTimeoutError(p: {
  migration: string
  lockTimeoutMs: number
  attempts: number
  wait: LockWait | undefined
  applied: readonly string[]
}): BusyError {
  const before = p.applied.length > 0 ? ` (the ${p.applied.length} before it, ${p.applied.join(', ')}, are applied)` : ''
  return new BusyError(
    `migration ${p.migration} waited more than ${p.lockTimeoutMs} ms for ${describeWait(p.wait)} in each of its ${p.attempts} tries ` +
      `and was rolled back: nothing of it is applied${before}. Run migrate again once that transaction ends ` +
      '(or end it), or allow a longer wait (SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS, --lock-timeout-ms)',
  )
}

/**
 * The applied migrations not among `known` (the names of this version's), when every one of `known`
 * is applied too: the schema is newer than this version. Undefined when there are none.
 * @throws InvalidStateError when some of `known` are not applied: the database was migrated by a
 *   build that is neither older nor newer than this one, and applying this version's would mix them.
 */
async function migrationsUnknown(db: Kysely<unknown>, known: readonly string[]): Promise<string[] | undefined> {
  // Two statements: a query naming the bookkeeping table fails to parse before the first migration.
  const { rows: exists } = await sql<{ found: boolean }>`select to_regclass('pgsched.kysely_migration') is not null as found`.execute(db)
  if (!exists[0]?.found) return undefined
  const { rows } = await sql<{ name: string }>`select name from pgsched.kysely_migration order by name`.execute(db)
  const applied = new Set(rows.map((r) => r.name))
  const knownSet = new Set(known)
  const unknown = rows.map((r) => r.name).filter((name) => !knownSet.has(name))
  if (unknown.length === 0) return undefined
  const pending = known.filter((name) => !applied.has(name))
  if (pending.length > 0) {
    throw new InvalidStateError(
      `the database has migrations this version does not know (${unknown.join(', ')}) while it lacks some of this version's (${pending.join(', ')}): ` +
        'it was migrated by another build of pgsched; run the migrate of a build that has all of them',
    )
  }
  return unknown
}

/** Refuses a partition count other than the installed one (none installed yet: any count). */
async function assertPartitionCount(db: Kysely<unknown>, partitions: number): Promise<void> {
  // Two statements: a query naming pgsched.settings fails to parse before the first migration.
  const { rows: exists } = await sql<{ found: boolean }>`select to_regclass('pgsched.settings') is not null as found`.execute(db)
  if (!exists[0]?.found) return
  const { rows } = await sql<{ value: string }>`select value from pgsched.settings where name = 'partition_count'`.execute(db)
  const installed = rows[0]?.value
  if (installed === undefined || Number(installed) === partitions) return
  throw new ConfigError(
    `the schema is installed with ${installed} partitions, but ${partitions} were asked for (--partitions or SCHEDULER_PARTITIONS); ` +
      `the partition count is fixed when the schema is created: leave it out, or give ${installed}`,
  )
}

/** Names of migrations not yet applied (for readiness checks). */
export async function pendingMigrations(db: Kysely<unknown>, migrationsDir?: string): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: new SqlFileMigrationProvider(migrationsDir ?? join(packageRoot(), 'migrations')),
    migrationTableSchema: 'pgsched',
  })
  const all = await migrator.getMigrations()
  return all.filter((m) => m.executedAt === undefined).map((m) => m.name)
}
