/**
 * A notification on `pgsched_cancel` is not a cancel: any role that can connect to the database may
 * send one (pg_notify needs no privilege; docs/roles.md's read-only role, which writes nothing, reads
 * every execution id in pgsched.runs). A worker that aborted a handler on the notification alone
 * stopped renewing a lease it still held: the run stayed RUNNING until the lease expired and the
 * reaper recorded a lost lease, an attempt spent, the job FAILED on its last one with a
 * LeaseExpiredError that blamed the worker. The worker now aborts only runs the database shows
 * cancelled (their lease gone), and still does so at once for a real cancel.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

describe('a pgsched_cancel notification', () => {
  it('that no cancel sent does not abort the handler of a run the database still leases to the worker; a real cancel does', {
    timeout: 30_000,
  }, async () => {
    const aborted = new Set<string>()
    const releases = new Map<string, () => void>()
    const handler = defineHandler('forged.slow', async (ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.add(ctx.jobId))
      await new Promise<void>((resolve) => {
        releases.set(ctx.jobId, resolve)
        ctx.signal.addEventListener('abort', () => resolve())
      })
      return { done: true }
    })
    const config = loadConfig({
      DATABASE_URL: t.url,
      SCHEDULER_WORKER_METRICS_PORT: 'off',
      SCHEDULER_LEASE_MS: '3000',
      SCHEDULER_HEARTBEAT_MS: '500',
      SCHEDULER_REAPER_INTERVAL_MS: '200',
    })
    const { log, lines } = capturingLogger<{ msg: string; executionIds?: string[] }>('warn')
    const system = createWorkerSystem({ config, log, handlers: [handler] })
    const client = createClient({ db: t.db })
    await system.start()
    try {
      const { job } = await client.submitJob({ type: 'forged.slow', maxAttempts: 1 })
      await waitFor(() => releases.has(job.id), { what: 'the handler to start' })
      const { rows } = await sql<{ id: string; expires: Date }>`
        select execution_id::text as id, lease_expires_at as expires from pgsched.runs where job_id = ${job.id}::uuid`.execute(t.db)
      const run = rows[0]
      if (!run) throw new Error('no run')

      // what any connected role can do: no cancel, only the notification
      const forger = new pg.Client({ connectionString: t.url })
      await forger.connect()
      try {
        await forger.query(`select pg_notify('pgsched_cancel', $1)`, [JSON.stringify([run.id])])
      } finally {
        await forger.end()
      }
      const ignored = await waitFor(() => lines.find((l) => l.msg.includes('no cancel sent it')), { what: 'the notification found to be no cancel' })
      expect(ignored.executionIds).toEqual([run.id])
      expect(aborted.has(job.id)).toBe(false)
      // the worker goes on renewing its lease, past the one it held when the notification came
      await waitFor(
        async () => {
          const { rows: now } = await sql<{ expires: Date }>`
            select lease_expires_at as expires from pgsched.runs where execution_id = ${run.id}::uuid`.execute(t.db)
          return (now[0]?.expires.getTime() ?? 0) > run.expires.getTime() + 1_000
        },
        { what: 'the lease renewed after the notification' },
      )
      expect(aborted.has(job.id)).toBe(false)
      releases.get(job.id)?.()
      await waitFor(async () => (await client.viewJob(job.id)).status !== 'RUNNING', { what: 'the job to end' })
      expect(await client.viewJob(job.id)).toMatchObject({ status: 'COMPLETED', lastExecution: { result: { done: true } } })

      // a real cancel still aborts the handler at once, well within the lease
      const { job: second } = await client.submitJob({ type: 'forged.slow', maxAttempts: 1 })
      await waitFor(() => releases.has(second.id), { what: 'the second handler to start' })
      await client.cancelJob(second.id)
      await waitFor(() => aborted.has(second.id), { what: 'the cancelled handler aborted', timeoutMs: 2_000 })
    } finally {
      for (const release of releases.values()) release()
      await system.stop()
      await client.close()
    }
  })
})
