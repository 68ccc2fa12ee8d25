/**
 * The webhook dispatcher: turns events into delivery jobs. Each pass numbers the committed events
 * (the sequencer), then, holding the webhooks cursor (one dispatcher at a time across processes;
 * the others skip), submits one `pgsched.webhook` job per event and subscription that wants it, and
 * moves the cursor past those events, in one transaction: an event is handed to its subscriptions
 * exactly once, and delivered at least once by the job (retried with backoff). Every worker with
 * the http handler on (SCHEDULER_HTTP_HANDLER) runs it; with no subscription a pass is one cheap query,
 * made at most every WEBHOOK_NONE_RECHECK_MS while the answer stays no.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import type { Logger } from '../logger.ts'
import { eventToJson, WEBHOOK_JOB_TYPE } from '../core/events.ts'
import { normalizeSubmit } from '../core/job.ts'
import { uuidV7 } from '../lib/uuid-v7.ts'
import { startLoop, type LoopHandle } from '../lib/service.ts'
import { jobInsertMany } from '../db/queries/jobs.ts'
import { webhookCursorAdvance, webhookDueAfterCursor, webhookSubscriptionAny, webhookSubscriptionsHeld, type WebhookDue } from '../db/queries/webhooks.ts'
import { sequenceEvents } from '../events/event-stream.ts'

/** How often a worker looks for events to deliver: the added latency of a webhook. */
export const WEBHOOK_DISPATCH_INTERVAL_MS = 250
/**
 * While no subscription exists, how long a worker takes the last look's answer for it: the most a
 * new subscription's first deliveries wait (its events are kept meanwhile), and what spares every
 * idle worker four queries a second.
 */
export const WEBHOOK_NONE_RECHECK_MS = 2_000
/** Events read per pass transaction (a pass runs transactions until one comes back short). */
const EVENTS_PER_PASS = 1_000
/**
 * Attempts and backoff of a delivery: 12 attempts, the waits between them random (full jitter) up to
 * 1 s, 2 s, 4 s, … doubling, at most 10 min: all made within about 27 minutes of the first (the sum
 * of the caps, core/backoff.ts retryWindowMaxMs: 1,623 s), about 14 minutes on average, plus the
 * requests' own time.
 */
export const WEBHOOK_DELIVERY = { maxAttempts: 12, backoffBaseMs: 1_000, backoffMaxMs: 600_000, timeoutMs: 30_000 } as const

export interface WebhookDispatcherOptions {
  db: Kysely<DB>
  log: Logger
  intervalMs?: number
}

export class WebhookDispatcher {
  private readonly o: WebhookDispatcherOptions
  private readonly log: Logger
  private loop: LoopHandle | undefined
  /** When the last look found no subscription (performance.now()); -Infinity: look at the next pass. */
  private noneSeenAt = Number.NEGATIVE_INFINITY

  constructor(options: WebhookDispatcherOptions) {
    this.o = options
    this.log = options.log.child({ component: 'webhook-dispatcher' })
  }

  /** One pass: submits the deliveries of every event numbered since the last; returns how many jobs. */
  async runOnce(): Promise<number> {
    if (performance.now() - this.noneSeenAt < WEBHOOK_NONE_RECHECK_MS) return 0
    if (!(await webhookSubscriptionAny(this.o.db))) {
      this.noneSeenAt = performance.now()
      return 0
    }
    this.noneSeenAt = Number.NEGATIVE_INFINITY
    await sequenceEvents(this.o.db)
    let total = 0
    for (;;) {
      const { more, jobs } = await this.o.db.transaction().execute(async (trx) => {
        const { upTo, read, more, due } = await webhookDueAfterCursor(trx, { limit: EVENTS_PER_PASS })
        if (upTo === null) return { more: false, jobs: 0 }
        // only to subscriptions not deleted since the read (nor while this transaction lasts)
        const held = await webhookSubscriptionsHeld(trx, [...new Set(due.map((d) => d.subscriptionId))])
        const kept = due.filter((d) => held.has(d.subscriptionId))
        await submitDeliveries(trx, kept)
        if (read > 0) await webhookCursorAdvance(trx, { to: upTo })
        return { more, jobs: kept.length }
      })
      total += jobs
      if (!more) break
    }
    if (total > 0) this.log.debug({ count: total }, 'webhook deliveries submitted')
    return total
  }

  start(): void {
    this.loop = startLoop({
      name: 'webhook-dispatcher',
      intervalMs: this.o.intervalMs ?? WEBHOOK_DISPATCH_INTERVAL_MS,
      log: this.log,
      runOnce: () => this.runOnce(),
    })
  }

  async stop(): Promise<void> {
    await this.loop?.stop()
  }
}

/** Submits one delivery job per (event, subscription), grouped by tenant. */
async function submitDeliveries(trx: Kysely<DB>, due: readonly WebhookDue[]): Promise<void> {
  const byTenant = new Map<string, WebhookDue[]>()
  for (const d of due) {
    const group = byTenant.get(d.event.tenant)
    if (group) group.push(d)
    else byTenant.set(d.event.tenant, [d])
  }
  const now = new Date()
  const nowMs = now.getTime()
  for (const [tenant, group] of byTenant) {
    const jobs = group.map((d) => ({
      ...normalizeSubmit(
        {
          type: WEBHOOK_JOB_TYPE,
          queue: d.queue,
          payload: { subscriptionId: d.subscriptionId, event: eventToJson(d.event) },
          ...WEBHOOK_DELIVERY,
        },
        now,
        { internal: true },
      ),
      id: uuidV7(nowMs),
      executionId: uuidV7(nowMs),
    }))
    await jobInsertMany(trx, { tenant, createdBy: 'webhooks', jobs })
  }
}
