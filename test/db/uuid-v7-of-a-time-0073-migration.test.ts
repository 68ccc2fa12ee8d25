/**
 * Migration 0073 on a database with webhook deliveries logged: pgsched.uuid_v7(at) makes the UUIDv7
 * of the instant given (its milliseconds, the fraction of the millisecond in 1/4096 steps, version 7,
 * the RFC 9562 variant), ordered as the instants are, beside pgsched.uuid_v7() unchanged; the rows
 * logged before it are kept.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0073')

describe('migration 0073 (the UUIDv7 of a given instant)', () => {
  it('makes the UUIDv7 of an instant, ordered as the instants, and keeps what was logged before', async () => {
    const { db } = createDb({ databaseUrl: before.url, poolSize: 2 })
    try {
      const hook = await createClient({ db, tenant: 'acme' }).webhooks.create({ url: 'https://example.com/hook' })
      await sql`insert into pgsched.webhook_deliveries (subscription_id, event_id, event_type, job_id, attempt, ok, will_retry, duration_ms)
                values (${hook.id}::uuid, '1-0', 'failed', ${hook.id}::uuid, 1, false, true, 12)`.execute(db)
      const { rows: was } = await sql<{ id: string }>`select id from pgsched.webhook_deliveries`.execute(db)

      await migrate({ databaseUrl: before.url })
      const { rows: kept } = await sql<{ id: string }>`select id from pgsched.webhook_deliveries`.execute(db)
      expect(kept).toEqual(was)
      const { rows } = await sql<{ id: string; ms: string; fraction: number; version: string; variant: string; later: boolean; clock: boolean }>`
        with made as (
          select pgsched.uuid_v7(timestamptz '2026-11-30 12:00:00.123456+00') as a,
                 pgsched.uuid_v7(timestamptz '2026-11-30 12:00:00.123457+00') as b
        ), hex as (select a, b, replace(a::text, '-', '') as h from made)
        select a::text as id,
               ('x' || substr(h, 1, 12))::bit(48)::bigint::text as ms,
               ('x' || substr(h, 14, 3))::bit(12)::int as fraction,
               substr(h, 13, 1) as version,
               substr(h, 17, 1) as variant,
               b > a as later,
               pgsched.uuid_v7() > b as clock
          from hex`.execute(db)
      const made = rows[0]
      expect(made).toMatchObject({ ms: String(Date.parse('2026-11-30T12:00:00.123Z')), version: '7', later: true, clock: true })
      // 456 µs of the millisecond, in 1/4096 steps
      expect(made?.fraction).toBe(Math.floor((456 * 4096) / 1000))
      expect(['8', '9', 'a', 'b']).toContain(made?.variant)
    } finally {
      await db.destroy()
    }
  })
})
