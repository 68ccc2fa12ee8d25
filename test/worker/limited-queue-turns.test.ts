/**
 * A worker serving an unlimited queue and limited or fair-share ones claims from each in turn: a
 * backlog in the unlimited queue, which fills every claim it is asked first, does not hold back the
 * others' due work until that backlog is gone.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('a limited and a fair-share queue beside an unlimited queue with a backlog, on one worker', () => {
  it('start their due jobs while the backlog runs', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.queues.setConcurrencyLimit('limited', 5)
    await client.queues.setFairShare('fair', true)
    const started: string[] = []
    const nap = defineHandler('nap', async (ctx) => {
      started.push(ctx.queue)
      await sleep(50)
    })
    await startWorker([nap], { queues: ['bulk', 'limited', 'fair'], concurrency: 4 })
    // about 10 s of work for 4 slots
    await client.submitJobs(Array.from({ length: 800 }, () => ({ type: 'nap', queue: 'bulk' })))
    await waitFor(() => started.length >= 10, { what: 'the backlog to run' })
    await client.submitJob({ type: 'nap', queue: 'limited', priority: 1000 })
    await client.submitJob({ type: 'nap', queue: 'fair', priority: 1000 })
    await waitFor(() => started.includes('limited') && started.includes('fair'), { what: 'the limited and the fair job to start', timeoutMs: 5_000 })
    // started while the backlog still ran, not after it
    expect(started.length).toBeLessThan(400)
  })
})
