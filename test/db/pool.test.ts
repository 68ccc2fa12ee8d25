/**
 * createDb: a pool with `genericPlans` plans each parameterised statement once
 * per connection (the worker's hot path); other pools keep PostgreSQL's choice.
 * No pool compiles statements with JIT. Every pool's sessions end a transaction left idle.
 * A BOUNDED_READ statement runs under its own statement_timeout, and a connection it failed on is replaced.
 * Connections lost all at once (a restart) make one warn line, not one or two per connection.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { BOUNDED_READ, BOUNDED_READ_STATEMENT_TIMEOUT_MS, createDb, IDLE_TRANSACTION_TIMEOUT_MS, type Database } from '../../src/db/pool.ts'
import { adminUrl } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { waitFor } from '../wait-for.ts'

describe('createDb', () => {
  const opened: Database[] = []
  afterAll(async () => {
    await Promise.all(opened.map((d) => d.db.destroy()))
  })
  const settings = async (genericPlans: boolean | undefined, databaseUrl = adminUrl()) => {
    const d = createDb({ databaseUrl, poolSize: 1, genericPlans })
    opened.push(d)
    const { rows } = await sql<{ mode: string; timeout: string }>`
      select current_setting('plan_cache_mode') as mode, current_setting('statement_timeout') as timeout`.execute(d.db)
    return rows[0]
  }
  const planCacheMode = async (genericPlans: boolean | undefined) => (await settings(genericPlans))?.mode

  it("runs a bounded pool's statements with that statement_timeout: one held up longer is cancelled by the server and takes no effect", async () => {
    const table = `pool_bound_${process.pid}`
    const admin = new pg.Client({ connectionString: adminUrl() })
    await admin.connect()
    const d = createDb({ databaseUrl: adminUrl(), poolSize: 1, statementBoundMs: 500 })
    opened.push(d)
    try {
      await admin.query(`create table ${table} (id int primary key, v text)`)
      await admin.query(`insert into ${table} values (1, 'before')`)
      expect((await settings(undefined))?.timeout).toBe('0') // an unbounded pool keeps the server's
      const { rows } = await sql<{ timeout: string }>`select current_setting('statement_timeout') as timeout`.execute(d.db)
      expect(rows[0]?.timeout).toBe('500ms')
      await admin.query('begin')
      await admin.query(`select 1 from ${table} where id = 1 for update`)
      const err = await sql`update ${sql.table(table)} set v = 'given up' where id = 1`.execute(d.db).catch((e: unknown) => e)
      expect(err).toMatchObject({ code: '57014' }) // canceling statement due to statement timeout
      await admin.query('commit')
      const after = await admin.query(`select v from ${table} where id = 1`)
      expect(after.rows[0]?.v).toBe('before')
      // the pool goes on with its connection
      expect((await sql<{ one: number }>`select 1 as one`.execute(d.db)).rows[0]?.one).toBe(1)
    } finally {
      await admin.query('rollback').catch(() => {})
      await admin.query(`drop table if exists ${table}`)
      await admin.end()
    }
  })

  it('logs the connections of a pool lost at once (a restart) in one warn line, not one or two per connection', async () => {
    const { log, lines } = capturingLogger<{ level: number; msg: string; reason?: string; err?: unknown }>('debug')
    const app = `lost-${process.pid}`
    const url = new URL(adminUrl())
    url.searchParams.set('application_name', app)
    const d = createDb({ databaseUrl: url.toString(), poolSize: 4, log, applicationName: app })
    opened.push(d)
    // four connections open at once, then idle in the pool
    await Promise.all(Array.from({ length: 4 }, () => sql`select pg_sleep(0.05)`.execute(d.db)))
    expect(d.pool.totalCount).toBe(4)
    const admin = new pg.Client({ connectionString: adminUrl() })
    await admin.connect()
    try {
      const { rows } = await admin.query<{ n: number }>('select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where application_name = $1', [
        app,
      ])
      expect(rows[0]?.n).toBe(4)
    } finally {
      await admin.end()
    }
    const lost = () => lines.filter((l) => l.msg === 'database connection lost')
    await waitFor(() => lost().length === 4, { what: 'the four connections reported lost' })
    const warned = lost().filter((l) => l.level === 40)
    expect(warned).toHaveLength(1)
    expect(warned[0]?.reason).toMatch(/terminat/i)
    expect(warned[0]?.err).toBeUndefined()
    // the pool carries on with new connections
    await expect(sql`select 1`.execute(d.db)).resolves.toBeDefined()
  })

  it('forces generic plans on every connection of a genericPlans pool', async () => {
    expect(await planCacheMode(true)).toBe('force_generic_plan')
  })

  it("leaves the server's plan choice to other pools", async () => {
    expect(await planCacheMode(undefined)).toBe('auto')
  })

  it('runs every pool without JIT, even where the connection asks for it', async () => {
    // JIT asked for at startup (the URL's options), as a server's default `jit = on` would
    const url = new URL(adminUrl())
    url.searchParams.set('options', '-c jit=on')
    const plain = new pg.Client({ connectionString: url.toString() })
    await plain.connect()
    try {
      const { rows } = await plain.query<{ jit: string }>("select current_setting('jit') as jit")
      expect(rows[0]?.jit).toBe('on') // the option takes without the pool
    } finally {
      await plain.end()
    }
    for (const genericPlans of [undefined, true]) {
      const d = createDb({ databaseUrl: url.toString(), poolSize: 1, genericPlans })
      opened.push(d)
      const { rows } = await sql<{ jit: string }>`select current_setting('jit') as jit`.execute(d.db)
      expect(rows[0]?.jit).toBe('off')
    }
  })

  it("keeps the connection's own startup options (here a statement timeout in the URL's options)", async () => {
    const url = new URL(adminUrl())
    url.searchParams.set('options', '-c statement_timeout=4321')
    expect(await settings(true, url.toString())).toEqual({ mode: 'force_generic_plan', timeout: '4321ms' })
  })

  it('has the server end a transaction its sessions leave idle, after IDLE_TRANSACTION_TIMEOUT_MS unless told otherwise', async () => {
    expect(IDLE_TRANSACTION_TIMEOUT_MS).toBe(10_000)
    const timeout = async (idleInTransactionTimeoutMs: number | undefined) => {
      const d = createDb({ databaseUrl: adminUrl(), poolSize: 1, idleInTransactionTimeoutMs })
      opened.push(d)
      const { rows } = await sql<{ t: string }>`select current_setting('idle_in_transaction_session_timeout') as t`.execute(d.db)
      return rows[0]?.t
    }
    expect(await timeout(undefined)).toBe('10s')
    expect(await timeout(250)).toBe('250ms')
    expect(await timeout(0)).toBe('0') // none
  })

  it("runs a bounded read under its own statement_timeout, and leaves the session's setting as it was", async () => {
    const url = new URL(adminUrl())
    url.searchParams.set('options', '-c statement_timeout=4321')
    const d = createDb({ databaseUrl: url.toString(), poolSize: 1 })
    opened.push(d)
    const timeout = async (marker: string) => {
      const { rows } = await sql<{ t: string }>`${sql.raw(marker)} select current_setting('statement_timeout') as t`.execute(d.db)
      return rows[0]?.t
    }
    expect(await timeout(BOUNDED_READ)).toBe(`${BOUNDED_READ_STATEMENT_TIMEOUT_MS / 1000}s`)
    expect(await timeout('')).toBe('4321ms') // the same connection (a pool of one), its setting back
  })

  it('replaces the connection a bounded read failed on', async () => {
    const d = createDb({ databaseUrl: adminUrl(), poolSize: 1 })
    opened.push(d)
    const backend = async (marker: string) => {
      const { rows } = await sql<{ pid: number }>`${sql.raw(marker)} select pg_backend_pid() as pid`.execute(d.db)
      return rows[0]?.pid
    }
    const first = await backend(BOUNDED_READ)
    expect(await backend('')).toBe(first) // kept after a bounded read that succeeded
    await expect(sql`${sql.raw(BOUNDED_READ)} select 1 / 0`.execute(d.db)).rejects.toThrow(/division by zero/)
    expect(await backend('')).not.toBe(first)
  })
})
