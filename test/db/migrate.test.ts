import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { migrate } from '../../src/db/migrate.ts'
import { PARTITION_COUNT_DEFAULT } from '../../src/core/names.ts'
import { ConfigError, ValidationError } from '../../src/errors.ts'
import { adminQuery, urlFor } from '../db.ts'
import { startTcpProxy, viaProxy } from '../worker/tcp-proxy.ts'

const created: string[] = []

async function emptyDatabase(): Promise<string> {
  const name = `m_${randomBytes(6).toString('hex')}`
  await adminQuery(`create database ${name}`)
  created.push(name)
  return urlFor(name)
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

afterEach(async () => {
  for (const name of created.splice(0)) await adminQuery(`drop database if exists ${name} with (force)`)
})

describe('migrate', () => {
  it('fails at its connect timeout, naming it, against a database that takes connections but never answers', async () => {
    const url = await emptyDatabase()
    const target = new URL(url)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    try {
      proxy.blackhole()
      const started = performance.now()
      await expect(migrate({ databaseUrl: viaProxy(url, proxy), connectTimeoutMs: 300 })).rejects.toThrow(/connection timeout/)
      expect(performance.now() - started).toBeLessThan(5_000)
    } finally {
      await proxy.close()
    }
  })

  it('creates the schema with the requested number of hash partitions on a fresh database', async () => {
    const url = await emptyDatabase()
    const { applied } = await migrate({ databaseUrl: url, partitions: 8 })
    expect(applied).toContain('0001_init')
    const tables = await query<{ relname: string }>(
      url,
      `select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'pgsched' and c.relkind = 'p' order by 1`,
    )
    // the history of executions (migration 0028 renamed the executions table; due and runs are not partitioned)
    expect(tables.map((t) => t.relname)).toEqual(['execution_history', 'job_idempotency_keys', 'jobs', 'triggers'])
    const parts = await query<{ n: string }>(url, `select count(*) as n from pg_inherits where inhparent = 'pgsched.execution_history'::regclass`)
    expect(parts[0]?.n).toBe('8')
    const setting = await query<{ value: string }>(url, `select value from pgsched.settings where name = 'partition_count'`)
    expect(setting[0]?.value).toBe('8')
  })

  it("creates PARTITION_COUNT_DEFAULT partitions when no count is given (never 0001's own fallback)", async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url })
    const setting = await query<{ value: string }>(url, `select value from pgsched.settings where name = 'partition_count'`)
    expect(setting[0]?.value).toBe(String(PARTITION_COUNT_DEFAULT))
    const parts = await query<{ n: string }>(url, `select count(*) as n from pg_inherits where inhparent = 'pgsched.execution_history'::regclass`)
    expect(parts[0]?.n).toBe(String(PARTITION_COUNT_DEFAULT))
  })

  it('sets every execution_history partition to vacuum after 5,000 dead rows, indexes included', async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url, partitions: 3 })
    const options = await query<{ reloptions: string[] }>(
      url,
      `select c.reloptions from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'pgsched.execution_history'::regclass`,
    )
    expect(options).toHaveLength(3)
    for (const o of options) {
      expect(o.reloptions).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=5000', 'vacuum_index_cleanup=on']))
    }
  })

  it('sets due and runs (rows inserted and deleted all the time) to vacuum after a fixed number of dead or inserted rows', async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url, partitions: 3 })
    const options = await query<{ relname: string; reloptions: string[] | null }>(
      url,
      `select c.relname, c.reloptions from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'pgsched' and c.relname in ('due', 'runs') order by 1`,
    )
    expect(options.map((o) => o.relname)).toEqual(['due', 'runs'])
    const [due, runs] = options
    expect(due?.reloptions).toEqual(
      expect.arrayContaining([
        'autovacuum_vacuum_scale_factor=0',
        'autovacuum_vacuum_threshold=5000',
        'autovacuum_vacuum_insert_scale_factor=0',
        'autovacuum_vacuum_insert_threshold=5000',
      ]),
    )
    // runs: room on each page for the heartbeat's HOT updates
    expect(runs?.reloptions).toEqual(
      expect.arrayContaining([
        'fillfactor=50',
        'autovacuum_vacuum_scale_factor=0',
        'autovacuum_vacuum_threshold=2000',
        'autovacuum_vacuum_insert_scale_factor=0',
        'autovacuum_vacuum_insert_threshold=2000',
      ]),
    )
  })

  it('changes nothing when run a second time, with the same count or none', async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url, partitions: 4 })
    const before = await query<{ n: string }>(url, `select count(*) as n from pgsched.kysely_migration`)
    expect((await migrate({ databaseUrl: url, partitions: 4 })).applied).toEqual([])
    expect((await migrate({ databaseUrl: url })).applied).toEqual([])
    const after = await query<{ n: string }>(url, `select count(*) as n from pgsched.kysely_migration`)
    expect(after).toEqual(before)
    const parts = await query<{ n: string }>(url, `select count(*) as n from pg_inherits where inhparent = 'pgsched.jobs'::regclass`)
    expect(parts[0]?.n).toBe('4')
  })

  it('refuses a database URL that is none with a ConfigError naming it, as createClient does', async () => {
    for (const databaseUrl of ['not a url', '']) {
      const err = await migrate({ databaseUrl }).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(ConfigError)
      expect((err as Error).message).toMatch(/^database URL is not a valid URL/)
    }
  })

  it('refuses a partition count other than the installed one, naming both, and changes nothing', async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url, partitions: 4 })
    const err = await migrate({ databaseUrl: url, partitions: 16 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as Error).message).toContain('the schema is installed with 4 partitions, but 16 were asked for')
    const parts = await query<{ n: string }>(url, `select count(*) as n from pg_inherits where inhparent = 'pgsched.jobs'::regclass`)
    expect(parts[0]?.n).toBe('4')
  })

  it('refuses a parameter it does not know, naming it and the known ones, before it connects, rather than fixing the default partition count', async () => {
    const url = await emptyDatabase()
    // from JavaScript: a misspelt partitions would install the default count, fixed for good
    const err = await migrate({ databaseUrl: url, partition: 8 } as never).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    expect((err as ValidationError).message).toBe(
      'unknown field "partition" (known: databaseUrl, partitions, log, migrationsDir, connectTimeoutMs, lockTimeoutMs, attempts, retryDelayMs)',
    )
    expect((err as ValidationError).details).toEqual([{ path: 'partition', message: 'unknown field "partition"' }])
    expect(await query(url, `select 1 from pg_namespace where nspname = 'pgsched'`)).toEqual([])
    await expect(migrate(undefined as never)).rejects.toThrow('migrate params must be an object')
    // a key left undefined is no parameter
    await migrate({ databaseUrl: url, partition: undefined } as never)
    const parts = await query<{ n: string }>(url, `select count(*) as n from pg_inherits where inhparent = 'pgsched.jobs'::regclass`)
    expect(parts[0]?.n).toBe(String(PARTITION_COUNT_DEFAULT))
  })

  it('succeeds in every one of several concurrent runs, applying each migration once', async () => {
    const url = await emptyDatabase()
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate({ databaseUrl: url, partitions: 4 })))
    const applied = results.flatMap((r) => r.applied)
    expect(applied.filter((name) => name === '0001_init')).toHaveLength(1)
  })

  it('comments every table', async () => {
    const url = await emptyDatabase()
    await migrate({ databaseUrl: url, partitions: 2 })
    const uncommented = await query<{ relname: string }>(
      url,
      `select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'pgsched' and c.relkind in ('r', 'p') and not c.relispartition
          and c.relname <> 'kysely_migration' and c.relname <> 'kysely_migration_lock'
          and obj_description(c.oid, 'pg_class') is null`,
    )
    expect(uncommented).toEqual([])
  })
})
