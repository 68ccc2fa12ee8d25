/**
 * Migration 0082: a webhook URL's host with a trailing dot (`example.com.`) is the same receiver as
 * without it. Applied to a database holding both forms in one tenant's queue, it keeps both as they
 * were and marks the later one as repeating the first; afterwards a new subscription of either form
 * is refused (409), naming the first.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore, useTestDb } from '../db.ts'

const before = useDatabaseBefore('0082')
const t = useTestDb()

describe('migration 0082 (a host’s trailing dot in webhook URLs)', () => {
  it('marks a subscription whose URL differs from an earlier one only by the trailing dot as its repeat, and refuses a new one', async () => {
    const { db } = createDb({ databaseUrl: before.url, poolSize: 2 })
    try {
      // as webhookSubscriptionInsert writes them: a subscription and its listener
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
      const first = await subscribe('a', 'https://example.com/hook')
      const dotted = await subscribe('a', 'https://Example.COM./hook')
      const otherHost = await subscribe('a', 'https://example.co/hook')
      // a repeat of the dotted one, as an earlier migration kept it
      const { rows: repeat } = await sql<{ id: string }>`
        insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret, duplicate_of)
        values ('a', 'https://example.com.:443/hook', '{}', 'default', 'sixteen-chars-ok!', ${dotted}::uuid) returning id`.execute(db)
      const repeatOfDotted = repeat[0]?.id as string
      await migrate({ databaseUrl: before.url })
      const { rows } = await sql<{ id: string; url: string; duplicate_of: string | null }>`
        select id, url, duplicate_of from pgsched.webhook_subscriptions order by id`.execute(db)
      expect(rows).toEqual([
        { id: first, url: 'https://example.com/hook', duplicate_of: null },
        { id: dotted, url: 'https://Example.COM./hook', duplicate_of: first },
        { id: otherHost, url: 'https://example.co/hook', duplicate_of: null },
        { id: repeatOfDotted, url: 'https://example.com.:443/hook', duplicate_of: first },
      ])
      // (and the repeats migration 0073 pointed at their receiver's subscription stay so: its test)
      const a = createClient({ db, tenant: 'a' }).webhooks
      await expect(a.create({ url: 'https://example.com.:443/hook' })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: first })
    } finally {
      await db.destroy()
    }
  })

  it('keys a host with and without its trailing dot alike, and nothing else', async () => {
    const key = async (u: string) => (await sql<{ k: string }>`select pgsched.webhook_url_key(${u}) as k`.execute(t.db)).rows[0]?.k
    expect(await key('https://example.com./a')).toBe('https://example.com/a')
    expect(await key('https://example.com.:8443/a')).toBe('https://example.com:8443/a')
    expect(await key('https://example.com/a.')).toBe('https://example.com/a.')
    expect(await key('https://u.@example.com/a')).toBe('https://u.@example.com/a')
    expect(await key('https://[::1]/a')).toBe('https://[::1]/a')
  })
})
