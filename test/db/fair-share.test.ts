/**
 * Fair share between tenants in the claim (migration 0016, claim.ts): in a fair queue, strict
 * priority across tenants, and round-robin between the tenants with due work at the same priority,
 * weighted by pgsched.tenants.weight; combined with a per-key limit and a concurrency limit.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { useTestDb } from '../db.ts'
import { insertExecutions } from '../factories.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000a002'
const as = (tenant: string) => createClient({ db: t.db, tenant })
const claimFair = async (limit: number, queue = 'shared') => {
  const { claimed } = await queueClaimLimited(t.db, { workerId: W, queues: [queue], types: ['k'], limit, leaseMs: 60_000 })
  const ids = claimed.map((c) => c.jobId)
  const { rows } = await sql<{ id: string; tenant: string; priority: number }>`
    select id, tenant, priority from pgsched.jobs where id = any(${ids}::uuid[])`.execute(t.db)
  const byId = new Map(rows.map((r) => [r.id, r]))
  // how many each tenant got (RETURNING gives no order)
  const counts: Record<string, number> = {}
  for (const c of claimed) {
    const tenant = byId.get(c.jobId)?.tenant ?? '?'
    counts[tenant] = (counts[tenant] ?? 0) + 1
  }
  return counts
}
const submit = (tenant: string, n: number, extra: Record<string, unknown> = {}) =>
  as(tenant).submitJobs(Array.from({ length: n }, () => ({ type: 'k', queue: 'shared', ...extra })))

describe('fair share between tenants', () => {
  it('without fair share the oldest due work goes first; with it, tenants take turns at one priority', async () => {
    await submit('big', 50)
    await submit('small', 3)
    // Not fair: the ordinary claim takes big's backlog first.
    expect(await claimFair(10)).toEqual({}) // not a limited queue: its own claim takes nothing
    const plain = await executionClaimBatch(t.db, { workerId: W, queues: ['shared'], types: ['k'], limit: 10, leaseMs: 60_000 })
    expect(plain).toHaveLength(10)
    expect(await claimFair(0)).toEqual({})
    const { rows: owners } = await sql<{ tenant: string }>`select distinct j.tenant from pgsched.jobs j
      where j.id = any(${plain.map((c) => c.jobId)}::uuid[])`.execute(t.db)
    expect(owners).toEqual([{ tenant: 'big' }]) // the oldest due work: all of it big's
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    // The ordinary claim leaves a fair queue alone.
    expect(await executionClaimBatch(t.db, { workerId: W, queues: ['shared'], types: ['k'], limit: 10, leaseMs: 60_000 })).toEqual([])
    expect(await claimFair(6)).toEqual({ big: 3, small: 3 })
    expect(await claimFair(4)).toEqual({ big: 4 })
  })

  it('gives claims of one execution each to the tenant with the fewest running, not to the oldest work', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await submit('old', 20)
    await submit('new', 3)
    const order: string[] = []
    for (let i = 0; i < 8; i++) order.push(...Object.keys(await claimFair(1)))
    // old first (older, both idle), then new (old has 1 running), then by turns: 1+1 against 0+2 …
    expect(order).toEqual(['old', 'new', 'old', 'new', 'old', 'new', 'old', 'old'])
  })

  it('keeps strict priority across tenants and weights the turns', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await sql`insert into pgsched.tenants (name, weight) values ('heavy', 3)`.execute(t.db)
    await submit('light', 10)
    await submit('heavy', 10)
    await submit('urgent', 2, { priority: 5 })
    expect(await claimFair(2)).toEqual({ urgent: 2 })
    // weight 3 against 1, nothing of theirs running: heavy's turns count 1/3, 2/3, 1, 4/3 … and
    // light's 1, 2 …; ties go to the older (light): heavy, heavy, light, heavy. In the next claim,
    // with 3 and 1 running, heavy counts 4/3, 5/3, 2 … and light 2, 3: the same shares
    expect(await claimFair(4)).toEqual({ heavy: 3, light: 1 })
    expect(await claimFair(4)).toEqual({ heavy: 3, light: 1 })
  })

  it('takes a late tenant within one claim batch even behind a large backlog', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    // 20,000 of one tenant in one statement, then 3 of another
    await insertExecutions(t.db, 20_000, { job: { tenant: 'flood', queue: 'shared', type: 'k' }, runAt: new Date(Date.now() - 60_000) })
    await submit('late', 3)
    expect(await claimFair(20)).toEqual({ flood: 17, late: 3 })
  })

  it('reads a few executions per tenant yet keeps strict priority when one tenant is far ahead', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    for (let i = 0; i < 10; i++) await submit(`t${i}`, 5)
    await submit('urgent', 100, { priority: 5 })
    // 11 tenants offer about 2 × 50 / 11 each: urgent's offer ends at its sentinel, and the claim
    // claims again with larger offers rather than take lower priorities
    expect(await claimFair(50)).toEqual({ urgent: 50 })
    expect(await claimFair(60)).toEqual({ urgent: 50, t0: 1, t1: 1, t2: 1, t3: 1, t4: 1, t5: 1, t6: 1, t7: 1, t8: 1, t9: 1 })
  })

  it("keeps claiming when a per-key limit drops most of a tenant's offer", async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await sql`select pgsched.set_queue_key_concurrency_limit('shared', 1)`.execute(t.db)
    await sql`insert into pgsched.tenants (name, weight) values ('a', 2)`.execute(t.db)
    await submit('b', 1, { concurrencyKey: 'K' })
    await submit('a', 20, { concurrencyKey: 'K' })
    await submit('c', 5)
    // a (weight 2) ranks first and takes K's one slot; its other offered rows and b's are held by
    // the key limit; c's keyless work is taken, before a's sentinel and (claiming again with larger
    // offers) after it
    expect(await claimFair(10)).toEqual({ a: 1, c: 5 })
    expect(await claimFair(10)).toEqual({})
  })

  it('applies a concurrency limit and a per-key limit in a fair queue', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await sql`select pgsched.set_queue_concurrency_limit('shared', 5)`.execute(t.db)
    await sql`select pgsched.set_queue_key_concurrency_limit('shared', 1)`.execute(t.db)
    await submit('x', 6, { concurrencyKey: 'one' })
    await submit('y', 2, { concurrencyKey: 'two' })
    await submit('y', 4)
    // one of key "one" (x's only turn), one of key "two" and three keyless (y): five, the limit
    expect(await claimFair(10)).toEqual({ x: 1, y: 4 })
    expect(await claimFair(10)).toEqual({})
  })
})
