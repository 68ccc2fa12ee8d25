import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { Completer } from '../../src/worker/completer.ts'
import { lockWaiters, useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000c0'

async function claimed(n: number) {
  await createClient({ db: t.db, tenant: 'acme' }).submitJobs(Array.from({ length: n }, () => ({ type: 'c' })))
  return executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['c'], limit: n, leaseMs: 60_000 })
}

describe('Completer.exclusive', () => {
  it('waits for the outcome write in flight, and holds back writes recorded meanwhile until it returns', async () => {
    const [a, b] = await claimed(2)
    if (!a || !b) throw new Error('claim failed')
    const completer = new Completer({ db: t.db, workerId: WORKER, log: t.log })
    const done = (c: typeof a) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: 'null', outputUri: null })
    const state = async (id: string) => (await t.db.selectFrom('pgsched.executions').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state

    // Block the write of `a` behind a row lock held by another connection.
    const blocker = await t.pool.connect()
    await blocker.query('begin')
    await blocker.query('select 1 from pgsched.runs where execution_id = $1 for update', [a.id])
    const writeA = completer.complete(done(a))
    await waitFor(async () => (await lockWaiters(t.db)) === 1, { what: 'the write to wait on the lock' })

    // Each step is recorded as it happens; the order shows who waited for whom.
    const order: string[] = []
    void writeA.then(() => order.push('write a ends'))
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => {
      release = resolve
    })
    const exclusive = completer.exclusive(async () => {
      order.push('exclusive starts')
      await gate
      order.push(`exclusive ends, b ${await state(b.id)}`)
    })

    await blocker.query('commit')
    blocker.release()
    expect(await writeA).toEqual({ accepted: true })
    await waitFor(() => order.includes('exclusive starts'), { what: 'the exclusive statement to start' })

    const writeB = completer.complete(done(b))
    void writeB.then(() => order.push('write b ends'))
    release()
    await exclusive
    expect(await writeB).toEqual({ accepted: true })
    // The exclusive statement started only after write a ended, and b was still unwritten when it ended.
    expect(order).toEqual(['write a ends', 'exclusive starts', 'exclusive ends, b running', 'write b ends'])
    expect(await state(b.id)).toBe('succeeded')
  })
})
