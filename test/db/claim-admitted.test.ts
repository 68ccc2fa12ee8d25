/**
 * The admitted claim of a limited queue (migration 0027, claim-admitted.ts): taken without the
 * settings row lock and checked against the limits at the end of the same statement. A claim that
 * would exceed a limit is undone whole; claims admitted at once never exceed the concurrency limit
 * together; a rate-limited claim takes its start slots; QueueClaims falls back to the locked claim.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { queueClaimAdmitted } from '../../src/db/queries/claim-admitted.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { executionClaimBatchQuery } from '../../src/db/queries/claim.ts'
import { fairKeysAssign, queueSetConcurrencyLimit, queueSetRateLimit } from '../../src/db/queries/queues.ts'
import { earlyStartMs, QueueClaims } from '../../src/worker/queue-claims.ts'
import { useTestDb } from '../db.ts'
import { setExecutionState } from '../factories.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000a002'
const client = (tenant = 'acme') => createClient({ db: t.db, tenant })
const admitted = async (queue: string, limit: number, fair = false) => {
  // as the worker does before claiming a fair queue: the executions waiting for their turn get it
  if (fair) await fairKeysAssign(t.db, queue)
  return queueClaimAdmitted(t.db, { workerId: W, queues: [queue], types: ['k'], limit, leaseMs: 60_000, fair })
}
const running = async (queue: string) =>
  (await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where state = 'running' and queue = ${queue}`.execute(t.db)).rows[0]?.n

describe('admitted claims of limited queues', () => {
  it('admits a claim within the concurrency limit and undoes one over it', async () => {
    await client().submitJobs(Array.from({ length: 10 }, () => ({ type: 'k', queue: 'narrow' })))
    await sql`select pgsched.set_queue_concurrency_limit('narrow', 4)`.execute(t.db)
    const first = await admitted('narrow', 3)
    expect(first?.claimed).toHaveLength(3)
    expect(first?.running).toBe(3)
    expect(await admitted('narrow', 2)).toBeNull() // 3 + 2 > 4: nothing taken
    expect(await running('narrow')).toBe(3)
    expect((await admitted('narrow', 1))?.claimed).toHaveLength(1)
    expect(await running('narrow')).toBe(4)
  })

  it('counts the running executions only when the bound it keeps of them says a claim may not fit', async () => {
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'k', queue: 'bounded' })))
    await sql`select pgsched.set_queue_concurrency_limit('bounded', 10)`.execute(t.db)
    const bound = async () => (await sql<{ b: number | null }>`select running_bound as b from pgsched.queues where name = 'bounded'`.execute(t.db)).rows[0]?.b
    const first = await admitted('bounded', 4)
    expect(first?.running).toBe(4) // no bound yet: counted
    expect(await bound()).toBe(4)
    // the 4 end: the bound stays at 4 (an upper bound), and the next claim is added to it uncounted
    // (each job here has one execution: finishing the claimed ones' jobs finishes exactly them)
    expect(await setExecutionState(t.db, { jobIds: first?.claimed.map((c) => c.jobId) ?? [], state: 'succeeded' })).toBe(4)
    expect(await running('bounded')).toBe(0)
    // uncounted, it says nothing of the running executions (the bound, 8, overstates them: 4 run)
    expect((await admitted('bounded', 4))?.running).toBeNull()
    expect(await bound()).toBe(8)
    // 8 + 4 > 10 by the bound: counted (4 run), so it fits after all, and the bound is exact again
    expect((await admitted('bounded', 4))?.running).toBe(8)
    expect(await bound()).toBe(8)
    // a change of the limit, and a claim under the lock, clear it
    await sql`select pgsched.set_queue_concurrency_limit('bounded', 9)`.execute(t.db)
    expect(await bound()).toBeNull()
    expect((await admitted('bounded', 1))?.running).toBe(9)
    await queueClaimLimited(t.db, { workerId: W, queues: ['bounded'], types: ['k'], limit: 1, leaseMs: 60_000 })
    expect(await bound()).toBeNull()
    expect(await admitted('bounded', 1)).toBeNull()
    expect(await running('bounded')).toBe(9)
  })

  it('counts, once a new concurrency limit is set, what a claim in flight without the limit took', async () => {
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'k', queue: 'late' })))
    // an ordinary claim (the queue has no limit yet) has taken 5 and not committed
    const inFlight = new pg.Client({ connectionString: t.url })
    await inFlight.connect()
    try {
      await inFlight.query('begin')
      const claim = executionClaimBatchQuery({ workerId: W, queues: ['late'], types: ['k'], limit: 5, leaseMs: 60_000 }).compile(t.db)
      expect((await inFlight.query(claim.sql, [...claim.parameters])).rows).toHaveLength(5)
      // the limit commits (the setter's first step, here alone): an admitted claim cannot see those 5,
      // counts 0 running and takes 1
      await sql`select pgsched.set_queue_concurrency_limit('late', 6)`.execute(t.db)
      expect((await admitted('late', 1))?.running).toBe(1)
      // the setter waits for the claim in flight
      let returned = false
      const set = queueSetConcurrencyLimit(t.db, 'late', 6).then(() => {
        returned = true
      })
      await new Promise((r) => setTimeout(r, 200))
      expect(returned).toBe(false)
      await inFlight.query('commit')
      await set
      // 6 run: once the setter returned, no claim may add one
      expect(await running('late')).toBe(6)
      expect(await admitted('late', 1)).toBeNull()
      expect(await running('late')).toBe(6)
    } finally {
      await inFlight.end()
    }
  })

  it('never exceeds the concurrency limit with many admitted claims at once', async () => {
    await client().submitJobs(Array.from({ length: 40 }, () => ({ type: 'k', queue: 'crowd' })))
    await sql`select pgsched.set_queue_concurrency_limit('crowd', 7)`.execute(t.db)
    const results = await Promise.all(Array.from({ length: 12 }, () => admitted('crowd', 3)))
    const taken = results.flatMap((r) => r?.claimed ?? [])
    expect(taken.length).toBeLessThanOrEqual(7)
    expect(taken.length).toBeGreaterThanOrEqual(3)
    expect(await running('crowd')).toBe(taken.length)
    expect(new Set(taken.map((c) => c.id)).size).toBe(taken.length)
  })

  it('gives a rate-limited claim evenly spaced start slots and undoes one past the horizon', async () => {
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'k', queue: 'paced' })))
    await sql`select pgsched.set_queue_rate_limit('paced', 50, 1000)`.execute(t.db)
    // Slots 1000 / 50 × 1.07 = 21.4 ms apart: 4 starts span 64.2 ms, within the 100 ms horizon.
    const first = await admitted('paced', 4)
    const delays = first?.claimed.map((c) => c.startDelayMs ?? Number.NaN) ?? []
    expect(delays).toHaveLength(4)
    expect(delays[0]).toBe(0)
    for (const [i, d] of delays.entries()) expect(d).toBeCloseTo(i * 21.4, 6)
    // The slots moved 4 × 21.4 ms past the clock read when they were taken (after the rows were).
    const { rows } = await sql<{ next_ms: number; now_ms: number }>`
      select (extract(epoch from next_start_at) * 1000)::float8 as next_ms, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
        from pgsched.queues where name = 'paced'`.execute(t.db)
    const startedAtMs = first?.claimed[0]?.startedAtMs ?? Number.NaN
    expect(rows[0]?.next_ms).toBeGreaterThanOrEqual(startedAtMs + 85.6 - 0.01)
    expect(rows[0]?.next_ms).toBeLessThanOrEqual((rows[0]?.now_ms ?? 0) + 85.6 + 0.01)
    // Slots taken up to a second ahead: no start of a new claim fits the 100 ms horizon.
    await sql`update pgsched.queues set next_start_at = clock_timestamp() + interval '1 second' where name = 'paced'`.execute(t.db)
    expect(await admitted('paced', 1)).toBeNull()
    expect(await running('paced')).toBe(4)
  })

  it('undoes the claim of a queue paused, given a per-key limit or turned fair since it was planned', async () => {
    await client().submitJobs(Array.from({ length: 3 }, () => ({ type: 'k', queue: 'moving' })))
    await sql`select pgsched.set_queue_concurrency_limit('moving', 100)`.execute(t.db)
    await sql`select pgsched.pause_queue('moving')`.execute(t.db)
    expect(await admitted('moving', 1)).toBeNull()
    await sql`select pgsched.resume_queue('moving')`.execute(t.db)
    await sql`select pgsched.set_queue_key_concurrency_limit('moving', 1)`.execute(t.db)
    expect(await admitted('moving', 1)).toBeNull()
    await sql`select pgsched.set_queue_key_concurrency_limit('moving', null)`.execute(t.db)
    await client().queues.setFairShare('moving', true)
    expect(await admitted('moving', 1, false)).toBeNull()
    expect(await running('moving')).toBe(0)
    expect((await admitted('moving', 1, true))?.claimed).toHaveLength(1)
  })

  it('takes turns between tenants in a fair queue', async () => {
    await client('big').submitJobs(Array.from({ length: 20 }, () => ({ type: 'k', queue: 'shared' })))
    await client('small').submitJobs(Array.from({ length: 2 }, () => ({ type: 'k', queue: 'shared' })))
    await client().queues.setFairShare('shared', true)
    const got = await admitted('shared', 4, true)
    const { rows } = await sql<{ tenant: string }>`
      select tenant from pgsched.executions where id = any(${got?.claimed.map((c) => c.id) ?? []}::uuid[])`.execute(t.db)
    expect(rows.map((r) => r.tenant).sort()).toEqual(['big', 'big', 'small', 'small'])
  })

  it('QueueClaims claims without the lock while the limit has room, and under it once the limit is near', async () => {
    await client().submitJobs(Array.from({ length: 30 }, () => ({ type: 'k', queue: 'capped' })))
    await sql`select pgsched.set_queue_concurrency_limit('capped', 12)`.execute(t.db)
    const errors: unknown[] = []
    const claims = new QueueClaims({ db: t.db, workerId: W, queues: ['capped'], types: ['k'], leaseMs: 60_000, onError: (e) => errors.push(e) })
    // the first claim learns what runs (under the lock), the next ones go without it while 12 is not reached
    expect((await claims.claim(4)).claimed).toHaveLength(4)
    expect((await claims.claim(4)).claimed).toHaveLength(4)
    // another claimer takes 3 behind this one's back: 11 run, and this one's view says 8
    expect((await admitted('capped', 3))?.claimed).toHaveLength(3)
    // 8 + 4 fits the limit as last seen, so it is tried without the lock and refused (11 + 4 > 12):
    // the claim under the lock takes the 1 left
    const last = await claims.claim(4)
    expect(last.claimed).toHaveLength(1)
    expect(last.full).toBe(true)
    expect(await running('capped')).toBe(12)
    expect(errors).toEqual([])
  })

  it('QueueClaims goes on claiming without the lock while what it claimed ends, however high the bound of the running ones', async () => {
    await client().submitJobs(Array.from({ length: 60 }, () => ({ type: 'k', queue: 'roomy' })))
    await sql`select pgsched.set_queue_concurrency_limit('roomy', 30)`.execute(t.db)
    const bound = async () => (await sql<{ b: number | null }>`select running_bound as b from pgsched.queues where name = 'roomy'`.execute(t.db)).rows[0]?.b
    const claims = new QueueClaims({ db: t.db, workerId: W, queues: ['roomy'], types: ['k'], leaseMs: 60_000, onError: (e) => expect.fail(String(e)) })
    const bounds: Array<number | null | undefined> = []
    for (let i = 0; i < 6; i++) {
      const { claimed } = await claims.claim(10)
      expect(claimed).toHaveLength(10)
      bounds.push(await bound())
      // each claim's runs end before the next: never more than 10 run
      expect(await setExecutionState(t.db, { jobIds: claimed.map((c) => c.jobId), state: 'succeeded' })).toBe(10)
    }
    // the first claim learns what runs under the lock (which clears the bound); every later one is
    // admitted without it (a claim under the lock would clear the bound again): the bound grows by
    // each claim uncounted, and is counted down to what runs when it says a claim may not fit
    expect(bounds).toEqual([null, 10, 20, 30, 10, 20])
  })

  it('QueueClaims starts at once the runs of a rate-limited queue whose slot is under a millisecond away, and no others', async () => {
    expect(earlyStartMs({ ratePeriodMs: 1000, keyRatePeriodMs: null })).toBe(1)
    expect(earlyStartMs({ ratePeriodMs: 50, keyRatePeriodMs: 1000 })).toBe(0.5)
    expect(earlyStartMs({ ratePeriodMs: null, keyRatePeriodMs: 20 })).toBeCloseTo(0.2)
    expect(earlyStartMs({ ratePeriodMs: null, keyRatePeriodMs: null })).toBe(0)
    const claimsOf = (queue: string) =>
      new QueueClaims({ db: t.db, workerId: W, queues: [queue], types: ['k'], leaseMs: 60_000, onError: (e) => expect.fail(String(e)) })
    // 100,000 a second: 30 slots 10.7 µs apart, all within a third of a millisecond
    await client().submitJobs(Array.from({ length: 30 }, () => ({ type: 'k', queue: 'fast' })))
    await queueSetRateLimit(t.db, 'fast', 100_000, 1000)
    const fast = (await claimsOf('fast').claim(30)).claimed
    expect(fast).toHaveLength(30)
    expect(fast.filter((c) => c.startDelayMs)).toEqual([])
    // 20 a second: slots 53.5 ms apart; the second one still waits for its slot
    await client().submitJobs(Array.from({ length: 5 }, () => ({ type: 'k', queue: 'slow' })))
    await queueSetRateLimit(t.db, 'slow', 20, 1000)
    const slow = (await claimsOf('slow').claim(5)).claimed
    expect(slow).toHaveLength(2)
    expect(slow.map((c) => c.startDelayMs ?? 0).sort((a, b) => a - b)[1]).toBeGreaterThan(50)
  })
})
