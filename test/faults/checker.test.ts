/**
 * The fault suite's checker on hand-made observations: which reruns around the SIGSTOP it explains by
 * the freeze, and which it leaves unexplained (those fail the suite). No database: the checker reads
 * only what a run saw.
 */
import { describe, expect, it } from 'vitest'
import type { ExecutionJson } from '../../src/api/schemas/execution.ts'
import type { JobJson } from '../../src/api/schemas/job.ts'
import type { LedgerRow } from '../worker/processes.ts'
import { check } from './checker.ts'
import type { Observation, ScenarioOptions } from './scenario.ts'

const JOB = '01a2296f-28e8-73fd-8e2c-203459115fe0'
const EXECUTION = '01a2296f-28e8-73fe-b33f-f191120efad7'
const FROZEN = 13055
const OTHER = 13054
const T0 = Date.parse('2026-11-29T22:31:20.000Z')
const at = (ms: number) => new Date(T0 + ms)
const iso = (ms: number) => at(ms).toISOString()
/** Frozen from 680 ms to 6,680 ms. */
const FREEZE = { pid: FROZEN, stoppedAtMs: T0 + 680, continuedAtMs: T0 + 6_680 }

/** A ledger row; its handler started at `handlerStartMs` by its process's clock, and its row landed at `startMs`. */
function run(attempt: number, pid: number, startMs: number, endMs: number, outcome: string, handlerStartMs = startMs): LedgerRow {
  return {
    run_id: crypto.randomUUID(),
    execution_id: EXECUTION,
    job_id: JOB,
    attempt,
    pid,
    handler_started_at: at(handlerStartMs),
    started_at: at(startMs),
    finished_at: at(endMs),
    outcome,
  }
}

/** The execution as the API reports it: its attempts (each claimed at `claimedMs`), and the result of the run `final` (succeeded). */
function execution(attempts: Array<{ claimedMs: number }>, final: LedgerRow): ExecutionJson {
  return {
    id: EXECUTION,
    jobId: JOB,
    state: 'succeeded',
    attempt: final.attempt,
    result: { pid: final.pid, run: final.run_id },
    attempts: attempts.map((a, i) => ({
      attempt: i + 1,
      startedAt: iso(a.claimedMs),
      endedAt: null,
      workerId: null,
      host: null,
      outcome: 'failed',
      error: null,
    })),
  } as unknown as ExecutionJson
}

function observe(ledger: LedgerRow[], e: ExecutionJson): Observation {
  const job = { id: JOB, schedule: null, status: 'COMPLETED', idempotencyKey: null, nextRunAt: null, lastExecution: e } as unknown as JobJson
  return {
    options: {} as ScenarioOptions,
    startedAtMs: T0,
    endedAtMs: T0 + 20_000,
    specs: [],
    outcomes: new Map(),
    stats: { responses: {}, rejected: [], successTimes: [] },
    jobs: [job],
    histories: new Map(),
    ledger,
    faults: { kills: [], freeze: FREEZE, wipe: null, apiRestart: null },
    workerPids: [FROZEN, OTHER],
    apiLogs: '',
    apiKey: 'psk_0123456789abcdef',
    workerLogs: new Map(),
  }
}

describe('the fault checker', () => {
  it("explains a rerun by the freeze when the zombie's run, claimed before it, is recorded after SIGCONT and ends ok with its outcome refused", () => {
    // attempt 2 claimed at 661 ms, just before the freeze; its start row landed at 6,690 ms; the new
    // owner's attempt 3 ran at 4,607 ms; the zombie's handler ignored the abort and ended ok (refused)
    const owner = run(3, OTHER, 4_607, 4_610, 'ok')
    const ledger = [run(1, FROZEN, 601, 607, 'error'), owner, run(2, FROZEN, 6_690, 6_832, 'ok', 665)]
    const report = check(observe(ledger, execution([{ claimedMs: 573 }, { claimedMs: 661 }, { claimedMs: 4_568 }], owner)))
    expect(report.duplicateRuns).toMatchObject({ total: 1, afterFreeze: 1, unexplained: [] })
    expect(report.resultMismatches).toEqual([])
  })

  it("explains it too when the zombie's late-recorded run, aborted, comes before the new owner's in the ledger", () => {
    const owner = run(3, OTHER, 7_500, 7_510, 'ok')
    const ledger = [run(2, FROZEN, 6_690, 6_700, 'aborted', 665), owner]
    const report = check(observe(ledger, execution([{ claimedMs: 573 }, { claimedMs: 661 }, { claimedMs: 7_480 }], owner)))
    expect(report.duplicateRuns).toMatchObject({ total: 1, afterFreeze: 1, unexplained: [] })
  })

  it("explains a rerun at the same attempt when the zombie's lease was requeued without counting it, its run recorded after SIGCONT", () => {
    // the zombie's handler began at 675 ms, 5 ms before the freeze and before any heartbeat marked it
    // begun; the reaper requeued it without counting an attempt, so the other worker ran attempt 1
    // too (the attempt log has only that claim); the zombie's start row landed at 6,690 ms and its
    // handler ended ok after SIGCONT, its outcome refused
    const owner = run(1, OTHER, 4_607, 4_610, 'ok')
    const ledger = [owner, run(1, FROZEN, 6_690, 6_832, 'ok', 675)]
    const report = check(observe(ledger, execution([{ claimedMs: 4_568 }], owner)))
    expect(report.duplicateRuns).toMatchObject({ total: 1, afterFreeze: 1, unexplained: [] })
    expect(report.resultMismatches).toEqual([])
  })

  it('leaves unexplained a run the frozen process claimed after SIGCONT and aborted, then ran elsewhere', () => {
    const owner = run(3, OTHER, 9_000, 9_010, 'ok')
    const ledger = [run(2, FROZEN, 6_720, 6_900, 'aborted'), owner]
    const report = check(observe(ledger, execution([{ claimedMs: 573 }, { claimedMs: 6_700 }, { claimedMs: 8_980 }], owner)))
    expect(report.duplicateRuns.unexplained).toEqual([`${EXECUTION}: after [${FROZEN} a2 aborted]`])
  })

  it("leaves unexplained a rerun after the zombie's late run whose outcome was accepted", () => {
    // the zombie's attempt 2 holds the execution's result: its run counted, so the one before it was a rerun no fault explains
    const zombie = run(2, FROZEN, 6_690, 6_832, 'ok', 665)
    const ledger = [run(1, OTHER, 4_607, 4_610, 'ok'), zombie]
    const report = check(observe(ledger, execution([{ claimedMs: 573 }, { claimedMs: 661 }], zombie)))
    expect(report.duplicateRuns.unexplained).toEqual([`${EXECUTION}: after [${OTHER} a1 ok]`])
  })

  it('matches a result to the run it names when one worker ran an attempt twice', () => {
    // the same process ran attempt 1 twice (its lease requeued uncounted, then claimed by it again):
    // the result names one of them; a result naming a run the ledger does not have is a mismatch,
    // though its attempt and process match both
    const first = run(1, OTHER, 1_000, 1_010, 'ok')
    const second = run(1, OTHER, 5_000, 5_010, 'ok')
    expect(check(observe([first, second], execution([{ claimedMs: 4_990 }], second))).resultMismatches).toEqual([])
    const unknown = execution([{ claimedMs: 4_990 }], { ...second, run_id: crypto.randomUUID() })
    expect(check(observe([first, second], unknown)).resultMismatches).toEqual([`${EXECUTION} attempt 1 pid ${OTHER}`])
  })
})
