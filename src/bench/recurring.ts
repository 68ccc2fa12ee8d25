/**
 * The recurring scenario: `jobs` recurring jobs, each every 1–10 s (a random interval, phases
 * spread over it), dispatched and run by two worker processes, nothing else running. After a
 * warm-up it measures, over a window: fire times per second, the CPU the product uses for them
 * (both workers and PostgreSQL, from /proc) as a share of one core and per fire, and the lag from
 * each fire time to its claim (executions.started_at − scheduled_for, database clock).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import { createClient } from '../client.ts'
import { cpuMeter } from './cpu.ts'
import { spawnWorker, type BenchProcess } from './processes.ts'
import type { Row } from './report.ts'
import type { Scratch } from './scratch.ts'
import { figure } from './stats.ts'

export interface RecurringOptions {
  jobs: number
  warmupMs: number
  windowMs: number
  /** Called with each worker process started, so the caller can stop it on failure. */
  spawned: (p: BenchProcess) => void
}

export interface RecurringResult {
  firesPerS: number
  /** CPU of both worker processes and of PostgreSQL, as a percentage of one core. */
  workersPct: number
  postgresPct: number
  /** (workers + PostgreSQL) CPU per fire time, µs. */
  cpuPerFireUs: number
  lagP50Ms: number
  lagP99Ms: number
}

/** Deterministic pseudo-random numbers (mulberry32), so every run submits the same schedules. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let r = Math.imul(a ^ (a >>> 15), 1 | a)
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r
    return ((r ^ (r >>> 14)) >>> 0) / 4_294_967_296
  }
}

export async function measureRecurring(s: Scratch, o: RecurringOptions): Promise<RecurringResult> {
  await s.reset()
  const client = createClient({ db: s.db, tenant: 'bench' })
  const rand = random(42)
  const start = Date.now() + 2_000
  for (let i = 0; i < o.jobs; i++) {
    const every = 1_000 + Math.floor(rand() * 9_000)
    await client.submitJob({ type: 'bench.noop', schedule: { every }, startAt: new Date(start + Math.floor(rand() * every)) })
  }
  const workers = [spawnWorker({ databaseUrl: s.url, concurrency: 50 }), spawnWorker({ databaseUrl: s.url, concurrency: 50 })]
  for (const w of workers) o.spawned(w)
  await Promise.all(workers.map((w) => w.ready))
  await sleep(o.warmupMs)
  const meter = cpuMeter({ w1: workers[0]?.child.pid, w2: workers[1]?.child.pid })
  const { rows: from } = await sql<{ now: Date }>`select now()`.execute(s.db)
  await sleep(o.windowMs)
  const cpu = meter.read()
  const { rows: to } = await sql<{ now: Date }>`select now()`.execute(s.db)
  const t0 = (from[0] as { now: Date }).now
  const t1 = (to[0] as { now: Date }).now
  // Fire times of the window, with their lag; those not claimed yet count with the time until `to`.
  const { rows } = await sql<{ fires: string; p50: number | null; p99: number | null }>`
    select count(*)::text as fires,
           percentile_cont(0.5) within group (order by lag) as p50,
           percentile_cont(0.99) within group (order by lag) as p99
      from (select extract(epoch from coalesce(started_at, ${t1}::timestamptz) - scheduled_for) * 1000 as lag
              from pgsched.executions
             where scheduled_for >= ${t0}::timestamptz and scheduled_for < ${t1}::timestamptz) x`.execute(s.db)
  await Promise.all(workers.map((w) => w.stop()))
  const r = rows[0] as { fires: string; p50: number | null; p99: number | null }
  const seconds = (t1.getTime() - t0.getTime()) / 1000
  const fires = Number(r.fires)
  const workerS = (cpu.processes.w1 ?? Number.NaN) + (cpu.processes.w2 ?? Number.NaN)
  return {
    firesPerS: fires / seconds,
    workersPct: (100 * workerS) / cpu.elapsedS,
    postgresPct: (100 * cpu.postgres) / cpu.elapsedS,
    cpuPerFireUs: (1e6 * (workerS + cpu.postgres)) / fires,
    lagP50Ms: r.p50 ?? Number.NaN,
    lagP99Ms: r.p99 ?? Number.NaN,
  }
}

/** Runs the scenario `reps` times and adds its rows (medians over the runs). */
export async function addRecurringRows(
  s: Scratch,
  o: { quick: boolean; reps: number; progress: (line: string) => void },
  spawned: (p: BenchProcess) => void,
  add: (row: Row) => void,
): Promise<void> {
  const jobs = o.quick ? 100 : 1_000
  const runs: RecurringResult[] = []
  for (let i = 1; i <= o.reps; i++) {
    o.progress(`  recurring ${i}/${o.reps}: ${jobs} jobs every 1–10 s, 2 worker processes`)
    runs.push(await measureRecurring(s, { jobs, warmupMs: o.quick ? 3_000 : 10_000, windowMs: o.quick ? 5_000 : 30_000, spawned }))
  }
  const of = (pick: (r: RecurringResult) => number) => figure(runs.map(pick))
  const what = `${jobs} recurring jobs every 1–10 s, 2 worker processes`
  add({ scenario: 'recurring', metric: `fire times per second, ${what}`, unit: 'fires/s', figure: of((r) => r.firesPerS) })
  add({ scenario: 'recurring', metric: 'CPU of the 2 workers, share of one core', unit: '%', figure: of((r) => r.workersPct) })
  add({ scenario: 'recurring', metric: 'CPU of PostgreSQL, share of one core', unit: '%', figure: of((r) => r.postgresPct) })
  add({
    scenario: 'recurring',
    metric: 'CPU in total (workers + PostgreSQL), share of one core',
    unit: '%',
    figure: of((r) => r.workersPct + r.postgresPct),
    target: o.quick ? undefined : '< 10',
  })
  add({ scenario: 'recurring', metric: 'CPU per fire time (workers + PostgreSQL)', unit: 'µs', figure: of((r) => r.cpuPerFireUs) })
  add({ scenario: 'recurring', metric: 'fire time → claim p50', unit: 'ms', figure: of((r) => r.lagP50Ms) })
  add({ scenario: 'recurring', metric: 'fire time → claim p99', unit: 'ms', figure: of((r) => r.lagP99Ms) })
}
