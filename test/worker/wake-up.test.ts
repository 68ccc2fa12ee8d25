/**
 * Wake-ups go only to waiting workers (migration 0006): a submit of due work
 * notifies when a worker serving its queue has signed up, and the sign-up
 * handshake cannot lose a submit that was in flight. The notification names
 * waiting workers per (queue, type) of the new work (migration 0011) until their
 * slots hold it (migration 0043), so those claim it, not every waiting one.
 * WakeUp is the worker's side of it: its sleep, wake-ups and listing.
 */
import pg from 'pg'
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { IDLE_MIN_PRIORITY, workerChannel, workerSignUpWaiting } from '../../src/db/queries/workers.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { WakeUp } from '../../src/worker/wake-up.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
const client = () => createClient({ db: t.db, tenant: 'acme' })
const listeners: pg.Client[] = []
afterEach(async () => {
  await Promise.all(listeners.splice(0).map((c) => c.end()))
})

/** Collects pgsched_executions notifications; `until(sentinel)` resolves with those before it. */
async function listen() {
  const c = new pg.Client({ connectionString: t.url })
  await c.connect()
  listeners.push(c)
  const seen: Array<{ queues: string[]; delayMs: number; priority?: number; workers?: string[] | null } | 'sentinel'> = []
  c.on('notification', (m) => seen.push(m.payload === 'sentinel' ? 'sentinel' : JSON.parse(m.payload ?? 'null')))
  await c.query('listen pgsched_executions')
  return {
    /** Sends a sentinel after everything so far and returns what arrived before it. */
    async before(): Promise<typeof seen> {
      await t.pool.query(`select pg_notify('pgsched_executions', 'sentinel')`)
      await waitFor(() => seen.includes('sentinel'), { what: 'the sentinel notification' })
      return seen.splice(0).slice(0, -1)
    },
  }
}

/** Collects notifications on `channels` as [channel, payload]; `before()` as in listen(). */
async function listenOn(channels: string[]) {
  const c = new pg.Client({ connectionString: t.url })
  await c.connect()
  listeners.push(c)
  const seen: Array<[string, unknown] | 'sentinel'> = []
  c.on('notification', (m) => seen.push(m.payload === 'sentinel' ? 'sentinel' : [m.channel, JSON.parse(m.payload ?? 'null')]))
  for (const channel of [...channels, 'pgsched_sentinel']) await c.query(`listen ${c.escapeIdentifier(channel)}`)
  return {
    async before(): Promise<Array<[string, unknown]>> {
      await t.pool.query(`select pg_notify('pgsched_sentinel', 'sentinel')`)
      await waitFor(() => seen.includes('sentinel'), { what: 'the sentinel notification' })
      return seen.splice(0).slice(0, -1) as Array<[string, unknown]>
    },
  }
}

describe('wake-ups', () => {
  it('sends none for due work when no worker waits on its queue, and one when a worker does', async () => {
    const l = await listen()
    await client().submitJob({ type: 'x', queue: 'emails' })
    expect(await l.before()).toEqual([])

    expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000001', queues: ['reports'] })).toBe(true)
    await client().submitJob({ type: 'x', queue: 'emails' })
    expect(await l.before()).toEqual([])

    expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000002', queues: ['emails', 'other'] })).toBe(true)
    await client().submitJob({ type: 'x', queue: 'emails', priority: 7 })
    expect(await l.before()).toEqual([{ queues: ['emails'], delayMs: 0, priority: 7, workers: ['00000000-0000-7000-8000-000000000002'] }])
  })

  it('wakes a worker holding prefetched work only for work of higher priority than it holds', async () => {
    const l = await listen()
    // Listed as a worker whose best buffered execution has priority 4.
    expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000004', queues: ['default'], minPriority: 5 })).toBe(true)
    await client().submitJob({ type: 'x', priority: 4 })
    expect(await l.before()).toEqual([])
    await client().submitJobs([
      { type: 'x', priority: 1 },
      { type: 'x', priority: 9 },
    ])
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 9, workers: ['00000000-0000-7000-8000-000000000004'] }])
  })

  it('names one waiting worker per queue and type: idle before holding work, then the one listed longest', async () => {
    const l = await listen()
    const id = (n: number) => `00000000-0000-7000-8000-0000000001${String(n).padStart(2, '0')}`
    const signUp = async (n: number, queues: string[], types: string[] | null, minPriority?: number) =>
      expect(await workerSignUpWaiting(t.db, { id: id(n), queues, types, minPriority })).toBe(true)
    await signUp(1, ['default'], ['a'], 5) // holds prefetched work of priority 4
    await signUp(2, ['default'], ['b']) // idle, other type
    await signUp(3, ['default'], ['a', 'b']) // idle, listed before 4
    await signUp(4, ['default'], ['a'])
    await client().submitJob({ type: 'a', priority: 9 })
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 9, workers: [id(3)] }])

    // One statement, two executions of one (queue, type) and one of another queue: workers without a
    // row in pgsched.workers count one slot each, so as many of them as executions of each.
    await signUp(5, ['other'], null)
    await client().submitJobs([{ type: 'a' }, { type: 'a' }, { type: 'c', queue: 'other' }])
    const [n] = await l.before()
    expect(n).toMatchObject({ queues: ['default', 'other'], delayMs: 0, priority: 0 })
    expect([...((n as { workers: string[] }).workers ?? [])].sort()).toEqual([id(3), id(4), id(5)])

    // No waiting worker serves the type: no wake-up at all.
    await client().submitJob({ type: 'z' })
    expect(await l.before()).toEqual([])
  })

  it('names waiting workers until their slots hold the new work: one with room for all of it alone, more as it grows', async () => {
    const l = await listen()
    const id = (n: number) => `00000000-0000-7000-8000-0000000005${String(n).padStart(2, '0')}`
    // three live idle workers of 10, 10 and 4 slots, listed in that order
    await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at)
              values (${id(1)}::uuid, 'h', 1, '{default}', '{x}', 10, now()), (${id(2)}::uuid, 'h', 2, '{default}', '{x}', 10, now()),
                     (${id(3)}::uuid, 'h', 3, '{default}', '{x}', 4, now())`.execute(t.db)
    for (const n of [1, 2, 3]) expect(await workerSignUpWaiting(t.db, { id: id(n), queues: ['default'], types: ['x'] })).toBe(true)
    const named = async (jobs: number) => {
      await client().submitJobs(Array.from({ length: jobs }, () => ({ type: 'x' })))
      const [n] = await l.before()
      return [...((n as { workers: string[] }).workers ?? [])].sort()
    }
    expect(await named(1)).toEqual([id(1)])
    expect(await named(4)).toEqual([id(1)])
    expect(await named(10)).toEqual([id(1)])
    expect(await named(11)).toEqual([id(1), id(2)])
    expect(await named(20)).toEqual([id(1), id(2)])
    expect(await named(21)).toEqual([id(1), id(2), id(3)])
    // more than all their slots: every one of them
    expect(await named(100)).toEqual([id(1), id(2), id(3)])
  })

  it('a worker listed idle whose claim filled its room passes the wake-up on: other waiting workers are named for the due work left, not the claimer', async () => {
    const l = await listen()
    const id = (n: number) => `00000000-0000-7000-8000-0000000006${String(n).padStart(2, '0')}`
    await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at)
              values (${id(1)}::uuid, 'h', 1, '{default}', '{x}', 10, now()), (${id(2)}::uuid, 'h', 2, '{default}', '{x}', 3, now()),
                     (${id(3)}::uuid, 'h', 3, '{default}', '{x}', 3, now()), (${id(4)}::uuid, 'h', 4, '{other}', '{x}', 3, now())`.execute(t.db)
    const passOn = async (claimer: number) =>
      (await sql<{ named: number }>`select pgsched.wake_waiting_after(${id(claimer)}::uuid, '{default}', '{x}') as named`.execute(t.db)).rows[0]?.named
    // Nothing due is left: no one is named.
    for (const n of [1, 2, 3, 4]) expect(await workerSignUpWaiting(t.db, { id: id(n), queues: n === 4 ? ['other'] : ['default'], types: ['x'] })).toBe(true)
    expect(await passOn(1)).toBe(0)
    expect(await l.before()).toEqual([])
    // Five due executions left (submitted while no one was listed: no wake-up went out for them).
    await sql`delete from pgsched.waiting_workers`.execute(t.db)
    await client().submitJobs(Array.from({ length: 5 }, (_, i) => ({ type: 'x', priority: i })))
    expect(await l.before()).toEqual([])
    for (const n of [1, 2, 3, 4]) expect(await workerSignUpWaiting(t.db, { id: id(n), queues: n === 4 ? ['other'] : ['default'], types: ['x'] })).toBe(true)
    // The claimer is never named; the others in turn until their slots (3 and 3) hold the five; the
    // worker of another queue is not.
    expect(await passOn(1)).toBe(2)
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 4, workers: [id(2), id(3)] }])
    expect(await passOn(2)).toBe(1)
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 4, workers: [id(1)] }])
  })

  it('a burst larger than the free slots of the one idle worker it names starts at once on another idle worker, without a poll', async () => {
    const started: Array<[string, string]> = []
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const handlerOf = (name: string) =>
      defineHandler('x', async (ctx) => {
        started.push([name, ctx.jobId])
        await gate
      })
    const listed = async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).map((w) => w.worker_id)
    // Two slots each, no prefetch, and only a wake-up starts work (a poll takes a minute). The
    // first is listed first, so a submit that fits in its two slots names it alone.
    const first = await startWorker([handlerOf('first')], { concurrency: 2, prefetch: 0, pollIntervalMs: 60_000 })
    await waitFor(async () => (await listed()).includes(first.id), { what: 'the first worker to list idle' })
    const second = await startWorker([handlerOf('second')], { concurrency: 2, prefetch: 0, pollIntervalMs: 60_000 })
    await waitFor(async () => (await listed()).includes(second.id), { what: 'the second worker to list idle' })
    try {
      // One long run on the first worker: it keeps one slot free and stays listed idle, first in turn.
      const { job: long } = await client().submitJob({ type: 'x' })
      await waitFor(() => started.some(([, jobId]) => jobId === long.id), { what: 'the long job to start', timeoutMs: 5_000 })
      expect(started).toEqual([['first', long.id]])
      // Two more: the first worker alone is named (its two slots hold them) and has room for one; it
      // claims that one only and passes the wake-up on for the other.
      const burst = await client().submitJobs([{ type: 'x' }, { type: 'x' }])
      await waitFor(() => burst.every((j) => started.some(([, jobId]) => jobId === j.id)), {
        what: 'both jobs of the burst to start',
        timeoutMs: 5_000,
      })
      expect(started.map(([name]) => name).sort()).toEqual(['first', 'first', 'second'])
    } finally {
      release()
    }
  })

  it('wakes a named worker on its own channel when it listed one, and one listed without a channel on pgsched_executions by name', async () => {
    const id = (n: number) => `00000000-0000-7000-8000-0000000007${String(n).padStart(2, '0')}`
    const l = await listenOn(['pgsched_executions', workerChannel(id(1)), workerChannel(id(2)), workerChannel(id(3))])
    // live idle workers of one slot each: 1 and 2 with their channels, 3 without (an earlier version)
    await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at)
              values (${id(1)}::uuid, 'h', 1, '{default}', '{x}', 1, now()), (${id(2)}::uuid, 'h', 2, '{default}', '{x}', 1, now()),
                     (${id(3)}::uuid, 'h', 3, '{default}', '{x}', 1, now())`.execute(t.db)
    for (const n of [1, 2]) expect(await workerSignUpWaiting(t.db, { id: id(n), queues: ['default'], types: ['x'], channel: workerChannel(id(n)) })).toBe(true)
    expect(await workerSignUpWaiting(t.db, { id: id(3), queues: ['default'], types: ['x'] })).toBe(true)

    // One job: the first listed alone, on its channel; nothing on the shared channel.
    await client().submitJob({ type: 'x', priority: 3 })
    expect(await l.before()).toEqual([[workerChannel(id(1)), { queues: ['default'], delayMs: 0, priority: 3 }]])
    // Three jobs: each on its channel, the one without a channel by name on the shared channel.
    await client().submitJobs([{ type: 'x' }, { type: 'x' }, { type: 'x' }])
    const woken = await l.before()
    expect(woken).toHaveLength(3)
    expect(woken).toEqual(
      expect.arrayContaining([
        [workerChannel(id(1)), { queues: ['default'], delayMs: 0, priority: 0 }],
        [workerChannel(id(2)), { queues: ['default'], delayMs: 0, priority: 0 }],
        ['pgsched_executions', { queues: ['default'], delayMs: 0, priority: 0, workers: [id(3)] }],
      ]),
    )
    // The wake-up passed on by the first worker goes the same way (the four jobs, the best of
    // priority 3, are all still due).
    expect((await sql<{ named: number }>`select pgsched.wake_waiting_after(${id(1)}::uuid, '{default}', '{x}') as named`.execute(t.db)).rows[0]?.named).toBe(2)
    const passed = await l.before()
    expect(passed).toHaveLength(2)
    expect(passed).toEqual(
      expect.arrayContaining([
        [workerChannel(id(2)), { queues: ['default'], delayMs: 0, priority: 3 }],
        ['pgsched_executions', { queues: ['default'], delayMs: 0, priority: 3, workers: [id(3)] }],
      ]),
    )
  })

  it('real workers idle on one queue: a submit wakes the one it names on its channel and sends nothing every worker hears', async () => {
    const started: string[] = []
    const workers = []
    for (let i = 0; i < 2; i++) workers.push(await startWorker([defineHandler('x', async (ctx) => void started.push(ctx.jobId))], { pollIntervalMs: 60_000 }))
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('channel').where('channel', 'is not', null).execute()).length === 2, {
      what: 'both workers to list idle with their channels',
    })
    const l = await listenOn(['pgsched_executions', ...workers.map((w) => workerChannel(w.id))])
    await l.before() // what the start-up sent
    const { job } = await client().submitJob({ type: 'x' })
    await waitFor(() => started.includes(job.id), { what: 'the job to start without a poll', timeoutMs: 5_000 })
    const woken = await l.before()
    expect(woken).toHaveLength(1)
    expect(workers.map((w) => workerChannel(w.id))).toContain(woken[0]?.[0])
  })

  it('passes over a listed worker not seen for 15 s (one that died) while a live one waits', async () => {
    const l = await listen()
    const dead = '00000000-0000-7000-8000-000000000301'
    const live = '00000000-0000-7000-8000-000000000302'
    await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at)
              values (${dead}::uuid, 'h', 1, '{default}', '{x}', 1, now() - interval '1 minute'),
                     (${live}::uuid, 'h', 2, '{default}', '{x}', 1, now())`.execute(t.db)
    expect(await workerSignUpWaiting(t.db, { id: dead, queues: ['default'], types: ['x'] })).toBe(true) // listed longest
    expect(await workerSignUpWaiting(t.db, { id: live, queues: ['default'], types: ['x'] })).toBe(true)
    await client().submitJob({ type: 'x' })
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 0, workers: [live] }])
  })

  it('a worker whose every slot runs is not listed idle (a submit names one with a free slot), and lists idle once one is free', async () => {
    const started: string[] = []
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const worker = await startWorker(
      [
        defineHandler('x', async (ctx) => void started.push(ctx.jobId)),
        defineHandler('slow', async (ctx) => {
          started.push(ctx.jobId)
          await gate
        }),
      ],
      { concurrency: 1, prefetch: 5, pollIntervalMs: 60_000 },
    )
    const level = async () =>
      (await t.db.selectFrom('pgsched.waiting_workers').select('min_priority').where('worker_id', '=', worker.id).executeTakeFirst())?.min_priority
    await waitFor(async () => (await level()) === IDLE_MIN_PRIORITY, { what: 'the worker to list idle' })
    // A fast run first: the worker prefetches as its runs' times allow, so its claims now have room
    // beyond its one slot, and a claim that takes one job leaves that room unfilled.
    const { job: fast } = await client().submitJob({ type: 'x' })
    await waitFor(() => started.includes(fast.id), { what: 'the fast job to start' })
    const { job: slow } = await client().submitJob({ type: 'slow' })
    await waitFor(() => started.includes(slow.id), { what: 'the slow job to start' })
    await waitFor(async () => (await level()) === undefined, { what: 'the busy worker to leave the listing' })
    release()
    await waitFor(async () => (await level()) === IDLE_MIN_PRIORITY, { what: 'the worker to list idle once its slot is free' })
  })

  it('wakes every worker (names none) when the new work needs more than 64 of them', async () => {
    const l = await listen()
    const types = Array.from({ length: 65 }, (_, i) => `t${i}`)
    for (const [i, type] of types.entries()) {
      const id = `00000000-0000-7000-8000-0000000002${String(i).padStart(2, '0')}`
      expect(await workerSignUpWaiting(t.db, { id, queues: ['default'], types: [type] })).toBe(true)
    }
    await client().submitJobs(types.map((type) => ({ type })))
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 0, workers: null }])
  })

  it('two idle workers of different types: each starts the work it is named for, without polling, and the other does not claim', async () => {
    const started: Array<[string, string]> = []
    const claims = { a: 0, b: 0 }
    for (const type of ['a', 'b'] as const) {
      await startWorker([defineHandler(type, async (ctx) => void started.push([type, ctx.jobId]))], {
        pollIntervalMs: 60_000, // only a wake-up can start the work
        events: { claimed: () => void claims[type]++ },
      })
    }
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).length === 2, {
      what: 'both workers to sign up',
    })
    // Each claims at start, then once more after signing up idle; then it sleeps.
    await waitFor(() => claims.a >= 2 && claims.b >= 2, { what: 'the claims that follow the sign-ups' })
    const claimsOfA = claims.a
    const submitAndStart = async (type: string) => {
      const { job } = await client().submitJob({ type })
      await waitFor(() => started.some(([, jobId]) => jobId === job.id), { what: `the ${type} job to start`, timeoutMs: 5_000 })
    }
    for (const type of ['b', 'b', 'b']) await submitAndStart(type)
    expect(claims.a).toBe(claimsOfA) // not woken for work named for b
    for (const type of ['a', 'a']) await submitAndStart(type)
    expect(started.map(([type]) => type)).toEqual(['b', 'b', 'b', 'a', 'a'])
  })

  it('an idle worker claims once per wake-up, not again when its runs end; with a backlog it claims as slots free', async () => {
    const started: string[] = []
    let claims = 0
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    await startWorker([defineHandler('x', async (ctx) => void started.push(ctx.jobId)), defineHandler('slow', async () => gate)], {
      pollIntervalMs: 60_000,
      concurrency: 2,
      prefetch: 0,
      events: { claimed: () => void claims++ },
    })
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).length === 1, {
      what: 'the worker to sign up idle',
    })
    const runOne = async () => {
      const { job } = await client().submitJob({ type: 'x' })
      await waitFor(() => started.includes(job.id), { what: 'the job to start', timeoutMs: 5_000 })
      await waitFor(async () => (await client().viewJob(job.id)).status === 'COMPLETED', { what: 'the job to complete', timeoutMs: 5_000 })
    }
    await runOne() // by now the claim that follows the sign-up has run too
    const before = claims
    for (let i = 0; i < 4; i++) await runOne()
    expect(claims - before).toBe(4)

    // Three jobs for two slots: the claim fills its room (a backlog), and the slot freed by the
    // first run's end claims the third without any wake-up.
    const slow = await client().submitJobs([{ type: 'slow' }, { type: 'slow' }])
    const third = await client().submitJob({ type: 'x', priority: -1 })
    await waitFor(async () => (await client().viewJob(slow[0]?.id as string)).status === 'RUNNING', { what: 'the slow jobs to start' })
    release()
    await waitFor(() => started.includes(third.job.id), { what: 'the third job to start once a slot is free', timeoutMs: 5_000 })
  })

  it('a worker lists itself again within five poll intervals when its listing is gone (the table emptied by a crash)', async () => {
    const worker = await startWorker([defineHandler('x', async () => undefined)]) // polls every 200 ms
    const listed = async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).map((r) => r.worker_id)
    await waitFor(async () => (await listed()).includes(worker.id), { what: 'the worker to sign up' })
    await sql`delete from pgsched.waiting_workers`.execute(t.db)
    await waitFor(async () => (await listed()).includes(worker.id), { what: 'the worker to sign up again', timeoutMs: 5_000 })
  })

  it('a worker whose LISTEN connection is lost lists itself again once it reconnects, and is woken by the next submit', async () => {
    const started: string[] = []
    const worker = await startWorker([defineHandler('x', async (ctx) => void started.push(ctx.jobId))], { pollIntervalMs: 60_000 })
    const listed = async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).map((r) => r.worker_id)
    await waitFor(async () => (await listed()).includes(worker.id), { what: 'the worker to sign up' })
    // What a server crash does to a worker: its LISTEN connection drops and the unlogged listing is gone.
    await sql`select pg_terminate_backend(pid) from pg_stat_activity
               where application_name = 'pgsched-listen' and datname = current_database()`.execute(t.db)
    await sql`delete from pgsched.waiting_workers`.execute(t.db)
    await waitFor(async () => (await listed()).includes(worker.id), { what: 'the worker to sign up after reconnecting', timeoutMs: 5_000 })
    const { job } = await client().submitJob({ type: 'x' })
    await waitFor(() => started.includes(job.id), { what: 'the job to start without polling', timeoutMs: 5_000 })
  })

  it('always announces work due later, with its delay', async () => {
    const l = await listen()
    await client().submitJob({ type: 'x', queue: 'emails', schedule: { at: new Date(Date.now() + 60_000).toISOString() } })
    const [n] = await l.before()
    expect(n).toMatchObject({ queues: ['emails'] })
    expect((n as { delayMs: number }).delayMs).toBeGreaterThan(50_000)
  })

  it('announces each moment work of one statement comes due later, in steps of 100 ms rounded up, not only the first, and for any worker when none waits', async () => {
    const l = await listen()
    const base = Date.now() + 60_000
    // two jobs due at one moment share a step; 300 ms and 2 s later each have their own
    const offsets = [0, 0, 300, 2_000]
    await client().submitJobs(offsets.map((ms) => ({ type: 'x', schedule: { at: new Date(base + ms).toISOString() } })))
    const [n] = (await l.before()) as unknown as Array<{ delayMs: number; laterMs: number[]; laterWorkers: Array<string | null> }>
    const later = n?.laterMs ?? []
    expect(later).toHaveLength(3)
    for (const ms of later) expect(ms % 100).toBe(0)
    // each step at or after its work (never before), and within one step of it
    const first = later[0] as number
    expect(first).toBeGreaterThanOrEqual(n?.delayMs as number)
    expect(later.map((ms) => ms - first)).toEqual([0, expect.closeTo(300, -2), expect.closeTo(2_000, -2)])
    expect(n?.laterWorkers).toEqual([null, null, null])
  })

  it('names, for each later moment, waiting workers of the work until their slots hold it: live ones first, then at random', async () => {
    const id = (n: number) => `00000000-0000-7000-8000-0000000004${String(n).padStart(2, '0')}`
    // 1 and 2: one slot each; 3: fifty slots, seen a minute ago (maybe dead); 4: holds work of priority 4
    await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, last_seen_at)
              values (${id(1)}::uuid, 'h', 1, '{emails}', '{x}', 1, now()), (${id(2)}::uuid, 'h', 2, '{emails}', '{x}', 1, now()),
                     (${id(3)}::uuid, 'h', 3, '{emails}', '{x}', 50, now() - interval '1 minute')`.execute(t.db)
    for (const n of [1, 2, 3]) expect(await workerSignUpWaiting(t.db, { id: id(n), queues: ['emails'] })).toBe(true)
    expect(await workerSignUpWaiting(t.db, { id: id(4), queues: ['emails'], minPriority: 5 })).toBe(true)
    const l = await listen()
    const at = (ms: number) => new Date(Date.now() + 60_000 + ms).toISOString()
    // 40 moments of one execution each, then one moment of three
    await client().submitJobs([
      ...Array.from({ length: 40 }, (_, i) => ({ type: 'x', queue: 'emails', schedule: { at: at(i * 100) } })),
      ...Array.from({ length: 3 }, () => ({ type: 'x', queue: 'emails', schedule: { at: at(10_000) } })),
    ])
    const [n] = (await l.before()) as unknown as Array<{ laterMs: number[]; laterWorkers: string[][] }>
    const named = n?.laterWorkers ?? []
    expect(n?.laterMs).toHaveLength(41)
    expect(named).toHaveLength(41)
    // one execution: one live worker with a slot; chosen at random (40 moments all for one of two: 1 in 2^39)
    for (const workers of named.slice(0, 40)) expect(workers).toHaveLength(1)
    expect(new Set(named.slice(0, 40).flat())).toEqual(new Set([id(1), id(2)]))
    // three executions: both live workers (two slots), then the one not seen lately (fifty more)
    expect(named[40]?.slice(0, 2).sort()).toEqual([id(1), id(2)])
    expect(named[40]?.[2]).toBe(id(3))
  })

  it('refuses a sign-up while a submit is between its insert and its commit', async () => {
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`select pgsched.submit_job('x', '{}')`)
      expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000003', queues: ['default'] })).toBe(false)
      await other.query('commit')
      expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000003', queues: ['default'] })).toBe(true)
    } finally {
      other.release()
    }
  })

  it('an idle worker starts work submitted while it was signing up, without polling', async () => {
    const started: string[] = []
    // A submit in flight (inserted, not committed) while the worker starts and finds nothing:
    // its sign-up is refused until the commit, and then it must still find the job.
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      const { rows } = await other.query<{ id: string }>(`select pgsched.submit_job('x', '{}') as id`)
      // Polling is out of the picture: only a wake-up or the claim after a sign-up can find work.
      await startWorker([defineHandler('x', async (ctx) => void started.push(ctx.jobId))], { pollIntervalMs: 60_000 })
      expect(await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).toEqual([])
      await other.query('commit')
      await waitFor(() => started.includes(rows[0]?.id as string), { what: 'the job to start', timeoutMs: 5_000 })
    } finally {
      other.release()
    }
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).length === 1, { what: 'the worker to sign up' })
    const burst = await client().submitJobs(Array.from({ length: 50 }, () => ({ type: 'x' })))
    await waitFor(() => burst.every((r) => started.includes(r.id)), { what: 'a burst to start', timeoutMs: 5_000 })
    // Started is not yet recorded: outcomes are written in batches after the handlers return.
    await waitFor(
      async () => {
        const { rows } = await sql<{ n: string }>`select count(*) as n from pgsched.executions where state <> 'succeeded'`.execute(t.db)
        return Number(rows[0]?.n) === 0
      },
      { what: 'every execution to be recorded as succeeded', timeoutMs: 5_000 },
    )
  })
})

describe('WakeUp', () => {
  const WORKER = '00000000-0000-7000-8000-0000000000f0'
  const wakeUp = () => new WakeUp({ db: t.db, workerId: WORKER, queues: ['default'], types: ['x'], pollIntervalMs: 60_000 })
  const listing = async () =>
    (await t.db.selectFrom('pgsched.waiting_workers').select('min_priority').where('worker_id', '=', WORKER).executeTakeFirst())?.min_priority

  it('ends a sleep on wake, and keeps a wake that came while the loop was busy for the next sleep', async () => {
    const w = wakeUp()
    const sleeping = w.sleep(60_000)
    w.wake()
    await sleeping
    w.wake()
    await w.sleep(60_000)
  })

  it('wakes at the earliest of the delays it was given', async () => {
    const w = wakeUp()
    w.wakeIn(60_000)
    w.wakeIn(5)
    await w.sleep(60_000)
    await w.signOff()
  })

  it('wakes at each of several later moments, in order, not only at the earliest', async () => {
    const w = wakeUp()
    const startedAt = performance.now()
    w.wakeInEach([400, 150, 60_000])
    w.wakeIn(150) // planned already: no second wake-up for it
    expect(await w.sleep(10_000)).toBe(true)
    const first = performance.now() - startedAt
    expect(await w.sleep(10_000)).toBe(true)
    const second = performance.now() - startedAt
    expect(first).toBeGreaterThanOrEqual(149)
    expect(first).toBeLessThan(400)
    expect(second).toBeGreaterThanOrEqual(399)
    // the third is a minute away: a short sleep times out
    expect(await w.sleep(300)).toBe(false)
    await w.signOff()
  })

  it('is not woken early by a moment further out than a Node.js timer reaches (about 24.8 days)', async () => {
    const w = wakeUp()
    w.wakeInEach([40 * 86_400_000])
    expect(await w.sleep(300)).toBe(false)
    await w.signOff()
  })

  it('no longer sleeps once closed', async () => {
    const w = wakeUp()
    const sleeping = w.sleep(60_000)
    w.close()
    await sleeping
    await w.sleep(60_000)
  })

  it('lists idle after a drained claim, at the best waiting priority + 1 with prefetched work, and not at all with a backlog only', async () => {
    const w = wakeUp()
    expect(await w.updateListing(false, undefined)).toBe('changed')
    expect(await listing()).toBe(IDLE_MIN_PRIORITY)
    expect(await w.updateListing(false, 3)).toBe('unchanged')
    expect(await w.updateListing(true, 4)).toBe('changed')
    expect(await listing()).toBe(5)
    expect(await w.updateListing(true, undefined)).toBe('changed')
    expect(await listing()).toBeUndefined()
    expect(await w.updateListing(true, 1000)).toBe('unchanged') // nothing is above the top priority
    await w.updateListing(false, undefined)
    await w.signOff()
    expect(await listing()).toBeUndefined()
  })

  it('retries a sign-up refused while a submit is in flight, and lists once it has committed', async () => {
    const w = wakeUp()
    const other = await t.pool.connect()
    try {
      await other.query('begin')
      await other.query(`select pgsched.submit_job('x', '{}')`)
      expect(await w.updateListing(false, undefined)).toBe('refused')
      // afterClaim waits SIGN_UP_RETRY_MS (not the poll interval) after a refusal, then lets the loop claim again.
      await w.afterClaim(false, undefined)
      expect(await listing()).toBeUndefined()
      await other.query('commit')
    } finally {
      other.release()
    }
    // Signed up idle: returns at once so the loop claims again.
    await w.afterClaim(false, undefined)
    expect(await listing()).toBe(IDLE_MIN_PRIORITY)
  })
})
