/**
 * The longer form of the cron differential test (cron-differential.test.ts): more seeds and cases,
 * windows up to six days, more re-asks per case, offset changes of 2024–2030 and historical ones
 * (Pacific/Apia skipping 2011-12-30, America/Sao_Paulo 2018, Europe/Moscow 2011 and 2014,
 * Asia/Tehran's last DST in 2022), random instants 2010–2037. Prints the engine's call times.
 * CRON_DIFF_SEED picks the first seed; CRON_DIFF_TRACE=<file> records each case before it runs (a
 * case that hangs the process is the file's last line); CRON_DIFF_REPORT=<file> writes every
 * difference found.
 */
import { appendFileSync, writeFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { cronFireTimes } from '../../src/core/cron.ts'
import {
  describeSlowest,
  retimeSlowest,
  differentialCases,
  differentialSeed,
  formatDifference,
  runDifferential,
  summarizeDifferential,
} from './cron-differential.ts'

const FIRST_SEED = differentialSeed(1_001)
const SEEDS = [FIRST_SEED, FIRST_SEED + 1, FIRST_SEED + 2, FIRST_SEED + 3]
const CASES_PER_SEED = 4_000
/** Not a benchmark: catches an engine that loops or searches without bound (see the npm-test form). */
const MAX_CALL_MS = 250
const SHOWN_DIFFERENCES = 10

const HISTORICAL = [
  ['Pacific/Apia', '2011-01-01T00:00:00Z', '2012-01-01T00:00:00Z'],
  ['America/Sao_Paulo', '2018-01-01T00:00:00Z', '2019-03-01T00:00:00Z'],
  ['Europe/Moscow', '2011-01-01T00:00:00Z', '2012-01-01T00:00:00Z'],
  ['Europe/Moscow', '2014-01-01T00:00:00Z', '2015-01-01T00:00:00Z'],
  ['Asia/Tehran', '2022-01-01T00:00:00Z', '2023-01-01T00:00:00Z'],
] as const

describe('cron fire times, differential against the reference (long form)', () => {
  for (const seed of SEEDS) {
    it(`agree with the reference, each call bounded (seed ${seed})`, () => {
      const cases = differentialCases({
        seed,
        count: CASES_PER_SEED,
        transitionYears: [2024, 2025, 2026, 2027, 2028, 2029, 2030],
        historical: HISTORICAL,
        randomFrom: '2010-01-01T00:00:00Z',
        randomTo: '2037-01-01T00:00:00Z',
        windowScale: 3,
      })
      const trace = process.env.CRON_DIFF_TRACE
      const report = runDifferential(cronFireTimes, cases, {
        stepChecksPerCase: 8,
        caseBudgetMs: 5_000,
        onCase: trace
          ? (c, i) => appendFileSync(trace, `${JSON.stringify({ seed, i, expression: c.expression, timezone: c.timezone, after: c.after, until: c.until })}\n`)
          : undefined,
      })
      console.info(summarizeDifferential(report, seed))
      const all = report.differences.map(formatDifference)
      const out = process.env.CRON_DIFF_REPORT
      if (out) writeFileSync(`${out}.${seed}`, `${all.join('\n')}\n`)
      expect
        .soft(report.differences.length, `seed ${seed} (CRON_DIFF_SEED to reproduce); first differences:\n${all.slice(0, SHOWN_DIFFERENCES).join('\n')}`)
        .toBe(0)
      // the slowest call timed again, least of 5 repeats: one slow reading on a busy machine is not a loop
      const slowestMs = (report.slowestCall?.ms ?? 0) < MAX_CALL_MS ? (report.slowestCall?.ms ?? 0) : retimeSlowest(cronFireTimes, report.slowestCall)
      expect(slowestMs, `seed ${seed}: slowest call ${describeSlowest(report.slowestCall)}, at best ${slowestMs.toFixed(1)} ms in 5 repeats`).toBeLessThan(
        MAX_CALL_MS,
      )
    })
  }
})
