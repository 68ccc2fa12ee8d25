/**
 * Prometheus metrics of an API process (prom-client), in a registry of its
 * own so several apps can live in one process (tests):
 *   pgsched_http_requests_total{method,route,status_code}
 *   pgsched_http_request_duration_seconds{method,route,status_code}  histogram
 *   pgsched_jobs_submitted_total{queue}      jobs created (idempotent repeats excluded)
 *   pgsched_submit_durable_seconds{queue}    histogram: a submit request received → its job committed
 *   pgsched_queue_depth{queue,state}         pending/running executions, read from the
 *                                            database at most every `queueDepthCacheMs`
 *   pgsched_queue_unserved{queue}            pending executions whose type no live worker
 *                                            serves in the queue (same reading; a scrape waits
 *                                            QUEUE_DEPTH_WAIT_MS for it, then reports the last)
 * The depth reading is a bounded read (db/pool.ts BOUNDED_READ): one the database never answers is
 * given up and its connection replaced, so the first scrape after an outage reads afresh. Readings
 * that fail or are late are logged once per outage, and once when a reading succeeds again.
 * plus prom-client's default process metrics. `route` is the route pattern
 * (`/v1/jobs/:id`), never the raw URL, so label values stay bounded. Queue names are chosen by
 * whoever submits, so the `queue` label is bounded too: the first QUEUE_LABELS_MAX queues a process
 * sees keep their own label, any later one counts under OTHER_QUEUE_LABEL (logged once).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { collectProcessMetrics } from '../lib/process-metrics.ts'
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionCountByQueue, type QueueDepth } from '../db/queries/ops.ts'
import type { Logger } from '../logger.ts'
import { LIVE_WORKER_WORDS } from '../core/job.ts'

/**
 * Most distinct queue names an API process labels its metrics with; the rest count as
 * OTHER_QUEUE_LABEL. A queue label costs about 20 series (a submit histogram's 17, its counter and
 * the two depth gauges), so 200 queues are about 4,000 series per API process: far more queues than
 * a deployment's workers serve, far fewer series than a tenant submitting to names of its own
 * making would otherwise create, one per name, without end.
 */
export const QUEUE_LABELS_MAX = 200
/** The queue label of every queue past QUEUE_LABELS_MAX (a queue name cannot start with `_`). */
export const OTHER_QUEUE_LABEL = '_other'

/**
 * How long a scrape waits for a queue depth reading before it reports the last one: well within
 * Prometheus's default scrape_timeout (10 s), so a database that does not answer (a partition, a
 * primary gone without closing its connections) never takes the API's other metrics down with it.
 */
export const QUEUE_DEPTH_WAIT_MS = 2_000

export interface ApiMetrics {
  readonly registry: Registry
  observeRequest(labels: { method: string; route: string; statusCode: number }, durationMs: number): void
  jobSubmitted(queue: string): void
  /** A submit's job is durable (committed, or found for an idempotent repeat) `elapsedMs` after its request was received. */
  submitDurable(queue: string, elapsedMs: number): void
}

export interface CreateApiMetricsParams {
  db: Kysely<DB>
  log: Logger
  /** How long a queue depth reading is reused; default 5000. */
  queueDepthCacheMs?: number
}

/**
 * The `queue` label of a queue name: its own for the first `max` names seen, OTHER_QUEUE_LABEL for
 * any later one (the first of which is logged). A name once labelled keeps its label for the
 * process's life, so a series never changes name mid-counter.
 */
function createQueueLabels(max: number, log: Logger): (queue: string) => string {
  const labelled = new Set<string>()
  let logged = false
  return (queue) => {
    if (labelled.has(queue)) return queue
    if (labelled.size < max) {
      labelled.add(queue)
      return queue
    }
    if (!logged) {
      logged = true
      log.warn(
        { limit: max, queue, label: OTHER_QUEUE_LABEL },
        'queue label limit reached: submits and depths of queues not yet labelled are counted under queue="_other" in /metrics until the API restarts',
      )
    }
    return OTHER_QUEUE_LABEL
  }
}

/**
 * The log of the queue depth readings' outages: the first reading of an outage that is late, and the
 * first that fails (with its error), are logged; later ones are counted, not written, until a
 * reading succeeds, which logs one line with the outage's length and the failed readings. Scrapes
 * during a 10-minute outage otherwise wrote a warning with a stack trace each.
 */
function createReadingOutage(log: Logger): { late(): void; failed(err: unknown): void; answered(): void } {
  let state: { sinceMs: number; lateLogged: boolean; failedLogged: boolean; failedReadings: number } | undefined
  const begin = () => {
    state ??= { sinceMs: Date.now(), lateLogged: false, failedLogged: false, failedReadings: 0 }
    return state
  }
  return {
    late() {
      const s = begin()
      if (s.lateLogged) return
      s.lateLogged = true
      log.warn({ waitedMs: QUEUE_DEPTH_WAIT_MS }, 'queue depth reading late: the database has not answered; reporting the last reading until it does')
    },
    failed(err) {
      const s = begin()
      s.failedReadings++
      if (s.failedLogged) return
      s.failedLogged = true
      log.warn({ err }, 'queue depth query failed; reporting the last reading until a reading succeeds')
    },
    answered() {
      if (!state) return
      log.warn({ outageMs: Date.now() - state.sinceMs, failedReadings: state.failedReadings }, 'queue depth read again')
      state = undefined
    },
  }
}

/** The metrics of one API app, in a registry of their own. */
export function createApiMetrics(params: CreateApiMetricsParams): ApiMetrics {
  const cacheMs = params.queueDepthCacheMs ?? 5000
  const queueLabel = createQueueLabels(QUEUE_LABELS_MAX, params.log)
  const registry = new Registry()
  collectProcessMetrics(registry)
  const requests = new Counter({
    name: 'pgsched_http_requests_total',
    help: 'HTTP requests answered, by route pattern and status.',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [registry],
  })
  const duration = new Histogram({
    name: 'pgsched_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by route pattern and status.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })
  const submitted = new Counter({
    name: 'pgsched_jobs_submitted_total',
    help: 'Jobs accepted by this API process (repeats of an idempotent submit excluded).',
    labelNames: ['queue'] as const,
    registers: [registry],
  })

  const durable = new Histogram({
    name: 'pgsched_submit_durable_seconds',
    help: 'Time from a submit request received to its job committed (or, for an idempotent repeat, found), by queue.',
    labelNames: ['queue'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })

  const outage = createReadingOutage(params.log)
  let reading: { atMs: number; rows: QueueDepth[] } | undefined
  const seen = new Set<string>()
  /** The reading asked for and not yet answered, with when it was asked (Date.now()) and whether it was found late. */
  let inFlight: { rows: Promise<QueueDepth[]>; sinceMs: number; late: boolean } | undefined
  /**
   * The queue depth: the cached reading while it is fresh, else a new one, waited for until
   * QUEUE_DEPTH_WAIT_MS after it was asked for; past that, null (the last reading is reported) while
   * the reading goes on, and is taken up by a later scrape once it is answered.
   */
  async function queueDepth(): Promise<QueueDepth[] | null> {
    // Process-local cache age: wall-clock time is fine here.
    if (reading && Date.now() - reading.atMs < cacheMs) return reading.rows
    if (!inFlight) {
      const asked = {
        sinceMs: Date.now(),
        late: false,
        rows: executionCountByQueue(params.db)
          .then(
            (rows) => {
              reading = { atMs: Date.now(), rows }
              outage.answered()
              return rows
            },
            (err: unknown) => {
              outage.failed(err)
              throw err
            },
          )
          .finally(() => {
            if (inFlight === asked) inFlight = undefined
          }),
      }
      inFlight = asked
    }
    const asked = inFlight
    const leftMs = asked.sinceMs + QUEUE_DEPTH_WAIT_MS - Date.now()
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), Math.max(0, leftMs))
    })
    try {
      const rows = await Promise.race([asked.rows, late])
      if (rows === null && !asked.late) {
        asked.late = true
        outage.late()
      }
      return rows
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * Reads the depth for a gauge's collect, by queue label (the queues past the limit summed under
   * OTHER_QUEUE_LABEL); null (the gauge keeps its last values) if the query fails or is late.
   */
  async function depthForCollect(): Promise<QueueDepth[] | null> {
    let rows: QueueDepth[] | null
    try {
      rows = await queueDepth()
    } catch {
      // logged by the reading itself (createReadingOutage), once per outage
      return null
    }
    if (rows === null) return null
    // The deepest queues first, so that they are the ones labelled if the limit is reached here.
    const byLabel = new Map<string, QueueDepth>()
    for (const row of [...rows].sort((a, b) => b.count - a.count)) {
      const queue = queueLabel(row.queue)
      const key = JSON.stringify([queue, row.state])
      const sum = byLabel.get(key)
      if (sum) {
        sum.count += row.count
        sum.unserved += row.unserved
      } else byLabel.set(key, { ...row, queue })
    }
    return [...byLabel.values()]
  }

  new Gauge({
    name: 'pgsched_queue_depth',
    help: `Executions pending or running, by queue (read from the database, at most ${cacheMs} ms old).`,
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      const rows = await depthForCollect()
      if (!rows) return
      // A queue that emptied reports 0 rather than vanishing from the series.
      for (const key of seen) {
        const [queue, state] = JSON.parse(key) as [string, string]
        this.set({ queue, state }, 0)
      }
      for (const row of rows) {
        seen.add(JSON.stringify([row.queue, row.state]))
        this.set({ queue: row.queue, state: row.state }, row.count)
      }
    },
  })

  const seenUnserved = new Set<string>()
  new Gauge({
    name: 'pgsched_queue_unserved',
    help: `Pending executions whose type no live worker serves in their queue (${LIVE_WORKER_WORDS}), by queue.`,
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const rows = await depthForCollect()
      if (!rows) return
      for (const queue of seenUnserved) this.set({ queue }, 0)
      for (const row of rows) {
        if (row.state !== 'pending') continue
        seenUnserved.add(row.queue)
        this.set({ queue: row.queue }, row.unserved)
      }
    },
  })

  return {
    registry,
    observeRequest(labels, durationMs) {
      const l = { method: labels.method, route: labels.route, status_code: String(labels.statusCode) }
      requests.inc(l)
      duration.observe(l, durationMs / 1000)
    },
    jobSubmitted(queue) {
      submitted.inc({ queue: queueLabel(queue) })
    },
    submitDurable(queue, elapsedMs) {
      durable.observe({ queue: queueLabel(queue) }, elapsedMs / 1000)
    },
  }
}
