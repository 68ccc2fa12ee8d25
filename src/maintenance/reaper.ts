/**
 * The reaper: returns executions whose lease expired to pending (or failed
 * when out of attempts), ends those that missed their start deadline, in bounded batches, and
 * cancels runs of cancelled jobs that a cancel's own sweep did not reach (jobCancelLeftovers), and
 * marks for a change of fair share the executions written by transactions in flight at it (fairShareSettle).
 * Runs in every worker; SKIP LOCKED in each statement keeps concurrent reapers from doing the same work.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionExpireLate, executionRescueExpired, type RescueOutcome } from '../db/queries/rescue.ts'
import { waitingWorkersPrune } from '../db/queries/workers.ts'
import { jobCancelLeftovers } from '../db/queries/jobs.ts'
import { fairShareSettle } from '../db/queries/queues.ts'

/** A worker not seen for this long (over the longest heartbeat allowed) no longer waits. */
const WAITING_STALE_MS = 3_600_000
import type { Logger } from '../logger.ts'
import { startLoop, type LoopHandle } from '../lib/service.ts'

export interface ReaperOptions {
  db: Kysely<DB>
  log: Logger
  intervalMs: number
  batchSize: number
  /** Told how many executions of (queue, type) each pass expired (worker metrics). */
  onExpired?: (queue: string, type: string, count: number) => void
  /**
   * Told how many executions of (queue, type) each statement took back from expired leases: requeued
   * with the attempt counted, failed on their last attempt, or requeued uncounted (they had not begun).
   */
  onRescued?: (queue: string, type: string, retried: number, failed: number, unstarted: number) => void
}

export class Reaper {
  private readonly o: ReaperOptions
  private readonly log: Logger
  private loop: LoopHandle | undefined

  constructor(options: ReaperOptions) {
    this.o = options
    this.log = options.log.child({ component: 'reaper' })
  }

  /** One pass: repeats full batches until fewer than batchSize expired leases remain. */
  async runOnce(now?: Date): Promise<{ retried: number; failed: number; unstarted: number; expired: number; cancelled: number }> {
    const total = { retried: 0, failed: 0, unstarted: 0, expired: 0, cancelled: 0 }
    for (;;) {
      const r: RescueOutcome = await executionRescueExpired(this.o.db, { limit: this.o.batchSize, now: now ?? null })
      total.retried += r.retried
      total.failed += r.failed
      total.unstarted += r.unstarted
      for (const q of r.byQueueType) this.o.onRescued?.(q.queue, q.type, q.retried, q.failed, q.unstarted)
      if (r.retried + r.failed + r.unstarted < this.o.batchSize) break
    }
    if (total.retried + total.failed + total.unstarted > 0)
      this.log.info(
        { retried: total.retried, failed: total.failed, unstarted: total.unstarted },
        'requeued executions with expired leases (unstarted: their handler had not begun; the attempt not counted)',
      )
    for (;;) {
      let n = 0
      for (const r of await executionExpireLate(this.o.db, { limit: this.o.batchSize, now: now ?? null })) {
        n += r.n
        this.o.onExpired?.(r.queue, r.type, r.n)
      }
      total.expired += n
      if (n < this.o.batchSize) break
    }
    if (total.expired > 0) this.log.info({ expired: total.expired }, 'expired executions that missed their start deadline')
    total.cancelled = await jobCancelLeftovers(this.o.db)
    if (total.cancelled > 0)
      this.log.info({ cancelled: total.cancelled }, 'cancelled what was left of cancelled jobs: runs no cancel sweep reached, and their due executions')
    // A change of fair share: the executions written by transactions in flight at it, once they ended.
    const marked = await fairShareSettle(this.o.db)
    if (marked > 0) this.log.info({ marked }, 'marked the due executions written while fair share was changing')
    // Wait sign-ups of workers that stopped or vanished only cost wake-ups; drop them.
    await waitingWorkersPrune(this.o.db, { staleMs: WAITING_STALE_MS })
    return total
  }

  start(): void {
    this.loop = startLoop({ name: 'reaper', intervalMs: this.o.intervalMs, log: this.log, runOnce: () => this.runOnce() })
  }

  async stop(): Promise<void> {
    await this.loop?.stop()
  }
}
