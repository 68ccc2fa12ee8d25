/**
 * The fault scenario in full (`npm run test:faults`): 24,000 one-time and 40
 * recurring jobs submitted over HTTP for 100 s by 16 clients to a real API
 * process, run by 3 worker processes, with a SIGKILL about every 6 s (at
 * least 12), a SIGSTOP zombie, a connection wipe and an API restart. The
 * table it prints is also written into docs/reliability.md ("Last run").
 * FAULTS_SEED repeats a run's workload and fault choices.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { cpus } from 'node:os'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { check, formatReport, formatViolations, type Report } from './checker.ts'
import { expectGuarantees } from './guarantees.ts'
import { saveForDiagnosis, useFaultScenario, type Observation } from './scenario.ts'

const { t, run } = useFaultScenario()
const DOC = 'docs/reliability.md'
const START = '<!-- fault-suite:last-run:start -->'
const END = '<!-- fault-suite:last-run:end -->'

async function writeLastRun(obs: Observation, report: Report, verdict: string): Promise<void> {
  const { rows } = await sql<{ v: string }>`select current_setting('server_version') as v`.execute(t.db)
  const when = new Date(obs.startedAtMs).toISOString().replace(/\.\d+Z$/, 'Z')
  const section = [
    START,
    `Produced by \`npm run test:faults\` (test/faults/full-scenario.faults.ts, seed ${obs.options.seed}) on ${when}:`,
    `${cpus().length} CPU cores, Node ${process.version}, PostgreSQL ${rows[0]?.v}; ${obs.options.workers} workers × ${obs.options.concurrency} slots,`,
    `lease ${obs.options.leaseMs} ms, heartbeat ${obs.options.heartbeatMs} ms. ${verdict}`,
    '',
    formatReport(report),
    END,
  ].join('\n')
  const doc = await readFile(DOC, 'utf8')
  const from = doc.indexOf(START)
  const to = doc.indexOf(END)
  if (from < 0 || to < from) throw new Error(`${DOC} has no ${START} … ${END} section`)
  await writeFile(DOC, `${doc.slice(0, from)}${section}${doc.slice(to + END.length)}`)
}

describe('fault scenario (full)', () => {
  it('24,000 jobs through 12+ SIGKILLs, a SIGSTOP zombie, a connection wipe and an API restart: nothing lost, nothing concurrent', {
    timeout: 600_000,
  }, async () => {
    const obs = await run({
      seed: Number(process.env.FAULTS_SEED ?? Date.now() % 1_000_000),
      oneTimeJobs: 24_000,
      recurringJobs: 40,
      recurringForMs: 100_000,
      submitForMs: 100_000,
      maxDelayMs: 20_000,
      clients: 16,
      workers: 3,
      concurrency: 20,
      killEveryMs: 6000,
      minKills: 12,
      restartAfterMs: 1000,
      freezeAtMs: 25_000,
      freezeForMs: 5000,
      wipeAtMs: 50_000,
      apiKillAtMs: 70_000,
      apiDownForMs: 1500,
      drainTimeoutMs: 240_000,
      leaseMs: 2000,
      heartbeatMs: 500,
    })
    const report = check(obs)
    process.stderr.write(`${formatReport(report)}\n${formatViolations(report)}\n`)
    let verdict = 'Every check passed.'
    try {
      expect(report.submitted).toBeGreaterThanOrEqual(20_000)
      expect(report.kills).toBeGreaterThanOrEqual(10)
      expectGuarantees(report, obs.outcomes.size, obs.options.leaseMs)
    } catch (err: unknown) {
      verdict = `FAILED: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`
      process.stderr.write(`ledger, jobs and process logs saved in ${await saveForDiagnosis(obs)}\n`)
      throw err
    } finally {
      await writeLastRun(obs, report, verdict)
    }
  })
})
