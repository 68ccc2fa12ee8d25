/**
 * `scheduler migrate` run while another holds the migration lock says it waits, naming the session
 * that holds it, instead of waiting without a word, and goes on once that one ends.
 */
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { MIGRATE_LOCK_KEY, migrate } from '../../src/db/migrate.ts'
import { capturingLogger } from '../log-capture.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

describe('migrate while another migrate holds the lock', () => {
  it('says it waits, naming the holder, and goes on once the lock is free', async () => {
    const other = new pg.Client({ connectionString: t.url, application_name: 'the-other-migrate' })
    await other.connect()
    try {
      await other.query('select pg_advisory_lock($1::bigint)', [MIGRATE_LOCK_KEY])
      const { log, lines } = capturingLogger<{ msg: string; holders?: Array<{ application_name: string }> }>('info')
      let done = false
      const running = migrate({ databaseUrl: t.url, log }).then((r) => {
        done = true
        return r
      })
      const said = await waitFor(() => lines.find((l) => l.msg.startsWith('waiting for another scheduler migrate')), { what: 'the wait to be said' })
      expect(said.holders?.map((h) => h.application_name)).toEqual(['the-other-migrate'])
      expect(done).toBe(false)
      await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATE_LOCK_KEY])
      expect(await running).toEqual({ applied: [] })
    } finally {
      await other.end()
    }
  })
})
