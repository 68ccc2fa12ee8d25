/**
 * A real PostgreSQL crash (SIGKILL of the postmaster, then a restart that runs crash recovery) on a
 * cluster of its own, created for this file with the Debian tools and dropped afterwards. Crash
 * recovery empties the unlogged wake-up listing (pgsched.waiting_workers) while every worker still
 * believes it is listed: submits then sent no wake-up, and submit → start fell back to the poll.
 * The worker here polls once a minute, so only a wake-up can start a job within seconds.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import { createLogger } from '../../src/logger.ts'
import { defineHandler, HandlerRegistry } from '../../src/worker/handlers.ts'
import { Worker } from '../../src/worker/worker.ts'
import { freePort } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'
import { fileOutputStore } from './harness.ts'

/** The newest PostgreSQL installed with the Debian tools (pg_createcluster). */
const VERSION = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))[0] as string
const CLUSTER = `crash${process.pid}`
const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' })
let url = ''
let dataDir = ''

function ctl(...args: string[]): string {
  return execFileSync(args[0] as string, args.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Starts the cluster, retrying while the killed server's processes still hold its shared memory. */
async function startCluster(): Promise<void> {
  await waitFor(
    () => {
      try {
        ctl('pg_ctlcluster', '--skip-systemctl-redirect', VERSION, CLUSTER, 'start')
        return true
      } catch {
        return false
      }
    },
    { what: `cluster ${CLUSTER} to start`, timeoutMs: 30_000, intervalMs: 200 },
  )
}

/** Drops clusters this test left behind in runs that were killed (named after a process gone since). */
function dropLeftovers(): void {
  for (const line of ctl('pg_lsclusters', '--no-header').split('\n')) {
    const [version, name] = line.trim().split(/\s+/)
    const pid = Number(/^crash(\d+)$/.exec(name ?? '')?.[1])
    if (!version || !pid || pid === process.pid) continue
    try {
      process.kill(pid, 0)
    } catch {
      ctl('pg_dropcluster', version, name as string, '--stop')
    }
  }
}

beforeAll(async () => {
  dropLeftovers()
  const port = await freePort()
  ctl('pg_createcluster', VERSION, CLUSTER, '-p', String(port), '--', '--auth=trust')
  await startCluster()
  url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const admin = createDb({ databaseUrl: url, poolSize: 1 })
  dataDir = (await admin.pool.query<{ data_directory: string }>('show data_directory')).rows[0]?.data_directory as string
  await admin.db.destroy()
  await migrate({ databaseUrl: url, log })
}, 60_000)

afterAll(() => {
  ctl('pg_dropcluster', VERSION, CLUSTER, '--stop')
})

describe('a PostgreSQL crash', () => {
  it('wake-ups work again once the server is back: submit → start within seconds, not at the next poll', { timeout: 120_000 }, async () => {
    const started = new Map<string, number>()
    const pool: Database = createDb({ databaseUrl: url, poolSize: 4, genericPlans: true, indexPlans: true, log })
    const worker = new Worker({
      db: pool.db,
      databaseUrl: url,
      log,
      handlers: new HandlerRegistry([defineHandler('x', async (ctx) => void started.set(ctx.jobId, Date.now()))]),
      queues: ['default'],
      concurrency: 4,
      leaseMs: 30_000,
      heartbeatMs: 5_000,
      pollIntervalMs: 60_000,
      shutdownGraceMs: 1_000,
      outputStore: fileOutputStore(),
    })
    const client = createClient({ databaseUrl: url })
    try {
      await worker.start()
      const submitAndStart = async (what: string) => {
        const submittedAt = Date.now()
        const { job } = await client.submitJob({ type: 'x' })
        await waitFor(() => started.has(job.id), { what, timeoutMs: 10_000 })
        return (started.get(job.id) as number) - submittedAt
      }
      await waitFor(async () => (await pool.pool.query('select count(*)::int as n from pgsched.waiting_workers')).rows[0].n === 1, {
        what: 'the worker to sign up',
      })
      expect(await submitAndStart('a job to start before the crash')).toBeLessThan(5_000)

      const postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0])
      process.kill(postmaster, 'SIGKILL')
      await startCluster()
      // The server ran crash recovery: the unlogged listing is empty, the worker's connections broke.
      await waitFor(
        async () => {
          try {
            return (await pool.pool.query('select count(*)::int as n from pgsched.waiting_workers')).rows[0].n === 1
          } catch {
            return false // connections broken by the crash; the pool opens new ones
          }
        },
        { what: 'the worker to sign up again after the crash', timeoutMs: 30_000, intervalMs: 100 },
      )
      const afterCrash = await submitAndStart('a job to start after the crash, without waiting for the poll')
      expect(afterCrash).toBeLessThan(5_000)
    } finally {
      await worker.stop()
      await client.close()
      await pool.db.destroy()
    }
  })
})
