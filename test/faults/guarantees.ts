/** The guarantees every run of the fault scenario must show, whatever its size. */
import { expect } from 'vitest'
import type { Report } from './checker.ts'

/** `leaseMs`: the workers' lease; a zombie must have stopped within one lease of resuming. */
export function expectGuarantees(report: Report, accepted: number, leaseMs: number): void {
  expect(report.rejected).toBe(0)
  expect(report.lost).toEqual([])
  expect(report.terminal).toBe(accepted)
  expect(report.unexpectedStatus).toEqual([])
  expect(report.resultMismatches).toEqual([])
  expect(report.concurrent).toEqual([])
  expect(report.duplicateRuns.unexplained).toEqual([])
  expect(report.duplicateJobs).toEqual([])
  expect(report.recurring.dispatchedTwice).toBe(0)
  expect(report.recurring.unknownExecutions).toBe(0)
  expect(report.openRuns).toEqual([])
  expect(report.zombie.takenOver).toBeGreaterThan(0)
  expect(report.zombie.completionsAccepted).toBe(0)
  expect(report.zombie.lastActivityAfterResumeMs ?? 0).toBeLessThan(leaseMs)
  expect(report.keyInApiLogs).toBe(false)
}
