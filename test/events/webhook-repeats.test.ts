/**
 * Subscriptions kept as repeats of another (duplicate_of: migrations 0064, 0068 and 0071 kept those
 * that subscribed a receiver twice before the rule) when that one is deleted or moved to another
 * receiver: the oldest repeat takes its place under the unique key, the others repeat it, rather
 * than naming a subscription that is gone or sends elsewhere; a new subscription of the receiver is
 * refused naming that repeat.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { WebhookExistsError } from '../../src/errors.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const URL_A = 'https://example.com/hook'

/** A subscription of `url`, and two repeats of it written as the migrations kept them (the API refuses them now). */
async function withRepeats(tenant: string, url: string) {
  const client = createClient({ db: t.db, tenant })
  const first = await client.webhooks.create({ url })
  const { rows } = await sql<{ id: string }>`
    insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret, duplicate_of)
    select ${tenant}, ${url}, '{}', 'default', 'a-kept-secret-123456', ${first.id}::uuid from generate_series(1, 2)
    returning id`.execute(t.db)
  const repeats = rows.map((r) => r.id).sort()
  return { client, first, repeats }
}

async function duplicateOf(ids: readonly string[]) {
  const { rows } = await sql<{ id: string; duplicate_of: string | null }>`
    select id, duplicate_of from pgsched.webhook_subscriptions where id = any(${ids}::uuid[]) order by id`.execute(t.db)
  return rows.map((r) => [r.id, r.duplicate_of])
}

describe('repeats of a subscription', () => {
  it('take its place under the unique key when it is deleted: the oldest holds the receiver, a new one is refused naming it', async () => {
    const { client, first, repeats } = await withRepeats('rep-del', URL_A)
    const [oldest, other] = repeats as [string, string]
    await client.webhooks.delete(first.id)
    expect(await duplicateOf(repeats)).toEqual([
      [oldest, null],
      [other, oldest],
    ])
    const again = client.webhooks.create({ url: URL_A })
    await expect(again).rejects.toThrow(WebhookExistsError)
    await expect(again).rejects.toMatchObject({ existingId: oldest })
    // deleting a repeat leaves the others as they are
    await client.webhooks.delete(other)
    expect(await duplicateOf([oldest])).toEqual([[oldest, null]])
  })

  it('take its place when it moves to another receiver, and not when its URL changes only in spelling', async () => {
    const { client, first, repeats } = await withRepeats('rep-move', URL_A)
    const [oldest, other] = repeats as [string, string]
    // the same receiver (the host's case): still the one the key holds
    await client.webhooks.update(first.id, { url: 'https://EXAMPLE.com/hook' })
    expect(await duplicateOf(repeats)).toEqual([
      [oldest, first.id],
      [other, first.id],
    ])
    await client.webhooks.update(first.id, { url: 'https://example.com/elsewhere' })
    expect(await duplicateOf(repeats)).toEqual([
      [oldest, null],
      [other, oldest],
    ])
    await expect(client.webhooks.create({ url: URL_A })).rejects.toMatchObject({ existingId: oldest })
    // its new receiver is its own
    await expect(client.webhooks.create({ url: 'https://example.com/elsewhere' })).rejects.toMatchObject({ existingId: first.id })
  })
})
