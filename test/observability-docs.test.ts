/**
 * docs/grafana/pgsched.json loads as a Grafana dashboard (a JSON Schema of the subset it uses), and
 * every query of its panels and of docs/prometheus/pgsched-alerts.yml parses with Prometheus's own
 * PromQL grammar (@prometheus-io/lezer-promql) and selects and groups only by metrics and labels the
 * worker and API registries expose, with `le` values that Prometheus 2 and 3 both store;
 * docs/observability.md names every pgsched metric they expose.
 */
import { readFileSync } from 'node:fs'
import { parser } from '@prometheus-io/lezer-promql'
import { Ajv } from 'ajv'
import { describe, expect, it } from 'vitest'
import { createApiMetrics } from '../src/api/metrics.ts'
import type { ClaimedExecution } from '../src/db/queries/claim.ts'
import { WorkerMetrics } from '../src/worker/metrics.ts'
import { useTestDb } from './db.ts'
import { insertExecution } from './factories.ts'
import { parsePrometheusText } from './prometheus-text.ts'

const t = useTestDb()
/** A node of a parsed expression (@lezer/common's SyntaxNode, through the parser that makes it). */
type SyntaxNode = ReturnType<typeof parser.parse>['topNode']
const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')

interface Dashboard {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }>; gridPos: { x: number; y: number; w: number; h: number } }>
}

/** A label matcher of a selector: `queue=~"$queue"` is { label: 'queue', op: '=~', value: '$queue' }. */
interface Matcher {
  label: string
  op: string
  value: string
}

/** What a PromQL expression selects and groups by, read from Prometheus's own grammar. */
interface ParsedQuery {
  /** Syntax errors, as the text around each. */
  errors: string[]
  selectors: Array<{ metric: string; matchers: Matcher[] }>
  /** Each `by (…)` or `on (…)` list, with the metrics of the selectors it groups. */
  groupings: Array<{ labels: string[]; metrics: string[] }>
}

/** Grafana's variables in range brackets, replaced so that Prometheus's grammar reads the query. */
function withoutGrafanaVariables(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m').replaceAll('$__range', '1h')
}

/** A PromQL double-quoted string's value (its escapes are JSON's for what these queries use). */
function unquote(literal: string): string {
  return literal.startsWith('"') ? (JSON.parse(literal) as string) : literal.slice(1, -1)
}

function parsePromql(exprWithVariables: string): ParsedQuery {
  const expr = withoutGrafanaVariables(exprWithVariables)
  const tree = parser.parse(expr)
  const text = (n: SyntaxNode) => expr.slice(n.from, n.to)
  const parsed: ParsedQuery = { errors: [], selectors: [], groupings: [] }
  const selectorsUnder = (node: SyntaxNode) => {
    const metrics: string[] = []
    const cursor = node.cursor()
    do {
      if (cursor.name === 'VectorSelector') {
        const id = cursor.node.getChild('Identifier')
        if (id) metrics.push(text(id))
      }
    } while (cursor.next() && cursor.from < node.to)
    return metrics
  }
  tree.iterate({
    enter: (ref) => {
      const node = ref.node
      if (ref.type.isError) parsed.errors.push(`at ${ref.from}: ${JSON.stringify(expr.slice(Math.max(0, ref.from - 20), ref.to + 20))}`)
      if (ref.name === 'VectorSelector') {
        const id = node.getChild('Identifier')
        const matchers = (node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []).map((m) => ({
          label: text(m.getChild('LabelName') as SyntaxNode),
          op: text(m.getChild('MatchOp') as SyntaxNode),
          value: unquote(text(m.getChild('StringLiteral') as SyntaxNode)),
        }))
        parsed.selectors.push({ metric: id ? text(id) : '', matchers })
      }
      if (ref.name === 'AggregateExpr') {
        const modifier = node.getChild('AggregateModifier')
        const labels = (modifier?.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map(text)
        if (modifier?.getChild('By')) parsed.groupings.push({ labels, metrics: selectorsUnder(node) })
      }
      if (ref.name === 'BinaryExpr') {
        const clause = node.getChild('MatchingModifierClause')
        const labels = (clause?.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map(text)
        if (clause?.getChild('On')) parsed.groupings.push({ labels, metrics: selectorsUnder(node) })
      }
    },
  })
  return parsed
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

/** Labels Prometheus adds to every series it scrapes. */
const TARGET_LABELS = ['instance', 'job']

/**
 * Every series name the worker and API registries expose, with the label names and values of their
 * samples, from their Prometheus text once each event has happened (a histogram: _bucket, _sum, _count).
 */
async function exposedSeries(): Promise<Map<string, Map<string, Set<string>>>> {
  await insertExecution(t.db, { job: { queue: 'default', type: 'docs.job' } })
  const api = createApiMetrics({ db: t.db, log: t.log })
  api.observeRequest({ method: 'POST', route: '/v1/jobs', statusCode: 202 }, 3)
  api.jobSubmitted('default')
  api.submitDurable('default', 2)
  const worker = new WorkerMetrics()
  const c = { queue: 'default', type: 'docs.job', runAtMs: 1_000, startedAtMs: 1_500 } as ClaimedExecution
  worker.observe({
    holding: () => ({ running: 1, buffered: 0, sandboxes: 1, idleSandboxes: 0 }),
    pools: [{ name: 'worker', pool: { totalCount: 2, idleCount: 1, waitingCount: 0 } }],
  })
  worker.claimed(1, 0, [c], 2)
  worker.runStarted(c)
  worker.runEnded(c, 10)
  worker.outcomeWritten(c, 'succeeded')
  worker.leaseLost(c)
  worker.handedBack([c])
  worker.heartbeat(1)
  worker.expired('default', 'docs.job', 1)
  worker.rescued('default', 'docs.job', 1, 0)
  const series = new Map<string, Map<string, Set<string>>>()
  for (const registry of [api.registry, worker.registry]) {
    for (const s of parsePrometheusText(await registry.metrics()).samples) {
      const labels = series.get(s.name) ?? new Map<string, Set<string>>()
      series.set(s.name, labels)
      for (const [k, v] of Object.entries(s.labels)) labels.set(k, (labels.get(k) ?? new Set()).add(v))
    }
  }
  return series
}

/** A bucket bound as Prometheus 3 stores it whatever the scrape format: a float's text (`900` → `900.0`). */
function prometheus3Le(le: string): string {
  return /^-?\d+$/.test(le) ? `${le}.0` : le
}

/** Whether a matcher selects `value` (Prometheus anchors regular expressions at both ends). */
function matches(m: Matcher, value: string): boolean {
  if (m.op === '=') return value === m.value
  if (m.op === '!=') return value !== m.value
  const re = new RegExp(`^(?:${m.value})$`)
  return m.op === '=~' ? re.test(value) : !re.test(value)
}

describe('observability docs', () => {
  const dashboard = JSON.parse(read('docs/grafana/pgsched.json')) as Dashboard
  const queries = [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((q) => ({ where: `panel "${p.title}"`, expr: q.expr }))),
    ...alertExprs(read('docs/prometheus/pgsched-alerts.yml')).map((expr) => ({ where: 'alert rule', expr })),
  ]

  it('ships a Grafana dashboard that passes the dashboard schema, its panels on the 24-column grid', () => {
    const ajv = new Ajv({ allErrors: true, strict: false })
    const validate = ajv.compile(JSON.parse(read('test/fixtures/grafana-dashboard.schema.json')) as object)
    expect(validate(dashboard), ajv.errorsText(validate.errors)).toBe(true)
    for (const p of dashboard.panels) expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24)
  })

  it('has panel and alert queries that parse as PromQL', () => {
    expect(queries.length).toBeGreaterThan(20)
    for (const { where, expr } of queries) expect(parsePromql(expr).errors, `${where}: ${expr}`).toEqual([])
  })

  it('queries in every panel and alert rule only metrics and labels the worker and API expose', async () => {
    const exposed = await exposedSeries()
    for (const { where, expr } of queries) {
      const { selectors, groupings } = parsePromql(expr)
      expect(selectors.length, `${where}: ${expr}`).toBeGreaterThan(0)
      for (const { metric, matchers } of selectors) {
        const labels = exposed.get(metric)
        expect(labels, `${metric} in ${where}: ${expr}`).toBeDefined()
        for (const m of matchers) expect([...(labels?.keys() ?? []), ...TARGET_LABELS], `${metric}{${m.label}} in ${where}`).toContain(m.label)
      }
      for (const { labels, metrics } of groupings) {
        for (const metric of metrics) {
          for (const label of labels)
            expect([...(exposed.get(metric)?.keys() ?? []), ...TARGET_LABELS], `by/on (${label}) over ${metric} in ${where}`).toContain(label)
        }
      }
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

  it('selects histogram buckets by le values that both Prometheus 2 (text as scraped) and 3 (normalised to floats) store', async () => {
    const exposed = await exposedSeries()
    const leMatchers = queries.flatMap(({ where, expr }) =>
      parsePromql(expr).selectors.flatMap(({ metric, matchers }) => matchers.filter((m) => m.label === 'le').map((m) => ({ where, metric, m }))),
    )
    expect(leMatchers.length).toBeGreaterThan(1)
    for (const { where, metric, m } of leMatchers) {
      const bounds = [...(exposed.get(metric)?.get('le') ?? [])]
      const selected = bounds.filter((le) => matches(m, le))
      expect(selected, `${metric}{le${m.op}"${m.value}"} in ${where} selects one exposed bucket`).toHaveLength(1)
      const bound = selected[0] as string
      expect(matches(m, prometheus3Le(bound)), `${metric}{le${m.op}"${m.value}"} in ${where} selects le="${prometheus3Le(bound)}" (Prometheus 3)`).toBe(true)
    }
  })

  it('shows on the dashboard every metric an alert rule fires on', () => {
    const onDashboard = new Set(queries.filter((q) => q.where !== 'alert rule').flatMap((q) => parsePromql(q.expr).selectors.map((s) => s.metric)))
    for (const { expr } of queries.filter((q) => q.where === 'alert rule')) {
      for (const { metric } of parsePromql(expr).selectors) expect([...onDashboard], `${metric} of the alert ${expr}`).toContain(metric)
    }
  })

  it("computes the dashboard's failure ratio over the same outcomes as the failure ratio alert", () => {
    const metricsOf = (expr: string) => parsePromql(expr).selectors.map((s) => s.metric)
    const panel = dashboard.panels.find((p) => p.title.startsWith('Failure ratio'))
    const alert = queries.find((q) => q.where === 'alert rule' && metricsOf(q.expr).includes('pgsched_worker_executions_failed_total'))
    expect(panel?.targets).toHaveLength(1)
    expect(alert).toBeDefined()
    expect(metricsOf(panel?.targets?.[0]?.expr ?? '')).toEqual(metricsOf(alert?.expr ?? ''))
  })

  it('reads metrics, matchers and groupings out of a PromQL expression', () => {
    const parsed = parsePromql(
      'histogram_quantile(0.99, sum by (queue, le) (rate(a_bucket{le=~"900(\\\\.0)?",queue=~"$queue"}[$__rate_interval]))) / on (queue) group_left () b_total > bool 0 or c offset 5m',
    )
    expect(parsed.errors).toEqual([])
    expect(parsed.selectors).toEqual([
      {
        metric: 'a_bucket',
        matchers: [
          { label: 'le', op: '=~', value: '900(\\.0)?' },
          { label: 'queue', op: '=~', value: '$queue' },
        ],
      },
      { metric: 'b_total', matchers: [] },
      { metric: 'c', matchers: [] },
    ])
    expect(parsed.groupings).toEqual([
      { labels: ['queue'], metrics: ['a_bucket', 'b_total'] },
      { labels: ['queue', 'le'], metrics: ['a_bucket'] },
    ])
    expect(parsePromql('sum by (queue) (rate(a_total[5m])').errors).not.toEqual([])
    expect(matches({ label: 'le', op: '=~', value: '900(\\.0)?' }, '900.0')).toBe(true)
    expect(matches({ label: 'le', op: '=~', value: '900(\\.0)?' }, '9000')).toBe(false)
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
