/**
 * `useTestDb()` gives a test file its own database, cloned from the migrated
 * template, emptied before each test and dropped after the file (kept when
 * KEEP_TEST_DB=1). A database rather than a schema, because advisory locks
 * and LISTEN/NOTIFY are database-wide.
 */
import { randomBytes } from 'node:crypto'
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { sql, type Kysely } from 'kysely'
import { afterAll, beforeAll, beforeEach, inject } from 'vitest'
import { migrate } from '../src/db/migrate.ts'
import { createDb } from '../src/db/pool.ts'
import { packageRoot } from '../src/lib/package-root.ts'
import type { DB } from '../src/db/schema.ts'
import { createLogger, type Logger } from '../src/logger.ts'

export interface TestDb {
  /** Connection URL of this file's database. */
  url: string
  name: string
  db: Kysely<DB>
  pool: pg.Pool
  log: Logger
}

export function adminUrl(): string {
  return inject('baseUrl')
}

export function urlFor(database: string): string {
  const url = new URL(inject('baseUrl'))
  url.pathname = `/${database}`
  return url.toString()
}

/** Runs `statement` on the server's maintenance database. */
export async function adminQuery(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

/** Creates database `name` as a clone of `template` (the migrated one: `inject('templateDb')`). */
export async function createFromTemplate(name: string, template: string): Promise<void> {
  // Concurrent clones of one template can collide ("being accessed by other users"): retry.
  for (let attempt = 1; ; attempt++) {
    try {
      await adminQuery(`create database ${name} template ${template}`)
      return
    } catch (err: unknown) {
      if (attempt >= 20 || !String(err).includes('being accessed')) throw err
      await new Promise((r) => setTimeout(r, 50 * attempt))
    }
  }
}

export function useTestDb(options: { truncate?: boolean } = {}): TestDb {
  const t = { log: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }) } as TestDb
  beforeAll(async () => {
    t.name = `t_${randomBytes(6).toString('hex')}`
    await createFromTemplate(t.name, inject('templateDb'))
    t.url = urlFor(t.name)
    const { db, pool } = createDb({ databaseUrl: t.url, poolSize: 10, log: t.log })
    t.db = db
    t.pool = pool
  })
  if (options.truncate !== false) {
    beforeEach(async () => {
      // delete, not truncate: on a few rows it is far quicker than truncating ~20 partitions
      await sql`delete from pgsched.execution_history; delete from pgsched.due; delete from pgsched.runs; delete from pgsched.execution_output; delete from pgsched.triggers; delete from pgsched.job_idempotency_keys;
                delete from pgsched.jobs; delete from pgsched.workers; delete from pgsched.api_keys;
                delete from pgsched.waiting_workers; delete from pgsched.queues; delete from pgsched.tenants; delete from pgsched.fair_clocks;
                delete from pgsched.event_batches; delete from pgsched.event_listeners; delete from pgsched.webhook_subscriptions;
                update pgsched.event_cursors set seq = 0`.execute(t.db)
    })
  }
  afterAll(async () => {
    await t.db?.destroy()
    if (t.name && process.env.KEEP_TEST_DB !== '1') await adminQuery(`drop database if exists ${t.name} with (force)`)
  })
  return t
}

/**
 * A new database migrated only through the migrations whose file names sort before `first` (to test
 * migration `first` on rows of the schema before it): made before the file's own beforeAll hooks
 * (call this first), dropped after the file. `url` is set once it is made.
 */
export function useDatabaseBefore(first: string): { url: string } {
  const made = { url: '' }
  const name = `m_${randomBytes(6).toString('hex')}`
  const dir = mkdtempSync(join(tmpdir(), 'pgsched-migrations-'))
  beforeAll(async () => {
    const all = join(packageRoot(), 'migrations')
    for (const f of readdirSync(all).filter((f) => f < first)) copyFileSync(join(all, f), join(dir, f))
    await adminQuery(`create database ${name}`)
    made.url = urlFor(name)
    await migrate({ databaseUrl: made.url, migrationsDir: dir })
  })
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true })
    await adminQuery(`drop database if exists ${name} with (force)`)
  })
  return made
}

/**
 * Rows of the jobs partitions read so far, by seq scans and through indexes, counting the reads of
 * `db`'s own session (flushed first: a session reports its statistics at most once a second), so
 * give it a one-connection pool that ran the statements measured.
 */
export async function jobRowsRead(db: Kysely<DB>): Promise<number> {
  return (await jobReads(db)).rows
}

/** jobRowsRead, and the index scans of the jobs partitions (a look-up by id is one, found or not). */
export async function jobReads(db: Kysely<DB>): Promise<{ rows: number; indexScans: number }> {
  await sql`select pg_stat_force_next_flush()`.execute(db)
  await sql`select pg_stat_clear_snapshot()`.execute(db)
  const { rows } = await sql<{ n: string; scans: string }>`
    select coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)::text as n, coalesce(sum(idx_scan), 0)::text as scans
      from pg_stat_user_tables
     where schemaname = 'pgsched' and relname like 'jobs_p%'`.execute(db)
  return { rows: Number(rows[0]?.n), indexScans: Number(rows[0]?.scans) }
}

/** Sessions of `db`'s database waiting for a lock now (a statement held up by another's row or table lock). */
export async function lockWaiters(db: Kysely<DB>): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock'`.execute(db)
  return rows[0]?.n ?? 0
}
