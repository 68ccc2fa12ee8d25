/**
 * The event loop lag statistics (nodejs_eventloop_lag_p50_seconds … _p99_seconds, the dashboard's
 * "Event loop lag p99" panel): an idle process's loop is not late, so they read near 0, not the 100 ms
 * sampling interval the timer's delays hold; a stall shows as its own length beyond it.
 */
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { collectProcessMetrics } from '../../src/lib/process-metrics.ts'
import { parsePrometheusText } from '../prometheus-text.ts'

describe('process metrics: event loop lag', () => {
  it('reads an idle event loop as not lagging, and a stall as about its length', async () => {
    const registry = new Registry()
    collectProcessMetrics(registry)
    await new Promise((r) => setTimeout(r, 1_500)) // idle but for the sampling timer
    const idle = parsePrometheusText(await registry.metrics())
    expect(idle.sum('nodejs_eventloop_lag_p50_seconds')).toBeLessThan(0.02)
    expect(idle.sum('nodejs_eventloop_lag_p99_seconds')).toBeLessThan(0.05)
    expect(idle.sum('nodejs_eventloop_lag_min_seconds')).toBeGreaterThanOrEqual(0)
    // a stall of 300 ms: the max shows how late the timer fired (up to the stall), not 100 ms more. (The
    // first delay after a scrape is not recorded: the stall comes a few ticks later.)
    await new Promise((r) => setTimeout(r, 250))
    const until = Date.now() + 300
    while (Date.now() < until) {
      // the loop blocked
    }
    await new Promise((r) => setTimeout(r, 250))
    const stalled = parsePrometheusText(await registry.metrics())
    expect(stalled.sum('nodejs_eventloop_lag_max_seconds')).toBeGreaterThan(0.15)
    expect(stalled.sum('nodejs_eventloop_lag_max_seconds')).toBeLessThan(0.35)
  })
})
