/**
 * A claim that commits while its answer is lost (the connection cut in between: a pooler or proxy
 * restart, a network cut, a failover) leaves its executions leased to a worker that does not know
 * them. The claim marked them begun, so when the lease ran out the reaper counted an attempt: a job
 * with one attempt ended FAILED without its handler ever running. The worker now hands such leases
 * back, uncounted, before its next claim.
 */
import { connect, createServer, type Socket } from 'node:net'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { createDb } from '../../src/db/pool.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

/**
 * A proxy that, while armed, passes each claim statement to the server (which runs and commits it)
 * but drops its answer and cuts the connection. A claim is told by its text, or, once prepared, by
 * the name it was prepared under.
 */
async function claimAnswerCutter(target: { host: string; port: number }) {
  const claimNames = new Set<string>()
  let armed = false
  let cuts = 0
  const server = createServer((client: Socket) => {
    const upstream = connect(target.port, target.host)
    let dropping = false
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1')
      const claimText = text.includes('insert into pgsched.runs (execution_id')
      if (claimText) for (const m of text.matchAll(/pgsched_[0-9a-f]{24}/g)) claimNames.add(m[0])
      const isClaim = claimText || [...claimNames].some((n) => text.includes(n))
      upstream.write(chunk)
      if (armed && isClaim) {
        dropping = true
        cuts++
        // long enough for the server to run and commit the claim, with no byte of its answer passed on
        setTimeout(() => {
          client.destroy()
          upstream.destroy()
        }, 300)
      }
    })
    upstream.on('data', (chunk: Buffer) => {
      if (!dropping) client.write(chunk)
    })
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as { port: number }).port,
    arm: (on: boolean) => {
      armed = on
    },
    cuts: () => cuts,
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}

describe('a claim whose answer is lost', () => {
  it('hands its executions back uncounted, so the job runs once and succeeds instead of failing unrun', async () => {
    const target = new URL(t.url)
    const proxy = await claimAnswerCutter({ host: target.hostname, port: Number(target.port || 5432) })
    const via = new URL(t.url)
    via.hostname = '127.0.0.1'
    via.port = String(proxy.port)
    const proxied = createDb({ databaseUrl: via.toString(), poolSize: 4, log: t.log })
    try {
      let ran = 0
      await startWorker(
        [
          defineHandler('once', async () => {
            ran++
          }),
        ],
        { db: proxied.db, databaseUrl: t.url, concurrency: 1, leaseMs: 2_000, heartbeatMs: 500, pollIntervalMs: 200 },
      )
      const client = createClient({ db: t.db, tenant: 'acme' })
      proxy.arm(true)
      const { job } = await client.submitJob({ type: 'once', maxAttempts: 1 })
      // a claim whose answer was cut took the job: its lease is this worker's, as the database sees it
      await waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.runs where job_id = ${job.id}::uuid`.execute(t.db)
          return proxy.cuts() > 0 && rows[0]?.n === 1
        },
        { what: 'a cut claim to take the job' },
      )
      proxy.arm(false)
      const reaper = new Reaper({ db: t.db, log: t.log, intervalMs: 200, batchSize: 100 })
      // the reaper runs in every worker; here too, so that an expired lease is seen as soon as it expires
      const ended = await waitFor(
        async () => {
          await reaper.runOnce()
          const status = (await client.viewJob(job.id)).status
          return status === 'COMPLETED' || status === 'FAILED' ? status : null
        },
        { timeoutMs: 15_000, intervalMs: 200, what: 'the job to end' },
      )
      expect([ended, ran]).toEqual(['COMPLETED', 1])
      const [execution] = (await client.listExecutions(job.id)).items
      expect(execution?.attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'succeeded']])
    } finally {
      await proxied.db.destroy()
      await proxy.close()
    }
  })
})
