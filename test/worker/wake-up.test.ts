/**
 * Wake-ups go only to waiting workers (migration 0006): a submit of due work
 * notifies when a worker serving its queue has signed up, and the sign-up
 * handshake cannot lose a submit that was in flight.
 */
import pg from 'pg'
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { workerSignUpWaiting } from '../../src/db/queries/workers.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
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
  const seen: Array<{ queues: string[]; delayMs: number; priority?: number } | 'sentinel'> = []
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
    expect(await l.before()).toEqual([{ queues: ['emails'], delayMs: 0, priority: 7 }])
  })

  it('wakes a worker holding prefetched work only for work of higher priority than it holds', async () => {
    const l = await listen()
    // Listed as a worker whose best buffered execution has priority 4.
    expect(await workerSignUpWaiting(t.db, { id: '00000000-0000-7000-8000-000000000004', queues: ['default'], minPriority: 5 })).toBe(true)
    await client().submitJob({ type: 'x', priority: 4 })
    expect(await l.before()).toEqual([])
    await client().submitJobs([{ type: 'x', priority: 1 }, { type: 'x', priority: 9 }])
    expect(await l.before()).toEqual([{ queues: ['default'], delayMs: 0, priority: 9 }])
  })

  it('always announces work due later, with its delay', async () => {
    const l = await listen()
    await client().submitJob({ type: 'x', queue: 'emails', schedule: { at: new Date(Date.now() + 60_000).toISOString() } })
    const [n] = await l.before()
    expect(n).toMatchObject({ queues: ['emails'] })
    expect((n as { delayMs: number }).delayMs).toBeGreaterThan(50_000)
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
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).length === 1,
      { what: 'the worker to sign up' })
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
