/**
 * prom-client's default process metrics (CPU, memory, heap, GC, event loop lag) for a registry of
 * the worker or the API. The event loop lag is sampled by a timer (perf_hooks.monitorEventLoopDelay)
 * every EVENT_LOOP_SAMPLE_MS, not prom-client's default of 10 ms: that timer woke an idle process a
 * hundred times a second, about half of an idle worker's CPU (docs/performance.md, "Recurring jobs").
 * A stall of the loop longer than the interval is still recorded whole (the timer fires late by it);
 * shorter ones are seen in proportion to their length.
 */
import { collectDefaultMetrics, type Registry } from 'prom-client'

/** How often the event loop's delay is sampled, in ms (the resolution of nodejs_eventloop_lag_*). */
export const EVENT_LOOP_SAMPLE_MS = 100

export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS })
}
