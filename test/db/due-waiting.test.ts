/**
 * pgsched.due_waiting (migrations 0063, 0066): the work due now by queue and type, and what holds it,
 * for an operator in psql. Each reason is made real (a paused queue, no live worker, a worker without
 * the handler, a concurrency limit reached, a rate limit's next start ahead, a concurrency key at its
 * limit or with its next start ahead) and named; once nothing but a free slot holds the work,
 * waiting_for is null. The limits per key are made real by the worker's own claim, which must agree.
 */
import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { queueClaimLimited } from '../../src/db/queries/claim-limited.ts'
import { workerRegister } from '../../src/db/queries/workers.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'

const t = useTestDb()

interface Row {
  queue: string
  type: string
  due: string
  top_priority: number
  waiting_for: string | null
  held_by_key: string
}

async function waiting(queue: string): Promise<Row[]> {
  const { rows } = await sql<Row>`
    select queue, type, due::text, top_priority, waiting_for, held_by_key::text from pgsched.due_waiting where queue = ${queue} order by type`.execute(t.db)
  return rows
}

const worker = (queues: string[], types: string[]) =>
  workerRegister(t.db, { id: randomUUID(), host: 'h', pid: 1, queues, types, concurrency: 10, leaseMs: 30_000 })

describe('pgsched.due_waiting', () => {
  it('names what holds work due now, reason by reason, and nothing once only a free slot does', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.submitJobs([
      { type: 'mail', queue: 'q' },
      { type: 'mail', queue: 'q', priority: 5 },
      { type: 'pdf', queue: 'q' },
    ])
    // work due later is not due now
    await client.submitJob({ type: 'mail', queue: 'q', schedule: { at: new Date(Date.now() + 3_600_000) } })
    expect((await waiting('q')).map((r) => [r.type, r.due, r.top_priority])).toEqual([
      ['mail', '2', 5],
      ['pdf', '1', 0],
    ])
    expect((await waiting('q')).map((r) => r.waiting_for)).toEqual([
      'no live worker serves the queue: start one with --queues q',
      'no live worker serves the queue: start one with --queues q',
    ])

    await worker(['q'], ['mail'])
    // a worker stopped long ago is not live
    await worker(['q'], ['pdf'])
    await sql`update pgsched.workers set stopped_at = now() where 'pdf' = any(types)`.execute(t.db)
    expect((await waiting('q')).map((r) => r.waiting_for)).toEqual([null, 'no live worker serving the queue has a handler for the type'])

    await sql`select pgsched.pause_queue('q')`.execute(t.db)
    expect((await waiting('q'))[0]?.waiting_for).toMatch(/^the queue is paused \(since .+\): pgsched\.resume_queue\('q'\)$/)
    await sql`select pgsched.resume_queue('q')`.execute(t.db)

    await sql`select pgsched.set_queue_concurrency_limit('q', 1)`.execute(t.db)
    expect((await waiting('q'))[0]?.waiting_for).toBeNull()
    await insertExecution(t.db, { state: 'running', job: { queue: 'q', type: 'mail', tenant: 'acme' } })
    expect((await waiting('q'))[0]?.waiting_for).toBe('the queue is at its concurrency limit (1 running)')
    await sql`select pgsched.set_queue_concurrency_limit('q', null)`.execute(t.db)

    await sql`select pgsched.set_queue_rate_limit('q', 10, 60000)`.execute(t.db)
    expect((await waiting('q'))[0]?.waiting_for).toBeNull()
    await sql`update pgsched.queues set next_start_at = now() + interval '1 minute' where name = 'q'`.execute(t.db)
    expect((await waiting('q'))[0]?.waiting_for).toMatch(/^the queue's rate limit: its next start is at /)
  })

  it('names the concurrency keys that hold all the work, with what of each runs against the limit per key or its next start', async () => {
    const acme = createClient({ db: t.db, tenant: 'acme' })
    const keyed = (n: number, concurrencyKey: string, client = acme) =>
      client.submitJobs(Array.from({ length: n }, () => ({ type: 'mail', queue: 'keyed', concurrencyKey })))
    const take = async () =>
      (await queueClaimLimited(t.db, { workerId: randomUUID(), queues: ['keyed'], types: ['mail'], limit: 20, leaseMs: 60_000 })).claimed.length
    const row = async () => {
      const [r] = await waiting('keyed')
      return [r?.due, r?.held_by_key, r?.waiting_for]
    }
    await worker(['keyed'], ['mail'])
    await sql`select pgsched.set_queue_key_concurrency_limit('keyed', 1)`.execute(t.db)
    await keyed(2, 'A')
    expect(await row()).toEqual(['2', '0', null])

    // one runs, the other waits for its key, and the claim agrees
    expect(await take()).toBe(1)
    expect(await row()).toEqual(['1', '1', "its concurrency key is at the queue's limit per key: 'A' of tenant 'acme' (1 running, limit 1)"])
    expect(await take()).toBe(0)

    // keys are counted per tenant: another tenant's A is claimable, so the work is not all held
    await keyed(1, 'A', createClient({ db: t.db, tenant: 'globex' }))
    expect(await row()).toEqual(['2', '1', null])
    expect(await take()).toBe(1)

    // several keys at the limit: the first three named, the rest counted
    await keyed(2, 'B')
    await keyed(2, 'C')
    await keyed(2, 'D')
    expect(await take()).toBe(3)
    expect(await row()).toEqual([
      '4',
      '4',
      "all 4 of its concurrency keys are at the queue's limits per key: 'A' of tenant 'acme' (1 running, limit 1), " +
        "'B' of tenant 'acme' (1 running, limit 1), 'C' of tenant 'acme' (1 running, limit 1), and 1 more",
    ])

    // a rate limit per key instead: a key whose next start lies ahead holds its work
    await sql`select pgsched.set_queue_key_concurrency_limit('keyed', null)`.execute(t.db)
    await sql`select pgsched.set_queue_key_rate_limit('keyed', 1, 60000)`.execute(t.db)
    expect(await row()).toEqual(['4', '0', null])
    expect(await take()).toBe(4)
    await keyed(1, 'A')
    const [, held, reason] = await row()
    expect(held).toBe('1')
    expect(reason).toMatch(/^its concurrency key is at the queue's limit per key: 'A' of tenant 'acme' \(rate limit per key: next start at .+\)$/)
    expect(await take()).toBe(0)

    // an operator view, but cheap: it reads what is due and runs now, never the history
    const { rows } = await sql<{ 'QUERY PLAN': unknown }>`explain (format json) select * from pgsched.due_waiting`.execute(t.db)
    const plan = JSON.stringify(rows)
    expect(plan).toContain('"Relation Name":"due"')
    expect(plan).not.toContain('execution_history')
  })
})
