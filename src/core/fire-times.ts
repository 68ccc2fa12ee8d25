/**
 * What a dispatcher pass does with one due trigger: which fire times get a
 * run, which are dropped, and the next fire time. Pure; the dispatcher
 * (maintenance/trigger-scheduler.ts) calls it under the trigger's row lock.
 *
 * Definitions (docs/recurring-jobs.md):
 * - A fire time f is *due* at `now` when f ≤ now, and *missed* when
 *   f < now − misfireThresholdMs (nothing dispatched it in time: deploy,
 *   outage, pause). Due fire times that are not missed are *on time* and always
 *   run; the misfire policy decides only about missed ones.
 * - fire_once: if any due fire time is missed, all due fire times collapse
 *   into one run, recorded for the latest of them.
 * - skip: missed fire times are dropped; on-time ones run.
 * - fire_all: the latest `misfireMaxRuns` missed fire times run (older ones are
 *   dropped), then the on-time ones.
 * - Overlap (applyOverlap): allow = every run; skip = a run only when the job
 *   has no pending or running execution; queue = like skip, but one fire time
 *   waits in the trigger's queue slot and runs when the job is idle again.
 */
import { cronFireTimes, cronLatestFireTimes } from './cron.ts'
import type { MisfirePolicy, OverlapPolicy } from './job.ts'
import { INSTANT_RANGE } from './formats.ts'

export interface TriggerSchedule {
  kind: 'once' | 'cron' | 'interval'
  cronExpression: string | null
  timezone: string
  intervalMs: number | null
  startAt: Date | null
  endAt: Date | null
  misfirePolicy: MisfirePolicy
  misfireMaxRuns: number
  /**
   * When the schedule was last resumed after a pause (null or absent: never): its fire times before
   * then passed while it was paused, and are missed fire times whatever the misfire threshold.
   */
  resumedAt?: Date | null
}

export interface FirePlan {
  /** Fire times that get a run (before the overlap policy), oldest first. */
  fireAt: Date[]
  /** Whether any due fire time was missed. */
  misfired: boolean
  /** First fire time after `now`; null when the schedule is exhausted (end_at passed, or a one-time trigger fired). */
  nextFireAt: Date | null
}

/** Error for a trigger whose schedule cannot be evaluated (bad cron expression or time zone from SQL). */
export class ScheduleError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ScheduleError'
  }
}

/** Most fire times one pass plans for a trigger's on-time window (a guard against tiny intervals and large thresholds). */
const MAX_ON_TIME = 10_000

function cronOf(s: TriggerSchedule): string {
  if (!s.cronExpression) throw new ScheduleError('cron trigger without cron_expression')
  return s.cronExpression
}

/** Fire times > after, in order; interval steps are fixed and anchored at `anchor`. */
function* forward(s: TriggerSchedule, anchor: Date, after: Date): Generator<Date, void, undefined> {
  if (s.kind === 'cron') {
    try {
      yield* cronFireTimes(cronOf(s), s.timezone, after)
    } catch (err: unknown) {
      throw new ScheduleError(`cannot evaluate cron "${s.cronExpression}" in time zone "${s.timezone}"`, { cause: err })
    }
    return
  }
  if (s.kind === 'interval') {
    const step = s.intervalMs
    if (!step || step <= 0) throw new ScheduleError('interval trigger without a positive interval_ms')
    const a = anchor.getTime()
    // The first k with a + k·step > after.
    let k = Math.max(0, Math.floor((after.getTime() - a) / step) + 1)
    for (;;) yield new Date(a + step * k++)
  }
  if (anchor > after) yield anchor // once: the single fire time
}

/** `f` when the schedule has it: not after its end, nor after the last instant pgsched takes (INSTANT_RANGE). */
function withinEnd(s: TriggerSchedule, f: Date | null): Date | null {
  return f && (!s.endAt || f <= s.endAt) && f.getTime() <= INSTANT_RANGE.max ? f : null
}

/**
 * The first fire time of a trigger whose next_fire_at was never computed
 * (submitted from SQL): the first one at or after max(now, startAt). Nothing
 * fires for it in the pass that computes it.
 */
export function firstFireAt(s: TriggerSchedule, now: Date): Date | null {
  const from = s.startAt && s.startAt > now ? s.startAt : now
  if (s.kind === 'cron') return withinEnd(s, forward(s, from, new Date(from.getTime() - 1)).next().value ?? null)
  return withinEnd(s, from)
}

/**
 * The first fire time of a trigger whose next_fire_at is not computed yet ('-infinity': every cron
 * schedule until the dispatcher's first pass over it, and every schedule submitted from SQL), as that
 * pass reckons it: at or after its submit (`submittedAt`, the database's created_at), or `now` should
 * that be earlier (the database's clock stepped back). So the database's clock decides it, never the
 * submitting host's. Throws ScheduleError as firstFireAt does.
 */
export function firstFireSinceSubmit(s: TriggerSchedule, submittedAt: Date, now: Date): Date | null {
  return firstFireAt(s, submittedAt < now ? submittedAt : now)
}

/** firstFireSinceSubmit for a view: null also when the schedule cannot be evaluated (its pass will record why). */
export function firstFireSinceSubmitOrNull(s: TriggerSchedule, submittedAt: Date, now: Date): Date | null {
  try {
    return firstFireSinceSubmit(s, submittedAt, now)
  } catch (err: unknown) {
    if (err instanceof ScheduleError) return null
    throw err
  }
}

/**
 * Plans one pass over a due trigger.
 * @param nextFireAt the stored next_fire_at (≤ now): the earliest fire time not yet handled.
 * @param now the database time of this pass.
 * @param misfireThresholdMs how late a fire time may be handled and still count as on time.
 * @param horizon plan the fire times up to here (default `now`): a pass that creates executions
 *   ahead of their fire time (docs/recurring-jobs.md) passes a later one. A trigger with missed fire
 *   times is planned up to `now` only, so its misfire policy sees what it always saw.
 * @throws ScheduleError when the schedule cannot be evaluated.
 */
export function planFires(s: TriggerSchedule, nextFireAt: Date, now: Date, misfireThresholdMs: number, horizon: Date = now): FirePlan {
  const f0 = nextFireAt
  // late by more than the threshold, or passed while the schedule was paused (before its resume,
  // and not after `now`: a resume the database dated later than a pinned clock)
  const resumedMs = s.resumedAt ? Math.min(s.resumedAt.getTime(), now.getTime()) : Number.NEGATIVE_INFINITY
  const cutoff = new Date(Math.max(now.getTime() - misfireThresholdMs, resumedMs))
  const missed = f0 < cutoff
  const until = missed || horizon < now ? now : horizon

  // Missed fire times the policy keeps (latest first bounded by misfireMaxRuns).
  let keptMissed: Date[] = []
  if (missed && s.misfirePolicy !== 'skip') {
    const max = s.misfirePolicy === 'fire_all' ? s.misfireMaxRuns : 1
    const missedEnd = s.endAt && s.endAt < cutoff ? new Date(s.endAt.getTime() + 1) : cutoff
    keptMissed = latest(s, f0, missedEnd, max)
  }

  // On-time fire times: cutoff ≤ f ≤ min(until, endAt).
  const onTime: Date[] = []
  const from = missed ? new Date(cutoff.getTime() - 1) : new Date(f0.getTime() - 1)
  let next: Date | null = null
  for (const f of forward(s, f0, from)) {
    if (s.endAt && f > s.endAt) break // exhausted: every later fire time is past endAt too
    if (f > until) {
      next = f
      break
    }
    if (onTime.length >= MAX_ON_TIME) {
      // Pathological window (tiny interval, huge threshold): resume after `until` rather than iterate on.
      next = forward(s, f0, until).next().value ?? null
      break
    }
    onTime.push(f)
  }
  if (s.kind === 'once') next = null

  let fireAt: Date[]
  if (missed && s.misfirePolicy === 'fire_once') {
    const last = onTime[onTime.length - 1] ?? keptMissed[keptMissed.length - 1]
    fireAt = last ? [last] : []
  } else fireAt = [...keptMissed, ...onTime]
  return { fireAt, misfired: missed, nextFireAt: withinEnd(s, next) }
}

/** The latest `max` fire times f with from ≤ f < before, oldest first. */
function latest(s: TriggerSchedule, from: Date, before: Date, max: number): Date[] {
  if (s.kind === 'once') return from < before ? [from] : []
  if (s.kind === 'interval') {
    const step = s.intervalMs as number
    const a = from.getTime()
    const count = Math.ceil((before.getTime() - a) / step) // fire times a + k·step < before
    const out: Date[] = []
    for (let k = Math.max(0, count - max); k < count; k++) out.push(new Date(a + step * k))
    return out
  }
  try {
    return cronLatestFireTimes(cronOf(s), s.timezone, from, before, max)
  } catch (err: unknown) {
    throw new ScheduleError(`cannot evaluate cron "${s.cronExpression}" in time zone "${s.timezone}"`, { cause: err })
  }
}

export interface OverlapDecision {
  /** Fire times that get an execution now. */
  execute: Date[]
  /** The trigger's queue slot after this pass (overlap policy queue only). */
  queuedFireAt: Date | null
  /** Fire times dropped because a run of the job was still going. */
  dropped: number
}

/**
 * Applies the overlap policy to the fire times of one pass.
 * @param busy whether the job has a pending or running execution (read after the trigger was locked).
 * @param queuedFireAt the fire time waiting in the trigger's queue slot, if any (it goes first).
 */
export function applyOverlap(policy: OverlapPolicy, busy: boolean, queuedFireAt: Date | null, fireAt: readonly Date[]): OverlapDecision {
  const candidates = queuedFireAt ? [queuedFireAt, ...fireAt.filter((f) => f > queuedFireAt)] : [...fireAt]
  if (policy === 'allow') return { execute: candidates, queuedFireAt: null, dropped: 0 }
  const execute = busy ? [] : candidates.slice(0, 1)
  const rest = candidates.slice(execute.length)
  if (policy === 'skip') return { execute, queuedFireAt: null, dropped: rest.length }
  return { execute, queuedFireAt: rest[0] ?? null, dropped: Math.max(0, rest.length - 1) }
}

/**
 * The next `count` fire times of a schedule from its stored next one (`nextFireAt` first), within
 * its end; fewer when the schedule ends sooner, none when it cannot be evaluated.
 */
export function upcomingFireTimes(s: TriggerSchedule, nextFireAt: Date, count: number): Date[] {
  const out: Date[] = []
  if (count < 1 || !withinEnd(s, nextFireAt)) return out
  out.push(nextFireAt)
  try {
    for (const f of forward(s, nextFireAt, nextFireAt)) {
      if (out.length >= count || !withinEnd(s, f)) break
      out.push(f)
    }
  } catch (err: unknown) {
    if (!(err instanceof ScheduleError)) throw err
  }
  return out
}

/** The misfire threshold a worker runs with unless SCHEDULER_MISFIRE_THRESHOLD_MS says otherwise. */
export const MISFIRE_THRESHOLD_DEFAULT_MS = 5_000

/**
 * The next `count` fire times of a schedule that get a run, as of `now`, from its stored next one.
 * A stored next fire time in the past (no dispatcher ran since: an outage, every worker stopped) is
 * planned as a dispatcher's pass at `now` would plan it (planFires): the fire times it still owes
 * come first, in the past (`fire_once`: the latest due one; `fire_all`: the latest missed ones up to
 * misfireMaxRuns, then those on time; `skip`: only those on time, within the misfire threshold), then
 * the fire times to come. The overlap policy, which depends on whether a run is going when the pass
 * comes, is not applied. A schedule that cannot be evaluated gives its stored fire time alone.
 */
export function fireTimesAsOf(
  s: TriggerSchedule,
  nextFireAt: Date,
  now: Date,
  count: number,
  misfireThresholdMs: number = MISFIRE_THRESHOLD_DEFAULT_MS,
): Date[] {
  // (to come, or an instant that is no date: as upcomingFireTimes lists it)
  if (!(nextFireAt <= now) || count < 1) return upcomingFireTimes(s, nextFireAt, count)
  let plan: FirePlan
  try {
    plan = planFires(s, nextFireAt, now, misfireThresholdMs)
  } catch (err: unknown) {
    if (!(err instanceof ScheduleError)) throw err
    return upcomingFireTimes(s, nextFireAt, count)
  }
  const owed = plan.fireAt.slice(0, count)
  if (owed.length >= count || plan.nextFireAt === null) return owed
  return [...owed, ...upcomingFireTimes(s, plan.nextFireAt, count - owed.length)]
}
