/**
 * The lease keeper against Postgres, driven through runOnce() and guard():
 * renewals, leases reported lost (taken away, not confirmed in time; not merely
 * because heartbeats fail) and the hand-back on shutdown.
 */
import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import type { DB } from '../../src/db/schema.ts'
import { LeaseLostError } from '../../src/worker/abort-reasons.ts'
import { Completer } from '../../src/worker/completer.ts'
import { LeaseKeeper } from '../../src/worker/lease-keeper.ts'
import { createRun, type Run } from '../../src/worker/run.ts'
import { lockWaiters, useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000d0'
const LEASE_MS = 60_000
const client = () => createClient({ db: t.db, tenant: 'acme' })

function keeper(options: { db?: Kysely<DB>; heartbeatMs?: number } = {}) {
  const db = options.db ?? t.db
  const lost: Array<{ run: Run; reason: LeaseLostError }> = []
  const k: LeaseKeeper = new LeaseKeeper({
    db,
    completer: new Completer({ db, workerId: WORKER, log: t.log }),
    workerId: WORKER,
    log: t.log,
    leaseMs: LEASE_MS,
    heartbeatMs: options.heartbeatMs ?? 5_000,
    onLost: (run, reason) => {
      lost.push({ run, reason })
      k.release(run)
    },
  })
  return { k, lost }
}

/** Submits `n` jobs, claims them for WORKER and holds their leases in `k`. */
async function held(k: LeaseKeeper, n: number): Promise<Run[]> {
  await client().submitJobs(Array.from({ length: n }, () => ({ type: 'k' })))
  const sentAtMs = performance.now()
  const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['k'], limit: n, leaseMs: LEASE_MS })
  const runs = claimed.map((c) => createRun(c, sentAtMs + LEASE_MS))
  for (const run of runs) k.hold(run)
  return runs
}

const row = (id: string) =>
  t.db.selectFrom('pgsched.executions').select(['state', 'attempt', 'lease_expires_at']).where('id', '=', id).executeTakeFirstOrThrow()

describe('LeaseKeeper', () => {
  it('forgets the runs it gave up once twice their lease has passed, without waiting for a hand-back', async () => {
    const leaseMs = 300
    const k = new LeaseKeeper({
      db: t.db,
      completer: new Completer({ db: t.db, workerId: WORKER, log: t.log }),
      workerId: WORKER,
      log: t.log,
      leaseMs,
      heartbeatMs: 100,
      onLost: () => {},
    })
    const remembered = () => (k as unknown as { givenUp: Map<string, number> }).givenUp.size
    const runs = await held(k, 4)
    for (const run of runs.slice(0, 3)) k.giveUp(run)
    expect(remembered()).toBe(3)
    await new Promise((r) => setTimeout(r, 2 * leaseMs + 50))
    // the next give-up forgets those: a worker that never fails a claim keeps no more than a lease's worth
    k.giveUp(runs[3] as Run)
    expect(remembered()).toBe(1)
  })

  it('renews every lease held and moves its sure-until time forward', async () => {
    const { k, lost } = keeper()
    const [run] = await held(k, 1)
    if (!run) throw new Error('nothing claimed')
    const before = await row(run.ref.id)
    const sureBefore = run.leaseSureUntilMs
    await k.runOnce()
    expect(lost).toEqual([])
    expect((await row(run.ref.id)).lease_expires_at?.getTime()).toBeGreaterThan(before.lease_expires_at?.getTime() ?? Infinity)
    expect(run.leaseSureUntilMs).toBeGreaterThan(sureBefore)
    expect(k.holds(run)).toBe(true)
  })

  it('reports a lease the heartbeat no longer finds, unless its outcome is being written', async () => {
    const { k, lost } = keeper()
    const [gone, finishing, kept] = await held(k, 3)
    if (!gone || !finishing || !kept) throw new Error('nothing claimed')
    finishing.state = 'finishing'
    await client().cancelJob(gone.ref.jobId)
    await client().cancelJob(finishing.ref.jobId)
    await k.runOnce()
    expect(lost.map((l) => l.run)).toEqual([gone])
    expect(lost[0]?.reason).toBeInstanceOf(LeaseLostError)
    expect(k.holds(kept)).toBe(true)
    expect(k.holds(finishing)).toBe(true)
  })

  it("renews the other leases while this worker's outcome write waits on another session's lock, passing over the rows that write holds", async () => {
    const completer = new Completer({ db: t.db, workerId: WORKER, log: t.log })
    const lost: Run[] = []
    const k = new LeaseKeeper({ db: t.db, completer, workerId: WORKER, log: t.log, leaseMs: LEASE_MS, heartbeatMs: 5_000, onLost: (run) => lost.push(run) })
    const [blocked, written, running] = await held(k, 3)
    if (!blocked || !written || !running) throw new Error('nothing claimed')
    // another session holds the row of `blocked`: the outcome write of `blocked` and `written` waits for it
    const blocker = await t.pool.connect()
    try {
      await blocker.query('begin')
      await blocker.query('select 1 from pgsched.runs where execution_id = $1 for update', [blocked.ref.id])
      const done = (r: Run) => ({ ...r.ref, resultJson: 'null', outputUri: null })
      for (const r of [blocked, written]) r.state = 'finishing'
      const writes = [completer.complete(done(blocked)), completer.complete(done(written))]
      await waitFor(async () => (await lockWaiters(t.db)) === 1, { what: 'the outcome write to wait on the lock' })
      const before = await row(running.ref.id)
      const sureBefore = [blocked, written, running].map((r) => r.leaseSureUntilMs)
      // the heartbeat answers while the write still waits, and renews the lease of the run no one holds
      let deadline: NodeJS.Timeout | undefined
      await Promise.race([
        k.runOnce(),
        new Promise((_, reject) => {
          deadline = setTimeout(() => reject(new Error('the heartbeat waited for the outcome write')), 10_000)
        }),
      ]).finally(() => clearTimeout(deadline))
      expect(await lockWaiters(t.db)).toBe(1)
      expect((await row(running.ref.id)).lease_expires_at?.getTime()).toBeGreaterThan(before.lease_expires_at?.getTime() ?? Infinity)
      expect(running.leaseSureUntilMs).toBeGreaterThan(sureBefore[2] as number)
      // the row another transaction holds is passed over: neither renewed nor lost (the write's other
      // row is renewed or passed over, as the write had locked it or not yet)
      expect(blocked.leaseSureUntilMs).toBe(sureBefore[0])
      expect(lost).toEqual([])
      await blocker.query('commit')
      expect(await Promise.all(writes)).toEqual([{ accepted: true }, { accepted: true }])
    } finally {
      await blocker.query('rollback').catch(() => undefined)
      blocker.release()
    }
    expect((await row(blocked.ref.id)).state).toBe('succeeded')
    expect((await row(written.ref.id)).state).toBe('succeeded')
  })

  it('runs beside outcome writes of the same leases without a deadlock: each heartbeat answers, each write is accepted', async () => {
    const completer = new Completer({ db: t.db, workerId: WORKER, log: t.log })
    let answered = 0
    const lost: Run[] = []
    const k = new LeaseKeeper({
      db: t.db,
      completer,
      workerId: WORKER,
      log: t.log,
      leaseMs: LEASE_MS,
      heartbeatMs: 5_000,
      onLost: (run) => lost.push(run),
      events: { heartbeat: () => answered++ },
    })
    const runs = await held(k, 400)
    const writes: Array<Promise<unknown>> = []
    for (let round = 0; round < 20; round++) {
      // 20 outcomes a round, recorded in an order of their own (a batch locks its rows as it finds them)
      const batch = runs.slice(round * 20, round * 20 + 20).reverse()
      for (const r of batch) {
        r.state = 'finishing'
        writes.push(
          completer.complete({ ...r.ref, resultJson: 'null', outputUri: null }).then((result) => {
            k.release(r)
            return result
          }),
        )
      }
      await k.runOnce()
    }
    const results = await Promise.all(writes)
    expect(results).toHaveLength(400)
    expect(results.every((r) => (r as { accepted: boolean }).accepted)).toBe(true)
    expect(answered).toBe(20)
    expect(lost).toEqual([])
  })

  it('reports no lease when heartbeats fail: the leases are still valid (the guard acts before they expire)', async () => {
    // A pool of one connection, taken: every heartbeat fails, after waiting 100 ms for it. The one
    // connection is made with time to spare (a busy machine can take over 100 ms to open one).
    const pool = new pg.Pool({ connectionString: t.url, max: 1, connectionTimeoutMillis: 30_000 })
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
    try {
      const { k, lost } = keeper({ db })
      const [a, b] = await held(k, 2)
      if (!a || !b) throw new Error('nothing claimed')
      b.state = 'finishing'
      const taken = await pool.connect()
      pool.options.connectionTimeoutMillis = 100
      for (let i = 0; i < 5; i++) await k.runOnce()
      k.guard()
      taken.release()
      expect(lost).toEqual([])
      expect(k.size).toBe(2)
    } finally {
      await db.destroy()
    }
  })

  it('guards: reports leases not confirmed for leaseMs − heartbeatMs, whatever the heartbeat does', async () => {
    const { k, lost } = keeper({ heartbeatMs: 1_000 })
    const [stale, finishing, fresh] = await held(k, 3)
    if (!stale || !finishing || !fresh) throw new Error('nothing claimed')
    // As if the last confirmation were leaseMs − heartbeatMs ago (a freeze, or a hung heartbeat).
    stale.leaseSureUntilMs = performance.now() + 1_000
    finishing.leaseSureUntilMs = performance.now() + 1_000
    finishing.state = 'finishing'
    expect(k.isSure(stale)).toBe(false)
    expect(k.isSure(fresh)).toBe(true)
    k.guard()
    expect(lost.map((l) => l.run)).toEqual([stale])
    expect(lost[0]?.reason.message).toContain('not confirmed in time')
  })

  it('hands leases back: pending again, attempt not counted, no longer held', async () => {
    const { k } = keeper()
    const runs = await held(k, 2)
    expect(await k.handBack(runs)).toBe(2)
    for (const run of runs) {
      expect(await row(run.ref.id)).toMatchObject({ state: 'pending', attempt: 0 })
      expect(k.holds(run)).toBe(false)
    }
  })

  it('guards on its own timer whenever a lease is held, also after holding none for a while', async () => {
    const { k, lost } = keeper({ heartbeatMs: 1_000 })
    k.start()
    try {
      for (const round of [1, 2]) {
        // nothing held between rounds: the guard's timer is off, and must come back with the next lease
        const [stale] = await held(k, 1)
        if (!stale) throw new Error('nothing claimed')
        stale.leaseSureUntilMs = performance.now() + 1_000
        await waitFor(() => lost.length === round, { what: `the guard of round ${round} to report the stale lease`, timeoutMs: 5_000 })
        expect(lost[round - 1]?.run).toBe(stale)
        expect(k.size).toBe(0)
      }
    } finally {
      await k.stop()
    }
  })

  it('stops its heartbeat loop and guard when stopped', async () => {
    const { k } = keeper({ heartbeatMs: 20 })
    k.start()
    await k.stop()
    await k.stop()
  })
})
