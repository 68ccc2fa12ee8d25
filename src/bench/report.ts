/**
 * The bench report: its rows (one figure per scenario and measure) and the
 * Markdown table `scheduler bench` prints and docs/benchmarks.md keeps.
 */
import type { Figure } from './stats.ts'

/** One measured figure. */
export interface Row {
  scenario: string
  metric: string
  unit: string
  figure: Figure
  /** Share of the ceiling (jobs/s scenarios). */
  ofCeiling?: number
  target?: string
}

/** A whole bench run. */
export interface BenchReport {
  startedAt: string
  durationS: number
  quick: boolean
  machine: Record<string, string | number>
  rows: Row[]
  explain: string
}

/** Relative change of `value` against `base`, e.g. "−8 %". */
export function change(value: number, base: number): string {
  const pct = Math.round((value / base - 1) * 100)
  return `${pct < 0 ? '−' : '+'}${Math.abs(pct)} %`
}

/** A figure for the table: thousands separated from 100 up, else 1–2 decimals. */
export function format(n: number): string {
  if (Number.isNaN(n)) return 'n/a'
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US')
  return n.toFixed(n >= 10 ? 1 : 2)
}

/** The report as a Markdown table. */
export function reportTable(report: BenchReport): string {
  const lines = [
    '| scenario | measure | median | min – max | % of ceiling | target |',
    '|---|---|---:|---:|---:|---|',
    ...report.rows.map(
      (r) =>
        `| ${r.scenario} | ${r.metric} | ${format(r.figure.median)} ${r.unit} | ${format(r.figure.min)} – ${format(r.figure.max)} | ${r.ofCeiling === undefined || Number.isNaN(r.ofCeiling) ? '' : `${Math.round(r.ofCeiling * 100)} %`} | ${r.target ?? ''} |`,
    ),
  ]
  return lines.join('\n')
}
