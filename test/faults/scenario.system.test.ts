/**
 * The fault scenario in its short form, part of `npm test`: 1,500 jobs,
 * 3 worker processes, SIGKILLs, a SIGSTOP zombie, a connection wipe and an
 * API restart in well under a minute. `npm run test:faults` runs the full
 * form (test/faults/full-scenario.faults.ts).
 */
import { describe, expect, it } from 'vitest'
import { check, formatReport, formatViolations } from './checker.ts'
import { expectGuarantees } from './guarantees.ts'
import { saveForDiagnosis, useFaultScenario } from './scenario.ts'

const { run } = useFaultScenario()

describe('fault scenario (short)', () => {
  it('loses nothing and runs nothing concurrently through SIGKILLs, a SIGSTOP zombie, a connection wipe and an API restart', { timeout: 120_000 }, async () => {
    const obs = await run({
      seed: Number(process.env.FAULTS_SEED ?? Date.now() % 1_000_000),
      oneTimeJobs: 1500,
      recurringJobs: 4,
      recurringForMs: 14_000,
      submitForMs: 12_000,
      maxDelayMs: 6000,
      clients: 8,
      workers: 3,
      concurrency: 10,
      killEveryMs: 3000,
      minKills: 3,
      restartAfterMs: 500,
      freezeAtMs: 2500,
      freezeForMs: 6000,
      wipeAtMs: 9000,
      apiKillAtMs: 6000,
      apiDownForMs: 1000,
      drainTimeoutMs: 40_000,
      // Longer than the full run's 2 s: npm test runs other heavy files beside this one.
      leaseMs: 3000,
      heartbeatMs: 750,
    })
    const report = check(obs)
    process.stderr.write(`${formatReport(report)}\n${formatViolations(report)}\n`)
    try {
      expect(report.kills).toBeGreaterThanOrEqual(3)
      expectGuarantees(report, obs.outcomes.size, obs.options.leaseMs)
    } catch (err: unknown) {
      process.stderr.write(`ledger, jobs and process logs saved in ${await saveForDiagnosis(obs)}\n`)
      throw err
    }
  })
})
