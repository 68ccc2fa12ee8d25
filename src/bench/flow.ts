/**
 * The flow-control scenarios of `scheduler bench` (opt-in: `--only flow`, or one of
 * `burn-down-limit`, `burn-down-fair`, `burn-down-rate`): the burn-down with each per-queue
 * mechanism on but never binding, paired run by run with the plain burn-down, to show what the
 * mechanism itself costs (the goal: within 10 % of the plain throughput).
 * - burn-down-limit: a concurrency limit of 10,000 on the queue (the workers hold at most
 *   2 × (100 + 400 prefetched) at once);
 * - burn-down-fair: fair share on, the jobs spread round-robin over 100 tenants;
 * - burn-down-rate: a rate limit of 1,000,000 starts per second.
 * Each variant is prepared after the scratch reset (which clears queue settings and tenants) and
 * before the worker processes start, so they read the settings with their first claim.
 */
import type { Client } from '../client.ts'
import { format, type Row } from './report.ts'
import { figure, type Figure } from './stats.ts'

export const FLOW_VARIANTS = ['burn-down-limit', 'burn-down-fair', 'burn-down-rate'] as const
export type FlowVariantName = (typeof FLOW_VARIANTS)[number]

/** The queue the burn-down uses. */
const QUEUE = 'default'
export const FLOW_CONCURRENCY_LIMIT = 10_000
export const FLOW_TENANTS = 100
export const FLOW_RATE_LIMIT = 1_000_000

type Submit = (jobs: Array<{ type: string }>) => Promise<unknown>

export interface FlowVariant {
  name: FlowVariantName
  /** What is on, for the report. */
  what: string
  /** Turns the mechanism on (after the reset, before the workers start). */
  setup(): Promise<void>
  /** Submits the burn-down's jobs (the fair variant spreads them over the tenants). */
  submit: Submit
}

/** The chosen variants, acting through `client` on the scratch database. */
export function flowVariants(names: readonly FlowVariantName[], client: Client): FlowVariant[] {
  const plain: Submit = (jobs) => client.submitJobs(jobs)
  const tenants = Array.from({ length: FLOW_TENANTS }, (_, k) => client.withTenant(`bench-${String(k).padStart(3, '0')}`))
  const spread: Submit = async (jobs) => {
    // job i goes to tenant i mod 100: one batch per tenant
    for (const [k, tenant] of tenants.entries()) {
      const mine = jobs.filter((_, i) => i % tenants.length === k)
      if (mine.length > 0) await tenant.submitJobs(mine)
    }
  }
  const all: Record<FlowVariantName, FlowVariant> = {
    'burn-down-limit': {
      name: 'burn-down-limit',
      what: `concurrency limit ${FLOW_CONCURRENCY_LIMIT.toLocaleString('en-US')}`,
      setup: async () => void (await client.queues.setConcurrencyLimit(QUEUE, FLOW_CONCURRENCY_LIMIT)),
      submit: plain,
    },
    'burn-down-fair': {
      name: 'burn-down-fair',
      what: `fair share, jobs over ${FLOW_TENANTS} tenants`,
      setup: async () => void (await client.queues.setFairShare(QUEUE, true)),
      submit: spread,
    },
    'burn-down-rate': {
      name: 'burn-down-rate',
      what: `rate limit ${FLOW_RATE_LIMIT.toLocaleString('en-US')} per second`,
      setup: async () => void (await client.queues.setRateLimit(QUEUE, FLOW_RATE_LIMIT, 1000)),
      submit: plain,
    },
  }
  return names.map((n) => all[n])
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
 * The rows of the flow variants at one process count: jobs/s (with its share of the ceiling),
 * throughput as a share of the plain burn-down of the same repetition, and CPU per job (worker
 * processes + PostgreSQL). `plain[i]` and `runs[i]` come from the same repetition.
 */
export function addFlowRows(params: {
  variants: readonly FlowVariant[]
  plain: readonly BurnDownRun[]
  runs: ReadonlyMap<FlowVariantName, readonly BurnDownRun[]>
  /** e.g. "100,000 no-op jobs, 1 worker process × concurrency 100" */
  what: string
  processes: number
  ceiling: number
  add: (row: Row) => void
}): void {
  const { plain, processes, add } = params
  const cpu = (r: BurnDownRun) => r.workerUs + r.postgresUs
  const plainJobs = figure(plain.map((r) => r.jobsPerS))
  const plainCpu = figure(plain.map(cpu))
  const workers = `${processes} worker process${processes > 1 ? 'es' : ''}`
  const ratio = (of: (r: BurnDownRun) => number, runs: readonly BurnDownRun[]): Figure =>
    figure(runs.map((r, i) => (100 * of(r)) / of(plain[i] as BurnDownRun)))
  for (const v of params.variants) {
    const runs = params.runs.get(v.name) ?? []
    const jobs = figure(runs.map((r) => r.jobsPerS))
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
      figure: ratio((r) => r.jobsPerS, runs),
      target: '≥ 90',
    })
    add({
      scenario: v.name,
      metric: `CPU per job (workers + PostgreSQL), ${workers} (burn-down: ${format(plainCpu.median)} µs)`,
      unit: 'µs',
      figure: figure(runs.map(cpu)),
    })
  }
}
