/**
 * The fault suite's workload: a seeded, reproducible list of job submissions
 * (immediate, delayed, prioritised, recurring; handlers that sleep, fail
 * retriably, exhaust their attempts or fail fatally), each with its own
 * idempotency key, the time it is released to the clients, and the status it
 * must end in. Bodies are fixed up front: a retried submission must send the
 * same body, or the API would rightly answer 409.
 */
import { seededRandom } from '../../src/lib/seeded-random.ts'

export type JobKind = 'immediate' | 'long' | 'delayed' | 'flaky' | 'exhausted' | 'fatal' | 'every' | 'cron'

export interface JobSpec {
  key: string
  kind: JobKind
  /** The JSON body (with `idempotencyKey` unless the key goes in the header). */
  body: Record<string, unknown>
  /** Send the key as the Idempotency-Key header rather than in the body. */
  viaHeader: boolean
  /** Status the job must end in (recurring jobs: that of their last run). */
  expected: 'COMPLETED' | 'FAILED'
  /** When the clients may send it, in ms after the scenario's start. */
  releaseAfterMs: number
}

export interface WorkloadOptions {
  seed: number
  /** Epoch ms the scenario starts (delayed and recurring times are absolute). */
  startMs: number
  oneTimeJobs: number
  recurringJobs: number
  /** Recurring jobs fire from submission until this long after the start. */
  recurringForMs: number
  /** One-time submissions are spread evenly over this long. */
  submitForMs: number
  /** Delayed jobs are due 1 s to this long after they are sent. */
  maxDelayMs: number
}

/** A small seeded PRNG, so a failing run can be repeated. */
export const createRandom = seededRandom

// Ten attempts: a job meant to complete must not run out of them because faults cut its runs short.
const RETRY = { maxAttempts: 10, backoffBaseMs: 100, backoffMaxMs: 1000 }

export function buildWorkload(o: WorkloadOptions): JobSpec[] {
  const random = createRandom(o.seed)
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1))
  const specs: JobSpec[] = []
  const add = (kind: JobKind, body: Record<string, unknown>, expected: JobSpec['expected'], releaseAfterMs: number) => {
    const key = `faults-${o.seed}-${specs.length}`
    const viaHeader = random() < 0.5
    specs.push({ key, kind, body: viaHeader ? body : { ...body, idempotencyKey: key }, viaHeader, expected, releaseAfterMs })
  }
  for (let i = 0; i < o.recurringJobs; i++) {
    const endAt = new Date(o.startMs + o.recurringForMs).toISOString()
    const schedule = i % 2 === 0 ? { every: 'PT1S' } : { cron: '*/2 * * * * *' }
    add(i % 2 === 0 ? 'every' : 'cron', { type: 'ledger.sleep', payload: { ms: 20 }, schedule, endAt, ...RETRY }, 'COMPLETED', int(0, 1000))
  }
  for (let i = 0; i < o.oneTimeJobs; i++) {
    const releaseAfterMs = Math.floor((i / o.oneTimeJobs) * o.submitForMs)
    const priority = int(-5, 5)
    const r = random()
    if (r < 0.55) {
      add('immediate', { type: 'ledger.sleep', payload: { ms: int(0, 30) }, priority, ...RETRY }, 'COMPLETED', releaseAfterMs)
    } else if (r < 0.65) {
      add('long', { type: 'ledger.sleep', payload: { ms: int(300, 1500) }, priority, ...RETRY }, 'COMPLETED', releaseAfterMs)
    } else if (r < 0.8) {
      const at = new Date(o.startMs + releaseAfterMs + int(1000, o.maxDelayMs)).toISOString()
      add('delayed', { type: 'ledger.sleep', payload: { ms: int(0, 50) }, priority, schedule: { at }, ...RETRY }, 'COMPLETED', releaseAfterMs)
    } else if (r < 0.9) {
      add(
        'flaky',
        { type: 'ledger.flaky', payload: { failures: int(1, 2) }, priority, maxAttempts: 10, backoffBaseMs: 50, backoffMaxMs: 500 },
        'COMPLETED',
        releaseAfterMs,
      )
    } else if (r < 0.93) {
      add(
        'exhausted',
        { type: 'ledger.flaky', payload: { failures: 10 }, priority, maxAttempts: 3, backoffBaseMs: 50, backoffMaxMs: 200 },
        'FAILED',
        releaseAfterMs,
      )
    } else {
      add('fatal', { type: 'ledger.fatal', priority, ...RETRY }, 'FAILED', releaseAfterMs)
    }
  }
  return specs.sort((a, b) => a.releaseAfterMs - b.releaseAfterMs)
}
