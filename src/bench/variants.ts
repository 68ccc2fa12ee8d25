/**
 * Variants of the burn-down, each paired run by run with the plain burn-down of the same
 * repetition (the order rotating so that none is always first), to show what one thing costs the
 * hot path: a flow-control mechanism on but never binding (flow.ts), a handler sandbox
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
  /** Awaited once the queue is drained, before the CPU is read (e.g. until a reader has caught up). */
  settle?(): Promise<void>
  /** The goal for its share of the plain throughput, over the group's; null: none (a variant shown for what it costs). */
  target?: string | null
  /** Undoes `setup` after the run (stops what it started). */
  teardown?(): Promise<void>
}

/** `items` rotated left by `by`: repetition i of a pairing starts with a different member. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const k = items.length === 0 ? 0 : by % items.length
  return [...items.slice(k), ...items.slice(0, k)]
}

/** One burn-down's figures (as runBench's burnDownOnce returns them). */
export interface BurnDownRun {
  jobsPerS: number
  workerUs: number
  postgresUs: number
}

/**
 * The rows of the variants at one process count: jobs/s (with its share of the ceiling),
 * throughput as a share of the plain burn-down of the same repetition, and CPU per job (worker
 * processes, PostgreSQL). `plain[i]` and `runs[i]` come from the same repetition. With `reference`,
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
  /** The goal for the share of the plain throughput, if any. */
  target?: string
  reference?: { scenario: string; what: string }
  add: (row: Row) => void
}): void {
  const { plain, processes, add } = params
  const plainJobs = figure(plain.map((r) => r.jobsPerS))
  const plainWorker = figure(plain.map((r) => r.workerUs))
  const plainPostgres = figure(plain.map((r) => r.postgresUs))
  const workers = `${processes} worker process${processes > 1 ? 'es' : ''}`
  const ratio = (runs: readonly BurnDownRun[]): Figure => figure(runs.map((r, i) => (100 * r.jobsPerS) / (plain[i] as BurnDownRun).jobsPerS))
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
    add({
      scenario: v.name,
      metric: `throughput as a share of the burn-down's in the same repetition, ${workers}`,
      unit: '% of burn-down',
      figure: ratio(runs),
      ...(target && { target }),
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
  }
}
