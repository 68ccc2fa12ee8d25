/**
 * A handler's error must always end its attempt. One whose message could not be read (a getter that
 * throws) or could not be stored (longer than a jsonb string holds) failed the outcome statement
 * every time it was written, and the outcome writer took that for an unreachable database: it
 * retried for as long as the worker lived, the heartbeat renewing the lease, so the job stayed
 * RUNNING and nothing was logged. Now the first becomes an error saying its message cannot be read,
 * and a message longer than ERROR_MESSAGE_MAX_CHARS is cut, saying how much (the same error class,
 * so a FatalError stays fatal).
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { ERROR_MESSAGE_MAX_CHARS, FatalError } from '../../src/errors.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

// a lease far longer than the waits: only a failure the worker writes can end these jobs in time
const LONG_LEASE = { leaseMs: 60_000, heartbeatMs: 1_000 }

describe("a handler's error that cannot be stored as it is", () => {
  it('fails the attempt of an Error whose message getter throws, saying its message cannot be read', async () => {
    await startWorker(
      [
        defineHandler('getter.message', () => {
          const err = new Error('placeholder')
          Object.defineProperty(err, 'message', {
            get() {
              throw new Error('message getter failed')
            },
          })
          throw err
        }),
      ],
      LONG_LEASE,
    )
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'getter.message', maxAttempts: 1 })
    await waitFor(async () => (await client.viewJob(job.id)).status === 'FAILED', { timeoutMs: 10_000, what: 'the job to fail' })
    expect((await client.viewJob(job.id)).lastExecution?.error).toMatchObject({
      name: 'Error',
      message: 'the handler threw an error whose message or name cannot be read: message getter failed',
    })
  })

  it('cuts a message past the limit, saying how much, and keeps a fatal error fatal', async () => {
    class UpstreamRefused extends FatalError {
      override name = 'UpstreamRefused'
    }
    const body = 'x'.repeat(1_000_000)
    await startWorker([defineHandler('long.message', () => Promise.reject(new UpstreamRefused(`upstream said: ${body}`)))], LONG_LEASE)
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'long.message', maxAttempts: 3 })
    await waitFor(async () => (await client.viewJob(job.id)).status === 'FAILED', { timeoutMs: 10_000, what: 'the job to fail' })
    const error = (await client.viewJob(job.id)).lastExecution?.error
    const full = `upstream said: ${body}`
    expect(error).toMatchObject({
      name: 'UpstreamRefused',
      fatal: true,
      attempt: 1, // fatal: not retried
      message: `${full.slice(0, ERROR_MESSAGE_MAX_CHARS)}… (${full.length - ERROR_MESSAGE_MAX_CHARS} more characters cut)`,
    })
    const { rows } = await sql<{ n: number }>`select octet_length(error::text)::int as n from pgsched.executions where job_id = ${job.id}::uuid`.execute(t.db)
    expect(rows[0]?.n).toBeLessThan(ERROR_MESSAGE_MAX_CHARS + 1_000)
  })
})
