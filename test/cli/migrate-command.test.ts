import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, describe, expect, it, onTestFinished } from 'vitest'
import { PARTITION_COUNT_DEFAULT } from '../../src/core/names.ts'
import { adminQuery, urlFor, useDatabaseBefore } from '../db.ts'

// (first: its database is made before the file's other hooks run)
const before0068 = useDatabaseBefore('0068')
const run = promisify(execFile)
const name = `c_${randomBytes(6).toString('hex')}`
const eight = `c_${randomBytes(6).toString('hex')}`

afterAll(async () => {
  await adminQuery(`drop database if exists ${name} with (force)`)
  await adminQuery(`drop database if exists ${eight} with (force)`)
})

/** Runs the CLI; killed after 30 s, so a command that should have refused to start (an API, a worker) is not left running. */
function scheduler(args: string[], env: Record<string, string> = {}) {
  return run('node', ['bin/scheduler', ...args], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, timeout: 30_000, killSignal: 'SIGKILL' })
}

interface LogLine {
  level: number
  msg: string
  count?: number
  migrations?: string[]
  [field: string]: unknown
}

/** The lines of a migrate's stdout, each of which must be a JSON log line. */
function logLines(stdout: string): LogLine[] {
  return stdout
    .trimEnd()
    .split('\n')
    .map((line) => {
      try {
        return JSON.parse(line) as LogLine
      } catch {
        throw new Error(`stdout has a line that is not JSON: ${JSON.stringify(line)}`)
      }
    })
}

/** The summary log line of a migrate's stdout (`schema migrated` or `schema is up to date`). */
function summary(stdout: string): LogLine | undefined {
  return logLines(stdout).find((l) => l.msg === 'schema migrated' || l.msg === 'schema is up to date')
}

const upToDate = expect.objectContaining({ level: 30, msg: 'schema is up to date', count: 0 })

describe('scheduler migrate', () => {
  it('exits 0 in two concurrent runs and reports nothing to do on the next', async () => {
    await adminQuery(`create database ${name}`)
    const env = { DATABASE_URL: urlFor(name) }
    const [a, b] = await Promise.all([scheduler(['migrate'], env), scheduler(['migrate'], env)])
    // stdout is JSON log lines only, the summary one of them
    const summaries = [summary(a.stdout), summary(b.stdout)].sort((x, y) => (y?.count ?? 0) - (x?.count ?? 0))
    expect(summaries[0]).toMatchObject({ level: 30, msg: 'schema migrated', migrations: expect.arrayContaining(['0001_init']) })
    expect(summaries[0]?.count).toBe(summaries[0]?.migrations?.length)
    expect(summaries[1]).toEqual(upToDate)
    const migrated = summary(a.stdout)?.msg === 'schema migrated' ? a.stdout : b.stdout
    const applied = logLines(migrated).filter((l) => l.msg === 'migration applied')
    expect(applied.map((l) => l.migration)).toEqual(summaries[0]?.migrations)
    const again = await scheduler(['migrate'], env)
    expect(logLines(again.stdout)).toEqual([upToDate])
  })

  it('exits 2 naming both counts when --partitions differs from the installed schema', async () => {
    // The first test above installed the schema with the default count.
    const env = { DATABASE_URL: urlFor(name) }
    const err = await scheduler(['migrate', '--partitions', '8'], env).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 2 })
    expect((err as { stderr: string }).stderr).toContain(`the schema is installed with ${PARTITION_COUNT_DEFAULT} partitions, but 8 were asked for`)
    const fromEnv = await scheduler(['migrate'], { ...env, SCHEDULER_PARTITIONS: '8' }).catch((e: unknown) => e)
    expect(fromEnv).toMatchObject({ code: 2 })
    expect(summary((await scheduler(['migrate', '--partitions', String(PARTITION_COUNT_DEFAULT)], env)).stdout)).toEqual(upToDate)
  })

  it('takes an empty SCHEDULER_PARTITIONS as not set: the installed count, whatever it is', async () => {
    await adminQuery(`create database ${eight}`)
    const env = { DATABASE_URL: urlFor(eight) }
    expect(summary((await scheduler(['migrate', '--partitions', '8'], env)).stdout)).toMatchObject({ msg: 'schema migrated' })
    expect(summary((await scheduler(['migrate'], { ...env, SCHEDULER_PARTITIONS: '' })).stdout)).toEqual(upToDate)
  })

  it('exits 2 with a message naming the variable when configuration is invalid', async () => {
    // (PORT is the API's, which migrate does not read)
    const err = await scheduler(['migrate'], { DATABASE_URL: 'mysql://nope', SCHEDULER_MIGRATE_ATTEMPTS: 'x', PORT: 'x' }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 2 })
    expect((err as { stderr: string }).stderr).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL')
    expect((err as { stderr: string }).stderr).toContain('SCHEDULER_MIGRATE_ATTEMPTS must be an integer from')
    expect((err as { stderr: string }).stderr).not.toContain('PORT must be')
  })

  it.each(['migrate', 'worker', 'api'])('%s exits 2 naming the problem when DATABASE_URL is malformed', async (command) => {
    const attrs = await scheduler([command], { DATABASE_URL: 'postgres://h1:5432,h2:5433/db?target_session_attrs=read-only' }).catch((e: unknown) => e)
    expect(attrs).toMatchObject({ code: 2 })
    expect((attrs as { stderr: string }).stderr).toContain('DATABASE_URL has target_session_attrs=read-only; pgsched writes')
    const malformed = await scheduler([command], { DATABASE_URL: 'postgres://h 1/db' }).catch((e: unknown) => e)
    expect(malformed).toMatchObject({ code: 2 })
    expect((malformed as { stderr: string }).stderr).toContain('DATABASE_URL is not a valid URL')
  })

  it('follows a multi-host DATABASE_URL past a host that does not answer', async () => {
    // The first run above created and migrated the database; port 1 has no server.
    const url = new URL(urlFor(name))
    const { stdout } = await scheduler(['migrate'], {
      DATABASE_URL: `postgres://${url.username}${url.password ? `:${url.password}` : ''}@127.0.0.1:1,${url.host}${url.pathname}?target_session_attrs=read-write`,
    })
    expect(summary(stdout)).toEqual(upToDate)
  })

  it('exits 1 naming the lock and its holder when a migration times out waiting for a lock in each try, and applies it once the lock is free', async () => {
    // Migration 0068 alters pgsched.webhook_subscriptions; a second session has read it in a transaction left open.
    const holder = new pg.Client({ connectionString: before0068.url, application_name: 'report' })
    await holder.connect()
    onTestFinished(() => holder.end())
    await holder.query('begin')
    await holder.query('select count(*) from pgsched.webhook_subscriptions')
    const pid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid
    const env = { DATABASE_URL: before0068.url }
    const failed = (await scheduler(['migrate', '--lock-timeout-ms', '300', '--attempts', '2'], env).catch((e: unknown) => e)) as {
      code: number
      stdout: string
      stderr: string
    }
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(
      new RegExp(
        `^scheduler: migration 0068_webhook_disabling_and_url_keys waited more than 300 ms for \\w+Lock on pgsched\\.webhook_subscriptions, behind pid ${pid} \\(application "report", idle in transaction, .*\\) in each of its 2 tries and was rolled back: nothing of it is applied\\.`,
      ),
    )
    const retries = logLines(failed.stdout).filter((l) => l.level === 40)
    expect(retries).toEqual([
      expect.objectContaining({
        msg: 'migration timed out waiting for a lock; rolled back, retrying',
        migration: '0068_webhook_disabling_and_url_keys',
        attempt: 1,
        attempts: 2,
        lockTimeoutMs: 300,
        blockers: [expect.objectContaining({ pid, applicationName: 'report', state: 'idle in transaction', queryStartedAt: expect.any(String) })],
      }),
    ])
    await holder.query('rollback')
    const { stdout } = await scheduler(['migrate'], { ...env, SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS: '300', SCHEDULER_MIGRATE_ATTEMPTS: '1' })
    expect(summary(stdout)).toMatchObject({ msg: 'schema migrated', migrations: expect.arrayContaining(['0068_webhook_disabling_and_url_keys']) })
  })

  it('exits 2 naming the setting when the lock timeout or the number of tries is out of range', async () => {
    const err = (await scheduler(['migrate', '--attempts', '0'], { DATABASE_URL: urlFor(name), SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS: '-5' }).catch(
      (e: unknown) => e,
    )) as {
      code: number
      stderr: string
    }
    expect(err.code).toBe(2)
    expect(err.stderr).toContain('--attempts must be an integer from 1 to 100 (got 0)')
    expect(err.stderr).toContain('SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS must be an integer from 0 to 3600000 (got -5)')
  })
})
