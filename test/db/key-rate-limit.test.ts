/**
 * Rate limits per concurrency key (migration 0027, claim-limited.ts): each key takes only as many
 * executions as it has start slots within the claim horizon, its slots spaced period / limit × 1.07
 * apart and kept in queue_key_slots; executions without a key are not limited per key; with a rate
 * limit on the queue too, each start respects both spacings.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { queueClaimAdmitted } from '../../src/db/queries/claim-admitted.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { QueueClaims } from '../../src/worker/queue-claims.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000a003'
const client = () => createClient({ db: t.db, tenant: 'acme' })
const take = (queue: string, limit = 20) => queueClaimLimited(t.db, { workerId: W, queues: [queue], types: ['k'], limit, leaseMs: 60_000 })
const submit = (queue: string, n: number, concurrencyKey?: string) =>
  client().submitJobs(Array.from({ length: n }, () => ({ type: 'k', queue, ...(concurrencyKey ? { concurrencyKey } : {}) })))
const keysOf = async (ids: string[]) =>
  (await sql<{ k: string | null }>`select concurrency_key as k from pgsched.executions where id = any(${ids}::uuid[]) order by 1`.execute(t.db)).rows.map(
    (r) => r.k,
  )
const slotsAhead = async (queue: string) =>
  (
    await sql<{ k: string; ms: number }>`
      select concurrency_key as k, (extract(epoch from next_start_at - clock_timestamp()) * 1000)::float8 as ms
        from pgsched.queue_key_slots where queue = ${queue} order by 1`.execute(t.db)
  ).rows

describe('rate limits per concurrency key', () => {
  it('starts one execution per key when the next slot of a key is past the horizon, keyless work unlimited', async () => {
    await submit('per-key', 5, 'A')
    await submit('per-key', 5, 'B')
    await submit('per-key', 3)
    // 2 per second per key: slots 535 ms apart, one within the 100 ms horizon
    await sql`select pgsched.set_queue_key_rate_limit('per-key', 2, 1000)`.execute(t.db)
    expect(await executionClaimBatch(t.db, { workerId: W, queues: ['per-key'], types: ['k'], limit: 20, leaseMs: 60_000 })).toEqual([])
    const first = await take('per-key')
    expect(await keysOf(first.claimed.map((c) => c.id))).toEqual(['A', 'B', null, null, null])
    for (const c of first.claimed) expect(c.startDelayMs).toBe(0)
    expect(first.claimed.some((c) => 'concurrencyKey' in c)).toBe(false)
    const slots = await slotsAhead('per-key')
    expect(slots.map((s) => s.k)).toEqual(['A', 'B'])
    for (const s of slots) {
      expect(s.ms).toBeGreaterThan(0)
      expect(s.ms).toBeLessThanOrEqual(535)
    }
    // Both keys' next slots lie past the horizon: nothing more now, and a limit held the claim back.
    await sql`update pgsched.queue_key_slots set next_start_at = clock_timestamp() + interval '1 second' where queue = 'per-key'`.execute(t.db)
    const second = await take('per-key')
    expect(second.claimed).toEqual([])
    expect(second.full).toBe(true)
    // Once a key's slot has come, it takes one more; the other key's slot is not yet.
    await sql`update pgsched.queue_key_slots set next_start_at = clock_timestamp() - interval '1 second' where concurrency_key = 'A'`.execute(t.db)
    const third = await take('per-key')
    expect(await keysOf(third.claimed.map((c) => c.id))).toEqual(['A'])
  })

  it("counts a key per tenant: another tenant's work with the same key is not held back by it", async () => {
    const other = createClient({ db: t.db, tenant: 'globex' })
    await submit('tenants', 3, 'customer-7')
    await other.submitJobs(Array.from({ length: 3 }, () => ({ type: 'k', queue: 'tenants', concurrencyKey: 'customer-7' })))
    await sql`select pgsched.set_queue_key_rate_limit('tenants', 2, 1000)`.execute(t.db)
    const first = await take('tenants')
    const tenantsOf = async (ids: string[]) =>
      (await sql<{ t: string }>`select tenant as t from pgsched.executions where id = any(${ids}::uuid[]) order by 1`.execute(t.db)).rows.map((r) => r.t)
    // one start slot within the horizon for each tenant's customer-7
    expect(await tenantsOf(first.claimed.map((c) => c.id))).toEqual(['acme', 'globex'])
    const { rows } = await sql<{ tenant: string; k: string }>`
      select tenant, concurrency_key as k from pgsched.queue_key_slots where queue = 'tenants' order by 1`.execute(t.db)
    expect(rows).toEqual([
      { tenant: 'acme', k: 'customer-7' },
      { tenant: 'globex', k: 'customer-7' },
    ])
  })

  it('spaces the starts of one key within the horizon', async () => {
    await submit('quick', 5, 'A')
    // 20 per second per key: slots 53.5 ms apart, two within the horizon
    await sql`select pgsched.set_queue_key_rate_limit('quick', 20, 1000)`.execute(t.db)
    const first = await take('quick')
    const delays = first.claimed.map((c) => c.startDelayMs ?? Number.NaN)
    expect(delays).toHaveLength(2)
    expect(delays[0]).toBe(0)
    expect(delays[1]).toBeCloseTo(53.5, 9)
  })

  it('keeps both spacings with a rate limit on the queue too', async () => {
    await submit('both', 6, 'A')
    await submit('both', 6, 'B')
    // queue: 50 per second (21.4 ms apart, 5 in the horizon); per key: 25 per second (42.8 ms apart, 3 in the horizon)
    await sql`select pgsched.set_queue_rate_limit('both', 50, 1000)`.execute(t.db)
    await sql`select pgsched.set_queue_key_rate_limit('both', 25, 1000)`.execute(t.db)
    const { claimed } = await take('both')
    expect(claimed.length).toBeLessThanOrEqual(5)
    expect(claimed.length).toBeGreaterThanOrEqual(4)
    const keys = await sql<{
      id: string
      k: string
    }>`select id, concurrency_key as k from pgsched.executions where id = any(${claimed.map((c) => c.id)}::uuid[])`.execute(t.db)
    const keyOf = new Map(keys.rows.map((r) => [r.id, r.k]))
    const starts = claimed.map((c) => ({ k: keyOf.get(c.id), at: c.startDelayMs ?? Number.NaN })).sort((a, b) => a.at - b.at)
    for (let i = 1; i < starts.length; i++) expect((starts[i]?.at ?? 0) - (starts[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(21.4 - 1e-9)
    for (const k of ['A', 'B']) {
      const mine = starts.filter((s) => s.k === k)
      for (let i = 1; i < mine.length; i++) expect((mine[i]?.at ?? 0) - (mine[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(42.8 - 1e-9)
    }
  })

  it('is never claimed without the settings row lock, and clearing it forgets the slots', async () => {
    await submit('locked', 3, 'A')
    await sql`select pgsched.set_queue_key_rate_limit('locked', 1, 60000)`.execute(t.db)
    expect(await queueClaimAdmitted(t.db, { workerId: W, queues: ['locked'], types: ['k'], limit: 3, leaseMs: 60_000, fair: false })).toBeNull()
    const claims = new QueueClaims({ db: t.db, workerId: W, queues: ['locked'], types: ['k'], leaseMs: 60_000, onError: () => undefined })
    expect(claims.isLimited('locked')).toBe(false) // settings not read yet
    expect((await claims.claim(3)).claimed).toHaveLength(1)
    expect(claims.isLimited('locked')).toBe(true)
    expect((await claims.claim(3)).claimed).toHaveLength(0)
    await sql`select pgsched.set_queue_key_rate_limit('locked', null, null)`.execute(t.db)
    expect(await slotsAhead('locked')).toEqual([])
  })
})
