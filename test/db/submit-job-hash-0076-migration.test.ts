/**
 * Migration 0076: pgsched.submit_job's idempotency check reads a request the same whatever the
 * session's TimeZone, DateStyle and IntervalStyle (a driver may set TimeZone to its host's zone), so
 * a repeat from another session returns the same job, and a different request under the same key is
 * still refused; a key stored before the migration keeps matching a repeat made with the settings it
 * was made with. A cron expression is stored without the whitespace around it its check ignores.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { migrate } from '../../src/db/migrate.ts'
import { useDatabaseBefore, useTestDb } from '../db.ts'

const t = useTestDb()
const before = useDatabaseBefore('0076')

/** Runs `statement` on a connection of its own to `url` after the session settings `settings`; its first row's `id`. */
async function onSession(url: string, settings: string, statement: string): Promise<string> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    await c.query(settings)
    const { rows } = await c.query(statement)
    return rows[0].id as string
  } finally {
    await c.end()
  }
}

const submit = (key: string, startAt = '2031-01-01 09:00+00') =>
  `select pgsched.submit_job('charge', every => interval '1 hour', start_at => '${startAt}', run_at => null,
                             idempotency_key => '${key}') as id`

describe('pgsched.submit_job: an idempotent repeat from any session (migration 0076)', () => {
  it('returns the same job for the same request whatever the session TimeZone, DateStyle and IntervalStyle', async () => {
    const first = await onSession(t.url, `set timezone = 'UTC'`, submit('same-request'))
    for (const settings of [
      `set timezone = 'Europe/Berlin'`,
      `set timezone = 'America/St_Johns'`,
      `set intervalstyle = 'iso_8601'`,
      `set intervalstyle = 'sql_standard'`,
      `set datestyle = 'SQL, DMY'`,
    ]) {
      expect(await onSession(t.url, settings, submit('same-request')), settings).toBe(first)
    }
    // the same instant written in another offset, the same interval in other units: the same request
    expect(
      await onSession(
        t.url,
        `set timezone = 'Asia/Kathmandu'`,
        `select pgsched.submit_job('charge', every => interval '60 minutes', start_at => '2031-01-01 14:45+05:45',
                                   idempotency_key => 'same-request') as id`,
      ),
    ).toBe(first)
    // another instant under the key: another request, refused
    await expect(onSession(t.url, `set timezone = 'Europe/Berlin'`, submit('same-request', '2031-01-01 10:00+00'))).rejects.toMatchObject({ code: '23505' })
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where idempotency_key = 'same-request'`.execute(t.db)
    expect(rows[0]?.n).toBe(1)
  })

  it('stores a cron expression without the tabs and line breaks around it, as the client does', async () => {
    const id = await onSession(t.url, 'select 1', `select pgsched.submit_job('x', cron => E'\\t0 9 * * *\\n') as id`)
    const { rows } = await sql<{ cron_expression: string }>`select cron_expression from pgsched.triggers where job_id = ${id}::uuid`.execute(t.db)
    expect(rows[0]?.cron_expression).toBe('0 9 * * *')
  })

  it('keeps matching a key stored before it, repeated with the settings it was made with', async () => {
    const settings = `set timezone = 'Europe/Berlin'`
    const kept = await onSession(before.url, settings, submit('kept-key'))
    await migrate({ databaseUrl: before.url })
    expect(await onSession(before.url, settings, submit('kept-key'))).toBe(kept)
    await expect(onSession(before.url, settings, submit('kept-key', '2031-01-01 10:00+00'))).rejects.toMatchObject({ code: '23505' })
  })
})
