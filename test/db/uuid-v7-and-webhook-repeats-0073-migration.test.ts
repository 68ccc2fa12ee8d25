/**
 * Migration 0073 on a database with webhook deliveries logged: pgsched.uuid_v7(at) makes the UUIDv7
 * of the instant given (its milliseconds, the fraction of the millisecond in 1/4096 steps, version 7,
 * the RFC 9562 variant), ordered as the instants are, beside pgsched.uuid_v7() unchanged; the rows
 * logged before it are kept. Repeats of a subscription deleted before it (duplicate_of naming none)
 * are promoted: the oldest takes the receiver, or they repeat the one of it made since.
 */
import { type Kysely, sql } from 'kysely'
import type { DB } from '../../src/db/schema.ts'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0073')

/** A subscription of `url`, and two repeats of it as migrations 0064–0071 kept them; the first deleted as before 0073, leaving them naming none. */
async function orphanedRepeats(db: Kysely<DB>, tenant: string, url: string): Promise<string[]> {
  const first = await createClient({ db, tenant }).webhooks.create({ url })
  const { rows } = await sql<{ id: string }>`
    insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret, duplicate_of)
    select ${tenant}, ${url}, '{}', 'default', 'a-kept-secret-123456', ${first.id}::uuid from generate_series(1, 2)
    returning id`.execute(db)
  await sql`delete from pgsched.webhook_subscriptions where id = ${first.id}::uuid`.execute(db)
  return rows.map((r) => r.id).sort()
}

describe('migration 0073 (the UUIDv7 of a given instant; repeats of a deleted subscription)', () => {
  it('promotes the repeats of a subscription deleted before it, or has them repeat the one of their receiver made since', async () => {
    const { db } = createDb({ databaseUrl: before.url, poolSize: 2 })
    try {
      const [oldest, other] = (await orphanedRepeats(db, 'orph-a', 'https://example.com/a')) as [string, string]
      const [r1, r2] = (await orphanedRepeats(db, 'orph-b', 'https://example.com/b')) as [string, string]
      // written by SQL after the deletion (the API refuses it: it finds the repeats), which the key
      // admitted, as it held none of the repeats
      const { rows: made } = await sql<{ id: string }>`
        insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret)
        values ('orph-b', 'https://EXAMPLE.com/b', '{}', 'default', 'a-later-secret-123456') returning id`.execute(db)
      const since = { id: made[0]?.id as string }

      await migrate({ databaseUrl: before.url })
      const { rows } = await sql<{ id: string; duplicate_of: string | null }>`
        select id, duplicate_of from pgsched.webhook_subscriptions where tenant like 'orph-%' order by tenant, id`.execute(db)
      expect(rows.map((r) => [r.id, r.duplicate_of])).toEqual([
        [oldest, null],
        [other, oldest],
        [r1, since.id],
        [r2, since.id],
        [since.id, null],
      ])
      await expect(createClient({ db, tenant: 'orph-a' }).webhooks.create({ url: 'https://example.com/a' })).rejects.toMatchObject({ existingId: oldest })
    } finally {
      await db.destroy()
    }
  })

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
