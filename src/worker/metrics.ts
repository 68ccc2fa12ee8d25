/**
 * A worker process's Prometheus metrics (docs/observability.md lists each): the worker's events
 * (WorkerEvents) and the reaper's expiries and rescues counted per (queue, type), the schedule lag per queue,
 * and gauges read when scraped (runs held, database pools, sandboxes), plus prom-client's default
 * process metrics, in a registry of its own. The counting is plain arithmetic on a record cached
 * per (queue, type) (collected-metric.ts): no label hashing or allocation per run.
 * Wired by system.ts; served by MetricsServer.
 */
import { Registry } from 'prom-client'
import { collectProcessMetrics } from '../lib/process-metrics.ts'
import type { ClaimedExecution } from '../db/queries/claim.ts'
import { BucketCounts, CollectedMetric, type CollectedValue } from './collected-metric.ts'
import type { WorkerEvents, WrittenOutcome } from './worker-options.ts'

/**
 * Schedule lag buckets, in seconds: 1 ms to 15 minutes, the promise of a start within 15 minutes
 * of the time a job was due, with steps of 2–2.5× between.
 */
export const SCHEDULE_LAG_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900] as const
/** Run duration buckets, in seconds: 1 ms to an hour. */
export const RUN_DURATION_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600] as const
/** Heartbeat and claim round-trip buckets, in seconds. */
export const HEARTBEAT_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const

/** What one (queue, type) did in this process. */
interface Series {
  readonly labels: { queue: string; type: string }
  claimed: number
  started: number
  succeeded: number
  failed: number
  retried: number
  expired: number
  leasesLost: number
  handedBack: number
  /** Executions this process's reaper took back from an expired lease: requeued, and failed on their last attempt. */
  rescuedRetried: number
  rescuedFailed: number
  rescuedUnstarted: number
  readonly duration: BucketCounts
}

/** The counters, each a field of Series: metric name suffix, field, help. */
const COUNTERS = [
  ['executions_claimed_total', 'claimed', 'Executions this worker claimed (leased).'],
  ['executions_started_total', 'started', 'Executions whose handler this worker started (a run took a slot).'],
  ['executions_succeeded_total', 'succeeded', 'Attempts whose success the database accepted.'],
  ['executions_failed_total', 'failed', 'Attempts that failed for good (fatal, or out of attempts), as accepted by the database.'],
  ['executions_retried_total', 'retried', 'Attempts that failed with a retry scheduled, as accepted by the database.'],
  [
    'executions_expired_total',
    'expired',
    'Executions of the queues and types this worker serves that its reaper ended because their first attempt missed its start deadline.',
  ],
  [
    'executions_handed_back_total',
    'handedBack',
    'Executions this worker claimed ahead and handed back unstarted, for workers with free slots: its handlers had grown slower, and they would have waited over 1 s for a slot.',
  ],
  ['leases_lost_total', 'leasesLost', 'Leases this worker lost: reaped or taken over, not confirmed in time, or an outcome refused by its fence.'],
] as const

/** A pg Pool's counts (pg.Pool has them). */
export interface PoolCounts {
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
}

/** What the gauges read when scraped. */
export interface WorkerMetricsSources {
  holding(): { running: number; buffered: number; sandboxes: number; idleSandboxes: number }
  /** The process's database pools, by name. */
  pools: ReadonlyArray<{ name: string; pool: PoolCounts }>
}

/** The metrics of one worker process; pass it as the Worker's `events`. */
export class WorkerMetrics implements WorkerEvents {
  readonly registry = new Registry()
  private readonly series = new Map<string, Map<string, Series>>()
  private readonly lag = new Map<string, BucketCounts>()
  private readonly heartbeats = new BucketCounts(HEARTBEAT_BUCKETS_S)
  private readonly claimTimes = new BucketCounts(HEARTBEAT_BUCKETS_S)
  /** Claims that took executions, and claims that found none. */
  private readonly claims = { rows: 0, empty: 0 }
  /** Webhook subscriptions this process's deliveries disabled. */
  private webhooksDisabled = 0
  private sources: WorkerMetricsSources | undefined

  constructor() {
    const registry = this.registry
    collectProcessMetrics(registry)
    const all = () => [...this.series.values()].flatMap((byType) => [...byType.values()])
    for (const [suffix, field, help] of COUNTERS) {
      const name = `pgsched_worker_${suffix}`
      new CollectedMetric({ name, help, type: 'counter', collect: () => all().map((s) => ({ labels: s.labels, value: s[field] })) }).registerIn(registry)
    }
    new CollectedMetric({
      name: 'pgsched_worker_executions_rescued_total',
      help:
        "Executions whose lease had expired (their worker stopped renewing it) that this process's reaper took back, by outcome: " +
        'retried (due again, the lost attempt counted), failed (it was the last attempt) or unstarted (due again, the attempt ' +
        "not counted: the handler had not begun, it waited in the dead worker's local queue).",
      type: 'counter',
      collect: () =>
        all().flatMap((s) => [
          { labels: { ...s.labels, outcome: 'retried' }, value: s.rescuedRetried },
          { labels: { ...s.labels, outcome: 'failed' }, value: s.rescuedFailed },
          { labels: { ...s.labels, outcome: 'unstarted' }, value: s.rescuedUnstarted },
        ]),
    }).registerIn(registry)
    new CollectedMetric({
      name: 'pgsched_worker_claims_total',
      help: 'Claims this worker made, by result: rows (it took executions) or empty (it found none).',
      type: 'counter',
      collect: () => [
        { labels: { result: 'rows' }, value: this.claims.rows },
        { labels: { result: 'empty' }, value: this.claims.empty },
      ],
    }).registerIn(registry)
    new CollectedMetric({
      name: 'pgsched_worker_webhook_subscriptions_disabled_total',
      help:
        'Webhook subscriptions a delivery attempt of this worker disabled: their attempts had failed, none succeeding, for SCHEDULER_WEBHOOK_DISABLE_AFTER_MS ' +
        '(at least SCHEDULER_WEBHOOK_DISABLE_AFTER_FAILURES of them). No event is sent to one until an update enables it.',
      type: 'counter',
      collect: () => [{ labels: {}, value: this.webhooksDisabled }],
    }).registerIn(registry)
    const histogram = (name: string, help: string, collect: () => CollectedValue[]) =>
      new CollectedMetric({ name, help, type: 'histogram', collect }).registerIn(registry)
    histogram('pgsched_worker_run_duration_seconds', 'Time a run held its slot: from taking it until its handler returned.', () =>
      all().flatMap((s) => s.duration.values('pgsched_worker_run_duration_seconds', s.labels)),
    )
    histogram(
      'pgsched_worker_schedule_lag_seconds',
      'Schedule lag of each execution started: when its claim took it (started_at) minus when it was due (run_at), by the database clock.',
      () => [...this.lag].flatMap(([queue, counts]) => counts.values('pgsched_worker_schedule_lag_seconds', { queue })),
    )
    histogram('pgsched_worker_heartbeat_duration_seconds', 'Round-trip of the heartbeat statement renewing every lease the worker holds.', () =>
      this.heartbeats.values('pgsched_worker_heartbeat_duration_seconds', {}),
    )
    histogram('pgsched_worker_claim_duration_seconds', 'Round-trip of each claim: its statements, from sending the first until the last returned.', () =>
      this.claimTimes.values('pgsched_worker_claim_duration_seconds', {}),
    )
    const gauge = (name: string, help: string, collect: (s: WorkerMetricsSources) => CollectedValue[]) =>
      new CollectedMetric({ name, help, type: 'gauge', collect: () => (this.sources ? collect(this.sources) : []) }).registerIn(registry)
    gauge('pgsched_worker_executions_running', 'Runs holding a slot now (in flight).', (s) => [{ labels: {}, value: s.holding().running }])
    gauge('pgsched_worker_executions_buffered', 'Executions claimed and leased, waiting in the local buffer for a slot.', (s) => [
      { labels: {}, value: s.holding().buffered },
    ])
    gauge('pgsched_worker_db_pool_connections', 'Connections open in a database pool of the process.', (s) =>
      s.pools.map(({ name, pool }) => ({ labels: { pool: name }, value: pool.totalCount })),
    )
    gauge('pgsched_worker_db_pool_idle', 'Idle connections in a database pool of the process.', (s) =>
      s.pools.map(({ name, pool }) => ({ labels: { pool: name }, value: pool.idleCount })),
    )
    gauge('pgsched_worker_db_pool_waiting', 'Queries waiting for a connection of a database pool of the process.', (s) =>
      s.pools.map(({ name, pool }) => ({ labels: { pool: name }, value: pool.waitingCount })),
    )
    gauge(
      'pgsched_worker_sandboxes',
      'Handler sandboxes (worker threads, child processes) alive, running a handler (busy) or kept for the next run (idle).',
      (s) => {
        const h = s.holding()
        return [
          { labels: { state: 'busy' }, value: h.sandboxes - h.idleSandboxes },
          { labels: { state: 'idle' }, value: h.idleSandboxes },
        ]
      },
    )
  }

  /** Gives the gauges what they read (the worker and pools exist only after the metrics do). */
  observe(sources: WorkerMetricsSources): void {
    this.sources = sources
  }

  // Events as own properties: they survive a spread ({ ...metrics, runStarted }) as the test harness does.
  readonly claimed = (count: number, _waiting: number, executions: readonly ClaimedExecution[], tookMs: number): void => {
    for (const c of executions) this.of(c.queue, c.type).claimed++
    if (count > 0) this.claims.rows++
    else this.claims.empty++
    this.claimTimes.observe(tookMs / 1000)
  }

  readonly runStarted = (c: ClaimedExecution): void => {
    this.of(c.queue, c.type).started++
    let lag = this.lag.get(c.queue)
    if (lag === undefined) {
      lag = new BucketCounts(SCHEDULE_LAG_BUCKETS_S)
      this.lag.set(c.queue, lag)
    }
    // Both from the claimed row: the database's started_at − run_at, in seconds.
    lag.observe((c.startedAtMs - c.runAtMs) / 1000)
  }

  readonly runEnded = (c: ClaimedExecution, ranMs: number): void => {
    this.of(c.queue, c.type).duration.observe(ranMs / 1000)
  }

  readonly outcomeWritten = (c: ClaimedExecution, outcome: WrittenOutcome): void => {
    this.of(c.queue, c.type)[outcome]++
  }

  readonly leaseLost = (c: ClaimedExecution): void => {
    this.of(c.queue, c.type).leasesLost++
  }

  readonly handedBack = (executions: readonly ClaimedExecution[]): void => {
    for (const c of executions) this.of(c.queue, c.type).handedBack++
  }

  readonly heartbeat = (tookMs: number): void => {
    this.heartbeats.observe(tookMs / 1000)
  }

  /** The reaper ended `count` executions of (queue, type) that missed their start deadline. */
  readonly expired = (queue: string, type: string, count: number): void => {
    this.of(queue, type).expired += count
  }

  /** The reaper took back `retried` + `failed` + `unstarted` executions of (queue, type) from expired leases. */
  readonly rescued = (queue: string, type: string, retried: number, failed: number, unstarted = 0): void => {
    const s = this.of(queue, type)
    s.rescuedRetried += retried
    s.rescuedFailed += failed
    s.rescuedUnstarted += unstarted
  }

  /** A delivery attempt of this process disabled a webhook subscription (createWebhookHandler's onDisabled). */
  readonly webhookDisabled = (): void => {
    this.webhooksDisabled++
  }

  /** The record of (queue, type), made on first use. */
  private of(queue: string, type: string): Series {
    let byType = this.series.get(queue)
    if (byType === undefined) {
      byType = new Map()
      this.series.set(queue, byType)
    }
    let s = byType.get(type)
    if (s === undefined) {
      s = {
        labels: { queue, type },
        claimed: 0,
        started: 0,
        succeeded: 0,
        failed: 0,
        retried: 0,
        expired: 0,
        leasesLost: 0,
        handedBack: 0,
        rescuedRetried: 0,
        rescuedFailed: 0,
        rescuedUnstarted: 0,
        duration: new BucketCounts(RUN_DURATION_BUCKETS_S),
      }
      byType.set(type, s)
    }
    return s
  }
}
