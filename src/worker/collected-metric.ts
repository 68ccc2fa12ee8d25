/**
 * Metrics counted in plain numbers on the worker's hot path and turned into prom-client values only
 * when scraped. prom-client's own counters and histograms hash their label values on every
 * increment; the worker instead keeps one record per (queue, type), found through two map lookups,
 * and adds to its fields. Registered with a prom-client Registry like any of its metrics, so the
 * text format, default labels and the other metrics of the registry are prom-client's.
 */
import type { Metric, Registry } from 'prom-client'

/** One value as prom-client renders it; `metricName` for a histogram's _bucket, _sum and _count lines. */
export interface CollectedValue {
  value: number
  labels: Record<string, string | number>
  metricName?: string
}

/** A counter, gauge or histogram whose values `collect` reads when the registry is scraped. */
export class CollectedMetric {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'gauge' | 'histogram'
  readonly aggregator = 'sum'
  private readonly collect: () => CollectedValue[]

  constructor(params: { name: string; help: string; type: 'counter' | 'gauge' | 'histogram'; collect: () => CollectedValue[] }) {
    this.name = params.name
    this.help = params.help
    this.type = params.type
    this.collect = params.collect
  }

  /** Adds this metric to `registry` (it has the shape prom-client renders, not one of its classes). */
  registerIn(registry: Registry): this {
    registry.registerMetric(this as unknown as Metric)
    return this
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: CollectedValue[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.collect() }
  }

  /** Counts live in their owners; nothing to reset here. */
  reset(): void {}
}

/**
 * A histogram's counts for one series: `counts[i]` observations ≤ bounds[i] and above bounds[i−1]
 * (the last, above every bound), their sum and their number. observe() allocates nothing.
 */
export class BucketCounts {
  readonly bounds: readonly number[]
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor(bounds: readonly number[]) {
    this.bounds = bounds
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > (bounds[i] as number)) i++
    this.counts[i] = (this.counts[i] as number) + 1
    this.sum += value
    this.count++
  }

  /** The Prometheus series of these counts: cumulative `_bucket{le}` lines, `_sum` and `_count`. */
  values(name: string, labels: Record<string, string>): CollectedValue[] {
    const out: CollectedValue[] = []
    let acc = 0
    this.bounds.forEach((le, i) => {
      acc += this.counts[i] as number
      out.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: acc })
    })
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: this.count })
    out.push({ metricName: `${name}_sum`, labels, value: this.sum })
    out.push({ metricName: `${name}_count`, labels, value: this.count })
    return out
  }
}
