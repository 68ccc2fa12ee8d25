/**
 * Queue settings in the claim (migration 0012, claim.ts, worker/queue-claims.ts): a paused queue is
 * not claimed from, in either form of the claim statement; a limited queue never has more
 * executions running than its limit, however many claimers ask at once.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { createDb } from '../../src/db/pool.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { QUEUE_SETTINGS_HEARD_TTL_MS, QUEUE_SETTINGS_TTL_MS, QueueClaims } from '../../src/worker/queue-claims.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000a001'
const client = () => createClient({ db: t.db, tenant: 'acme' })
const claim = (queues: string[], limit = 100) => executionClaimBatch(t.db, { workerId: W, queues, types: ['k'], limit, leaseMs: 60_000 })
const running = async (queue: string) =>
  (await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where state = 'running' and queue = ${queue}`.execute(t.db)).rows[0]?.n

describe('queue settings in the claim', () => {
  it('skips a paused queue in the one-queue and the several-queue claim, and takes it again once resumed', async () => {
    await client().submitJobs([
      { type: 'k', queue: 'held' },
      { type: 'k', queue: 'held' },
      { type: 'k', queue: 'free' },
    ])
    await sql`select pgsched.pause_queue('held')`.execute(t.db)
    expect(await claim(['held'])).toEqual([])
    expect((await claim(['held', 'free'])).map((c) => c.queue)).toEqual(['free'])
    await sql`select pgsched.resume_queue('held')`.execute(t.db)
    expect((await claim(['held'])).map((c) => c.queue)).toEqual(['held', 'held'])
  })

  it('leaves a limited queue to its own claim, which never has more running than the limit', async () => {
    await client().submitJobs(Array.from({ length: 20 }, () => ({ type: 'k', queue: 'narrow' })))
    await sql`select pgsched.set_queue_concurrency_limit('narrow', 3)`.execute(t.db)
    expect(await claim(['narrow'])).toEqual([]) // not the ordinary claim's any more
    // Ten claimers at once, each asking for 5: three executions in all.
    const results = await Promise.all(
      Array.from({ length: 10 }, () => queueClaimLimited(t.db, { workerId: W, queues: ['narrow'], types: ['k'], limit: 5, leaseMs: 60_000 })),
    )
    expect(results.flatMap((r) => r.claimed)).toHaveLength(3)
    expect(await running('narrow')).toBe(3)
    expect(results.some((r) => r.full)).toBe(true)
    // One ends: room for exactly one more.
    const first = results.flatMap((r) => r.claimed)[0]
    if (!first) throw new Error('nothing claimed')
    await executionCompleteMany(t.db, { workerId: W, completions: [{ ...first, resultJson: 'null', outputUri: null }] })
    const next = await queueClaimLimited(t.db, { workerId: W, queues: ['narrow'], types: ['k'], limit: 5, leaseMs: 60_000 })
    expect(next.claimed).toHaveLength(1)
    expect(await running('narrow')).toBe(3)
    // No limit any more: the ordinary claim takes the rest.
    await sql`select pgsched.set_queue_concurrency_limit('narrow', null)`.execute(t.db)
    expect(await claim(['narrow'])).toHaveLength(16)
  })

  it("goes on claiming a limited queue once the server ends the transaction of a claim whose process froze holding the queue's lock", async () => {
    await client().submitJobs(Array.from({ length: 4 }, () => ({ type: 'k', queue: 'narrow' })))
    await sql`select pgsched.set_queue_concurrency_limit('narrow', 3)`.execute(t.db)
    // A claimer on its own pool, its sessions set as every pool's (IDLE_TRANSACTION_TIMEOUT_MS),
    // 300 ms here; it stops after its first statement, which holds the queue's row lock, as a
    // process stopped by SIGSTOP or a paused VM would.
    const frozen = createDb({ databaseUrl: t.url, poolSize: 1, idleInTransactionTimeoutMs: 300 })
    let took: () => void = () => undefined
    const taken = new Promise<void>((resolve) => (took = resolve))
    let thaw: () => void = () => undefined
    const thawed = new Promise<void>((resolve) => (thaw = resolve))
    const connect = frozen.pool.connect.bind(frozen.pool) as () => Promise<pg.PoolClient>
    let freeze = true
    frozen.pool.connect = (async () => {
      const c = await connect()
      const query = c.query.bind(c) as (...a: unknown[]) => Promise<unknown>
      c.query = (async (...a: unknown[]) => {
        const r = await query(...a)
        const text = typeof a[0] === 'string' ? a[0] : String((a[0] as { text?: unknown }).text)
        if (freeze && text.includes('running_bound = null')) {
          freeze = false
          took()
          await thawed
        }
        return r
      }) as typeof c.query
      return c
    }) as typeof frozen.pool.connect
    try {
      const stopped = queueClaimLimited(frozen.db, { workerId: W, queues: ['narrow'], types: ['k'], limit: 5, leaseMs: 60_000 })
      stopped.catch(() => undefined)
      await taken
      // Another worker's claim waits for the lock, and gets it once the server has ended the
      // frozen session (rolling its transaction back).
      const other = await queueClaimLimited(t.db, { workerId: W, queues: ['narrow'], types: ['k'], limit: 5, leaseMs: 60_000 })
      expect(other.claimed).toHaveLength(3)
      thaw()
      await expect(stopped).rejects.toThrow()
      expect(await running('narrow')).toBe(3)
    } finally {
      thaw()
      await frozen.db.destroy()
    }
  })

  it('QueueClaims claims across open and limited queues, within the room and the limits', async () => {
    await client().submitJobs([
      ...Array.from({ length: 4 }, () => ({ type: 'k', queue: 'a' })),
      ...Array.from({ length: 4 }, () => ({ type: 'k', queue: 'b' })),
    ])
    await sql`select pgsched.set_queue_concurrency_limit('b', 2)`.execute(t.db)
    await sql`select pgsched.pause_queue('c')`.execute(t.db)
    const errors: unknown[] = []
    const claims = new QueueClaims({ db: t.db, workerId: W, queues: ['a', 'b', 'c'], types: ['k'], leaseMs: 60_000, onError: (e) => errors.push(e) })
    const first = await claims.claim(5)
    expect(first.claimed.map((c) => c.queue).sort()).toEqual(['a', 'a', 'a', 'a', 'b'])
    const second = await claims.claim(5)
    expect(second.claimed.map((c) => c.queue)).toEqual(['b'])
    expect(second.full).toBe(true)
    expect((await claims.claim(5)).claimed).toEqual([])
    expect(errors).toEqual([])
  })

  it('takes no more of one concurrency key than its limit minus what of it runs, in priority order, keyless work unlimited', async () => {
    await client().submitJobs([
      ...Array.from({ length: 5 }, (_, i) => ({ type: 'k', queue: 'keyed', concurrencyKey: 'a', priority: 10 - i })),
      ...Array.from({ length: 5 }, () => ({ type: 'k', queue: 'keyed', concurrencyKey: 'b' })),
      { type: 'k', queue: 'keyed' },
      { type: 'k', queue: 'keyed' },
    ])
    await sql`select pgsched.set_queue_key_concurrency_limit('keyed', 1)`.execute(t.db)
    const take = () => queueClaimLimited(t.db, { workerId: W, queues: ['keyed'], types: ['k'], limit: 20, leaseMs: 60_000 })
    const first = await take()
    const keyOf = async (ids: string[]) =>
      (await t.db.selectFrom('pgsched.executions').select(['concurrency_key', 'priority']).where('id', 'in', ids).execute()).map(
        (r) => `${r.concurrency_key ?? '-'}${r.concurrency_key === 'a' ? r.priority : ''}`,
      )
    expect((await keyOf(first.claimed.map((c) => c.id))).sort()).toEqual(['-', '-', 'a10', 'b'])
    const second = await take()
    expect(second.claimed).toEqual([])
    expect(second.full).toBe(true) // work is due, held back by its keys' limit
    const a = first.claimed.find((c) => c.priority === 10)
    if (!a) throw new Error('no execution of key a')
    await executionCompleteMany(t.db, { workerId: W, completions: [{ ...a, resultJson: 'null', outputUri: null }] })
    const third = await take()
    expect(await keyOf(third.claimed.map((c) => c.id))).toEqual(['a9'])
    // The ordinary claim leaves the queue alone while it has a limit per key.
    expect(await claim(['keyed'])).toEqual([])
  })

  it("counts a key per tenant: one tenant's runs of a key do not hold back another tenant's work with that key", async () => {
    const other = createClient({ db: t.db, tenant: 'globex' })
    await client().submitJobs(Array.from({ length: 3 }, () => ({ type: 'k', queue: 'shared', concurrencyKey: 'customer-7' })))
    await other.submitJobs(Array.from({ length: 3 }, () => ({ type: 'k', queue: 'shared', concurrencyKey: 'customer-7' })))
    await sql`select pgsched.set_queue_key_concurrency_limit('shared', 1)`.execute(t.db)
    const take = () => queueClaimLimited(t.db, { workerId: W, queues: ['shared'], types: ['k'], limit: 20, leaseMs: 60_000 })
    const tenantsOf = async (ids: string[]) =>
      (await sql<{ t: string }>`select tenant as t from pgsched.executions where id = any(${ids}::uuid[]) order by 1`.execute(t.db)).rows.map((r) => r.t)
    expect(await tenantsOf((await take()).claimed.map((c) => c.id))).toEqual(['acme', 'globex'])
    // each tenant's customer-7 at its limit now
    expect((await take()).claimed).toEqual([])
  })

  it("looks past a key at its limit: one key's backlog does not hide other keys' work", async () => {
    await client().submitJobs([
      ...Array.from({ length: 600 }, () => ({ type: 'k', queue: 'crowded', concurrencyKey: 'big', priority: 5 })),
      { type: 'k', queue: 'crowded', concurrencyKey: 'small', priority: 0 },
    ])
    await sql`select pgsched.set_queue_key_concurrency_limit('crowded', 1)`.execute(t.db)
    const take = () => queueClaimLimited(t.db, { workerId: W, queues: ['crowded'], types: ['k'], limit: 20, leaseMs: 60_000 })
    expect((await take()).claimed.map((c) => c.priority)).toEqual([5]) // the window held only 'big'
    expect((await take()).claimed.map((c) => c.priority)).toEqual([0]) // 'big' at its limit: 'small' is found
  })

  it('gives the starts of a rate-limited queue evenly spaced slots, as many per claim as fit the horizon', async () => {
    await client().submitJobs(Array.from({ length: 30 }, () => ({ type: 'k', queue: 'paced' })))
    await sql`select pgsched.set_queue_rate_limit('paced', 50, 1000)`.execute(t.db)
    expect(await claim(['paced'])).toEqual([]) // not the ordinary claim's
    const take = () => queueClaimLimited(t.db, { workerId: W, queues: ['paced'], types: ['k'], limit: 20, leaseMs: 60_000 })
    const before = performance.now()
    const first = await take()
    // Slots 1000 / 50 × 1.07 = 21.4 ms apart; those within the 100 ms horizon: 0, 21.4, 42.8, 64.2, 85.6.
    const delays = first.claimed.map((c) => c.startDelayMs ?? Number.NaN)
    expect(delays).toHaveLength(5)
    // The first slot is now: 0 (its time already spent on the claim); the others 21.4 ms apart.
    expect(delays[0]).toBe(0)
    for (const [i, d] of delays.entries()) if (i > 1) expect(d - (delays[1] as number)).toBeCloseTo((i - 1) * 21.4, 6)
    expect(delays[1]).toBeGreaterThan(10)
    expect(delays[1]).toBeLessThanOrEqual(21.4)
    const second = await take()
    const elapsed = performance.now() - before
    // The next slot is 107 ms after the first: a claim a few ms on finds at most one more within its
    // 100 ms horizon, and one more for each 21.4 ms it came later (on a busy machine).
    expect(second.claimed.length).toBeLessThanOrEqual(1 + Math.floor(elapsed / 21.4))
    for (const c of second.claimed) expect(c.startDelayMs).toBeGreaterThan(107 - elapsed)
    expect(second.full).toBe(true)
    const { rows } = await sql<{ ahead_ms: number }>`
      select (extract(epoch from next_start_at - now()) * 1000)::float8 as ahead_ms from pgsched.queues where name = 'paced'`.execute(t.db)
    const readAfterMs = performance.now() - before
    // Past the slots given out: 5 × 21.4 ms from the first claim (made after `before`), and 21.4 more
    // if the second claim took one; read this long after it (more on a busy machine)
    expect(rows[0]?.ahead_ms).toBeGreaterThan(107 - readAfterMs - 1)
    expect(rows[0]?.ahead_ms).toBeLessThanOrEqual(107 + 21.4 * second.claimed.length)
  })

  it('tells the workers of every change of a queue setting, by the functions or plain SQL, and not of what the claims keep', async () => {
    const listener = new pg.Client({ connectionString: t.url })
    await listener.connect()
    const heard: unknown[] = []
    listener.on('notification', (m) => {
      const p = JSON.parse(m.payload ?? 'null') as { settings?: boolean }
      if (p.settings === true) heard.push(p)
    })
    try {
      await listener.query('listen pgsched_executions')
      const settingsOf = async (change: () => Promise<unknown>) => {
        heard.length = 0
        await change()
        // a notification sent before this round trip's answer has arrived with it
        await listener.query('select 1')
        return heard.slice()
      }
      const told = [{ queues: ['q1'], delayMs: 0, settings: true }]
      expect(await settingsOf(() => sql`select pgsched.pause_queue('q1')`.execute(t.db))).toEqual(told)
      expect(await settingsOf(() => sql`select pgsched.resume_queue('q1')`.execute(t.db))).toEqual(told)
      expect(await settingsOf(() => sql`update pgsched.queues set concurrency_limit = 4 where name = 'q1'`.execute(t.db))).toEqual(told)
      expect(await settingsOf(() => sql`update pgsched.queues set rate_limit = 5, rate_period_ms = 1000 where name = 'q1'`.execute(t.db))).toEqual(told)
      expect(await settingsOf(() => sql`update pgsched.queues set fair_share = true where name = 'q1'`.execute(t.db))).toEqual(told)
      // the columns the claims keep, and an update that changes no setting
      expect(
        await settingsOf(() => sql`update pgsched.queues set running_bound = 2, next_start_at = now(), updated_at = now() where name = 'q1'`.execute(t.db)),
      ).toEqual([])
      expect(await settingsOf(() => sql`delete from pgsched.queues where name = 'q1'`.execute(t.db))).toEqual(told)
    } finally {
      await listener.end()
    }
  })

  it('QueueClaims reads the settings again once told they changed, and keeps them longer only while it hears of changes', async () => {
    await client().submitJobs([{ type: 'k', queue: 'told' }])
    const claims = new QueueClaims({
      db: t.db,
      workerId: W,
      queues: ['told'],
      types: ['k'],
      leaseMs: 60_000,
      onError: (e) => {
        throw e
      },
    })
    const pauseAndRead = async (ttlMs: number) => {
      await sql`select pgsched.pause_queue('told')`.execute(t.db)
      claims.settingsChanged()
      const readAt = performance.now()
      expect((await claims.claim(5)).claimed).toEqual([]) // reads the settings: paused
      await sql`select pgsched.resume_queue('told')`.execute(t.db)
      const cached = await claims.claim(5)
      // not told: the settings read are used for ttlMs (unless this machine stalled for that long)
      if (performance.now() - readAt < ttlMs) expect(cached.claimed).toEqual([])
      return { readAt, cached }
    }
    // hearing changes: kept for QUEUE_SETTINGS_HEARD_TTL_MS, read again once told
    claims.hearing(true)
    const heard = await pauseAndRead(QUEUE_SETTINGS_HEARD_TTL_MS)
    if (heard.cached.claimed.length === 0) {
      claims.settingsChanged()
      expect((await claims.claim(5)).claimed.map((c) => c.queue)).toEqual(['told'])
    }
    // not hearing them: kept for QUEUE_SETTINGS_TTL_MS only
    await client().submitJobs([{ type: 'k', queue: 'told' }])
    claims.hearing(false)
    const deaf = await pauseAndRead(QUEUE_SETTINGS_TTL_MS)
    // read again within a few seconds, well before QUEUE_SETTINGS_HEARD_TTL_MS
    const after =
      deaf.cached.claimed.length > 0
        ? deaf.cached.claimed
        : await waitFor(
            async () => {
              const { claimed } = await claims.claim(5)
              return claimed.length > 0 ? claimed : undefined
            },
            { what: 'the resume to be read', timeoutMs: QUEUE_SETTINGS_HEARD_TTL_MS / 2, intervalMs: 100 },
          )
    expect(after.map((c) => c.queue)).toEqual(['told'])
  })
})

describe('the queue functions of SQL', () => {
  it.each([
    [`pgsched.set_queue_concurrency_limit('default', 0)`, 'concurrency_limit must be an integer from 1 to 100000, or null for no limit, got 0'],
    [
      `pgsched.set_queue_key_concurrency_limit('default', 100001)`,
      'key_concurrency_limit must be an integer from 1 to 100000, or null for no limit, got 100001',
    ],
    [`pgsched.set_queue_rate_limit('default', 0, 1000)`, 'rate_limit must be an integer from 1 to 1000000, or null for no rate limit, got 0'],
    [`pgsched.set_queue_rate_limit('default', 5, 0)`, 'rate_period_ms must be an integer from 1 to 86400000, got 0'],
    [`pgsched.set_queue_rate_limit('default', 5, null)`, 'rate_limit and rate_period_ms are given together (both null: no rate limit), got 5 and null'],
    [`pgsched.set_queue_key_rate_limit('default', 5, null)`, 'key_rate_limit and key_rate_period_ms are given together'],
    [`pgsched.pause_queue(null)`, 'queue must be 1-64 characters: letters, digits and _ . : / - (not first), got null'],
    [`pgsched.set_queue_concurrency_limit('bad queue!', 3)`, `queue must be 1-64 characters: letters, digits and _ . : / - (not first), got 'bad queue!'`],
    [`pgsched.set_queue_fair_share('default', null)`, 'fair_share must be true or false, got null'],
    [`pgsched.set_queue_fair_share('bad queue!', null)`, `queue must be 1-64 characters: letters, digits and _ . : / - (not first), got 'bad queue!'`],
  ])('%s is refused with a message naming the argument, and changes nothing', async (call, message) => {
    const error = await sql`select ${sql.raw(call)}`.execute(t.db).then(
      () => undefined,
      (err: { message: string; code: string; detail?: string }) => err,
    )
    expect(error?.message).toContain(message)
    expect(error?.code).toBe('22023')
    expect(error?.detail).toBeUndefined()
    expect(await t.db.selectFrom('pgsched.queues').selectAll().execute()).toEqual([])
  })

  it('refuses claims_in_flight_since(null), which would read as no claim in flight', async () => {
    const error = await sql`select pgsched.claims_in_flight_since(null)`.execute(t.db).then(
      () => undefined,
      (err: { message: string; code: string }) => err,
    )
    expect(error).toMatchObject({ code: '22023', message: 'since must be the instant to count claims from (read after the pause, e.g. now()), got null' })
    const { rows } = await sql<{ n: number }>`select pgsched.claims_in_flight_since(now()) as n`.execute(t.db)
    expect(rows[0]?.n).toBe(0)
  })

  it('takes settings in range and removes them with null', async () => {
    await sql`select pgsched.set_queue_rate_limit('q', 5, 1000), pgsched.set_queue_concurrency_limit('q', 3)`.execute(t.db)
    await sql`select pgsched.set_queue_rate_limit('q', null, null), pgsched.set_queue_concurrency_limit('q', null)`.execute(t.db)
    const q = await t.db
      .selectFrom('pgsched.queues')
      .select(['rate_limit', 'rate_period_ms', 'concurrency_limit'])
      .where('name', '=', 'q')
      .executeTakeFirstOrThrow()
    expect(q).toEqual({ rate_limit: null, rate_period_ms: null, concurrency_limit: null })
  })
})
