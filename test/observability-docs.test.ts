/**
 * docs/grafana/pgsched.json loads as a Grafana dashboard (a JSON Schema of the subset it uses),
 * and every metric its panels and docs/prometheus/pgsched-alerts.yml query is one the worker and
 * API registries expose; docs/observability.md names every pgsched metric they expose.
 */
import { readFileSync } from 'node:fs'
import { Ajv } from 'ajv'
import { describe, expect, it } from 'vitest'
import { createApiMetrics } from '../src/api/metrics.ts'
import { WorkerMetrics } from '../src/worker/metrics.ts'
import { useTestDb } from './db.ts'

const t = useTestDb()
const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')

interface Dashboard {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }>; gridPos: { x: number; y: number; w: number; h: number } }>
}

/** The metric names a PromQL expression selects (functions, keywords, label lists and matchers left out). */
function promqlMetricNames(expr: string): string[] {
  const e = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\boffset\s+\S+/g, ' ')
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan'])
  const names: string[] = []
  for (const m of e.matchAll(/(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = e.slice((m.index ?? 0) + m[0].length).trimStart()
    if (after.startsWith('(') || keywords.has(m[0].toLowerCase())) continue
    names.push(m[0])
  }
  return names
}

/** The `expr:` values of a Prometheus rules file (one line, or a `|` block). */
function alertExprs(yaml: string): string[] {
  const lines = yaml.split('\n')
  const exprs: string[] = []
  const indentOf = (line: string) => line.length - line.trimStart().length
  lines.forEach((line, i) => {
    const m = /^(\s*)expr:\s*(.*)$/.exec(line)
    if (!m) return
    if (m[2] !== '|') {
      exprs.push(m[2] as string)
      return
    }
    const indent = (m[1] as string).length
    const block: string[] = []
    for (let j = i + 1; j < lines.length; j++) {
      const next = lines[j] as string
      if (next.trim() !== '' && indentOf(next) <= indent) break
      block.push(next)
    }
    exprs.push(block.join(' '))
  })
  return exprs
}

/** The series names each registry's metrics expose (a histogram: its _bucket, _sum and _count). */
function exposedNames(): Set<string> {
  const api = createApiMetrics({ db: t.db, log: t.log })
  const worker = new WorkerMetrics()
  const names = new Set<string>()
  for (const m of [...api.registry.getMetricsAsArray(), ...worker.registry.getMetricsAsArray()]) {
    const { name, type } = m as unknown as { name: string; type: string }
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix)
    else names.add(name)
  }
  return names
}

describe('observability docs', () => {
  const dashboard = JSON.parse(read('docs/grafana/pgsched.json')) as Dashboard

  it('ships a Grafana dashboard that passes the dashboard schema, its panels on the 24-column grid', () => {
    const ajv = new Ajv({ allErrors: true, strict: false })
    const validate = ajv.compile(JSON.parse(read('test/fixtures/grafana-dashboard.schema.json')) as object)
    expect(validate(dashboard), ajv.errorsText(validate.errors)).toBe(true)
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24)
  })

  it('queries in every panel and alert rule only metrics the worker and API expose', () => {
    const exposed = exposedNames()
    const queries = [...dashboard.panels.flatMap((p) => (p.targets ?? []).map((q) => q.expr)), ...alertExprs(read('docs/prometheus/pgsched-alerts.yml'))]
    expect(queries.length).toBeGreaterThan(20)
    for (const expr of queries) {
      const names = promqlMetricNames(expr)
      expect(names.length, expr).toBeGreaterThan(0)
      for (const name of names) expect(exposed.has(name), `${name} in ${expr}`).toBe(true)
    }
    // Each alert the issue asks for is there.
    const alerts = read('docs/prometheus/pgsched-alerts.yml')
    for (const metric of [
      'pgsched_worker_schedule_lag_seconds_bucket',
      'pgsched_worker_executions_failed_total',
      'pgsched_queue_unserved',
      'pgsched_worker_leases_lost_total',
    ]) {
      expect(alerts).toContain(metric)
    }
  })

  it('reads the metric names out of a PromQL expression', () => {
    const expr =
      'histogram_quantile(0.99, sum by (queue, le) (rate(a_bucket{le="900",queue=~"$queue"}[$__rate_interval]))) / on (queue) group_left () b_total > bool 0 or c offset 5m'
    expect(promqlMetricNames(expr)).toEqual(['a_bucket', 'b_total', 'c'])
  })

  it('lists every pgsched metric in docs/observability.md', () => {
    const doc = read('docs/observability.md')
    const api = createApiMetrics({ db: t.db, log: t.log })
    const worker = new WorkerMetrics()
    const ours = [...api.registry.getMetricsAsArray(), ...worker.registry.getMetricsAsArray()]
      .map((m) => (m as unknown as { name: string }).name)
      .filter((n) => n.startsWith('pgsched_'))
    expect(ours.length).toBeGreaterThan(20)
    for (const name of ours) expect(doc, name).toContain(`\`${name}\``)
  })
})
