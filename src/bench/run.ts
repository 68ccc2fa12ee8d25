/**
 * `scheduler bench`: measures the scheduler on this machine against a scratch
 * database, and reports each figure as the median of `reps` runs with its
 * range, and throughput also as a share of the ceiling measured in the same
 * run (the same claim + complete SQL driven by a bare loop).
 *
 * Scenarios: ceiling, burn-down (1 and 2 worker processes), submit (batch,
 * single ×8, REST ×32 connections), latency at a steady rate, priority under
 * load, scale (history rows), memory (peak RSS), recurring and steady (CPU per execution at a steady
 * load). Opt-in (`--only`), each a set of burn-down variants paired with the plain burn-down, or
 * with another variant of the set (variants.ts): flow, with a concurrency limit, fair share or a rate limit on but not binding
 * (flow.ts); sandbox, with every handler in a thread or process sandbox (sandboxes.ts); events, with
 * events written for nobody or read by one SSE client (events.ts). Also opt-in: list, the reads of
 * the jobs page over HTTP with the history rows in place (list.ts); steady-rates and cold-start, the
 * steady state at several rates and on a new database from its first request (steady.ts).
 */
import { performance } from 'node:perf_hooks'
import { sql } from 'kysely'
import { createClient } from '../client.ts'
import type { Logger } from '../logger.ts'
import { cpuMeter } from './cpu.ts'
import { EVENTS_TARGET, EVENTS_VARIANTS, eventsVariants } from './events.ts'
import { FLOW_TARGET, FLOW_VARIANTS, flowVariants } from './flow.ts'
import { monotonicMs, type ProbeMessage } from './handlers.ts'
import {
  afterAutovacuum,
  dbNow,
  dbThroughput,
  explainClaim,
  drainWithBareLoop,
  machineDescription,
  serverDescription,
  waitUntilDrained,
  writeHistory,
} from './probes.ts'
import { addListRows } from './list.ts'
import { loadAutocannon, spawnWorker, type BenchProcess } from './processes.ts'
import { change, format, type BenchReport, type Row } from './report.ts'
import { addSandboxStartRows, SANDBOX_CONCURRENCY, SANDBOX_REFERENCE, SANDBOX_VARIANTS, sandboxVariants } from './sandboxes.ts'
import { createScratch, insertJobs, type Scratch } from './scratch.ts'
import { addColdStartRows, addRecurringRows, addSteadyRateRows, addSteadyRows } from './steady.ts'
import { addSubmitRows } from './submit.ts'
import { figure, quantile } from './stats.ts'
import { addVariantRows, runOrder, type BurnDownRun, type BurnDownVariant, type Submit } from './variants.ts'

export interface BenchOptions {
  databaseUrl: string
  quick: boolean
  reps: number
  historyRows: number
  /** Leave the list scenario's seeded database for the next run. */
  keepHistory: boolean
  /** The steady scenario: jobs per second over REST, and the measured window (s). */
  steadyRate: number
  steadySeconds: number
  /** Hash partitions of the scratch schema (as `scheduler migrate --partitions`). */
  partitions: number
  /** Scenarios to run (all when absent). */
  only?: readonly Scenario[]
  log: Logger
  progress: (line: string) => void
}

/** PostgreSQL's SQLSTATE for a command the role may not run. */
const INSUFFICIENT_PRIVILEGE = '42501'

/** Scenarios of a run without `--only`. */
export const DEFAULT_SCENARIOS = ['ceiling', 'burn-down', 'submit', 'latency', 'priority', 'scale', 'memory', 'recurring', 'steady'] as const
/** Every scenario `--only` accepts: the default ones, the flow-control ones (flow: all five), the sandbox ones (sandbox: both), the event ones (events: both), steady-rates, cold-start, list. */
export const SCENARIOS = [
  ...DEFAULT_SCENARIOS,
  'flow',
  ...FLOW_VARIANTS,
  'sandbox',
  ...SANDBOX_VARIANTS,
  'events',
  ...EVENTS_VARIANTS,
  'steady-rates',
  'cold-start',
  'list',
] as const
export type Scenario = (typeof SCENARIOS)[number]

const WORKER_ID = '00000000-0000-7000-8000-00000000be00'

export async function runBench(o: BenchOptions): Promise<BenchReport> {
  const started = performance.now()
  const wantRest =
    !o.only ||
    o.only.includes('submit') ||
    o.only.includes('memory') ||
    o.only.includes('steady') ||
    o.only.includes('steady-rates') ||
    o.only.includes('cold-start')
  // Before any work: a run that cannot finish should say so at once, not after minutes.
  const loadTest = wantRest ? await loadAutocannon() : undefined
  const rows: Row[] = []
  const N = o.quick ? 5_000 : 100_000
  const ceilingN = o.quick ? 5_000 : 50_000
  const s = await createScratch(o.databaseUrl, o.partitions)
  const client = createClient({ db: s.db, tenant: 'bench' })
  const submitMany = (jobs: Array<{ type: string }>) => client.submitJobs(jobs)
  const reps = (label: string) => Array.from({ length: o.reps }, (_, i) => `${label} ${i + 1}/${o.reps}`)
  const add = (row: Row) => {
    rows.push(row)
    o.progress(`  ${row.scenario} ${row.metric}: ${format(row.figure.median)} ${row.unit}`)
  }
  let explain = ''
  let workerRss = Number.NaN
  let postgres = ''
  const want = (scenario: Scenario) => !o.only || o.only.includes(scenario)
  // The flow and sandbox variants run only when named (they add a burn-down per variant and repetition).
  const named = <V extends Scenario>(group: Scenario, variants: readonly V[]) => variants.filter((v) => o.only?.includes(v) || o.only?.includes(group))
  const flow = flowVariants(named('flow', FLOW_VARIANTS), client)
  const sandboxNames = named('sandbox', SANDBOX_VARIANTS)
  const sandbox = sandboxVariants(sandboxNames)
  // Every process started, so that none outlives a failed run.
  const spawned = new Set<BenchProcess>()
  const track = <P extends BenchProcess>(p: P): P => {
    spawned.add(p)
    return p
  }
  const events = eventsVariants(named('events', EVENTS_VARIANTS), s, N, track)
  try {
    postgres = await serverDescription(s.db)

    // 1. ceiling
    for (const batch of want('ceiling') ? [100, 500] : []) {
      const runs: number[] = []
      for (const label of reps(`ceiling batch ${batch}`)) {
        o.progress(label)
        await s.reset()
        await insertJobs(s.db, submitMany, ceilingN)
        const t0 = performance.now()
        await drainWithBareLoop(s.hot, WORKER_ID, batch)
        runs.push(ceilingN / ((performance.now() - t0) / 1000))
      }
      add({ scenario: 'ceiling', metric: `claim+complete, batch ${batch}, 2 connections`, unit: 'jobs/s', figure: figure(runs) })
    }
    const ceilings = rows.filter((r) => r.scenario === 'ceiling').map((r) => r.figure.median)
    const ceiling = ceilings.length > 0 ? Math.max(...ceilings) : Number.NaN

    // 2. burn-down
    // (CHECKPOINT needs superuser or pg_checkpoint: without it the runs go on, said once)
    let checkpointDenied = false
    const checkpoint = async (db: Scratch['db']) => {
      if (checkpointDenied) return
      await sql`checkpoint`.execute(db).catch((err: unknown) => {
        if ((err as { code?: unknown } | null)?.code !== INSUFFICIENT_PRIVILEGE) throw err
        checkpointDenied = true
        o.progress(`  no checkpoint before the burn-downs (a checkpoint may fall inside a run): ${String(err)}`)
      })
    }
    /** One burn-down of N jobs on `on` (emptied by `prepare`): jobs/s and the first worker's peak RSS. */
    const burnDownOnce = async (
      on: Scratch,
      submit: Submit,
      prepare: () => Promise<void>,
      processes = 1,
      worker: { concurrency?: number; env?: Record<string, string>; variant?: BurnDownVariant } = {},
    ): Promise<{ jobsPerS: number; peakRssMb: number; workerUs: number; postgresUs: number; benchUs: number }> => {
      await prepare()
      await insertJobs(on.db, submit, N)
      // Each run starts just after a checkpoint: none falls inside its few seconds (one did in some
      // runs and not in others, by WAL volume or the timer), and each pays the same full-page writes.
      await checkpoint(on.db)
      const since = await dbNow(on.db)
      const { concurrency = 100, env, variant } = worker
      const workers = Array.from({ length: processes }, () => track(spawnWorker({ databaseUrl: on.url, concurrency, env })))
      try {
        await Promise.all(workers.map((w) => w.ready))
        // CPU from the moment every worker is ready until the queue is empty (and the variant has
        // settled), per job burnt down (a worker's with its sandbox child processes, and the variant's own).
        const meter = cpuMeter({ ...Object.fromEntries(workers.map((w, i) => [`w${i}`, w.child.pid])), ...variant?.watch?.() })
        const ownBefore = process.cpuUsage()
        await waitUntilDrained(on, 600_000)
        await variant?.settle?.()
        const cpu = meter.read()
        const own = process.cpuUsage(ownBefore)
        const workerS = Object.values(cpu.processes).reduce((a, b) => a + b, 0)
        return {
          jobsPerS: await dbThroughput(on, since),
          peakRssMb: workers[0]?.peakRssMb() ?? Number.NaN,
          workerUs: (workerS / N) * 1e6,
          postgresUs: (cpu.postgres / N) * 1e6,
          benchUs: (own.user + own.system) / N,
        }
      } finally {
        await Promise.all(workers.map((w) => w.stop()))
      }
    }
    /**
     * The plain burn-down `reps` times at `concurrency` per worker process; with variants, each
     * repetition also runs each variant (paired runs, the order rotating so that none is always first,
     * and a variant running before its `pairedWith` in even repetitions and after it in odd ones: runOrder).
     */
    const burnDown = async (processes: number, label: string, variants: readonly BurnDownVariant[], concurrency = 100) => {
      const runs: BurnDownRun[] = []
      const variantRuns = new Map<string, BurnDownRun[]>(variants.map((v) => [v.name, []]))
      for (const [i, l] of reps(label).entries()) {
        for (const v of runOrder(variants, i)) {
          o.progress(v ? `${l}: ${v.name}` : l)
          const prepare = async () => {
            await s.reset()
            await v?.setup?.()
          }
          const run = await burnDownOnce(s, v?.submit ?? submitMany, prepare, processes, { concurrency, env: v?.workerEnv, variant: v }).finally(() =>
            v?.teardown?.(),
          )
          if (v) {
            variantRuns.get(v.name)?.push(run)
            continue
          }
          runs.push(run)
          if (processes === 1 && concurrency === 100) workerRss = Math.max(Number.isNaN(workerRss) ? 0 : workerRss, run.peakRssMb)
        }
      }
      const f = figure(runs.map((r) => r.jobsPerS))
      return { runs, variantRuns, f, workerUs: figure(runs.map((r) => r.workerUs)), postgresUs: figure(runs.map((r) => r.postgresUs)) }
    }
    const burnDownWhat = (processes: number, concurrency: number) =>
      `${N.toLocaleString('en-US')} no-op jobs, ${processes} worker process${processes > 1 ? 'es' : ''} × concurrency ${concurrency}`
    for (const processes of want('burn-down') || want('memory') || flow.length > 0 || events.length > 0 ? [1, 2] : []) {
      const { runs, variantRuns, f, workerUs, postgresUs } = await burnDown(processes, `burn-down ${processes} process(es)`, [...flow, ...events])
      const what = burnDownWhat(processes, 100)
      add({
        scenario: 'burn-down',
        metric: what,
        unit: 'jobs/s',
        figure: f,
        ofCeiling: f.median / ceiling,
        target: processes === 1 ? '≥ 45,000 and ≥ 80 % of ceiling' : '≥ 60,000',
      })
      const cpuOf = `burn-down, ${processes} worker process${processes > 1 ? 'es' : ''}`
      add({ scenario: 'burn-down', metric: `CPU per job, ${cpuOf}: worker${processes > 1 ? 's' : ''}`, unit: 'µs', figure: workerUs })
      add({ scenario: 'burn-down', metric: `CPU per job, ${cpuOf}: PostgreSQL`, unit: 'µs', figure: postgresUs })
      addVariantRows({ variants: flow, plain: runs, runs: variantRuns, what, processes, ceiling, target: FLOW_TARGET, add })
      addVariantRows({ variants: events, plain: runs, runs: variantRuns, what, processes, ceiling, target: EVENTS_TARGET, add })
    }
    // The sandbox variants, paired with their own in-process burn-down at the sandboxes' concurrency.
    if (sandbox.length > 0) await addSandboxStartRows(sandboxNames, add)
    for (const processes of sandbox.length > 0 ? [1, 2] : []) {
      const label = `in-process burn-down ${processes} process(es) × concurrency ${SANDBOX_CONCURRENCY}`
      const { runs, variantRuns } = await burnDown(processes, label, sandbox, SANDBOX_CONCURRENCY)
      const what = burnDownWhat(processes, SANDBOX_CONCURRENCY)
      addVariantRows({ variants: sandbox, plain: runs, runs: variantRuns, what, processes, ceiling, reference: SANDBOX_REFERENCE, add })
    }

    // 3. submit
    const apiRss = await addSubmitRows({
      ...{ s, client, n: N, quick: o.quick, reps, add, loadTest, track, progress: o.progress },
      batch: want('submit'),
      rest: want('submit') || want('memory'),
    })

    // 4. latency
    const latency = async (
      label: string,
      on: Scratch = s,
      prepare: () => Promise<void> = () => on.reset(),
    ): Promise<{ p50: number; p95: number; p99: number; max: number }> => {
      const count = o.quick ? 300 : 2_000
      const submittedAt = new Map<number, number>()
      const startedAt = new Map<number, number>()
      const submitter = on === s ? client : createClient({ db: on.db, tenant: 'bench' })
      await prepare()
      const worker = track(
        spawnWorker({
          databaseUrl: on.url,
          concurrency: 10,
          onProbe: (m: ProbeMessage) => startedAt.set((m.payload as { i: number }).i, m.startedAtMs),
        }),
      )
      await worker.ready
      o.progress(label)
      const t0 = performance.now()
      const pending: Array<Promise<unknown>> = []
      for (let i = 0; i < count; i++) {
        const due = t0 + i * 5 // 200 per second
        const wait = due - performance.now()
        if (wait > 0) await new Promise((r) => setTimeout(r, wait))
        submittedAt.set(i, monotonicMs())
        pending.push(submitter.submitJob({ type: 'bench.probe', payload: { i } }))
      }
      await Promise.all(pending)
      await waitUntilDrained(on, 60_000)
      await worker.stop()
      const lat = [...submittedAt].map(([i, t]) => (startedAt.get(i) ?? Number.NaN) - t).filter((x) => !Number.isNaN(x))
      if (lat.length !== count) throw new Error(`latency: ${count - lat.length} probes never reported a start`)
      return { p50: quantile(lat, 0.5), p95: quantile(lat, 0.95), p99: quantile(lat, 0.99), max: Math.max(...lat) }
    }
    const latencyRuns: Array<{ p50: number; p95: number; p99: number; max: number }> = []
    for (const l of want('latency') ? reps('latency') : []) latencyRuns.push(await latency(l))
    const addLatency = (scenario: string, runsOf: typeof latencyRuns, p50Target = '≤ 1.5', what = '') => {
      add({ scenario, metric: `submit → handler start p50 at 200 jobs/s${what}`, unit: 'ms', figure: figure(runsOf.map((r) => r.p50)), target: p50Target })
      add({ scenario, metric: 'submit → handler start p95', unit: 'ms', figure: figure(runsOf.map((r) => r.p95)) })
      add({ scenario, metric: 'submit → handler start p99', unit: 'ms', figure: figure(runsOf.map((r) => r.p99)), target: '≤ 5' })
      add({ scenario, metric: 'submit → handler start max', unit: 'ms', figure: figure(runsOf.map((r) => r.max)) })
    }
    if (latencyRuns.length > 0) addLatency('latency', latencyRuns)

    // 5. priority under load
    if (want('priority')) {
      const runs: number[] = []
      for (const l of reps('priority under load')) {
        o.progress(l)
        await s.reset()
        const low = o.quick ? 2_000 : 10_000
        await insertJobs(s.db, submitMany, low, (i) => ({ type: 'bench.probe', priority: 0, payload: { i, ms: 1 } }))
        const starts: Array<{ high: boolean; t: number }> = []
        const worker = track(
          spawnWorker({
            databaseUrl: s.url,
            concurrency: 10,
            onProbe: (m) => starts.push({ high: Boolean((m.payload as { high?: boolean }).high), t: m.startedAtMs }),
          }),
        )
        await worker.ready
        while (starts.length < 500) await new Promise((r) => setTimeout(r, 10))
        await client.submitJobs(Array.from({ length: 100 }, (_, i) => ({ type: 'bench.probe', priority: 10, payload: { i, high: true } })))
        // The high-priority jobs are due once committed, i.e. when the submit returns.
        const submittedAt = monotonicMs()
        while (starts.filter((x) => x.high).length < 100) await new Promise((r) => setTimeout(r, 10))
        const lastHigh = Math.max(...starts.filter((x) => x.high).map((x) => x.t))
        runs.push(starts.filter((x) => !x.high && x.t > submittedAt && x.t < lastHigh).length)
        await worker.stop()
      }
      add({
        scenario: 'priority',
        metric: 'low-priority starts after 100 high-priority jobs are committed and before the last of them starts (worker concurrency 10)',
        unit: 'jobs',
        figure: figure(runs),
        target: '< 10 (one claim batch)',
      })
    }

    // 6. scale
    if (want('scale')) {
      await s.reset()
      await writeHistory(s, o.historyRows, o.progress)
      // Between runs the history stays (each run's executions join it); only work left pending
      // (the EXPLAIN's) is removed, through the claim index.
      const keep = async () => {
        await sql`delete from pgsched.due`.execute(s.db)
        await sql`truncate pgsched.jobs, pgsched.workers, pgsched.waiting_workers`.execute(s.db)
      }
      // Each scale run is paired with the same run on an empty twin schema, in the same minutes: the
      // machine's speed drifts by tens of percent within an hour, so the comparison is made run by run.
      const twin = await createScratch(o.databaseUrl, o.partitions)
      try {
        const twinClient = createClient({ db: twin.db, tenant: 'bench' })
        // Each history run starts as a steady state does: after the vacuum autovacuum would have run.
        const keepVacuumed = async () => {
          await keep()
          await afterAutovacuum(s, await dbNow(s.db), o.progress)
        }
        const runs: number[] = []
        const twinRuns: number[] = []
        // Pairs alternate which goes first.
        for (const [i, l] of reps('scale burn-down').entries()) {
          const empty = async () =>
            twinRuns.push(
              (
                await burnDownOnce(
                  twin,
                  (jobs) => twinClient.submitJobs(jobs),
                  () => twin.reset(),
                )
              ).jobsPerS,
            )
          const history = async () => runs.push((await burnDownOnce(s, submitMany, keepVacuumed)).jobsPerS)
          o.progress(`${l}: ${i % 2 === 0 ? 'empty tables, then history' : 'history, then empty tables'}`)
          if (i % 2 === 0) await empty().then(history)
          else await history().then(empty)
        }
        const fTwin = figure(twinRuns)
        const f = figure(runs)
        add({ scenario: 'scale', metric: 'burn-down, 1 process, empty tables, paired runs', unit: 'jobs/s', figure: fTwin, ofCeiling: fTwin.median / ceiling })
        add({
          scenario: 'scale',
          metric: `burn-down, 1 process, with ${o.historyRows.toLocaleString('en-US')} history rows (${change(f.median, fTwin.median)})`,
          unit: 'jobs/s',
          figure: f,
          ofCeiling: f.median / ceiling,
          target: `within 10 % of ${format(fTwin.median)}`,
        })
        // A burn-down leaves a dead claim-index entry per job; autovacuum clears them (migration 0007 sets
        // per-partition thresholds). Latency is measured as in a steady state: after that vacuum.
        const scaleLatency: Array<{ p50: number; p95: number; p99: number; max: number }> = []
        const twinLatency: Array<{ p50: number; p95: number; p99: number; max: number }> = []
        for (const [i, l] of reps('scale latency').entries()) {
          const empty = async () => twinLatency.push(await latency(`${l}: empty tables`, twin))
          const history = async () => scaleLatency.push(await latency(`${l}: history`, s, keepVacuumed))
          if (i % 2 === 0) await empty().then(history)
          else await history().then(empty)
        }
        // EXPLAIN the claim with pending work and the history in place.
        await keep()
        await insertJobs(s.db, submitMany, 10_000)
        explain = await explainClaim(s.db, WORKER_ID)
        const twinP50 = figure(twinLatency.map((r) => r.p50)).median
        addLatency('scale', twinLatency, '', ', empty tables, paired runs')
        addLatency(
          'scale',
          scaleLatency,
          `within 10 % of ${format(twinP50)}`,
          `, with history (${change(figure(scaleLatency.map((r) => r.p50)).median, twinP50)})`,
        )
      } finally {
        await twin.drop().catch((err: unknown) => o.progress(`  could not drop ${twin.name}: ${String(err)}`))
      }
    }

    // 7. memory
    if (want('memory')) {
      add({ scenario: 'memory', metric: 'worker peak RSS at concurrency 100 (burn-down)', unit: 'MB', figure: figure([workerRss]), target: '≤ 150' })
      add({ scenario: 'memory', metric: 'API peak RSS under REST load', unit: 'MB', figure: figure([apiRss]), target: '≤ 150' })
    }
    // 8–9. steady states: recurring jobs alone, and REST submits beside recurring jobs (CPU per execution)
    if (want('recurring')) await addRecurringRows(s, o, track, add)
    if (want('steady')) await addSteadyRows(s, o, track, add)
    // (only when named) the steady state at several rates, and on a new database from its first request
    if (o.only?.includes('steady-rates')) await addSteadyRateRows(s, o, track, add)
    if (o.only?.includes('cold-start')) await addColdStartRows(o.databaseUrl, o.partitions, o, track, add)
    // 10. list (only when named): the jobs page's reads with the history in place
    if (o.only?.includes('list')) {
      await addListRows({ ...o, keep: o.keepHistory, add, track })
    }
  } finally {
    await Promise.all([...spawned].map((p) => p.stop().catch(() => undefined)))
    await s.drop()
  }
  return {
    startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
    durationS: (performance.now() - started) / 1000,
    quick: o.quick,
    machine: machineDescription(postgres, o.partitions),
    rows,
    explain,
  }
}
