/**
 * Migration 0068 on a database holding subscriptions whose URLs differ only in the case of their
 * host or a default port (distinct receivers before it): it does not fail, keeps each as it was,
 * marks the later ones as repeating the first, and leaves every subscription enabled, sent the
 * events from its creation on.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0068')

describe('migration 0068 (webhook URLs compared as receivers; disabling)', () => {
  it('marks the subscriptions repeating an earlier one under the new comparison, keeping their URLs, and leaves all enabled', async () => {
    const url = before.url
    const { db } = createDb({ databaseUrl: url, poolSize: 2 })
    try {
      // as webhookSubscriptionInsert wrote them before: a subscription and its listener
      const subscribe = async (tenant: string, target: string) => {
        const { rows } = await sql<{ id: string }>`
          with sub as (
            insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret)
            values (${tenant}, ${target}, '{}', 'default', 'sixteen-chars-ok!') returning id, tenant
          ), listener as (
            insert into pgsched.event_listeners (id, tenant, kind, until) select id, tenant, 'webhook', 'infinity' from sub
          )
          select id from sub`.execute(db)
        return rows[0]?.id as string
      }
      const first = await subscribe('a', 'https://Example.COM/hook')
      const lower = await subscribe('a', 'https://example.com/hook')
      const port = await subscribe('a', 'https://example.com:443/hook')
      const path = await subscribe('a', 'https://example.com/Hook')
      const otherTenant = await subscribe('b', 'https://example.com/hook')

      await migrate({ databaseUrl: url })
      const { rows } = await sql<{ id: string; url: string; duplicate_of: string | null; enabled: boolean; from_creation: boolean }>`
        select id, url, duplicate_of, disabled_at is null as enabled, enabled_at = created_at as from_creation
          from pgsched.webhook_subscriptions order by id`.execute(db)
      expect(rows).toEqual([
        { id: first, url: 'https://Example.COM/hook', duplicate_of: null, enabled: true, from_creation: true },
        { id: lower, url: 'https://example.com/hook', duplicate_of: first, enabled: true, from_creation: true },
        { id: port, url: 'https://example.com:443/hook', duplicate_of: first, enabled: true, from_creation: true },
        { id: path, url: 'https://example.com/Hook', duplicate_of: null, enabled: true, from_creation: true },
        { id: otherTenant, url: 'https://example.com/hook', duplicate_of: null, enabled: true, from_creation: true },
      ])
      const a = createClient({ db, tenant: 'a' }).webhooks
      await expect(a.create({ url: 'https://EXAMPLE.com:443/hook' })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: first })
    } finally {
      await db.destroy()
    }
  })
})
