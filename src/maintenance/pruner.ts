/**
 * The pruner: deletes terminal executions finished longer ago than the
 * retention (and one-time jobs left with nothing), webhook delivery records as old,
 * workers last seen as long ago and at least a day ago (holding no lease), and events
 * older than the event retention, in bounded batches.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionPruneFinished } from '../db/queries/prune.ts'
import { eventPruneOld } from '../db/queries/events.ts'
import { webhookDeliveryPruneOld } from '../db/queries/webhooks.ts'
import { workerPruneGone } from '../db/queries/workers.ts'
import type { Logger } from '../logger.ts'
import { startLoop, type LoopHandle } from '../lib/service.ts'

/**
 * A worker row goes no sooner than this after it was last seen, however short the retention: a
 * process that stalled (a paused VM) and then resumed keeps its row, which wake-ups and the
 * unserved-work checks read.
 */
const WORKER_GONE_MIN_MS = 86_400_000

export interface PrunerOptions {
  db: Kysely<DB>
  log: Logger
  retentionMs: number
  /** Events (migration 0022) are kept this long; default 1 hour. */
  eventRetentionMs?: number
  intervalMs: number
  batchSize: number
}

export class Pruner {
  private readonly o: PrunerOptions
  private readonly log: Logger
  private loop: LoopHandle | undefined

  constructor(options: PrunerOptions) {
    this.o = options
    this.log = options.log.child({ component: 'pruner' })
  }

  /** Deletes batches until one comes back short. */
  async runOnce(): Promise<{ executions: number; jobs: number; events: number; workers: number }> {
    const total = { executions: 0, jobs: 0, events: 0, workers: 0 }
    for (;;) {
      const r = await executionPruneFinished(this.o.db, { olderThanMs: this.o.retentionMs, limit: this.o.batchSize })
      total.executions += r.executions
      total.jobs += r.jobs
      if (r.executions < this.o.batchSize) break
    }
    const limit = this.o.batchSize
    while ((await webhookDeliveryPruneOld(this.o.db, { olderThanMs: this.o.retentionMs, limit })) === limit);
    for (;;) {
      const n = await eventPruneOld(this.o.db, { olderThanMs: this.o.eventRetentionMs ?? 3_600_000, limit })
      total.events += n
      if (n < limit) break
    }
    for (;;) {
      const n = await workerPruneGone(this.o.db, { olderThanMs: Math.max(this.o.retentionMs, WORKER_GONE_MIN_MS), limit })
      total.workers += n
      if (n < limit) break
    }
    if (total.executions > 0 || total.events > 0 || total.workers > 0) this.log.info(total, 'pruned finished executions, old events and workers long gone')
    return total
  }

  start(): void {
    this.loop = startLoop({ name: 'pruner', intervalMs: this.o.intervalMs, log: this.log, runOnce: () => this.runOnce() })
  }

  async stop(): Promise<void> {
    await this.loop?.stop()
  }
}
