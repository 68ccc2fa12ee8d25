/**
 * Steady-state scenarios: work arriving at a steady rate, run by two worker processes, measured
 * after a warm-up over a window, with the CPU every part uses (from /proc): each worker process, the
 * API process and every `postgres` process.
 * - recurring: `jobs` recurring jobs, each every 1–10 s (a random interval, phases spread over it),
 *   nothing else.
 * - steady: one-time jobs submitted over REST at a fixed rate (open loop) beside 200 recurring jobs.
 * - steady-rates (only when named): the steady scenario at 150, 300, 600 and 1,200 jobs/s, to show
 *   how the CPU per execution moves with the rate.
 * - cold-start (only when named): the steady scenario on a database just migrated, never analyzed,
 *   measured from the first request with no warm-up.
 * Lag is the time from when an execution became due (run_at: the fire time, or the submit) to its
 * claim (started_at), both on the database clock.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import { createApiKey } from '../api/auth.ts'
import { createClient } from '../client.ts'
import { cpuMeter, type CpuReading } from './cpu.ts'
import { freePort } from './probes.ts'
import { loadAutocannon, spawnApi, spawnBareHttp, spawnWorker, type BenchProcess } from './processes.ts'
import type { Row } from './report.ts'
import { createScratch, type Scratch } from './scratch.ts'
import { figure, quantile } from './stats.ts'
import { seededRandom } from '../lib/seeded-random.ts'

export interface SteadyOptions {
  recurringJobs: number
  /** One-time jobs per second over REST (0: none, and no API process). */
  restRate: number
  warmupMs: number
  windowMs: number
  /** Measure the reference server after the run (default true; needs restRate > 0). */
  bareHttp?: boolean
  /** Called with each process started, so the caller can stop it on failure. */
  spawned: (p: BenchProcess) => void
}

export interface SteadyResult {
  /** Executions that became due in the window, per second. */
  executionsPerS: number
  /** CPU as a percentage of one core. */
  workersPct: number
  apiPct: number
  postgresPct: number
  /** CPU per execution, µs. */
  workersUs: number
  apiUs: number
  postgresUs: number
  lagP50Ms: number
  lagP99Ms: number
  /** Executions due and not claimed at the end of the window minus those at its start. */
  backlogGrowth: number
  /** p99 latency of `POST /v1/jobs` as the load generator saw it, over warm-up and window (NaN without REST). */
  submitP99Ms: number
  /** CPU per request, µs, of the reference server (bare-http.ts) under the same REST load (NaN without one). */
  bareHttpUs: number
}

/** What the load generator sends: the same body to the API and to the reference server. */
const SUBMIT_BODY = JSON.stringify({ type: 'bench.noop', payload: { n: 1 } })

type LoadTest = Awaited<ReturnType<typeof loadAutocannon>>

/**
 * CPU per request of the reference server (bare-http.ts: a Fastify route, a shared database round
 * trip, a small reply) under the same load as the API, after the same warm-up: what an HTTP submit
 * costs on this machine before anything of pgsched runs.
 */
async function measureBareHttp(s: Scratch, loadTest: LoadTest, o: SteadyOptions): Promise<number> {
  const port = await freePort()
  const server = spawnBareHttp({ databaseUrl: s.url, port })
  o.spawned(server)
  try {
    await server.ready
    const windowMs = Math.min(o.windowMs, 15_000)
    const load = loadTest({
      url: `http://127.0.0.1:${port}/v1/jobs`,
      method: 'POST',
      connections: 16,
      overallRate: o.restRate,
      duration: Math.ceil((o.warmupMs + windowMs) / 1000) + 1,
      headers: { 'content-type': 'application/json' },
      body: SUBMIT_BODY,
    })
    await sleep(o.warmupMs)
    const meter = cpuMeter({ server: server.child.pid })
    await sleep(windowMs)
    const cpu = meter.read()
    const result = await load
    if (result.non2xx > 0 || result.errors > 0) {
      throw new Error(`bare HTTP server under the steady load: ${result.non2xx} non-2xx answers and ${result.errors} errors`)
    }
    // per request answered (the load generator may fall short of the rate on a busy machine)
    const answeredPerS = result.duration > 0 ? result.requests.total / result.duration : o.restRate
    return (1e6 * (cpu.processes.server ?? Number.NaN)) / (Math.min(o.restRate, answeredPerS) * cpu.elapsedS)
  } finally {
    await server.stop()
  }
}

/** Executions due and not claimed yet (pending, run_at passed). */
async function dueBacklog(s: Scratch): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*)::text as n from pgsched.executions where state = 'pending' and run_at <= now()`.execute(s.db)
  return Number(rows[0]?.n)
}

/** How often the lags are read during the window: well inside the shortest retention (60 s). */
const LAG_POLL_MS = 10_000
/** Outcomes are read once this old: a completing transaction may commit after the time it recorded. */
const LAG_SETTLE_MS = 5_000

/**
 * The lag (ms) of every execution due from `t0`, read while the window runs: an execution that
 * finished is read from the history within seconds, before retention can prune it (a soak with a
 * retention shorter than its window would otherwise count only the executions still kept at its end).
 * `end(t1)` reads the rest and returns the lags of those due before `t1`; one not claimed by then
 * counts with the time until `t1`.
 */
function lagCollector(s: Scratch, t0: Date) {
  const seen: Array<{ runAt: number; lag: number }> = []
  let from = t0
  const keep = (rows: ReadonlyArray<{ run_at_ms: number; lag_ms: number }>) => {
    for (const r of rows) seen.push({ runAt: Number(r.run_at_ms), lag: Number(r.lag_ms) })
  }
  // (an execution cancelled before it started has no lag: left out)
  const finished = (upTo: Date | null) => sql`
    select extract(epoch from run_at) * 1000 as run_at_ms, extract(epoch from started_at - run_at) * 1000 as lag_ms
      from pgsched.execution_history
     where finished_at >= ${from}::timestamptz and (${upTo}::timestamptz is null or finished_at < ${upTo}::timestamptz)
       and run_at >= ${t0}::timestamptz and started_at is not null`
  return {
    async poll(): Promise<void> {
      const upTo = new Date((await dbNow(s)).getTime() - LAG_SETTLE_MS)
      keep((await sql<{ run_at_ms: number; lag_ms: number }>`${finished(upTo)}`.execute(s.db)).rows)
      from = upTo
    },
    async end(t1: Date): Promise<number[]> {
      // one statement, one snapshot: an execution that finishes meanwhile is read once, as finished or not
      const { rows } = await sql<{ run_at_ms: number; lag_ms: number }>`
        ${finished(null)}
        union all
        select extract(epoch from run_at) * 1000, extract(epoch from coalesce(started_at, ${t1}::timestamptz) - run_at) * 1000
          from pgsched.executions
         where finished_at is null and run_at >= ${t0}::timestamptz and run_at < ${t1}::timestamptz`.execute(s.db)
      keep(rows)
      const end = t1.getTime()
      return seen.filter((x) => x.runAt < end).map((x) => x.lag)
    },
  }
}

async function dbNow(s: Scratch): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`select now()`.execute(s.db)
  return (rows[0] as { now: Date }).now
}

export async function measureSteady(s: Scratch, o: SteadyOptions): Promise<SteadyResult> {
  const loadTest = o.restRate > 0 ? await loadAutocannon() : undefined
  await s.reset()
  const client = createClient({ db: s.db, tenant: 'bench' })
  const rand = seededRandom(42)
  const start = Date.now() + 2_000
  for (let i = 0; i < o.recurringJobs; i++) {
    const every = 1_000 + Math.floor(rand() * 9_000)
    await client.submitJob({ type: 'bench.noop', schedule: { every }, startAt: new Date(start + Math.floor(rand() * every)) })
  }
  const workers = [spawnWorker({ databaseUrl: s.url, concurrency: 50 }), spawnWorker({ databaseUrl: s.url, concurrency: 50 })]
  for (const w of workers) o.spawned(w)
  let api: BenchProcess | undefined
  let load: Promise<{ non2xx: number; errors: number; latency: { p99: number } }> | undefined
  let measured: { cpu: CpuReading; t0: Date; t1: Date; backlogGrowth: number; p99: number; window: number[] }
  try {
    if (loadTest) {
      const key = await createApiKey(s.db, { tenant: 'bench', name: `steady-${Date.now()}` })
      const port = await freePort()
      api = spawnApi({ databaseUrl: s.url, port })
      o.spawned(api)
      await api.ready
      await Promise.all(workers.map((w) => w.ready))
      load = loadTest({
        url: `http://127.0.0.1:${port}/v1/jobs`,
        method: 'POST',
        connections: 16,
        overallRate: o.restRate,
        duration: Math.ceil((o.warmupMs + o.windowMs) / 1000) + 1,
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: SUBMIT_BODY,
      })
    } else {
      await Promise.all(workers.map((w) => w.ready))
    }
    await sleep(o.warmupMs)
    const meter = cpuMeter({ w1: workers[0]?.child.pid, w2: workers[1]?.child.pid, api: api?.child.pid })
    const t0 = await dbNow(s)
    const backlogBefore = await dueBacklog(s)
    const lags = lagCollector(s, t0)
    const windowEnd = Date.now() + o.windowMs
    while (Date.now() < windowEnd) {
      await sleep(Math.min(LAG_POLL_MS, windowEnd - Date.now()))
      if (Date.now() < windowEnd) await lags.poll()
    }
    const cpu = meter.read()
    const t1 = await dbNow(s)
    const backlogGrowth = (await dueBacklog(s)) - backlogBefore
    const result = await load
    if (result && (result.non2xx > 0 || result.errors > 0)) {
      throw new Error(`steady REST load: ${result.non2xx} non-2xx answers and ${result.errors} errors`)
    }
    const window = await lags.end(t1)
    measured = { cpu, t0, t1, backlogGrowth, p99: result ? result.latency.p99 : Number.NaN, window }
  } finally {
    // stopped whatever happened, before the caller may drop the database under them
    await Promise.all([...workers, ...(api ? [api] : [])].map((p) => p.stop()))
  }
  const { cpu, t0, t1, backlogGrowth, window } = measured
  const bareHttpUs = loadTest && o.bareHttp !== false ? await measureBareHttp(s, loadTest, o) : Number.NaN
  const n = window.length
  const workerS = (cpu.processes.w1 ?? Number.NaN) + (cpu.processes.w2 ?? Number.NaN)
  const apiS = api ? (cpu.processes.api ?? Number.NaN) : 0
  const pct = (seconds: number) => (100 * seconds) / cpu.elapsedS
  const us = (seconds: number) => (1e6 * seconds) / n
  return {
    executionsPerS: n / ((t1.getTime() - t0.getTime()) / 1000),
    workersPct: pct(workerS),
    apiPct: pct(apiS),
    postgresPct: pct(cpu.postgres),
    workersUs: us(workerS),
    apiUs: us(apiS),
    postgresUs: us(cpu.postgres),
    lagP50Ms: quantile(window, 0.5),
    lagP99Ms: quantile(window, 0.99),
    backlogGrowth,
    submitP99Ms: measured.p99,
    bareHttpUs,
  }
}

async function runs(
  s: Scratch,
  o: { reps: number; progress: (line: string) => void },
  label: string,
  options: SteadyOptions,
): Promise<(pick: (r: SteadyResult) => number) => ReturnType<typeof figure>> {
  const results: SteadyResult[] = []
  for (let i = 1; i <= o.reps; i++) {
    o.progress(`  ${label} ${i}/${o.reps}`)
    results.push(await measureSteady(s, options))
  }
  return (pick) => figure(results.map(pick))
}

/** The recurring scenario: 1,000 recurring jobs every 1–10 s (100 with --quick), nothing else. */
export async function addRecurringRows(
  s: Scratch,
  o: { quick: boolean; reps: number; progress: (line: string) => void },
  spawned: (p: BenchProcess) => void,
  add: (row: Row) => void,
): Promise<void> {
  const jobs = o.quick ? 100 : 1_000
  const what = `${jobs} recurring jobs every 1–10 s, 2 worker processes`
  const of = await runs(s, o, `recurring: ${what}`, {
    recurringJobs: jobs,
    restRate: 0,
    warmupMs: o.quick ? 3_000 : 10_000,
    windowMs: o.quick ? 5_000 : 30_000,
    spawned,
  })
  add({ scenario: 'recurring', metric: `fire times per second, ${what}`, unit: 'fires/s', figure: of((r) => r.executionsPerS) })
  add({ scenario: 'recurring', metric: 'CPU of the 2 workers, share of one core', unit: '%', figure: of((r) => r.workersPct) })
  add({ scenario: 'recurring', metric: 'CPU of PostgreSQL, share of one core', unit: '%', figure: of((r) => r.postgresPct) })
  add({
    scenario: 'recurring',
    metric: 'CPU in total (workers + PostgreSQL), share of one core',
    unit: '%',
    figure: of((r) => r.workersPct + r.postgresPct),
    target: o.quick ? undefined : '< 10',
  })
  add({ scenario: 'recurring', metric: 'CPU per fire time (workers + PostgreSQL)', unit: 'µs', figure: of((r) => r.workersUs + r.postgresUs) })
  add({ scenario: 'recurring', metric: 'fire time → claim p50', unit: 'ms', figure: of((r) => r.lagP50Ms) })
  add({ scenario: 'recurring', metric: 'fire time → claim p99', unit: 'ms', figure: of((r) => r.lagP99Ms) })
}

/** The steady scenario: one-time jobs over REST at `steadyRate` per second beside 200 recurring jobs. */
export async function addSteadyRows(
  s: Scratch,
  o: { quick: boolean; reps: number; steadyRate: number; steadySeconds: number; progress: (line: string) => void },
  spawned: (p: BenchProcess) => void,
  add: (row: Row) => void,
): Promise<void> {
  const rate = o.steadyRate
  const window = o.steadySeconds === 30 ? '' : `, ${o.steadySeconds} s window`
  const what = `POST /v1/jobs at ${rate}/s + 200 recurring jobs, 1 API and 2 worker processes${window}`
  const of = await runs(s, o, `steady: ${what}`, {
    recurringJobs: 200,
    restRate: rate,
    warmupMs: o.quick ? 3_000 : 10_000,
    windowMs: o.steadySeconds * 1000,
    spawned,
  })
  add({ scenario: 'steady', metric: `executions per second, ${what}`, unit: 'executions/s', figure: of((r) => r.executionsPerS) })
  add({ scenario: 'steady', metric: 'CPU per execution: API', unit: 'µs', figure: of((r) => r.apiUs) })
  add({
    scenario: 'steady',
    metric: 'for reference: CPU per request of a bare Fastify server under the same load (one route, a shared database round trip)',
    unit: 'µs',
    figure: of((r) => r.bareHttpUs),
  })
  add({ scenario: 'steady', metric: 'CPU per execution: the 2 workers', unit: 'µs', figure: of((r) => r.workersUs) })
  add({ scenario: 'steady', metric: 'CPU per execution: PostgreSQL', unit: 'µs', figure: of((r) => r.postgresUs) })
  add({
    scenario: 'steady',
    metric: 'CPU per execution: total',
    unit: 'µs',
    figure: of((r) => r.apiUs + r.workersUs + r.postgresUs),
    target: o.quick ? undefined : '≤ 400',
  })
  add({ scenario: 'steady', metric: 'CPU in total, share of one core', unit: '%', figure: of((r) => r.apiPct + r.workersPct + r.postgresPct) })
  add({ scenario: 'steady', metric: 'due → claim p50', unit: 'ms', figure: of((r) => r.lagP50Ms) })
  add({ scenario: 'steady', metric: 'due → claim p99', unit: 'ms', figure: of((r) => r.lagP99Ms) })
  add({ scenario: 'steady', metric: 'POST /v1/jobs p99 (load generator)', unit: 'ms', figure: of((r) => r.submitP99Ms) })
  add({ scenario: 'steady', metric: 'backlog growth over the window (due, not claimed)', unit: 'executions', figure: of((r) => r.backlogGrowth) })
}

/** REST rates of the steady-rates scenario, jobs/s (the --quick run: the first two). */
export const STEADY_RATES = [150, 300, 600, 1_200] as const

/**
 * The steady scenario at several rates, the lowest first: the CPU per execution of each part, so a
 * cost that does not scale with the work (polling, timers, statements that find nothing) shows as a
 * figure that rises as the rate falls. Beside each rate, the reference server's CPU per request at
 * that rate: what a request costs an HTTP server that does nearly nothing, which rises as the rate
 * falls too (each request wakes the process and pays its system calls alone).
 */
export async function addSteadyRateRows(
  s: Scratch,
  o: { quick: boolean; reps: number; steadySeconds: number; progress: (line: string) => void },
  spawned: (p: BenchProcess) => void,
  add: (row: Row) => void,
): Promise<void> {
  const rates = o.quick ? STEADY_RATES.slice(0, 2) : STEADY_RATES
  for (const rate of rates) {
    const of = await runs(s, o, `steady-rates: POST /v1/jobs at ${rate}/s + 200 recurring jobs`, {
      recurringJobs: 200,
      restRate: rate,
      warmupMs: o.quick ? 3_000 : 10_000,
      windowMs: o.steadySeconds * 1000,
      spawned,
    })
    const at = `${rate}/s + 200 recurring jobs`
    add({ scenario: 'steady-rates', metric: `executions per second, ${at}`, unit: 'executions/s', figure: of((r) => r.executionsPerS) })
    add({ scenario: 'steady-rates', metric: `${at}: CPU per execution, API`, unit: 'µs', figure: of((r) => r.apiUs) })
    add({ scenario: 'steady-rates', metric: `${at}: CPU per execution, the 2 workers`, unit: 'µs', figure: of((r) => r.workersUs) })
    add({ scenario: 'steady-rates', metric: `${at}: CPU per execution, PostgreSQL`, unit: 'µs', figure: of((r) => r.postgresUs) })
    add({ scenario: 'steady-rates', metric: `${at}: CPU per execution, total`, unit: 'µs', figure: of((r) => r.apiUs + r.workersUs + r.postgresUs) })
    add({ scenario: 'steady-rates', metric: `${at}: due → claim p99`, unit: 'ms', figure: of((r) => r.lagP99Ms) })
    add({
      scenario: 'steady-rates',
      metric: `${at}: for reference, CPU per request of a bare Fastify server at ${rate}/s`,
      unit: 'µs',
      figure: of((r) => r.bareHttpUs),
    })
  }
}

/**
 * The steady scenario on a database just migrated and never analyzed (a new install), measured from
 * the first request with no warm-up: the plans each process makes on empty tables must hold once
 * they fill. Each repetition gets a database of its own.
 */
export async function addColdStartRows(
  databaseUrl: string,
  partitions: number,
  o: { quick: boolean; reps: number; steadyRate: number; steadySeconds: number; progress: (line: string) => void },
  spawned: (p: BenchProcess) => void,
  add: (row: Row) => void,
): Promise<void> {
  const results: SteadyResult[] = []
  const window = o.quick ? 5 : Math.max(o.steadySeconds, 60)
  const what = `POST /v1/jobs at ${o.steadyRate}/s + 200 recurring jobs on a new database, the first ${window} s`
  for (let i = 1; i <= o.reps; i++) {
    o.progress(`  cold-start: ${what} ${i}/${o.reps}`)
    const fresh = await createScratch(databaseUrl, partitions)
    try {
      results.push(await measureSteady(fresh, { recurringJobs: 200, restRate: o.steadyRate, warmupMs: 0, windowMs: window * 1000, bareHttp: false, spawned }))
    } finally {
      await fresh.drop().catch((err: unknown) => o.progress(`  could not drop ${fresh.name}: ${String(err)}`))
    }
  }
  const of = (pick: (r: SteadyResult) => number) => figure(results.map(pick))
  add({ scenario: 'cold-start', metric: `executions per second, ${what}`, unit: 'executions/s', figure: of((r) => r.executionsPerS) })
  add({ scenario: 'cold-start', metric: 'CPU per execution: total', unit: 'µs', figure: of((r) => r.apiUs + r.workersUs + r.postgresUs) })
  add({ scenario: 'cold-start', metric: 'CPU per execution: PostgreSQL', unit: 'µs', figure: of((r) => r.postgresUs) })
  add({ scenario: 'cold-start', metric: 'due → claim p99', unit: 'ms', figure: of((r) => r.lagP99Ms), target: o.quick ? undefined : '< 1000' })
  add({ scenario: 'cold-start', metric: 'POST /v1/jobs p99 (load generator)', unit: 'ms', figure: of((r) => r.submitP99Ms) })
  add({ scenario: 'cold-start', metric: 'backlog growth over the window (due, not claimed)', unit: 'executions', figure: of((r) => r.backlogGrowth) })
}
