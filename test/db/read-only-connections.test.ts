/**
 * Connections opened while the database was read-only (default_transaction_read_only, as on a server
 * not yet promoted) are closed once a write is refused on one, or the readiness check finds one
 * read-only: once the database takes writes again, the next statements get new connections rather
 * than failing until the pool drops the old ones as idle (30 s).
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { databaseWritable } from '../../src/db/queries/ops.ts'
import { createDb } from '../../src/db/pool.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

describe('connections opened while the database was read-only', () => {
  it('are closed when a write is refused on them, or the readiness check finds them read-only', async () => {
    const name = new URL(t.url).pathname.slice(1)
    const database = createDb({ databaseUrl: t.url, poolSize: 1 })
    const client = createClient({ db: database.db, tenant: 'acme', batchSubmits: false })
    try {
      await sql.raw(`alter database ${name} set default_transaction_read_only = on`).execute(t.db)
      // the pool's one connection, opened now, is read-only for its life
      expect(await databaseWritable(database.db)).toBe(false)
      await expect(client.submitJob({ type: 'refused' })).rejects.toMatchObject({ code: '25006' })
      await sql.raw(`alter database ${name} reset default_transaction_read_only`).execute(t.db)
      // a new connection: writable
      expect(await databaseWritable(database.db)).toBe(true)
      expect((await client.submitJob({ type: 'written' })).created).toBe(true)
      // the same after a refused write alone (no readiness check between): the pool's connection is
      // ended, and the one it opens next is read-only
      await sql.raw(`alter database ${name} set default_transaction_read_only = on`).execute(t.db)
      const { rows } = await database.pool.query<{ pid: number }>('select pg_backend_pid() as pid')
      await sql`select pg_terminate_backend(${rows[0]?.pid}::int)`.execute(t.db)
      await waitFor(
        async () =>
          await database.pool.query('select 1').then(
            () => true,
            () => false,
          ),
        { what: 'a new connection' },
      )
      await expect(client.submitJob({ type: 'refused' })).rejects.toMatchObject({ code: '25006' })
      await sql.raw(`alter database ${name} reset default_transaction_read_only`).execute(t.db)
      expect((await client.submitJob({ type: 'written' })).created).toBe(true)
    } finally {
      await sql.raw(`alter database ${name} reset default_transaction_read_only`).execute(t.db)
      await database.db.destroy()
    }
  })
})
