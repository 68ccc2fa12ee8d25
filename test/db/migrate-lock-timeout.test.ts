/**
 * `migrate` on a database in use: a migration that waits for a table lock behind a long transaction
 * gives up after the lock timeout (so submits and claims queue behind it no longer than that), is
 * rolled back and tried again, and after its last try fails naming the lock and the session holding
 * it, having applied nothing of itself. A second connection holds the lock, as a report or an
 * idle-in-transaction session would.
 */
import { randomBytes } from 'node:crypto'
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { migrate } from '../../src/db/migrate.ts'
import { BusyError } from '../../src/errors.ts'
import { packageRoot } from '../../src/lib/package-root.ts'
import { capturingLogger } from '../log-capture.ts'
import { adminQuery, createFromTemplate, urlFor } from '../db.ts'
import { waitFor } from '../wait-for.ts'

/** A migration that applies at once. */
const BEFORE = { name: '9000_lock_test_before', sql: 'create table pgsched.lock_test_before (id int);\n' }
/** A migration whose second statement needs an exclusive lock on pgsched.queues. */
const WAITS = { name: '9001_lock_test_waits', sql: 'create table pgsched.lock_test_marker (id int);\nalter table pgsched.queues add column lock_test int;\n' }

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A database with this build's schema, dropped after the test. */
async function migratedDatabase(): Promise<string> {
  const name = `m_${randomBytes(6).toString('hex')}`
  await createFromTemplate(name, inject('templateDb'))
  cleanups.push(() => adminQuery(`drop database if exists ${name} with (force)`))
  return urlFor(name)
}

/** A migrations folder with this build's migrations and `extra` after them. */
function migrationsWith(...extra: Array<{ name: string; sql: string }>): string {
  const dir = mkdtempSync(join(tmpdir(), 'pgsched-migrations-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const all = join(packageRoot(), 'migrations')
  for (const f of readdirSync(all).filter((f) => f.endsWith('.sql'))) copyFileSync(join(all, f), join(dir, f))
  for (const m of extra) writeFileSync(join(dir, `${m.name}.sql`), m.sql)
  return dir
}

/** A second session in a transaction that has read pgsched.queues (so holds a lock on it), left open. */
async function holdQueuesLock(url: string): Promise<{ client: pg.Client; pid: number }> {
  const client = new pg.Client({ connectionString: url, application_name: 'lock-holder' })
  await client.connect()
  cleanups.push(() => client.end())
  await client.query('begin')
  await client.query('select count(*) from pgsched.queues')
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid')
  return { client, pid: rows[0]?.pid as number }
}

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<T>(text)).rows
  } finally {
    await client.end()
  }
}

interface Line {
  level: number
  msg: string
  migration?: string
  attempt?: number
  attempts?: number
  delayMs?: number
  lockTimeoutMs?: number
  lock?: unknown
  blockers?: unknown
}

describe('migrate behind a transaction holding a lock', () => {
  it('gives up after its last try, naming the lock and the session holding it, and applies nothing of that migration', async () => {
    const url = await migratedDatabase()
    const holder = await holdQueuesLock(url)
    const { log, lines } = capturingLogger<Line>()
    const err = await migrate({ databaseUrl: url, migrationsDir: migrationsWith(BEFORE, WAITS), lockTimeoutMs: 400, attempts: 3, retryDelayMs: 10, log }).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(BusyError)
    const message = (err as Error).message
    expect(message).toMatch(
      new RegExp(
        `^migration 9001_lock_test_waits waited more than 400 ms for AccessExclusiveLock on pgsched\\.queues, behind pid ${holder.pid} ` +
          '\\(application "lock-holder", idle in transaction, transaction started \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z, statement started [\\dTZ:.-]+\\) ' +
          'in each of its 3 tries and was rolled back: nothing of it is applied \\(the 1 before it, 9000_lock_test_before, are applied\\)\\.',
      ),
    )
    expect(message).toContain('SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS, --lock-timeout-ms')
    const blocker = {
      pid: holder.pid,
      applicationName: 'lock-holder',
      state: 'idle in transaction',
      xactStartedAt: expect.any(String),
      queryStartedAt: expect.any(String),
    }
    const lock = { type: 'relation', relation: 'pgsched.queues', mode: 'AccessExclusiveLock' }
    expect(lines.filter((l) => l.level === 40)).toEqual([
      expect.objectContaining({
        msg: 'migration timed out waiting for a lock; rolled back, retrying',
        migration: WAITS.name,
        attempt: 1,
        attempts: 3,
        delayMs: 10,
        lockTimeoutMs: 400,
        lock,
        blockers: [blocker],
      }),
      expect.objectContaining({ migration: WAITS.name, attempt: 2, attempts: 3, delayMs: 20, lock, blockers: [blocker] }),
    ])
    await holder.client.query('rollback')
    const applied = await query<{ name: string }>(url, `select name from pgsched.kysely_migration where name like '9%' order by name`)
    expect(applied.map((r) => r.name)).toEqual([BEFORE.name])
    const leftovers = await query<{ marker: string | null; column: string | null }>(
      url,
      `select to_regclass('pgsched.lock_test_marker')::text as marker,
              (select attname::text from pg_attribute where attrelid = 'pgsched.queues'::regclass and attname = 'lock_test') as column`,
    )
    expect(leftovers).toEqual([{ marker: null, column: null }])
  })

  it('applies the migration on a later try once the transaction holding the lock ends', async () => {
    const url = await migratedDatabase()
    const holder = await holdQueuesLock(url)
    const { log, lines } = capturingLogger<Line>()
    const running = migrate({ databaseUrl: url, migrationsDir: migrationsWith(WAITS), lockTimeoutMs: 300, attempts: 5, retryDelayMs: 1_000, log })
    await waitFor(() => lines.some((l) => l.level === 40), { timeoutMs: 10_000, what: 'a retry logged' })
    await holder.client.query('commit')
    expect(await running).toEqual({ applied: [WAITS.name] })
    expect(lines.filter((l) => l.level === 40)).toEqual([expect.objectContaining({ migration: WAITS.name, attempt: 1 })])
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'migration applied', migration: WAITS.name }))
    const column = await query(url, `select 1 from pg_attribute where attrelid = 'pgsched.queues'::regclass and attname = 'lock_test'`)
    expect(column).toHaveLength(1)
  })

  it('refuses a lock timeout, a number of tries or a delay out of range, naming it, before it connects', async () => {
    const url = 'postgres://nobody@127.0.0.1:1/none'
    await expect(migrate({ databaseUrl: url, attempts: 0 })).rejects.toThrow('migrate params.attempts must be an integer from 1 to 100 (got 0)')
    await expect(migrate({ databaseUrl: url, lockTimeoutMs: -1 })).rejects.toThrow('migrate params.lockTimeoutMs must be an integer from 0 to 3600000 (got -1)')
    await expect(migrate({ databaseUrl: url, retryDelayMs: 1.5 })).rejects.toThrow('migrate params.retryDelayMs must be an integer from 0 to 600000 (got 1.5)')
  })
})
