/**
 * A subscription's disabling decided by a failed attempt while another worker records a successful
 * one: the failed attempt's statement judges the subscription on what it read, and must not disable
 * it once a success committed in between has shown the receiver answering.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { webhookDeliveryInsert, webhookSubscriptionInsert } from '../../src/db/queries/webhooks.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

const attempt = (subscriptionId: string, ok: boolean) => ({
  subscriptionId,
  eventId: '1-0',
  eventType: 'succeeded' as const,
  jobId: uuidV7(),
  attempt: 1,
  statusCode: ok ? 200 : 500,
  ok,
  error: ok ? null : 'POST answered 500',
  durationMs: 3,
  willRetry: !ok,
})

describe('webhook subscription disabling, raced by a successful attempt', () => {
  it('does not disable a subscription whose successful attempt committed while the failed one waited for its row', async () => {
    const written = await webhookSubscriptionInsert(t.db, {
      tenant: 'race',
      url: 'https://example.com/hook',
      events: [],
      queue: 'default',
      secret: 'sixteen-chars-ok!',
      maxPerTenant: 100,
    })
    const row = 'row' in written ? written.row : undefined
    const id = row?.id as string
    // failing for a while: three failed attempts recorded (by workers that never disable)
    for (let i = 0; i < 3; i++) await webhookDeliveryInsert(t.db, attempt(id, false))

    // a worker records a successful attempt; its transaction has not committed yet
    let commit!: () => void
    const committed = new Promise<void>((resolve) => {
      commit = resolve
    })
    let recorded!: () => void
    const successRecorded = new Promise<void>((resolve) => {
      recorded = resolve
    })
    const success = t.db.transaction().execute(async (trx) => {
      await webhookDeliveryInsert(trx, attempt(id, true))
      recorded()
      await committed
    })
    await successRecorded
    // another records a failed one, past both thresholds: its statement waits for the row
    const failure = webhookDeliveryInsert(t.db, { ...attempt(id, false), disable: { afterMs: 0, afterFailures: 3 } })
    await waitFor(
      async () => {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and query like '%webhook_deliveries%'`.execute(t.db)
        return (rows[0]?.n ?? 0) > 0
      },
      { timeoutMs: 10_000, what: 'the failed attempt waiting for the subscription row' },
    )
    commit()
    await success
    expect(await failure).toBeUndefined()
    const { rows } = await sql<{ disabled_at: Date | null; failing_since: Date | null }>`
      select disabled_at, failing_since from pgsched.webhook_subscriptions where id = ${id}::uuid`.execute(t.db)
    // not disabled: the receiver answered in between; the failed attempt starts a new failing spell
    expect(rows).toEqual([{ disabled_at: null, failing_since: expect.any(Date) }])
  })
})
