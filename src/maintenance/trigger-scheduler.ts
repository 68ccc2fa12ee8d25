/**
 * The dispatcher: turns due fire times of recurring jobs into executions.
 * Runs in every worker process; one per database works at a time (the dispatch lock; of several
 * workers, the oldest live one's dispatcher), the others stand by and take over within intervalMs
 * once fire times are late. Correctness does not rest on that lock: any number may
 * run at once (exclusive: false), each taking other triggers.
 *
 *   one pass = one transaction, bounded by batchSize:
 *     dispatch lock (else stand by) and due triggers (SKIP LOCKED) ─▶ plan fire times in TypeScript
 *     (core/fire-times.ts: cron in the job's time zone, misfire policy) ─▶ re-read "busy" for the
 *     overlap policies skip and queue ─▶ insert executions (unique per fire time) and advance
 *     next_fire_at ─▶ commit
 *
 * The database clock decides what is due (no host clock is consulted, so skew
 * cannot fire early); `clock` pins that time in tests. Triggers of overlap policy
 * allow are handled up to aheadMs before their fire times (each execution due at
 * its fire time); the others at their fire times. The loop sleeps until the next
 * pass one of them wants when that comes before the next interval tick. A pass at an interval tick
 * (no fire time planned for it) first looks whether there is anything to do, in one statement
 * without a transaction, so an idle dispatcher costs one statement per interval.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import type { Kysely, Transaction } from 'kysely'
import type { Clock } from '../clock.ts'
import type { DB } from '../db/schema.ts'
import {
  dispatchLockTaken,
  triggerClaimDue,
  triggerClaimQueued,
  triggerFireAndAdvance,
  triggerJobActivityMany,
  triggerLook,
  type ClaimedTrigger,
  type JobActivity,
  type TriggerAdvance,
} from '../db/queries/triggers.ts'
import { applyOverlap, firstFireSinceSubmit, planFires } from '../core/fire-times.ts'
import { CronEvaluationError } from '../core/cron.ts'
import { toError } from '../errors.ts'
import type { Logger } from '../logger.ts'
import { abortableSleep } from '../lib/service.ts'

/** What the passes assume of a job whose activity they did not read (every trigger of the batch is overlap allow). */
const ALLOW_ONLY: JobActivity = { state: 'active', busy: false }

/** Longest stretch of fire-time planning before the pass lets other work of the process run. */
const PLAN_SLICE_MS = 2

export interface TriggerSchedulerOptions {
  db: Kysely<DB>
  log: Logger
  /** Longest sleep between passes; a due fire time sooner than that wakes the loop earlier. */
  intervalMs: number
  /**
   * Fire times due within this many ms after the earliest next one share its pass (default
   * DISPATCH_WINDOW_MS): the loop sleeps until the last of them, so under load a pass serves several
   * fire times (the earliest up to this much late) instead of one each, while a fire time with none
   * close behind it is met at once.
   */
  windowMs?: number
  /**
   * One dispatcher per database works at a time (default true): a pass that finds another one
   * mid-pass does nothing, and its loop stands by for intervalMs instead of waking at every fire
   * time, ready to take over. False: dispatch alongside the others (each takes other triggers).
   */
  exclusive?: boolean
  /**
   * The worker this dispatcher runs in (exclusive mode): of several, the oldest live worker's dispatcher
   * makes the passes and the others stand by, passing only for work it is late with. Without it, a
   * free dispatch lock is enough to pass.
   */
  workerId?: string
  /**
   * Create the executions of triggers with overlap policy allow up to this many ms before their fire
   * times (default 0: at the fire time). Each is due at its fire time, so none starts early; passes
   * come about every aheadMs / 2 instead of at every fire time, and each serves the fire times of
   * that stretch. The overlap policies skip and queue decide at the fire time (they need to know
   * whether a run is going then), so their triggers are never handled ahead.
   */
  aheadMs?: number
  /** Triggers per transaction. */
  batchSize: number
  /** A fire time handled later than this after it was due is missed (docs/recurring-jobs.md). */
  misfireThresholdMs: number
  /** An injected clock that pins the time of every pass (tests drive fire times with it). Absent: the database's now(). */
  clock?: Clock
}

export interface DispatchOutcome {
  /** Triggers handled. */
  triggers: number
  /** Executions created. */
  fired: number
  /** Triggers whose pass found missed fire times (the misfire policy applied). */
  misfired: number
  /** Fire times dropped by the overlap policy (a run of the job was still going). */
  dropped: number
  /** Another dispatcher held the dispatch lock: this pass did nothing (exclusive mode). */
  standby?: boolean
  /** Milliseconds from the pass until the earliest next fire time it knows of (null: none known). */
  nextFireInMs?: number | null
  /** A standby's pass for work the working dispatcher was late with (runOnce's `late`). */
  late?: boolean
  /** When nextFireInMs was measured (performance.now(): as the answer it comes from arrived). */
  measuredAt?: number
}

interface Decision {
  execute: Date[]
  misfired: boolean
  dropped: number
  advance: TriggerAdvance
}

/** Shortest sleep between passes, so a due trigger locked by another dispatcher is not polled in a tight loop. */
const MIN_SLEEP_MS = 10

/** Added to the sleep until a fire time (see sleepAfter). */
const WAKE_SLACK_MS = 2

/** Default of `windowMs` (SCHEDULER_DISPATCHER_WINDOW_MS); docs/recurring-jobs.md has its measurements. */
export const DISPATCH_WINDOW_MS = 50

export class TriggerScheduler {
  private readonly o: TriggerSchedulerOptions
  private readonly log: Logger
  private controller: AbortController | undefined
  private loop: Promise<void> | undefined
  /** When the last pass looked for queue slots to release (performance.now()). */
  private queuedCheckedAt = Number.NEGATIVE_INFINITY
  /** The last pass found another dispatcher working (exclusive mode). */
  private standingBy = false

  constructor(options: TriggerSchedulerOptions) {
    this.o = options
    this.log = options.log.child({ component: 'trigger-scheduler' })
  }

  /**
   * One pass: repeats full batches until fewer than batchSize due triggers remain. With
   * `releaseQueued`, the first batch also takes the queue slots (overlap policy queue) whose job
   * has become idle. `late`: a standby's pass for work the working dispatcher is late with, made
   * whether or not this dispatcher's worker is the oldest live one (workerId).
   */
  async runOnce(releaseQueued = true, late = false): Promise<DispatchOutcome> {
    const total: DispatchOutcome = { triggers: 0, fired: 0, misfired: 0, dropped: 0 }
    // Standing by: a look at the lock first, and a pass only once it is free.
    if (this.standingBy && this.o.exclusive !== false && (await dispatchLockTaken(this.o.db))) return { ...total, standby: true }
    for (let batch = 0; ; batch++) {
      const now = this.o.clock?.now() ?? null
      const r = await this.o.db.transaction().execute((trx) => this.dispatchBatch(trx, now, releaseQueued && batch === 0, late))
      total.triggers += r.triggers
      total.fired += r.fired
      total.misfired += r.misfired
      total.dropped += r.dropped
      // Counted from the claim's answer: take off the time the pass took since.
      total.nextFireInMs = r.nextFireInMs == null ? r.nextFireInMs : r.nextFireInMs - (performance.now() - (r.measuredAt ?? performance.now()))
      if (r.standby) {
        if (batch === 0) total.standby = true
        break
      }
      if (r.due < this.o.batchSize) break
      total.nextFireInMs = 0 // more are due: the next batch runs at once
    }
    if (total.triggers > 0) this.log.info(total, 'dispatched recurring jobs')
    // a late pass is a standby's: it looks again as one (and takes the lock from the oldest worker's
    // dispatcher only while that one is late)
    this.standingBy = total.standby === true || late
    if (late) total.late = true
    return total
  }

  private async dispatchBatch(trx: Transaction<DB>, now: Date | null, releaseQueued: boolean, late: boolean): Promise<DispatchOutcome & { due: number }> {
    const aheadMs = this.o.aheadMs ?? 0
    const claim = await triggerClaimDue(trx, {
      limit: this.o.batchSize,
      now,
      exclusive: this.o.exclusive !== false,
      aheadMs,
      workerId: this.o.workerId ?? null,
      force: late,
    })
    const measuredAt = performance.now()
    if (!claim.held) return { triggers: 0, fired: 0, misfired: 0, dropped: 0, due: 0, standby: true }
    const passNow = claim.now
    const due = claim.triggers.length
    const queued = releaseQueued
      ? await triggerClaimQueued(trx, { limit: this.o.batchSize, excludeJobIds: claim.triggers.map((t) => t.jobId) })
      : { now: null, triggers: [] }
    const triggers = [...claim.triggers, ...queued.triggers]
    // from the end of the claim statement (on the database's clock), which its answer closely follows
    const inMs = (at: Date | null) => (at === null ? null : at.getTime() - passNow.getTime() - claim.sinceNowMs)
    const upcoming = claim.upcoming.map((u) => this.passTime(u.at, u.allow))
    if (triggers.length === 0) return { triggers: 0, fired: 0, misfired: 0, dropped: 0, due, nextFireInMs: inMs(this.nextPassAt(upcoming)), measuredAt }

    // Only the overlap policies skip and queue need to know whether a run of the job is going.
    // Read after the locks: this statement sees every execution an earlier holder of a lock
    // committed. Under allow, a paused or cancelled job gets no execution from the insert itself.
    const activity = triggers.some((t) => t.overlapPolicy !== 'allow') ? await triggerJobActivityMany(trx, { jobIds: triggers.map((t) => t.jobId) }) : undefined
    const fires: Array<{ jobId: string; scheduledFor: Date }> = []
    const advances: TriggerAdvance[] = []
    let dropped = 0
    let misfired = 0
    let slice = performance.now()
    for (const t of triggers) {
      if (performance.now() - slice > PLAN_SLICE_MS) {
        // Planning a large batch must not hold the event loop (and every lease heartbeat of this process).
        await yieldToEventLoop()
        slice = performance.now()
      }
      const a = this.decide(t, passNow, activity ? activity.get(t.jobId) : ALLOW_ONLY, aheadMs)
      dropped += a.dropped
      if (a.misfired) misfired++
      for (const f of a.execute) fires.push({ jobId: t.jobId, scheduledFor: f })
      advances.push(a.advance)
    }
    const { fired, advanced } = await triggerFireAndAdvance(trx, { fires, advances, passAt: passNow })
    const updated = new Set(advanced)
    const lost = advances.filter((a) => !updated.has(a.jobId))
    if (lost.length > 0) {
      // Cannot happen while the rows are locked; roll the whole pass back rather than half-apply it.
      throw new Error(`triggers changed during dispatch: ${lost.map((a) => a.jobId).join(', ')}`)
    }
    // The next wake-up, from the triggers this claim could not take and the new fire times of this pass.
    for (const [i, a] of advances.entries()) if (a.nextFireAt !== null) upcoming.push(this.passTime(a.nextFireAt, triggers[i]?.overlapPolicy === 'allow'))
    return { triggers: triggers.length, fired, misfired, dropped, due, nextFireInMs: inMs(this.nextPassAt(upcoming)), measuredAt }
  }

  /**
   * When a pass should handle a fire time (ms since the epoch): at it, or, for a trigger handled
   * ahead (overlap policy allow), half of aheadMs before it. That pass creates the executions of
   * every such fire time up to aheadMs after it, so each is created at least aheadMs / 2 early, and
   * the next pass comes about aheadMs / 2 later.
   */
  private passTime(fireAt: Date, allow: boolean): number {
    const aheadMs = this.o.aheadMs ?? 0
    return allow && aheadMs > 0 ? fireAt.getTime() - aheadMs / 2 : fireAt.getTime()
  }

  /**
   * When the next pass should run: at the last of the known pass times within the window after the
   * earliest. The window stays under half the misfire threshold, so no fire time waits for it long
   * enough to count as missed.
   */
  private nextPassAt(passTimes: readonly number[]): Date | null {
    if (passTimes.length === 0) return null
    let first = Number.POSITIVE_INFINITY
    for (const t of passTimes) first = Math.min(first, t)
    const windowEnd = first + Math.min(this.o.windowMs ?? DISPATCH_WINDOW_MS, this.o.misfireThresholdMs / 2)
    let last = first
    for (const t of passTimes) if (t <= windowEnd && t > last) last = t
    return new Date(last)
  }

  /** What one pass does with one locked trigger (`aheadMs`: how far ahead an allow trigger is planned). */
  private decide(t: ClaimedTrigger, now: Date, activity: JobActivity | undefined, aheadMs: number): Decision {
    const advance: TriggerAdvance = {
      jobId: t.jobId,
      expectedNextFireAtKey: t.nextFireAtKey,
      expectedQueuedFireAtKey: t.queuedFireAtKey,
      nextFireAt: t.nextFireAt,
      queuedFireAt: t.queuedFireAt,
      error: null,
    }
    try {
      let fireAt: Date[] = []
      let misfired = false
      // Not computed yet (a cron schedule's first pass, or any submitted from SQL): its first fire time,
      // at or after its submit by the database's clock, so that the fire times since then go by the
      // misfire policy like any others
      const nextFireAt = t.nextFireAtKey === '-infinity' ? firstFireSinceSubmit(t, t.submittedAt ?? now, now) : t.nextFireAt
      advance.nextFireAt = nextFireAt
      if (nextFireAt && nextFireAt.getTime() <= now.getTime() + (t.overlapPolicy === 'allow' ? aheadMs : 0)) {
        const horizon = t.overlapPolicy === 'allow' ? new Date(now.getTime() + aheadMs) : now
        const plan = planFires(t, nextFireAt, now, this.o.misfireThresholdMs, horizon)
        fireAt = plan.fireAt
        misfired = plan.misfired
        advance.nextFireAt = plan.nextFireAt
      }
      if (activity?.state !== 'active') {
        // Job paused or cancelled while its trigger was not: keep the schedule moving, run nothing.
        return { execute: [], misfired, dropped: 0, advance }
      }
      const decision = applyOverlap(t.overlapPolicy, activity.busy, t.queuedFireAt, fireAt)
      advance.queuedFireAt = decision.queuedFireAt
      if (misfired) this.log.debug({ triggerId: t.jobId, jobId: t.jobId, policy: t.misfirePolicy, count: decision.execute.length }, 'fire times missed')
      return { execute: decision.execute, misfired, dropped: decision.dropped, advance }
    } catch (err: unknown) {
      // A schedule that cannot be evaluated (bad cron or zone written by SQL) would block every pass: stop it.
      this.log.error({ err: toError(err), triggerId: t.jobId, jobId: t.jobId }, 'trigger schedule cannot be evaluated; trigger stopped')
      const e = toError(err)
      const cause = e.cause === undefined ? undefined : toError(e.cause)
      // a cron's own error names the expression and the zone already: said once, not twice
      const reason = cause === undefined ? e.message : cause instanceof CronEvaluationError ? cause.message : `${e.message}: ${cause.message}`
      return { execute: [], misfired: false, dropped: 0, advance: { ...advance, nextFireAt: null, queuedFireAt: null, error: reason } }
    }
  }

  /**
   * Milliseconds the loop may sleep after a pass: until the next pass's fire times are due, at most
   * intervalMs; `planned`: it wakes for fire times (not only because the interval has come).
   */
  private sleepAfter(outcome: DispatchOutcome): { ms: number; planned: boolean } {
    // Standing by: another dispatcher is working; look again after the interval, not at every fire time.
    if (outcome.standby) return { ms: this.o.intervalMs, planned: false }
    // + WAKE_SLACK_MS: the delay is counted from the answer of the statement that measured it, a little
    // after the database's clock was read; the slack keeps a loop that wakes on time from finding the
    // fire time not yet due by a rounding (it would then meet it MIN_SLEEP_MS late).
    const untilDue = (outcome.nextFireInMs ?? Number.POSITIVE_INFINITY) + WAKE_SLACK_MS
    // A standby that just passed for late work (the working dispatcher's worker stopped, and is not yet
    // seen as gone): it looks again a little after the next pass time, when the working dispatcher would
    // have handled it, rather than after the interval, so that it keeps the fire times on time (each
    // late look finds one due, not two: overlap policy skip would drop the second) until its own worker
    // is the oldest live one. A working dispatcher that is back has handled it by then: nothing is late.
    if (outcome.late && outcome.triggers > 0) {
      const lateAt = untilDue + Math.max(MIN_SLEEP_MS, (this.o.aheadMs ?? 0) / 4)
      return { ms: Math.max(MIN_SLEEP_MS, Math.min(this.o.intervalMs, lateAt)), planned: false }
    }
    return { ms: Math.max(MIN_SLEEP_MS, Math.min(this.o.intervalMs, untilDue)), planned: untilDue < this.o.intervalMs }
  }

  /**
   * A pass the loop makes because its interval has come, not for a fire time: first one look, with
   * no transaction, at whether there is anything to do (triggerLook), and the pass only if there is.
   * Standing by, the look asks only for work the working dispatcher is late with.
   */
  private async lookThenPass(releaseQueued: boolean): Promise<DispatchOutcome> {
    const aheadMs = this.o.aheadMs ?? 0
    if (this.standingBy && this.o.exclusive !== false) {
      // Standing by: pass only for work the working dispatcher should have done by now. It handles each
      // fire time ahead at least aheadMs / 2 early (passTime), so one not yet handled aheadMs / 4 before
      // it is late; taking the lock merely because it is free between two of that dispatcher's passes
      // made a pass of each, the second doing part of the next one's work (twice the passes). Such a
      // pass is made whatever worker is the oldest (workerId): that one's dispatcher is not keeping up.
      // A standby whose worker has become the oldest live one (the working one's stopped) passes as
      // the working dispatcher would, ahead, and makes the planned passes from then on.
      const look = await triggerLook(this.o.db, {
        now: this.o.clock?.now() ?? null,
        aheadMs: Math.floor(aheadMs / 4),
        queued: releaseQueued,
        workerId: this.o.workerId ?? null,
        // a cron schedule just submitted is the working dispatcher's to compute at its next look
        uncomputedLateMs: 2 * this.o.intervalMs,
      })
      if (look.oldest) return this.runOnce(releaseQueued)
      return look.work ? this.runOnce(releaseQueued, true) : { triggers: 0, fired: 0, misfired: 0, dropped: 0, standby: true }
    }
    const look = await triggerLook(this.o.db, { now: this.o.clock?.now() ?? null, aheadMs, queued: releaseQueued })
    const answeredAt = performance.now()
    if (look.work) return this.runOnce(releaseQueued)
    const next = this.nextPassAt(look.upcoming.map((u) => this.passTime(u.at, u.allow)))
    // from the end of the look statement (its answer closely follows it)
    const nextFireInMs = next === null ? null : next.getTime() - look.now.getTime() - look.sinceNowMs - (performance.now() - answeredAt)
    return { triggers: 0, fired: 0, misfired: 0, dropped: 0, nextFireInMs }
  }

  start(): void {
    if (this.controller) throw new Error('trigger scheduler already started')
    this.controller = new AbortController()
    this.loop = this.run(this.controller.signal)
    this.log.info({ intervalMs: this.o.intervalMs, misfireThresholdMs: this.o.misfireThresholdMs }, 'trigger scheduler started')
  }

  async stop(): Promise<void> {
    this.controller?.abort()
    await this.loop
    this.controller = undefined
    this.loop = undefined
  }

  private async run(signal: AbortSignal): Promise<void> {
    let failures = 0
    // the first pass, and one after a failure, is a full one
    let planned = true
    while (!signal.aborted) {
      let sleepMs = this.o.intervalMs
      try {
        // Queue slots are looked at once per interval, not at every pass a fire time wakes
        // (the docs promise their release within SCHEDULER_DISPATCHER_INTERVAL_MS).
        const releaseQueued = performance.now() - this.queuedCheckedAt >= this.o.intervalMs
        if (releaseQueued) this.queuedCheckedAt = performance.now()
        const sleep = this.sleepAfter(planned ? await this.runOnce(releaseQueued) : await this.lookThenPass(releaseQueued))
        sleepMs = sleep.ms
        planned = sleep.planned
        failures = 0
      } catch (err: unknown) {
        failures++
        planned = true
        const level = failures >= 5 ? 'error' : 'warn'
        this.log[level]({ err: toError(err), failures }, 'dispatch failed; retrying')
      }
      await abortableSleep(sleepMs, signal)
    }
  }
}
