/**
 * Variants of the burn-down, each paired run by run with the plain burn-down of the same
 * repetition, or with another variant's run (`pairedWith`), the order rotating so that none is
 * always first, to show what one thing costs the hot path: a flow-control mechanism on but never binding (flow.ts), a handler sandbox
 * (sandboxes.ts). runBench runs the pairs; this file says what a variant is and reports them.
 */
import { format, type Row } from './report.ts'
import { figure, type Figure } from './stats.ts'

export type Submit = (jobs: Array<{ type: string }>) => Promise<unknown>

export interface BurnDownVariant {
  name: string
  /** What is on, for the report. */
  what: string
  /** Turns it on (after the scratch reset, before the workers start). */
  setup?(): Promise<void>
  /** Submits the burn-down's jobs; absent: as the plain burn-down does. */
  submit?: Submit
  /** Environment of its worker processes, over the plain burn-down's. */
  workerEnv?: Record<string, string>
  /** Processes of its own (name → pid) whose CPU counts with the workers' (e.g. an API process). */
  watch?(): Record<string, number | undefined>
  /**
   * Work of its own in the benchmark's process (e.g. 'the SSE client'): that process's CPU per job over the
   * burn-down (from the workers' start until the variant settled) is reported beside the others.
   */
  inBench?: string
  /** Awaited once the queue is drained, before the CPU is read (e.g. until a reader has caught up). */
  settle?(): Promise<void>
  /** The goal for its share of its pair's throughput (see pairedWith), over the group's; null: none (a variant shown for what it costs). */
  target?: string | null
  /**
   * The variant (of the same group) whose run in the same repetition is this one's "without it": the
   * goal applies to the share of that run's throughput (the share of the plain burn-down's is shown too).
   * For a variant whose jobs are submitted otherwise than the plain burn-down's, so that the pair differs
   * only in what the variant turns on.
   */
  pairedWith?: string
  /** Undoes `setup` after the run (stops what it started). */
  teardown?(): Promise<void>
}

/** `items` rotated left by `by`: repetition i of a pairing starts with a different member. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const k = items.length === 0 ? 0 : by % items.length
  return [...items.slice(k), ...items.slice(0, k)]
}

/**
 * The order of repetition `rep`'s runs (undefined: the plain burn-down): rotated by `rep`, each
 * variant with a `pairedWith` running before its pair in even repetitions and after it in odd ones
 * (the two swap places where the rotation put them otherwise), so that neither always runs first.
 */
export function runOrder<V extends Pick<BurnDownVariant, 'name' | 'pairedWith'>>(variants: readonly V[], rep: number): Array<V | undefined> {
  const order = rotate([undefined, ...variants], rep)
  for (const v of variants) {
    if (v.pairedWith === undefined) continue
    const a = order.indexOf(v)
    const b = order.findIndex((w) => w?.name === v.pairedWith)
    if (b < 0 || a < b === (rep % 2 === 0)) continue
    ;[order[a], order[b]] = [order[b], order[a]]
  }
  return order
}

/** One burn-down's figures (as runBench's burnDownOnce returns them). */
export interface BurnDownRun {
  jobsPerS: number
  workerUs: number
  postgresUs: number
  /** The benchmark process's own CPU per job over the same window (its polling; a variant's `inBench` work). */
  benchUs?: number
}

/**
 * The rows of the variants at one process count: jobs/s (with its share of the ceiling),
 * throughput as a share of the plain burn-down of the same repetition (and, for a variant with
 * `pairedWith`, of that variant's run, which carries its goal), and CPU per job (worker processes,
 * PostgreSQL). `plain[i]` and `runs[i]` come from the same repetition. With `reference`,
 * the plain burn-down's own rows come first under that scenario name.
 */
export function addVariantRows(params: {
  variants: readonly BurnDownVariant[]
  plain: readonly BurnDownRun[]
  runs: ReadonlyMap<string, readonly BurnDownRun[]>
  /** e.g. "100,000 no-op jobs, 1 worker process × concurrency 100" */
  what: string
  processes: number
  ceiling: number
  /** The goal for the share of the pair's throughput, if any. */
  target?: string
  reference?: { scenario: string; what: string }
  add: (row: Row) => void
}): void {
  const { plain, processes, add } = params
  const plainJobs = figure(plain.map((r) => r.jobsPerS))
  const plainWorker = figure(plain.map((r) => r.workerUs))
  const plainPostgres = figure(plain.map((r) => r.postgresUs))
  const workers = `${processes} worker process${processes > 1 ? 'es' : ''}`
  const ratio = (runs: readonly BurnDownRun[], base: readonly BurnDownRun[] = plain): Figure =>
    figure(runs.map((r, i) => (100 * r.jobsPerS) / (base[i] as BurnDownRun).jobsPerS))
  const ref = params.reference
  if (ref) {
    add({ scenario: ref.scenario, metric: `${params.what}, ${ref.what}`, unit: 'jobs/s', figure: plainJobs, ofCeiling: plainJobs.median / params.ceiling })
    add({ scenario: ref.scenario, metric: `CPU per job, ${workers}`, unit: 'µs', figure: plainWorker })
    add({ scenario: ref.scenario, metric: 'CPU per job, PostgreSQL', unit: 'µs', figure: plainPostgres })
  }
  for (const v of params.variants) {
    const runs = params.runs.get(v.name) ?? []
    const jobs = figure(runs.map((r) => r.jobsPerS))
    const target = v.target === undefined ? params.target : (v.target ?? undefined)
    add({
      scenario: v.name,
      metric: `${params.what}, ${v.what} (burn-down in the same run: ${format(plainJobs.median)} jobs/s)`,
      unit: 'jobs/s',
      figure: jobs,
      ofCeiling: jobs.median / params.ceiling,
    })
    const pair = v.pairedWith
    const base = pair === undefined ? undefined : params.runs.get(pair)
    if (pair !== undefined && base?.length !== runs.length) throw new Error(`${v.name} is paired with ${pair}, which did not run beside it`)
    if (base) {
      add({
        scenario: v.name,
        metric: `throughput as a share of ${pair}'s in the same repetition, ${workers}`,
        unit: `% of ${pair}`,
        figure: ratio(runs, base),
        ...(target && { target }),
      })
    }
    add({
      scenario: v.name,
      metric: `throughput as a share of the burn-down's in the same repetition, ${workers}`,
      unit: '% of burn-down',
      figure: ratio(runs),
      ...(!base && target && { target }),
    })
    add({
      scenario: v.name,
      metric: `CPU per job, ${workers}${v.watch ? ' and its own (API process)' : ''} (burn-down: ${format(plainWorker.median)} µs)`,
      unit: 'µs',
      figure: figure(runs.map((r) => r.workerUs)),
    })
    add({
      scenario: v.name,
      metric: `CPU per job, PostgreSQL (burn-down: ${format(plainPostgres.median)} µs)`,
      unit: 'µs',
      figure: figure(runs.map((r) => r.postgresUs)),
    })
    if (v.inBench !== undefined) {
      add({
        scenario: v.name,
        metric: `CPU per job, the benchmark's own process with ${v.inBench}, over the burn-down, not counted above (burn-down: ${format(figure(plain.map((r) => r.benchUs ?? Number.NaN)).median)} µs)`,
        unit: 'µs',
        figure: figure(runs.map((r) => r.benchUs ?? Number.NaN)),
      })
    }
  }
}
