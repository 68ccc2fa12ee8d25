/**
 * The fault suite's checker. It reads only the external ledger (one row per
 * handler run: execution, attempt, pid, start, finish, outcome) and what the
 * API reports (jobs, executions), plus what the clients and the fault
 * injector saw, and computes the figures of the final table:
 *   - lost: an accepted job that is missing, unfinished, or never ran;
 *   - concurrent: two runs of one execution whose live time overlaps (a
 *     SIGKILLed process stops at its kill; a SIGSTOPped one does not run
 *     while frozen, and a run it resumes only to abort ends at SIGCONT);
 *   - duplicate runs: a run after an earlier run of the same execution that
 *     was not a planned (retriable) failure, each attributed to the fault that
 *     explains it, or "unexplained";
 *   - duplicate jobs, recurring fire times with two executions, zombie
 *     completions accepted, and the time from each fault to recovery.
 */
import type { JobJson } from '../../src/api/schemas/job.ts'
import type { ExecutionJson } from '../../src/api/schemas/execution.ts'
import type { LedgerRow } from '../worker/processes.ts'
import type { Observation } from './scenario.ts'

/** Time from a fault to recovery: to the first of the affected runs restarting, and to all of them (ms). */

/** How soon after SIGCONT a zombie's already-issued write may land (its lease guard runs first). */
const ZOMBIE_LATE_WRITE_MS = 1000

export interface Recovery {
  /** Faults measured. */
  count: number
  firstMedianMs: number | null
  allMedianMs: number | null
  allMaxMs: number | null
}

export interface Report {
  durationMs: number
  submitted: number
  accepted202: number
  /** Keys whose first answer was lost and whose retry got the job with a 200. */
  acceptedOnRetry: number
  /** Deliberate second submissions answered 200 with the same job. */
  repeatsAnsweredSame: number
  rejected: number
  responses: Record<string, number>
  jobsInApi: number
  terminal: number
  lost: string[]
  unexpectedStatus: string[]
  /** Succeeded executions whose result has no matching 'ok' run in the ledger. */
  resultMismatches: string[]
  concurrent: string[]
  /** Zombie handler steps, already due when it resumed, that ended after SIGCONT while another worker ran the execution. */
  zombieLateSteps: string[]
  duplicateRuns: { total: number; afterKill: number; afterFreeze: number; afterWipe: number; unexplained: string[] }
  duplicateJobs: string[]
  recurring: { jobs: number; fireTimes: number; dispatchedTwice: number; missedFireTimes: number; unknownExecutions: number }
  /** Runs of live processes that never finished. */
  openRuns: string[]
  zombie: {
    pid: number | null
    frozenMs: number
    held: number
    takenOver: number
    completionsAccepted: number
    finishedAfterResume: Record<string, number>
    lastActivityAfterResumeMs: number | null
  }
  ledgerRuns: number
  executions: number
  kills: number
  wipedConnections: number
  keyInApiLogs: boolean
  recovery: { kill: Recovery; freeze: Recovery; wipe: Recovery; api: Recovery }
}

const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED'])

function median(values: readonly number[]): number | null {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length ? (sorted[Math.floor((sorted.length - 1) / 2)] as number) : null
}

/** One entry per fault: the delays (ms) after which each affected run restarted. */
function recovery(perFault: ReadonlyArray<readonly number[]>): Recovery {
  const measured = perFault.filter((d) => d.length > 0)
  const all = measured.map((d) => Math.max(...d))
  return {
    count: measured.length,
    firstMedianMs: median(measured.map((d) => Math.min(...d))),
    allMedianMs: median(all),
    allMaxMs: all.length ? Math.max(...all) : null,
  }
}

function resultPid(e: ExecutionJson): number | undefined {
  const r = e.result as { pid?: unknown } | null
  return typeof r?.pid === 'number' ? r.pid : undefined
}

/** The ledger run whose result the execution holds (the fixture handlers return their run id). */
function resultRun(e: ExecutionJson): string | undefined {
  const r = e.result as { run?: unknown } | null
  return typeof r?.run === 'string' ? r.run : undefined
}

export function check(obs: Observation): Report {
  const { faults } = obs
  const killAt = new Map(faults.kills.map((k) => [k.pid, k.atMs]))
  const freeze = faults.freeze
  const rowsByExecution = new Map<string, LedgerRow[]>()
  const rowsByJob = new Map<string, LedgerRow[]>()
  for (const r of obs.ledger) {
    rowsByExecution.set(r.execution_id, [...(rowsByExecution.get(r.execution_id) ?? []), r])
    rowsByJob.set(r.job_id, [...(rowsByJob.get(r.job_id) ?? []), r])
  }
  for (const runs of rowsByExecution.values()) runs.sort((a, b) => a.started_at.getTime() - b.started_at.getTime())

  // --- submissions and jobs -------------------------------------------------------------
  const jobsByKey = new Map<string, JobJson[]>()
  for (const j of obs.jobs) {
    if (j.idempotencyKey) jobsByKey.set(j.idempotencyKey, [...(jobsByKey.get(j.idempotencyKey) ?? []), j])
  }
  const duplicateJobs: string[] = []
  for (const [key, list] of jobsByKey) if (list.length > 1) duplicateJobs.push(key)
  for (const j of obs.jobs) if (!j.idempotencyKey) duplicateJobs.push(`job ${j.id} without a key`)
  let accepted202 = 0
  let acceptedOnRetry = 0
  let repeatsAnsweredSame = 0
  for (const [key, o] of obs.outcomes) {
    if (o.firstStatus === 202) accepted202++
    else acceptedOnRetry++
    for (const id of o.repeatedIds) {
      if (id === o.jobId) repeatsAnsweredSame++
      else duplicateJobs.push(`${key}: repeat answered ${id}, first ${o.jobId}`)
    }
    const listed = jobsByKey.get(key) ?? []
    if (listed.length === 1 && listed[0]?.id !== o.jobId) duplicateJobs.push(`${key}: answered ${o.jobId}, listed ${listed[0]?.id}`)
  }

  // Every execution the API reports: the last one of each one-time job, every one of a recurring job.
  const executions = new Map<string, ExecutionJson>()
  for (const j of obs.jobs) {
    if (j.schedule === null && j.lastExecution) executions.set(j.lastExecution.id, j.lastExecution)
  }
  for (const list of obs.histories.values()) for (const e of list) executions.set(e.id, e)

  const lost: string[] = []
  const unexpectedStatus: string[] = []
  let terminal = 0
  const specByKey = new Map(obs.specs.map((s) => [s.key, s]))
  for (const [key, o] of obs.outcomes) {
    const spec = specByKey.get(key)
    const job = (jobsByKey.get(key) ?? []).find((j) => j.id === o.jobId)
    if (!job || !spec) {
      lost.push(`${key}: accepted as ${o.jobId}, not listed by the API`)
      continue
    }
    if (job.schedule === null) {
      const ran = (rowsByJob.get(job.id) ?? []).length > 0
      if (!TERMINAL.has(job.status) || !ran) {
        lost.push(`${key}: ${job.status}, ${ran ? 'ran' : 'never ran'}`)
        continue
      }
    } else {
      const history = obs.histories.get(job.id) ?? []
      const unfinished = history.filter((e) => e.state === 'pending' || e.state === 'running')
      const neverRan = history.filter((e) => !rowsByExecution.has(e.id))
      if (history.length === 0 || unfinished.length > 0 || neverRan.length > 0 || job.nextRunAt !== null) {
        lost.push(`${key}: recurring, ${history.length} executions, ${unfinished.length} unfinished, ${neverRan.length} never ran, next ${job.nextRunAt}`)
        continue
      }
    }
    terminal++
    if (job.status !== spec.expected)
      unexpectedStatus.push(`${key} (${spec.kind}): ${job.status}, expected ${spec.expected}; ${JSON.stringify(job.lastExecution?.error)}`)
  }

  // --- outcomes recorded match real runs --------------------------------------------------
  const resultMismatches: string[] = []
  for (const e of executions.values()) {
    if (e.state !== 'succeeded') continue
    const pid = resultPid(e)
    const run = resultRun(e)
    const match = (rowsByExecution.get(e.id) ?? []).some((r) => r.run_id === run && r.attempt === e.attempt && r.pid === pid && r.outcome === 'ok')
    if (!match) resultMismatches.push(`${e.id} attempt ${e.attempt} pid ${pid}`)
  }

  // --- concurrency: live spans of one execution must not overlap -------------------------
  /** Live spans of a run; `late`: the part a zombie ran after SIGCONT, for a run it did not abort. */
  const spans = (r: LedgerRow): Array<[number, number, boolean]> => {
    const start = r.started_at.getTime()
    const death = killAt.get(r.pid)
    let end = r.finished_at?.getTime() ?? (death !== undefined ? Math.max(start, death) : Number.POSITIVE_INFINITY)
    if (death !== undefined) end = Math.min(end, Math.max(start, death))
    if (freeze && r.pid === freeze.pid) {
      // Frozen, the process runs nothing. A run it resumes and that then ends 'aborted' was stopped
      // at once: its only work after SIGCONT is writing that it stopped (the lease guard aborts it
      // among the first callbacks; the zombie line of the table shows how soon). A run that ends
      // otherwise after SIGCONT did its work then, and that time counts.
      const out: Array<[number, number, boolean]> = []
      if (start < freeze.stoppedAtMs) out.push([start, Math.min(end, freeze.stoppedAtMs), false])
      if (end > freeze.continuedAtMs && r.outcome !== 'aborted') out.push([Math.max(start, freeze.continuedAtMs), end, true])
      return out
    }
    return [[start, end, false]]
  }
  const concurrent: string[] = []
  // A zombie's handler step that was already due when it resumed and ran before its lease guard
  // could abort it (see docs/reliability.md, "The limits of a lease"), overlapping the new owner.
  const zombieLateSteps: string[] = []
  for (const [id, runs] of rowsByExecution) {
    if (runs.length < 2) continue
    const all = runs.flatMap((r, i) => spans(r).map(([s, e, late]) => ({ s, e, i, late })))
    all.sort((a, b) => a.s - b.s)
    let clash: 'live' | 'late' | null = null
    for (let x = 0; x < all.length && clash !== 'live'; x++) {
      for (let y = x + 1; y < all.length; y++) {
        const a = all[x] as (typeof all)[number]
        const b = all[y] as (typeof all)[number]
        if (b.s >= a.e) break
        if (a.i !== b.i) clash = a.late || b.late ? (clash ?? 'late') : 'live'
      }
    }
    const runsText = () =>
      `${id}: ${runs.map((r) => `[${r.pid} a${r.attempt} ${r.started_at.toISOString()}–${r.finished_at?.toISOString() ?? 'open'} ${r.outcome}]`).join(' ')}`
    if (clash === 'live') concurrent.push(runsText())
    else if (clash === 'late') zombieLateSteps.push(runsText())
  }

  // --- duplicate runs, attributed to the fault that explains them ------------------------
  // A worker that is alive keeps renewing its lease until the outcome of a run is written, so a run
  // is repeated only when its process died or froze before that, or its handler was aborted.
  const duplicateRuns = { total: 0, afterKill: 0, afterFreeze: 0, afterWipe: 0, unexplained: [] as string[] }
  /**
   * A run of the frozen process whose ledger start row landed within ZOMBIE_LATE_WRITE_MS of SIGCONT
   * although its handler had started before the freeze (by the process's own clock, read as the
   * handler began), and that did not count: it ended aborted (the lease guard, at once), or its
   * handler ignored the abort and its outcome was refused (the execution does not hold it). (Not the
   * execution's attempt log: a lease that expired before a heartbeat marked it begun is requeued
   * without counting an attempt, so the zombie's claim leaves no attempt of its own there.)
   */
  const zombieRecordedLate = (r: LedgerRow): boolean => {
    if (freeze === null || r.pid !== freeze.pid) return false
    const at = r.started_at.getTime()
    if (at < freeze.continuedAtMs || at > freeze.continuedAtMs + ZOMBIE_LATE_WRITE_MS) return false
    if (r.handler_started_at.getTime() >= freeze.stoppedAtMs) return false
    const final = executions.get(r.execution_id)
    const counted = final?.attempt === r.attempt && (final.state === 'succeeded' ? resultRun(final) === r.run_id : final.state !== 'pending')
    return r.outcome === 'aborted' || !counted
  }
  const wipeAt = faults.wipe?.atMs
  for (const [id, runs] of rowsByExecution) {
    for (let i = 1; i < runs.length; i++) {
      const prev = runs[i - 1] as LedgerRow
      const next = runs[i] as LedgerRow
      if (prev.outcome === 'error') continue // a planned retriable failure
      duplicateRuns.total++
      const from = prev.started_at.getTime()
      const to = next.started_at.getTime()
      const killedAt = killAt.get(prev.pid)
      const frozen = freeze !== null && prev.pid === freeze.pid && from < freeze.continuedAtMs && freeze.stoppedAtMs <= to
      // The zombie's run recorded late: its handler had started before the freeze, but its first
      // write (the ledger's start row, timestamped by the database) only landed on resuming. So its
      // run starts, in the ledger, after SIGCONT: second when the new owner ran before, first when
      // the new owner came after. Either way the freeze explains the pair.
      if (zombieRecordedLate(next) || zombieRecordedLate(prev)) {
        duplicateRuns.afterFreeze++
        continue
      }
      if (prev.outcome === 'aborted') {
        // Aborted by its own worker: by the lease guard on resuming from the freeze, or after the
        // heartbeats failed around the wipe. (A killed process writes nothing.)
        const end = prev.finished_at?.getTime() ?? from
        if (frozen && end >= (freeze?.continuedAtMs ?? 0)) duplicateRuns.afterFreeze++
        else if (wipeAt !== undefined && end >= wipeAt && end <= wipeAt + 10_000) duplicateRuns.afterWipe++
        else duplicateRuns.unexplained.push(`${id}: after [${prev.pid} a${prev.attempt} aborted]`)
      } else if (frozen) {
        duplicateRuns.afterFreeze++ // the zombie's run: cut off, or its outcome refused
      } else if (killedAt !== undefined && killedAt >= from - 1000 && killedAt <= to) {
        // Died while running it, or before its outcome was written. (The start row of a run can
        // carry a database time a moment after the kill was sent: the insert was on its way.)
        duplicateRuns.afterKill++
      } else if (wipeAt !== undefined && prev.outcome !== null && wipeAt >= from && wipeAt <= to) {
        duplicateRuns.afterWipe++ // its outcome was being written when every connection dropped
      } else {
        duplicateRuns.unexplained.push(`${id}: after [${prev.pid} a${prev.attempt} ${prev.outcome}]`)
      }
    }
  }

  // --- recurring jobs ---------------------------------------------------------------------
  const recurring = { jobs: 0, fireTimes: 0, dispatchedTwice: 0, missedFireTimes: 0, unknownExecutions: 0 }
  for (const job of obs.jobs.filter((j) => j.schedule !== null)) {
    recurring.jobs++
    const history = obs.histories.get(job.id) ?? []
    const byFireTime = new Map<string, number>()
    for (const e of history) byFireTime.set(e.scheduledFor, (byFireTime.get(e.scheduledFor) ?? 0) + 1)
    recurring.fireTimes += byFireTime.size
    for (const n of byFireTime.values()) if (n > 1) recurring.dispatchedTwice++
    const known = new Set(history.map((e) => e.id))
    const ledgerIds = new Set((rowsByJob.get(job.id) ?? []).map((r) => r.execution_id))
    for (const id of ledgerIds) if (!known.has(id)) recurring.unknownExecutions++
    const stepMs = job.schedule?.intervalMs ?? 2000
    const times = [...byFireTime.keys()].map((s) => Date.parse(s)).sort((a, b) => a - b)
    for (let i = 1; i < times.length; i++) recurring.missedFireTimes += Math.max(0, Math.round(((times[i] as number) - (times[i - 1] as number)) / stepMs) - 1)
  }

  // --- runs that never finished although their process lived ------------------------------
  const openRuns = obs.ledger.filter((r) => r.finished_at === null && !killAt.has(r.pid)).map((r) => `${r.execution_id} a${r.attempt} pid ${r.pid}`)

  // --- the SIGSTOP zombie -----------------------------------------------------------------
  const zombie: Report['zombie'] = {
    pid: freeze?.pid ?? null,
    frozenMs: freeze ? freeze.continuedAtMs - freeze.stoppedAtMs : 0,
    held: 0,
    takenOver: 0,
    completionsAccepted: 0,
    finishedAfterResume: {},
    lastActivityAfterResumeMs: null,
  }
  const freezeDelays: number[] = []
  if (freeze) {
    const held = obs.ledger.filter(
      (r) => r.pid === freeze.pid && r.started_at.getTime() < freeze.continuedAtMs && (r.finished_at === null || r.finished_at.getTime() > freeze.stoppedAtMs),
    )
    zombie.held = held.length
    let latest: number | null = null
    for (const r of held) {
      const end = r.finished_at?.getTime()
      if (end !== undefined && end > freeze.continuedAtMs) {
        const label = r.outcome ?? 'open'
        zombie.finishedAfterResume[label] = (zombie.finishedAfterResume[label] ?? 0) + 1
        latest = Math.max(latest ?? 0, end - freeze.continuedAtMs)
      }
      const later = (rowsByExecution.get(r.execution_id) ?? []).find((x) => x.pid !== freeze.pid && x.started_at.getTime() > freeze.stoppedAtMs)
      if (!later) continue
      zombie.takenOver++
      freezeDelays.push(later.started_at.getTime() - freeze.stoppedAtMs)
      const final = executions.get(r.execution_id)
      if (final?.state === 'succeeded' && resultRun(final) === r.run_id) zombie.completionsAccepted++
    }
    zombie.lastActivityAfterResumeMs = latest
  }

  // --- recovery times ---------------------------------------------------------------------
  const killDelays: number[][] = []
  for (const k of faults.kills) {
    // Every unfinished run of a killed process was cut off by the kill (its start row may carry a
    // database time a few ms after the kill was sent: the insert was already on its way).
    const held = obs.ledger.filter((r) => r.pid === k.pid && r.finished_at === null)
    const delays: number[] = []
    for (const r of held) {
      const later = (rowsByExecution.get(r.execution_id) ?? []).find((x) => x.started_at.getTime() > k.atMs && x.pid !== k.pid)
      if (later) delays.push(later.started_at.getTime() - k.atMs)
    }
    killDelays.push(delays)
  }
  const wipeDelays: number[] = []
  if (faults.wipe) {
    const wipe = faults.wipe
    // Workers that were running handlers before the wipe (not one still starting up).
    const working = wipe.livePids.filter((pid) => obs.ledger.some((r) => r.pid === pid && r.started_at.getTime() < wipe.atMs))
    for (const pid of working) {
      const first = obs.ledger.find((r) => r.pid === pid && r.started_at.getTime() > wipe.atMs)
      if (first) wipeDelays.push(first.started_at.getTime() - wipe.atMs)
    }
  }
  const apiDelays: number[] = []
  if (faults.apiRestart) {
    const { killedAtMs, restartedAtMs } = faults.apiRestart
    const first = obs.stats.successTimes.filter((s) => s >= restartedAtMs).sort((a, b) => a - b)[0]
    if (first !== undefined) apiDelays.push(first - killedAtMs)
  }

  return {
    durationMs: obs.endedAtMs - obs.startedAtMs,
    submitted: obs.specs.length,
    accepted202,
    acceptedOnRetry,
    repeatsAnsweredSame,
    rejected: obs.stats.rejected.length,
    responses: obs.stats.responses,
    jobsInApi: obs.jobs.length,
    terminal,
    lost,
    unexpectedStatus,
    resultMismatches,
    concurrent,
    zombieLateSteps,
    duplicateRuns,
    duplicateJobs,
    recurring,
    openRuns,
    zombie,
    ledgerRuns: obs.ledger.length,
    executions: executions.size,
    kills: faults.kills.length,
    wipedConnections: faults.wipe?.terminated ?? 0,
    keyInApiLogs: obs.apiLogs.includes(obs.apiKey) || obs.apiLogs.includes(obs.apiKey.slice(12)),
    recovery: {
      kill: recovery(killDelays),
      freeze: recovery([freezeDelays]),
      wipe: recovery([wipeDelays]),
      api: recovery([apiDelays]),
    },
  }
}

const n = (x: number) => x.toLocaleString('en-US')
const s = (ms: number | null) => (ms === null ? '–' : `${(ms / 1000).toFixed(1)} s`)
const rec = (r: Recovery) =>
  r.count === 0
    ? 'not measured'
    : r.count === 1
      ? s(r.firstMedianMs) === s(r.allMaxMs)
        ? s(r.allMaxMs)
        : `first ${s(r.firstMedianMs)}, all ${s(r.allMaxMs)}`
      : `first: median ${s(r.firstMedianMs)}; all: median ${s(r.allMedianMs)}, max ${s(r.allMaxMs)} (${r.count} faults)`

/** The final table, as Markdown. */
export function formatReport(r: Report): string {
  const d = r.duplicateRuns
  const z = r.zombie
  const afterResume =
    Object.entries(z.finishedAfterResume)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ') || 'none'
  const rows: Array<[string, string, string]> = [
    ['jobs submitted (unique idempotency keys)', n(r.submitted), ''],
    ['accepted (202)', n(r.accepted202), ''],
    ['accepted on a retry after a lost reply (200)', n(r.acceptedOnRetry), ''],
    ['rejected (4xx)', n(r.rejected), '0'],
    ['reached a terminal state', n(r.terminal), 'all accepted'],
    ['lost (accepted, never ran or never finished)', n(r.lost.length), '0'],
    ['ended in another status than planned', n(r.unexpectedStatus.length), '0'],
    ['successes not matching a run in the ledger', n(r.resultMismatches.length), '0'],
    ['executions run concurrently with themselves', n(r.concurrent.length), '0'],
    [
      'duplicate runs',
      `${n(d.total)} (after SIGKILL ${d.afterKill}, after SIGSTOP ${d.afterFreeze}, after the wipe ${d.afterWipe}, unexplained ${d.unexplained.length})`,
      'only after a fault',
    ],
    ['duplicate jobs from retried submissions', `${n(r.duplicateJobs.length)} (${n(r.repeatsAnsweredSame)} deliberate repeats answered 200, same job)`, '0'],
    [
      'recurring fire times run twice (two executions)',
      `${r.recurring.dispatchedTwice} of ${n(r.recurring.fireTimes)} (${r.recurring.jobs} jobs, ${r.recurring.missedFireTimes} fire times skipped)`,
      '0',
    ],
    [
      'SIGSTOP zombie: a step already due on resuming, ended while the new owner ran (result refused)',
      n(r.zombieLateSteps.length),
      'see "The limits of a lease"',
    ],
    [
      'SIGSTOP zombie: completions accepted',
      `${z.completionsAccepted} (frozen ${s(z.frozenMs)}, held ${z.held} runs, ${z.takenOver} taken over; ended after SIGCONT: ${afterResume}, ` +
        `the last ${z.lastActivityAfterResumeMs ?? '–'} ms after it)`,
      '0',
    ],
    ['runs left open by a live process', n(r.openRuns.length), '0'],
    ['API key in the API logs', r.keyInApiLogs ? 'yes' : 'no', 'no'],
    ["recovery after SIGKILL: the victim's runs restarted elsewhere", rec(r.recovery.kill), ''],
    ["recovery after SIGSTOP: the zombie's runs restarted elsewhere", rec(r.recovery.freeze), ''],
    ['recovery after the connection wipe: each worker started a run again', rec(r.recovery.wipe), ''],
    ['recovery after the API kill: first accepted submission', rec(r.recovery.api), ''],
  ]
  const responses = Object.entries(r.responses)
    .map(([k, v]) => `${k}: ${n(v)}`)
    .join(', ')
  return [
    '| check | result | required |',
    '|---|---|---|',
    ...rows.map(([a, b, c]) => `| ${a} | ${b} | ${c} |`),
    '',
    `Faults: ${r.kills} SIGKILLs, 1 SIGSTOP, 1 wipe (${r.wipedConnections} connections), 1 API SIGKILL. ` +
      `${n(r.executions)} executions, ${n(r.ledgerRuns)} handler runs in the ledger. HTTP answers: ${responses}. ` +
      `Run time ${s(r.durationMs)}.`,
  ].join('\n')
}

/** The first few offending items of every check that failed, for the test output. */
export function formatViolations(r: Report): string {
  const lists: Array<[string, readonly string[]]> = [
    ['lost', r.lost],
    ['unexpected status', r.unexpectedStatus],
    ['success without a matching run', r.resultMismatches],
    ['concurrent', r.concurrent],
    ['zombie step after SIGCONT beside the new owner (reported, not a failure)', r.zombieLateSteps],
    ['unexplained duplicate run', r.duplicateRuns.unexplained],
    ['duplicate job', r.duplicateJobs],
    ['open run', r.openRuns],
  ]
  return lists
    .filter(([, items]) => items.length > 0)
    .map(
      ([label, items]) =>
        `${label} (${items.length}):\n${items
          .slice(0, 20)
          .map((i) => `  ${i}`)
          .join('\n')}`,
    )
    .join('\n')
}
