/**
 * pgsched.due_waiting (migration 0063): the work due now by queue and type, and what holds it, for an
 * operator in psql. Each reason is made real (a paused queue, no live worker, a worker without the
 * handler, a concurrency limit reached, a rate limit's next start ahead) and named; once nothing but a
 * free slot holds the work, waiting_for is null.
 */
import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
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
}

async function waiting(queue: string): Promise<Row[]> {
  const { rows } = await sql<Row>`
    select queue, type, due::text, top_priority, waiting_for from pgsched.due_waiting where queue = ${queue} order by type`.execute(t.db)
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
})
