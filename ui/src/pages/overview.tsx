/**
 * The overview: each queue's depth by state and claimed count (paused and limited queues
 * marked), and, from GET /v1/stats, throughput, failure rate and schedule lag per minute over the
 * last hour as charts, for all queues or one. Refreshed by live events and every 15 s.
 */
import { useMemo, useRef, useState } from 'preact/hooks'
import { ApiError, call, withQuery } from '../api.ts'
import { Chart, type Series } from '../components/chart.tsx'
import { ErrorNotice } from '../components/common.tsx'
import { QUEUE_CLAIMED_NOTE } from '../figures.ts'
import { duration } from '../format.ts'
import { useInterval, useLiveRefresh, useLoad } from '../hooks.ts'
import { href } from '../router.ts'
import type { Queue, StatsRow } from '../types.ts'

const MINUTES = 60

interface Minute {
  started: number
  succeeded: number
  failed: number
  lagP50Ms: number | null
  lagP95Ms: number | null
}

/** Per-minute totals over the chosen queues, one point for every minute (empty minutes count 0). */
function perMinute(rows: StatsRow[], nowMs: number): { times: number[]; minutes: Minute[] } {
  const end = Math.floor(nowMs / 60_000) * 60
  const times = Array.from({ length: MINUTES }, (_, i) => end - (MINUTES - 1 - i) * 60)
  const byMinute = new Map<number, Minute>()
  for (const r of rows) {
    const t = Math.floor(Date.parse(r.minute) / 60_000) * 60
    const m = byMinute.get(t) ?? { started: 0, succeeded: 0, failed: 0, lagP50Ms: null, lagP95Ms: null }
    m.started += r.started
    m.succeeded += r.succeeded
    m.failed += r.failed
    // Across queues the worst queue's lag is shown: a mean would hide a queue that falls behind.
    if (r.lagP50Ms !== null) m.lagP50Ms = Math.max(m.lagP50Ms ?? 0, r.lagP50Ms)
    if (r.lagP95Ms !== null) m.lagP95Ms = Math.max(m.lagP95Ms ?? 0, r.lagP95Ms)
    byMinute.set(t, m)
  }
  return { times, minutes: times.map((t) => byMinute.get(t) ?? { started: 0, succeeded: 0, failed: 0, lagP50Ms: null, lagP95Ms: null }) }
}

function QueueCards({ queues }: { queues: Queue[] }) {
  if (queues.length === 0) return <p class="empty">No queue has work or settings yet.</p>
  return (
    <>
      <ul class="cards" aria-label="Queues">
        {queues.map((q) => {
          const limited = q.concurrencyLimit !== null || q.keyConcurrencyLimit !== null || q.rateLimit !== null || q.keyRateLimit !== null
          return (
            <li key={q.name} class={`card queue-card${q.paused ? ' paused' : ''}`} data-queue={q.name}>
              <h3>
                <a href={href('/jobs', { queue: q.name })}>{q.name}</a>
                {q.paused && <span class="badge badge-paused">paused</span>}
                {limited && <span class="badge badge-limited">limited</span>}
              </h3>
              <dl class="figures">
                <div>
                  <dt>Due</dt>
                  <dd>{q.due}</dd>
                </div>
                <div>
                  <dt>Scheduled</dt>
                  <dd>{q.scheduled}</dd>
                </div>
                <div title={QUEUE_CLAIMED_NOTE}>
                  <dt>Claimed</dt>
                  <dd>
                    {q.running}
                    {q.concurrencyLimit !== null ? ` / ${q.concurrencyLimit}` : ''}
                  </dd>
                </div>
                <div>
                  <dt>Oldest due</dt>
                  <dd>{duration(q.oldestDueLagMs)}</dd>
                </div>
              </dl>
              {q.unserved > 0 && <p class="notice">{q.unserved} waiting for a worker that serves their type</p>}
            </li>
          )
        })}
      </ul>
      <p class="help" data-note="claimed">
        {QUEUE_CLAIMED_NOTE}
      </p>
    </>
  )
}

export function OverviewPage() {
  const [queue, setQueue] = useState('')
  const queues = useLoad((signal) => call<{ items: Queue[] }>('/v1/queues', { signal }), [])
  const stats = useLoad((signal) => call<{ items: StatsRow[] }>(withQuery('/v1/stats', { minutes: MINUTES, queue }), { signal }), [queue])
  const refresh = () => {
    queues.reload()
    stats.reload()
  }
  useLiveRefresh(() => true, refresh, 2000)
  useInterval(refresh, 15_000)
  const charts = useMemo(() => {
    if (!stats.data) return null
    const { times, minutes } = perMinute(stats.data.items, Date.now())
    const throughput: Series[] = [
      { label: 'started', values: minutes.map((m) => m.started), color: '#1f5fbf' },
      { label: 'succeeded', values: minutes.map((m) => m.succeeded), color: '#217a3c' },
      { label: 'failed', values: minutes.map((m) => m.failed), color: '#b3261e' },
    ]
    const failureRate: Series[] = [
      {
        label: 'failed %',
        values: minutes.map((m) => (m.succeeded + m.failed > 0 ? Math.round((1000 * m.failed) / (m.succeeded + m.failed)) / 10 : null)),
        color: '#b3261e',
      },
    ]
    const lag: Series[] = [
      { label: 'p50', values: minutes.map((m) => m.lagP50Ms), color: '#1f5fbf' },
      { label: 'p95', values: minutes.map((m) => m.lagP95Ms), color: '#8a4b00' },
    ]
    return { times, throughput, failureRate, lag }
  }, [stats.data])
  // every queue seen: those with work or settings, and those with figures only (their work has
  // finished), kept while one queue's figures are shown
  const seen = useRef(new Set<string>())
  for (const q of queues.data?.items ?? []) seen.current.add(q.name)
  for (const r of stats.data?.items ?? []) seen.current.add(r.queue)
  const queueNames = [...seen.current].sort()
  const statsMissing = stats.error instanceof ApiError && stats.error.missingRoute
  return (
    <>
      <h1 tabIndex={-1}>Overview</h1>
      <h2>Queues</h2>
      <ErrorNotice error={queues.error} what="The queue figures" />
      {queues.data && <QueueCards queues={queues.data.items} />}
      <h2>Last hour</h2>
      <div class="toolbar">
        <label for="chart-queue">Queue</label>
        <select id="chart-queue" value={queue} onChange={(e) => setQueue(e.currentTarget.value)}>
          <option value="">all queues</option>
          {queueNames.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </div>
      <ErrorNotice error={stats.error} what="Throughput and lag charts" />
      {charts && !statsMissing && (
        <div class="charts">
          <Chart title="Throughput per minute" times={charts.times} series={charts.throughput} unit="executions" />
          <Chart title="Failure rate" times={charts.times} series={charts.failureRate} unit="%" />
          <Chart title="Schedule lag" times={charts.times} series={charts.lag} unit="ms" />
        </div>
      )}
    </>
  )
}
