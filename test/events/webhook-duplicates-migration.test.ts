/**
 * Migration 0064 on a database that already holds repeated webhook subscriptions (one tenant's URL
 * subscribed several times in one queue, as was allowed before): it does not fail, and keeps every
 * one as it was, the later ones marked as repeating the first; from then on no subscription is
 * created or moved onto a URL and queue of its tenant's, the kept ones included.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0064')

const HOOK = 'https://example.com/hooks/pgsched'

describe('migration 0064 (one subscription per tenant, URL and queue)', () => {
  it('keeps the subscriptions that repeated one another, marking the later ones, and refuses new repeats of any of them', async () => {
    const url = before.url
    const { db } = createDb({ databaseUrl: url, poolSize: 2 })
    try {
      // as webhookSubscriptionInsert wrote them before: a subscription and its listener, the same URL three times
      const subscribe = async (tenant: string, target: string, queue: string, events: string[]) => {
        const { rows } = await sql<{ id: string }>`
          with sub as (
            insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret)
            values (${tenant}, ${target}, ${events}::text[], ${queue}, 'sixteen-chars-ok!') returning id, tenant
          ), listener as (
            insert into pgsched.event_listeners (id, tenant, kind, until) select id, tenant, 'webhook', 'infinity' from sub
          )
          select id from sub`.execute(db)
        return rows[0]?.id as string
      }
      const first = await subscribe('a', HOOK, 'default', ['failed'])
      const second = await subscribe('a', HOOK, 'default', ['failed', 'succeeded'])
      const third = await subscribe('a', HOOK, 'default', [])
      const otherQueue = await subscribe('a', HOOK, 'hooks', [])
      const otherTenant = await subscribe('b', HOOK, 'default', [])

      await migrate({ databaseUrl: url })
      const { rows } = await sql<{ id: string; events: string[]; duplicate_of: string | null }>`
        select id, events, duplicate_of from pgsched.webhook_subscriptions order by id`.execute(db)
      expect(rows).toEqual([
        { id: first, events: ['failed'], duplicate_of: null },
        { id: second, events: ['failed', 'succeeded'], duplicate_of: first },
        { id: third, events: [], duplicate_of: first },
        { id: otherQueue, events: [], duplicate_of: null },
        { id: otherTenant, events: [], duplicate_of: null },
      ])
      const { rows: listeners } = await sql<{ n: number }>`select count(*)::int as n from pgsched.event_listeners where kind = 'webhook'`.execute(db)
      expect(listeners[0]?.n).toBe(5)

      const a = createClient({ db, tenant: 'a' }).webhooks
      await expect(a.create({ url: HOOK })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: first })
      // a kept repeat moved to a URL of its own is held to it like any other
      expect((await a.update(second, { url: `${HOOK}/second` })).url).toBe(`${HOOK}/second`)
      await expect(a.create({ url: `${HOOK}/second` })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: second })
      await expect(a.update(otherQueue, { events: ['failed'] })).resolves.toMatchObject({ events: ['failed'] })
      // the first deleted, the repeat still kept sends to the URL: a new one would repeat it
      await a.delete(first)
      await expect(a.create({ url: HOOK })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: third })
      await expect(a.update(second, { url: HOOK })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: third })
      // a change of the kept repeat other than its URL changes nothing else
      expect((await a.update(third, { events: ['succeeded'] })).events).toEqual(['succeeded'])
    } finally {
      await db.destroy()
    }
  })
})
