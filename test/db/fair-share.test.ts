/**
 * Fair share between tenants in the claim (migrations 0016 and 0031, claim.ts): in a fair queue,
 * strict priority across tenants, and turns between the tenants with due work at the same priority
 * (each execution's fair_key: its tenant's previous one plus 1 / weight, or the head of the queue),
 * weighted by pgsched.tenants.weight; combined with a per-key limit and a concurrency limit.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { FAIR_KEYS_PER_TENANT, fairKeysAssign, fairShareSettle } from '../../src/db/queries/queues.ts'
import { executionReleaseMany } from '../../src/db/queries/lease.ts'
import { QueueClaims } from '../../src/worker/queue-claims.ts'
import { useTestDb } from '../db.ts'
import { insertExecutions } from '../factories.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000a002'
const as = (tenant: string) => createClient({ db: t.db, tenant })
const claimFair = async (limit: number, queue = 'shared') => {
  // as the worker does before each claim of a fair queue
  await fairKeysAssign(t.db, queue)
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
    await as('admin').queues.setFairShare('shared', true)
    // The ordinary claim leaves a fair queue alone.
    expect(await executionClaimBatch(t.db, { workerId: W, queues: ['shared'], types: ['k'], limit: 10, leaseMs: 60_000 })).toEqual([])
    expect(await claimFair(6)).toEqual({ big: 3, small: 3 })
    expect(await claimFair(4)).toEqual({ big: 4 })
  })

  it('gives claims of one execution each by turns, not to the oldest work', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await submit('old', 20)
    await submit('new', 3)
    const order: string[] = []
    for (let i = 0; i < 8; i++) order.push(...Object.keys(await claimFair(1)))
    // new starts at the head (old's first turn): old first (older), then new, then by turns …
    expect(order).toEqual(['old', 'new', 'old', 'new', 'old', 'new', 'old', 'old'])
  })

  it("hands a fair claim's executions to the worker in their turns, not the older tenant's first", async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await insertExecutions(t.db, 20, { job: { tenant: 'old', queue: 'shared', type: 'k' }, runAt: new Date(Date.now() - 60_000) })
    await submit('new', 3)
    const claims = new QueueClaims({ db: t.db, workerId: W, queues: ['shared'], types: ['k'], leaseMs: 60_000, onError: (e) => expect.fail(String(e)) })
    const { claimed } = await claims.claim(8)
    const { rows } = await sql<{
      id: string
      tenant: string
    }>`select id, tenant from pgsched.jobs where id = any(${claimed.map((c) => c.jobId)}::uuid[])`.execute(t.db)
    const tenantOf = new Map(rows.map((r) => [r.id, r.tenant]))
    // the buffer's order: by priority, then claim, then as handed over (by age this would be old × 5, then new × 3)
    expect(claimed.map((c) => tenantOf.get(c.jobId))).toEqual(['old', 'new', 'old', 'new', 'old', 'new', 'old', 'old'])
  })

  it('moves the clock only from the claims that ask for it', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await submit('a', 10)
    const clock = async () => (await sql<{ fair_key: number }>`select fair_key from pgsched.fair_clocks where queue = 'shared'`.execute(t.db)).rows
    const claim = (fairClock?: boolean) =>
      executionClaimBatch(t.db, {
        workerId: W,
        queues: ['shared'],
        types: ['k'],
        limit: 2,
        leaseMs: 60_000,
        fairOnly: true,
        ...(fairClock === undefined ? {} : { fairClock }),
      })
    expect(await claim(false)).toHaveLength(2)
    expect(await clock()).toEqual([])
    expect(await claim()).toHaveLength(2)
    expect(await clock()).toEqual([{ fair_key: 3 }]) // the highest turn taken: a's fourth (0-based)
  })

  it('keeps strict priority across tenants and weights the turns', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await sql`insert into pgsched.tenants (name, weight) values ('heavy', 3)`.execute(t.db)
    await submit('light', 10)
    await submit('heavy', 10)
    await submit('urgent', 2, { priority: 5 })
    expect(await claimFair(2)).toEqual({ urgent: 2 })
    // weight 3 against 1: light's turns are 0, 1, 2 …, heavy's (from the head, 0) 0, 1/3, 2/3, 1 …;
    // ties go to the older (light): light, heavy, heavy, heavy; then light 1, heavy 1, 4/3, 5/3
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

  it('keeps strict priority across tenants when one tenant is far ahead', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    for (let i = 0; i < 10; i++) await submit(`t${i}`, 5)
    await submit('urgent', 100, { priority: 5 })
    expect(await claimFair(50)).toEqual({ urgent: 50 })
    expect(await claimFair(60)).toEqual({ urgent: 50, t0: 1, t1: 1, t2: 1, t3: 1, t4: 1, t5: 1, t6: 1, t7: 1, t8: 1, t9: 1 })
  })

  it("passes over the executions a per-key limit holds and takes the others' turns", async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await sql`select pgsched.set_queue_key_concurrency_limit('shared', 1)`.execute(t.db)
    await sql`insert into pgsched.tenants (name, weight) values ('a', 2)`.execute(t.db)
    await submit('b', 1, { concurrencyKey: 'K' })
    await submit('a', 20, { concurrencyKey: 'K' })
    await submit('c', 5)
    // b, a and c all start at the head (turn 0, a's turns 1/2 apart): b takes its K's one slot and a
    // its own K's (keys are counted per tenant); a's other 19 are held by the key limit; c's keyless
    // ones are taken
    expect(await claimFair(10)).toEqual({ a: 1, b: 1, c: 5 })
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

  it("gives executions that come due later their turns when they come due: one tenant's burst does not hold back another", async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    const past = (ms: number) => new Date(Date.now() - ms)
    // written ahead, as a retry or a recurring fire time is: they wait for their keys
    await insertExecutions(t.db, 3000, { job: { tenant: 'burst', queue: 'shared', type: 'k' }, runAt: past(60_000) })
    await insertExecutions(t.db, 3, { job: { tenant: 'other', queue: 'shared', type: 'k' }, runAt: past(30_000) })
    await insertExecutions(t.db, 5, { job: { tenant: 'later', queue: 'shared', type: 'k' }, runAt: new Date(Date.now() + 3_600_000) })
    expect(await claimFair(20)).toEqual({ burst: 17, other: 3 })
    // a bounded number per tenant got keys; what is not due yet still waits
    const { rows } = await sql<{ tenant: string; keyed: number; waiting: number }>`
      select tenant, count(*) filter (where fair_key < 'infinity')::int as keyed, count(*) filter (where fair_key = 'infinity')::int as waiting
        from pgsched.due group by tenant order by tenant`.execute(t.db)
    expect(rows).toEqual([
      { tenant: 'burst', keyed: FAIR_KEYS_PER_TENANT - 17, waiting: 3000 - FAIR_KEYS_PER_TENANT },
      { tenant: 'later', keyed: 0, waiting: 5 },
    ])
    // the next assignment tops burst's turns from the head up to the bound; past it, each gives a
    // hundredth of it (placed behind the rest), not the whole bound again
    const keyed = async () =>
      (await sql<{ keyed: number }>`select count(*)::int as keyed from pgsched.due where tenant = 'burst' and fair_key < 'infinity'`.execute(t.db)).rows[0]
        ?.keyed
    expect(await fairKeysAssign(t.db, 'shared')).toBe(17)
    expect(await keyed()).toBe(FAIR_KEYS_PER_TENANT)
    expect(await fairKeysAssign(t.db, 'shared')).toBe(FAIR_KEYS_PER_TENANT / 100)
    expect(await keyed()).toBe(FAIR_KEYS_PER_TENANT + FAIR_KEYS_PER_TENANT / 100)
  })

  it('places the waiting executions of a tenant whose turns run far ahead, and measures its turns from the head, not from one that is stuck', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    // one of a type no worker here runs keeps turn 0; the client keys 1,500 more as it writes them
    await submit('busy', 1, { type: 'unserved' })
    await submit('busy', 1_500)
    expect(await claimFair(600)).toEqual({ busy: 600 }) // the claims are at turn 600
    // retries, say: written ahead, due now, waiting for their keys
    await insertExecutions(t.db, 120, { job: { tenant: 'busy', queue: 'shared', type: 'k' }, runAt: new Date(Date.now() - 1_000) })
    // busy's latest turn (1,500) is 900 turns from the head (600), whatever the stuck turn 0: room for 99
    // (measured from turn 0 it would be the floor, 10)
    expect(await fairKeysAssign(t.db, 'shared')).toBe(99)
    const { rows } = await sql<{ fair_key: number }>`select max(fair_key) as fair_key from pgsched.due where tenant = 'busy' and fair_key < 'infinity'`.execute(
      t.db,
    )
    expect(rows).toEqual([{ fair_key: 1_599 }]) // behind the rest of its turns
  })

  it('keys what the SQL submit and a hand-back write in a fair queue when a claim comes', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    await submit('client', 4)
    await sql`select pgsched.submit_job('k', queue => 'shared', tenant => 'sql')`.execute(t.db)
    const { rows: before } = await sql<{ tenant: string; fair_key: number }>`select tenant, fair_key from pgsched.due order by tenant, fair_key`.execute(t.db)
    // the client's submit keyed its executions (turns 0 … 3); the SQL one waits
    expect(before).toEqual([
      { tenant: 'client', fair_key: 0 },
      { tenant: 'client', fair_key: 1 },
      { tenant: 'client', fair_key: 2 },
      { tenant: 'client', fair_key: 3 },
      { tenant: 'sql', fair_key: Number.POSITIVE_INFINITY },
    ])
    // sql's execution starts at the head: the second of the first two turns
    expect(await claimFair(2)).toEqual({ client: 1, sql: 1 })
    const { claimed } = await queueClaimLimited(t.db, { workerId: W, queues: ['shared'], types: ['k'], limit: 1, leaseMs: 60_000 })
    expect(claimed).toHaveLength(1)
    await executionReleaseMany(t.db, { workerId: W, leases: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt })), started: false })
    const { rows: back } = await sql<{ fair_key: number }>`select fair_key from pgsched.due where execution_id = ${claimed[0]?.id}::uuid`.execute(t.db)
    expect(back).toEqual([{ fair_key: Number.POSITIVE_INFINITY }])
    // handed back, it takes the turn after its tenant's latest (3)
    expect(await fairKeysAssign(t.db, 'shared')).toBe(1)
    const { rows: again } = await sql<{ fair_key: number }>`select fair_key from pgsched.due where execution_id = ${claimed[0]?.id}::uuid`.execute(t.db)
    expect(again).toEqual([{ fair_key: 4 }])
    expect(await claimFair(10)).toEqual({ client: 3 })
  })

  it('marks the due executions when fair share is turned on, and clears their keys when it is turned off', async () => {
    await submit('a', 3)
    const keys = async () =>
      (await sql<{ fair_key: number | null }>`select fair_key from pgsched.due where queue = 'shared' order by fair_key`.execute(t.db)).rows.map(
        (r) => r.fair_key,
      )
    expect(await keys()).toEqual([null, null, null])
    await as('admin').queues.setFairShare('shared', true)
    expect(await keys()).toEqual([Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY])
    expect(await fairKeysAssign(t.db, 'shared')).toBe(3)
    expect(await keys()).toEqual([0, 1, 2])
    await as('admin').queues.setFairShare('shared', false)
    expect(await keys()).toEqual([null, null, null])
  })

  it('records a change made by the setter as settled, so the reaper does not mark the queue again', async () => {
    await submit('a', 3)
    await as('admin').queues.setFairShare('shared', true)
    const state = async () =>
      (
        await sql<{ waiting: boolean; settled: boolean }>`
          select fair_waiting_for is not null as waiting, fair_settled_at is not null as settled from pgsched.queues where name = 'shared'`.execute(t.db)
      ).rows
    // (the transactions open at the change, anywhere on the server, had ended when the setter returned)
    expect(await state()).toEqual([{ waiting: true, settled: true }])
    // executions left unmarked now stay so: the reaper has nothing left to settle (it would mark all 3)
    await sql`update pgsched.due set fair_key = null where queue = 'shared'`.execute(t.db)
    expect(await fairShareSettle(t.db)).toBe(0)
    expect(await fairShareSettle(t.db)).toBe(0)
    // a change in SQL is still the reaper's to settle: it marks them
    await sql`select pgsched.set_queue_fair_share('shared', false)`.execute(t.db)
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    expect(await state()).toEqual([{ waiting: false, settled: false }])
    let marked = 0
    await waitFor(
      async () => {
        marked += await fairShareSettle(t.db)
        return (await state())[0]?.settled === true
      },
      { what: 'the reaper to settle the change', timeoutMs: 10_000 },
    )
    expect(marked).toBe(3)
    expect(await claimFair(5)).toEqual({ a: 3 })
  })

  it('marks, once they commit, the executions that transactions in flight wrote as fair share was turned on in SQL', async () => {
    const slow = new pg.Client({ connectionString: t.url })
    await slow.connect()
    try {
      // a submit in flight, written while the queue was not fair: no key, not waiting for one
      await slow.query('begin')
      await slow.query(`select pgsched.submit_job('k', queue => 'shared', tenant => 'slow')`)
      await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
      // the reaper notes the change, then waits while the submit is in flight
      expect(await fairShareSettle(t.db)).toBe(0)
      expect(await fairShareSettle(t.db)).toBe(0)
      await slow.query('commit')
      const key = async () => (await sql<{ fair_key: number | null }>`select fair_key from pgsched.due where tenant = 'slow'`.execute(t.db)).rows
      expect(await key()).toEqual([{ fair_key: null }])
      expect(await claimFair(5)).toEqual({})
      // once it has ended, the next pass marks it: the next claim gives it its turn
      expect(await fairShareSettle(t.db)).toBe(1)
      expect(await key()).toEqual([{ fair_key: Number.POSITIVE_INFINITY }])
      expect(await fairShareSettle(t.db)).toBe(0)
      expect(await claimFair(5)).toEqual({ slow: 1 })
    } finally {
      await slow.end()
    }
  })

  it('leaves no row locked by a mark that began while another was marking the same executions', async () => {
    await submit('a', 50) // not a fair queue yet: no keys
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    const first = new pg.Client({ connectionString: t.url })
    const second = new pg.Client({ connectionString: t.url })
    await Promise.all([first.connect(), second.connect()])
    try {
      await first.query('begin')
      expect((await first.query(`select pgsched.fair_share_mark('shared') as n`)).rows).toEqual([{ n: 50 }])
      // the reaper's mark, say, while the setter's is uncommitted: it waits for it
      await second.query('begin')
      const secondPid = (await second.query('select pg_backend_pid() as pid')).rows[0].pid
      const secondMark = second.query(`select pgsched.fair_share_mark('shared') as n`)
      await waitFor(
        async () =>
          (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where pid = ${secondPid}::int and wait_event_type = 'Lock'`.execute(t.db))
            .rows[0]?.n === 1,
        { what: 'the second mark to wait for the first', timeoutMs: 10_000 },
      )
      await first.query('commit')
      expect((await secondMark).rows).toEqual([{ n: 0 }])
      // its transaction still open, it holds none of the rows the first marked: their keys can be given
      expect(await fairKeysAssign(t.db, 'shared')).toBe(50)
      await second.query('commit')
    } finally {
      await Promise.all([first.end(), second.end()])
    }
  })

  it('starts a tenant new to the queue where the claims are, not at work nobody claims', async () => {
    await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
    // an execution of a type no worker here runs keeps the lowest key pending
    await submit('stuck', 1, { type: 'unserved' })
    await submit('busy', 200)
    expect(await claimFair(100)).toEqual({ busy: 100 })
    // busy's turns 0 … 99 run: a newcomer starts at 99, level with busy's next turns, not at 0
    await submit('new', 50)
    expect(await claimFair(10)).toEqual({ busy: 5, new: 5 })
  })

  it('marks the pending executions when the reaper first sees fair share turned on in SQL, even while other transactions are open', async () => {
    await submit('a', 3)
    const other = new pg.Client({ connectionString: t.url })
    await other.connect()
    try {
      await other.query('begin')
      await other.query('select 1')
      await sql`select pgsched.set_queue_fair_share('shared', true)`.execute(t.db)
      expect(await claimFair(5)).toEqual({})
      expect(await fairShareSettle(t.db)).toBe(3)
      expect(await claimFair(5)).toEqual({ a: 3 })
      await other.query('commit')
    } finally {
      await other.end()
    }
  })
})
