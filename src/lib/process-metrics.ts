/**
 * prom-client's default process metrics (CPU, memory, heap, GC, event loop lag) for a registry of
 * the worker or the API. The event loop lag is sampled by a timer (perf_hooks.monitorEventLoopDelay)
 * every EVENT_LOOP_SAMPLE_MS, not prom-client's default of 10 ms: that timer woke an idle process a
 * hundred times a second, about half of an idle worker's CPU (docs/performance.md, "Recurring jobs").
 * A stall of the loop longer than the interval is still recorded whole (the timer fires late by it);
 * shorter ones are seen in proportion to their length.
 *
 * The timer's delays, as Node.js records them, hold the interval itself: an idle process read about
 * 100 ms at every percentile. The statistics prom-client sets from them (nodejs_eventloop_lag_min,
 * _max, _mean, _p50, _p90, _p99_seconds) are shifted down by the interval, to the lag beyond it (0
 * for an idle loop), when the smallest delay of the period shows the interval included (at least
 * 90 % of it); nodejs_eventloop_lag_seconds, measured otherwise, and the standard deviation are as
 * prom-client sets them.
 */
import { collectDefaultMetrics, type Gauge, type Registry } from 'prom-client'

/** How often the event loop's delay is sampled, in ms (the resolution of nodejs_eventloop_lag_*). */
export const EVENT_LOOP_SAMPLE_MS = 100

/** The statistics of the timer's delays, in the order prom-client sets them (the minimum first). */
const SHIFTED = ['min', 'max', 'mean', 'p50', 'p90', 'p99'] as const

export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS })
  const interval = EVENT_LOOP_SAMPLE_MS / 1000
  // decided at each collection by the minimum, which prom-client sets first
  let shift = 0
  for (const stat of SHIFTED) {
    const gauge = registry.getSingleMetric(`nodejs_eventloop_lag_${stat}_seconds`) as Gauge | undefined
    if (!gauge) continue
    const set = gauge.set.bind(gauge) as (labels: object, value: number) => void
    gauge.set = ((labelsOrValue: object | number, value?: number) => {
      const [labels, v] = typeof labelsOrValue === 'number' ? [{}, labelsOrValue] : [labelsOrValue, value ?? 0]
      if (stat === 'min') shift = v >= 0.9 * interval ? interval : 0
      set(labels, Math.max(0, v - shift))
    }) as Gauge['set']
  }
}
