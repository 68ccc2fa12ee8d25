import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { selfOverlaps, useWorkerProcesses, waitFor } from './processes.ts'

const t = useTestDb()
const { spawnWorker, ledger } = useWorkerProcesses(t)
const client = () => createClient({ db: t.db, tenant: 'acme' })

async function countByState(): Promise<Record<string, number>> {
  const { rows } = await sql<{ state: string; n: number }>`select state, count(*)::int as n from pgsched.executions group by state`.execute(t.db)
  return Object.fromEntries(rows.map((r) => [r.state, r.n]))
}

describe('worker processes', () => {
  it('run 5,000 jobs across 3 processes: each exactly once, never concurrently, in priority order', { timeout: 150_000 }, async () => {
    const jobs = Array.from({ length: 5000 }, (_, i) => ({ type: 'ledger.sleep', priority: ((i * 7919) % 11) - 5, payload: { ms: 0 } }))
    await client().submitJobs(jobs)
    const workers = [spawnWorker(), spawnWorker(), spawnWorker()]
    await Promise.all(workers.map((w) => w.ready))
    await waitFor(async () => (await countByState()).succeeded === 5000, { timeoutMs: 120_000, intervalMs: 200, what: '5,000 successes' })
    const rows = await ledger()
    expect(rows).toHaveLength(5000)
    expect(new Set(rows.map((r) => r.execution_id)).size).toBe(5000)
    expect(selfOverlaps(rows)).toEqual([])
    // Priority: no job may start while more than the in-flight capacity (3 × 10) of higher-priority jobs still wait.
    const { rows: starts } = await sql<{ priority: number }>`
      select priority from pgsched.executions order by started_at, priority desc`.execute(t.db)
    const laterByPriority = new Map<number, number>()
    let worst = 0
    for (let i = starts.length - 1; i >= 0; i--) {
      const p = (starts[i] as { priority: number }).priority
      let higherLater = 0
      for (const [q, n] of laterByPriority) if (q > p) higherLater += n
      worst = Math.max(worst, higherLater)
      laterByPriority.set(p, (laterByPriority.get(p) ?? 0) + 1)
    }
    process.stderr.write(`priority: at most ${worst} higher-priority jobs started after a lower one (bound 30)\n`)
    expect(worst).toBeLessThanOrEqual(30)
  })

  it("runs a SIGKILLed worker's execution again on another worker after its lease expires, counting the lost attempt", async () => {
    const env = { SCHEDULER_LEASE_MS: '2000', SCHEDULER_HEARTBEAT_MS: '500', SCHEDULER_REAPER_INTERVAL_MS: '200', SCHEDULER_POLL_INTERVAL_MS: '200' }
    const workers = [spawnWorker({ env }), spawnWorker({ env })]
    await Promise.all(workers.map((w) => w.ready))
    const { job } = await client().submitJob({ type: 'ledger.sleep', payload: { ms: 1500 }, backoffBaseMs: 0, backoffMaxMs: 0 })
    const [first] = await waitFor(async () => ((await ledger()).length > 0 ? await ledger() : null), { what: 'first attempt to start' })
    const victim = workers.find((w) => w.pid === first?.pid)
    expect(victim).toBeDefined()
    victim?.child.kill('SIGKILL')
    const killedAt = new Date()
    await victim?.exited
    const done = await waitFor(
      async () => {
        const v = await client().viewJob(job.id)
        return v.status === 'COMPLETED' ? v : null
      },
      { timeoutMs: 20_000, what: 'job to complete on the other worker' },
    )
    expect(done.lastExecution?.attempt).toBe(2)
    const rows = await ledger()
    expect(rows.map((r) => [r.attempt, r.pid, r.outcome])).toEqual([
      [1, victim?.pid, null],
      [2, workers.find((w) => w !== victim)?.pid, 'ok'],
    ])
    expect(selfOverlaps(rows, new Map([[victim?.pid as number, killedAt]]))).toEqual([])
  })

  it("runs a SIGKILLed worker's executions that waited in its local queue again without counting an attempt; those that began count it", async () => {
    const env = { SCHEDULER_LEASE_MS: '2000', SCHEDULER_HEARTBEAT_MS: '500', SCHEDULER_REAPER_INTERVAL_MS: '200', SCHEDULER_POLL_INTERVAL_MS: '200' }
    // concurrency 4: prefetch holds what its slots start within 100 ms at the mean run time
    const victim = spawnWorker({ env, concurrency: 4 })
    await victim.ready
    // one run first: prefetch sizes itself by the mean run time, unknown until a run has ended. A run
    // that touches no database (switch.fail with no switch file returns at once), so that the mean stays
    // far below 100 ms however busy the machine is, and the first claim takes all 12 (4 started, 8 ahead)
    const { job: warm } = await client().submitJob({ type: 'switch.fail', payload: { failWhile: '/nonexistent/pgsched-switch' } })
    await waitFor(async () => (await client().viewJob(warm.id)).status === 'COMPLETED', { what: 'the first job' })
    // one attempt each: before, a lost lease counted one whether its handler had started or not,
    // so the jobs that waited in the killed worker's local queue ended failed without having run
    const once = { maxAttempts: 1, backoffBaseMs: 0, backoffMaxMs: 0 }
    const four = (priority: number, ms: number) => Array.from({ length: 4 }, () => ({ type: 'ledger.sleep', priority, payload: { ms }, ...once }))
    const jobs = await client().submitJobs([...four(10, 1000), ...four(9, 60_000), ...four(0, 0)])
    const ids = jobs.map((j) => j.id)
    const [short, long, low] = [ids.slice(0, 4), ids.slice(4, 8), ids.slice(8)]
    const began = async () => {
      const { rows } = await sql<{ job_id: string; began: boolean }>`select job_id, began from pgsched.runs`.execute(t.db)
      return new Map(rows.map((r) => [r.job_id, r.began]))
    }
    // the claim marks begun the runs it starts at once, not those it took ahead into the local queue
    const first = await waitFor(
      async () => {
        const m = await began()
        return m.size === 12 ? m : null
      },
      { what: 'a claim of all 12, 8 of them beyond the free slots' },
    )
    expect(
      [...first]
        .filter(([, b]) => b)
        .map(([id]) => id)
        .sort(),
    ).toEqual([...short].sort())
    // the next four start when the first end; the next heartbeat marks them begun
    const held = await waitFor(
      async () => {
        const m = await began()
        return long.every((id) => m.get(id) === true) ? m : null
      },
      { what: 'the second four marked begun' },
    )
    const waiting = [...held].filter(([, b]) => !b).map(([id]) => id)
    expect(waiting.length).toBeGreaterThan(0)
    expect(waiting.every((id) => low.includes(id))).toBe(true)
    expect((await ledger()).filter((r) => waiting.includes(r.job_id))).toEqual([])
    victim.child.kill('SIGKILL')
    await victim.exited
    const other = spawnWorker({ env })
    await other.ready
    const ended = await waitFor(
      async () => {
        const views = await Promise.all(jobs.map((j) => client().viewJob(j.id)))
        return views.every((v) => v.status === 'COMPLETED' || v.status === 'FAILED') ? views : null
      },
      { timeoutMs: 20_000, what: 'every job to end' },
    )
    expect(ended.map((v) => [v.status, v.lastExecution?.attempt])).toEqual([
      ...short.map(() => ['COMPLETED', 1]),
      ...long.map(() => ['FAILED', 1]),
      ...low.map(() => ['COMPLETED', 1]),
    ])
    for (const v of ended.slice(4, 8)) expect(v.lastExecution?.error).toMatchObject({ name: 'LeaseExpiredError' })
    const rows = await ledger()
    for (const id of low) expect(rows.filter((r) => r.job_id === id).map((r) => [r.attempt, r.pid, r.outcome])).toEqual([[1, other.pid, 'ok']])
    // the surviving worker's reaper took them back: those waiting unstarted, the begun ones failed on their last attempt
    const reaped = other
      .output()
      .split('\n')
      .filter((line) => line.includes('requeued executions with expired leases'))
      .map((line) => JSON.parse(line) as { retried: number; failed: number; unstarted: number })
    const none = { retried: 0, failed: 0, unstarted: 0 }
    expect(reaped.reduce((n, r) => ({ retried: n.retried + r.retried, failed: n.failed + r.failed, unstarted: n.unstarted + r.unstarted }), none)).toEqual({
      retried: 0,
      failed: 4,
      unstarted: waiting.length,
    })
  })

  it('finish everything after every database connection is terminated, twice', { timeout: 120_000 }, async () => {
    await client().submitJobs(Array.from({ length: 2000 }, () => ({ type: 'ledger.sleep', payload: { ms: 10 }, backoffBaseMs: 10, backoffMaxMs: 100 })))
    const workers = [spawnWorker(), spawnWorker(), spawnWorker()]
    await Promise.all(workers.map((w) => w.ready))
    for (const threshold of [300, 900]) {
      await waitFor(async () => ((await countByState()).succeeded ?? 0) >= threshold, { timeoutMs: 60_000, what: `${threshold} successes` })
      const { rows } = await sql<{ n: number }>`
        select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
         where datname = current_database() and pid <> pg_backend_pid()`.execute(t.db)
      expect(rows[0]?.n).toBeGreaterThan(3)
    }
    await waitFor(async () => (await countByState()).succeeded === 2000, { timeoutMs: 90_000, intervalMs: 200, what: 'all 2,000 to succeed' })
    expect(await countByState()).toEqual({ succeeded: 2000 })
    expect(workers.every((w) => w.alive())).toBe(true)
    expect(selfOverlaps(await ledger())).toEqual([])
  })

  it('on SIGTERM lets short jobs finish, hands long ones back and exits 0 with nothing running', async () => {
    const worker = spawnWorker({ env: { SCHEDULER_SHUTDOWN_GRACE_MS: '1500' } })
    await worker.ready
    await client().submitJobs([
      ...Array.from({ length: 5 }, () => ({ type: 'ledger.sleep', priority: 1, payload: { ms: 300 } })),
      ...Array.from({ length: 5 }, () => ({ type: 'ledger.sleep', payload: { ms: 60_000 } })),
    ])
    await waitFor(async () => (await ledger()).length === 10, { what: '10 handlers to start' })
    worker.child.kill('SIGTERM')
    expect(await worker.exited).toEqual({ code: 0, signal: null })
    expect(await countByState()).toEqual({ succeeded: 5, pending: 5 })
    const { rows } = await sql<{ attempt: number; run_at_due: boolean }>`
      select attempt, run_at <= now() as run_at_due from pgsched.executions where state = 'pending'`.execute(t.db)
    expect(rows.every((r) => r.attempt === 0 && r.run_at_due)).toBe(true)
    const stopped = await t.db.selectFrom('pgsched.workers').select('stopped_at').executeTakeFirstOrThrow()
    expect(stopped.stopped_at).not.toBeNull()
  })
})
