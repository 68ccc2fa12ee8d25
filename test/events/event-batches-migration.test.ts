/**
 * Migration 0024 on a database that already holds events of 0022's form (one row per event, some
 * numbered, some not): each is carried over as a batch of one keeping its number, an id given
 * before the migration resumes a stream exactly after that event, unnumbered ones are numbered
 * afterwards in their order, and webhook deliveries keep naming their event.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { eventListAfter } from '../../src/db/queries/events.ts'
import { webhookDeliveryList } from '../../src/db/queries/webhooks.ts'
import { sequenceEvents } from '../../src/events/event-stream.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0024')

describe('migration 0024 (event batches)', () => {
  it('carries the events of one row each over as batches of one, keeping their numbers and order', async () => {
    const url = before.url
    const { db } = createDb({ databaseUrl: url, poolSize: 2 })
    try {
      const job = (k: number) => `00000000-0000-7000-8000-${String(k).padStart(12, '0')}`
      // five events of 0022: three numbered (7, 8, 9), two not yet
      await sql`
        insert into pgsched.events (seq, type, tenant, job_id, execution_id, queue, job_type, attempt)
        values (7, 'submitted', 'a', ${job(1)}::uuid, ${job(11)}::uuid, 'default', 't', 0),
               (8, 'started', 'a', ${job(1)}::uuid, ${job(11)}::uuid, 'default', 't', 1),
               (9, 'submitted', 'b', ${job(2)}::uuid, null, 'q', 'u', null),
               (null, 'succeeded', 'a', ${job(1)}::uuid, ${job(11)}::uuid, 'default', 't', 1),
               (null, 'started', 'b', ${job(2)}::uuid, ${job(12)}::uuid, 'q', 'u', 1)`.execute(db)
      await sql`select setval('pgsched.event_seq', 9)`.execute(db)
      const { rows: subs } = await sql<{ id: string }>`
        insert into pgsched.webhook_subscriptions (tenant, url, secret) values ('a', 'http://127.0.0.1:9/h', 'sixteen-chars-ok!') returning id`.execute(db)
      const sub = subs[0]?.id as string
      await sql`insert into pgsched.webhook_deliveries (subscription_id, event_seq, event_type, job_id, attempt, ok, duration_ms)
                values (${sub}::uuid, 8, 'started', ${job(1)}::uuid, 1, true, 3)`.execute(db)

      await migrate({ databaseUrl: url })
      await sequenceEvents(db)
      const events = await eventListAfter(db, { after: '0', tenant: null, filter: {}, limit: 100 })
      expect(events.map((e) => [e.id, e.type, e.tenant])).toEqual([
        ['7-0', 'submitted', 'a'],
        ['8-0', 'started', 'a'],
        ['9-0', 'submitted', 'b'],
        ['10-0', 'succeeded', 'a'],
        ['11-0', 'started', 'b'],
      ])
      expect(events[2]).toMatchObject({ executionId: null, attempt: null, queue: 'q', jobType: 'u' })
      // a Last-Event-ID given before the migration ('8') resumes right after that event
      const resumed = await eventListAfter(db, { after: '8', tenant: 'a', filter: {}, limit: 100 })
      expect(resumed.map((e) => e.id)).toEqual(['10-0'])
      // the view shows one row per event, as the table did
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.events`.execute(db)
      expect(rows[0]?.n).toBe(5)
      expect((await webhookDeliveryList(db, { subscriptionId: sub, limit: 10 })).map((d) => d.eventId)).toEqual(['8'])
      // a statement of the previous version (its capture CTE inserting into pgsched.events) still works
      await sql`
        with captured as (
          insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
          select 'succeeded', 'b', ${job(2)}::uuid, ${job(12)}::uuid, 'q', 'u', 1
        )
        select 1`.execute(db)
      await sequenceEvents(db)
      expect((await eventListAfter(db, { after: '11', tenant: 'b', filter: {}, limit: 10 })).map((e) => [e.id, e.type])).toEqual([['12-0', 'succeeded']])
    } finally {
      await db.destroy()
    }
  })
})
