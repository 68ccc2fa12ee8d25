/**
 * A handler's return value is the handler's, not the worker's: one that looks like a promise but
 * whose `then` throws (a method that throws, or a getter that throws, as a strict proxy's does) must
 * fail that attempt, as `await` would, and not throw out of the executor's microtask, which ends
 * the whole worker process with every other run it holds.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('a handler that returns a thenable whose then throws', () => {
  for (const [type, make] of [
    [
      'then.method',
      () => ({
        // biome-ignore lint/suspicious/noThenProperty: what the handler returns is exactly this
        then: () => {
          throw new Error('then method failed')
        },
      }),
    ],
    [
      'then.getter',
      () =>
        new Proxy(
          {},
          {
            get(_target, key) {
              throw new Error(`no property ${String(key)}`)
            },
          },
        ),
    ],
  ] as const) {
    it(`fails the attempt (${type}) and the worker goes on running other jobs`, async () => {
      const uncaught: unknown[] = []
      const onUncaught = (err: unknown) => uncaught.push(err)
      process.on('uncaughtException', onUncaught)
      try {
        await startWorker([defineHandler(type, make), defineHandler('ok', () => ({ ok: true }))], { leaseMs: 60_000, heartbeatMs: 1_000 })
        const client = createClient({ db: t.db, tenant: 'acme' })
        const bad = (await client.submitJob({ type, maxAttempts: 1 })).job.id
        await waitFor(async () => (await client.viewJob(bad)).status === 'FAILED' || uncaught.length > 0, { timeoutMs: 10_000, what: 'the job to fail' })
        expect(uncaught).toEqual([])
        expect((await client.viewJob(bad)).status).toBe('FAILED')
        const good = (await client.submitJob({ type: 'ok' })).job.id
        await waitFor(async () => (await client.viewJob(good)).status === 'COMPLETED', { timeoutMs: 10_000, what: 'the next job to succeed' })
      } finally {
        process.off('uncaughtException', onUncaught)
      }
    })
  }
})
