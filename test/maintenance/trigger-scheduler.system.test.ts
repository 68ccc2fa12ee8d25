import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { useWorkerProcesses, waitFor } from '../worker/processes.ts'

const t = useTestDb()
const { spawnWorker, ledger } = useWorkerProcesses(t)
const client = () => createClient({ db: t.db, tenant: 'acme' })

describe('recurring jobs with worker processes', () => {
  it('every-second cron over 10 s with 3 processes dispatching: exactly one execution per second, no gaps, no duplicates', { timeout: 90_000 }, async () => {
    const workers = [spawnWorker(), spawnWorker(), spawnWorker()]
    await Promise.all(workers.map((w) => w.ready))
    const { job } = await client().submitJob({ type: 'ledger.sleep', payload: { ms: 50 }, schedule: { cron: '* * * * * *' } })
    const first = job.nextRunAt as Date
    const last = new Date(first.getTime() + 10_000)
    await waitFor(
      async () => {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pgsched.executions
           where job_id = ${job.id}::uuid and scheduled_for <= ${last}::timestamptz and state = 'succeeded'`.execute(t.db)
        return (rows[0]?.n ?? 0) >= 11
      },
      { timeoutMs: 40_000, intervalMs: 200, what: '11 fire times to run' },
    )
    await client().pauseJob(job.id)

    const { rows } = await sql<{ id: string; scheduled_for: Date; run_at: Date; started_at: Date; state: string; attempt: number }>`
      select id, scheduled_for, run_at, started_at, state, attempt from pgsched.executions
       where job_id = ${job.id}::uuid and scheduled_for <= ${last}::timestamptz
       order by scheduled_for`.execute(t.db)
    // One execution for each second from the first fire time: no gap, none twice.
    expect(rows.map((r) => r.scheduled_for.getTime())).toEqual(Array.from({ length: 11 }, (_, i) => first.getTime() + i * 1000))
    expect(rows.every((r) => r.state === 'succeeded' && r.attempt === 1)).toBe(true)
    // (Dispatched on time: a pass later than the misfire threshold would have merged seconds under
    // fire_once, leaving a gap above.) Never early: each is due at its fire time (created up to
    // SCHEDULER_DISPATCHER_AHEAD_MS before it) and started at or after it.
    for (const r of rows) {
      expect(r.run_at.getTime()).toBe(r.scheduled_for.getTime())
      expect(r.started_at.getTime()).toBeGreaterThanOrEqual(r.scheduled_for.getTime())
    }
    // Each ran exactly once.
    const ran = (await ledger()).filter((l) => rows.some((r) => r.id === l.execution_id))
    expect(ran.map((l) => l.execution_id).sort()).toEqual(rows.map((r) => r.id).sort())
    // Every process runs the dispatcher.
    for (const w of workers) expect(w.output()).toContain('"msg":"trigger scheduler started"')
  })
})
