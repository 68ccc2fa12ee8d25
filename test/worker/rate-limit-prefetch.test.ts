/**
 * A rate-limited queue beside busy slots: a worker that prefetches (the default) claimed a paced
 * queue's executions ahead into its buffer, where they waited for a free slot and then started at
 * "slot free + their delay", several together: 17 starts in a second under a limit of 10 a second.
 * A paced queue's claim now takes the free slots only, each run starting at its slot. And a raised
 * limit applies to the next claim: the start slots taken under the old one (a minute apart) held the
 * queue's next starts back until the old next slot.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

/** The most starts in any window of `periodMs` beginning at a start. */
function mostInAnyPeriod(starts: readonly number[], periodMs: number): number {
  let most = 0
  for (const s of starts) most = Math.max(most, starts.filter((x) => x >= s && x < s + periodMs).length)
  return most
}

describe('a rate-limited queue on a worker that prefetches', () => {
  it('never starts more than the rate in any period, while other work holds the slots', { timeout: 60_000 }, async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.queues.setRateLimit('paced', 10, 1_000)
    const starts: number[] = []
    await startWorker(
      [
        defineHandler('sleep', async (ctx) => {
          await new Promise((resolve) => setTimeout(resolve, (ctx.payload as { ms: number }).ms))
        }),
        defineHandler('tick', () => void starts.push(Date.now())),
      ],
      { queues: ['other', 'paced'], concurrency: 5, prefetch: 1000 },
    )
    // the worker claiming (a first job run), then every slot busy for most of a second, then the paced backlog
    const { job } = await client.submitJob({ type: 'sleep', queue: 'other', payload: { ms: 5 } })
    await waitFor(async () => (await client.viewJob(job.id)).status === 'COMPLETED', { what: 'the first job' })
    for (let i = 0; i < 5; i++) await client.submitJob({ type: 'sleep', queue: 'other', payload: { ms: 900 } })
    await client.submitJobs(Array.from({ length: 40 }, () => ({ type: 'tick', queue: 'paced' })))
    await waitFor(() => starts.length >= 25, { what: '25 paced starts', timeoutMs: 30_000 })
    // Slots are 107 ms apart, so ten fit in a second; a start whose timer fired late (by more than
    // 70 ms, on a loaded machine) can bring an eleventh of its slots into the second after it, and a
    // twelfth one later by 177 ms. Claimed ahead, they started in bunches: 17 and 18 in a second.
    expect(mostInAnyPeriod(starts, 1_000)).toBeLessThanOrEqual(12)
  })
})

describe('a raised rate limit', () => {
  for (const [what, set, job] of [
    ['of the queue', 'setRateLimit', {}],
    ['per key', 'setKeyRateLimit', { concurrencyKey: 'customer-7' }],
  ] as const) {
    it(`${what} applies to the next claim, not after the old limit's next slot`, { timeout: 60_000 }, async () => {
      const client = createClient({ db: t.db, tenant: 'acme' })
      await client.queues[set]('paced', 1, 60_000)
      const starts: number[] = []
      await startWorker([defineHandler('tick', () => void starts.push(Date.now()))], { queues: ['paced'] })
      await client.submitJobs(Array.from({ length: 5 }, () => ({ type: 'tick', queue: 'paced', ...job })))
      await waitFor(() => starts.length >= 1, { what: 'the first start' })
      // the next slot is a minute away under the old limit
      await client.queues[set]('paced', 100, 1_000)
      await waitFor(() => starts.length >= 5, { what: 'the other four starts at the new pace', timeoutMs: 10_000 })
    })
  }
})
