/**
 * The flow-control scenarios of `scheduler bench` (opt-in: `--only flow`, or one of
 * `burn-down-limit`, `burn-down-fair`, `burn-down-tenants`, `burn-down-rate`, `burn-down-fair-backlogs`):
 * the burn-down with each per-queue mechanism on but never binding, paired run by run with the same
 * run without it, to show what the mechanism itself costs (the goal: within 10 % of that run's
 * throughput). For the limits that is the plain burn-down; for fair share, burn-down-tenants.
 * - burn-down-limit: a concurrency limit of 10,000 on the queue (the workers hold at most
 *   2 × (100 + 1000 prefetched) at once);
 * - burn-down-fair: fair share on, the jobs of 100 tenants arriving interleaved (each tenant submits
 *   3 jobs in turn, one submit after another, as tenants submitting at the same time do): each
 *   claim of 300 in the fair order takes the next 300 that arrived, so fairness is on without holding
 *   anyone back, and the rows lie in that order as the plain burn-down's do;
 * - burn-down-rate: a rate limit of 1,000,000 starts per second.
 * burn-down-fair's "without it" is burn-down-tenants (no goal of its own; it runs beside
 * burn-down-fair whenever that runs): the same submits with fair share off. The plain burn-down's jobs
 * come in batches of 10,000, one transaction each; these come 3 to a transaction (about 33,000 of them
 * per run), so a pair with the plain burn-down would weigh the submits' shape with the mechanism.
 * And one that binds, with no goal, to show what reordering costs: burn-down-fair-backlogs, fair
 * share on, each tenant's jobs submitted as its own batch (100 a tenant per 10,000 submitted), so the
 * fair order interleaves what arrived apart and a claim of 300 takes 3 from each of 100 batches.
 * Each variant is prepared after the scratch reset (which clears queue settings and tenants) and
 * before the worker processes start, so they read the settings with their first claim.
 */
import type { Client } from '../client.ts'
import type { BurnDownVariant, Submit } from './variants.ts'

export const FLOW_VARIANTS = ['burn-down-limit', 'burn-down-fair', 'burn-down-tenants', 'burn-down-rate', 'burn-down-fair-backlogs'] as const
export type FlowVariantName = (typeof FLOW_VARIANTS)[number]

/** The queue the burn-down uses. */
const QUEUE = 'default'
export const FLOW_CONCURRENCY_LIMIT = 10_000
export const FLOW_TENANTS = 100
export const FLOW_RATE_LIMIT = 1_000_000
/** burn-down-fair: how many jobs a tenant submits at a time (a claim of 300 takes 3 turns of each of 100 tenants). */
const INTERLEAVED_BATCH = 3

/** A flow-control variant: its setup turns the mechanism on (burn-down-tenants': none); the fair share ones and burn-down-tenants submit over 100 tenants. */
export interface FlowVariant extends BurnDownVariant {
  name: FlowVariantName
  setup(): Promise<void>
  submit: Submit
}

/** The share of its pair's throughput (the plain burn-down's, or its `pairedWith`'s) each variant with a goal should keep. */
export const FLOW_TARGET = '≥ 90'

/** The chosen variants, acting through `client` on the scratch database. */
export function flowVariants(names: readonly FlowVariantName[], client: Client): FlowVariant[] {
  const plain: Submit = (jobs) => client.submitJobs(jobs)
  const tenants = Array.from({ length: FLOW_TENANTS }, (_, k) => client.withTenant(`bench-${String(k).padStart(3, '0')}`))
  const backlogs: Submit = async (jobs) => {
    // job i goes to tenant i mod 100: one batch per tenant
    for (const [k, tenant] of tenants.entries()) {
      const mine = jobs.filter((_, i) => i % tenants.length === k)
      if (mine.length > 0) await tenant.submitJobs(mine)
    }
  }
  // Job n of the run (counted across the calls: the burn-down submits in chunks) goes to tenant
  // floor(n / 3) mod 100; each run of one tenant's jobs is one submit, in order, one at a time (several
  // at once would write into as many heap pages at a time, which the plain burn-down's rows are not).
  // `start` begins a run's count.
  const interleaved = () => {
    let submitted = 0
    const submit: Submit = async (jobs) => {
      for (let i = 0; i < jobs.length; ) {
        const n = submitted + i
        const take = Math.min(INTERLEAVED_BATCH - (n % INTERLEAVED_BATCH), jobs.length - i)
        const tenant = tenants[Math.floor(n / INTERLEAVED_BATCH) % tenants.length] as Client
        await tenant.submitJobs(jobs.slice(i, i + take))
        i += take
      }
      submitted += jobs.length
    }
    const start = () => {
      submitted = 0
    }
    return { submit, start }
  }
  const fair = interleaved()
  const unfair = interleaved()
  const all: Record<FlowVariantName, FlowVariant> = {
    'burn-down-limit': {
      name: 'burn-down-limit',
      what: `concurrency limit ${FLOW_CONCURRENCY_LIMIT.toLocaleString('en-US')}`,
      setup: async () => void (await client.queues.setConcurrencyLimit(QUEUE, FLOW_CONCURRENCY_LIMIT)),
      submit: plain,
    },
    'burn-down-fair': {
      name: 'burn-down-fair',
      what: `fair share, ${FLOW_TENANTS} tenants' jobs arriving interleaved`,
      setup: async () => {
        fair.start()
        await client.queues.setFairShare(QUEUE, true)
      },
      submit: fair.submit,
      pairedWith: 'burn-down-tenants',
    },
    'burn-down-tenants': {
      name: 'burn-down-tenants',
      what: `fair share off, ${FLOW_TENANTS} tenants' jobs arriving interleaved as burn-down-fair's do`,
      setup: async () => unfair.start(),
      submit: unfair.submit,
      target: null,
    },
    'burn-down-fair-backlogs': {
      name: 'burn-down-fair-backlogs',
      what: `fair share, ${FLOW_TENANTS} tenants' jobs each submitted as the tenant's own batch (the fair order interleaves them)`,
      setup: async () => void (await client.queues.setFairShare(QUEUE, true)),
      submit: backlogs,
      target: null,
    },
    'burn-down-rate': {
      name: 'burn-down-rate',
      what: `rate limit ${FLOW_RATE_LIMIT.toLocaleString('en-US')} per second`,
      setup: async () => void (await client.queues.setRateLimit(QUEUE, FLOW_RATE_LIMIT, 1000)),
      submit: plain,
    },
  }
  // burn-down-fair's goal is against burn-down-tenants: it runs beside it
  const wanted = names.includes('burn-down-fair') && !names.includes('burn-down-tenants') ? [...names, 'burn-down-tenants' as const] : names
  return wanted.map((n) => all[n])
}
