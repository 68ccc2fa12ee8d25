/**
 * Keeps the leases of the runs this worker holds (buffered, running, or with
 * the outcome being written) and reports the ones it loses through `onLost`.
 *   heartbeat: every heartbeatMs one statement renews every lease held, passing over the rows
 *   another transaction holds (this worker's outcome write or hand-back in flight, which it never
 *   waits for); a run missing from the answer lost its lease. A heartbeat that fails (the database
 *   unreachable, a failover) changes nothing: the leases are still valid, and the
 *   handlers keep running while the database may come back in time.
 *   guard: a heartbeat that fails or hangs (a partition that drops packets), or a process frozen
 *   (SIGSTOP, VM pause) that sends nothing, leaves leases unconfirmed; a timer reports every running
 *   lease last confirmed more than leaseMs − heartbeatMs ago on the monotonic clock, before another
 *   worker can take it. Outcome writes in progress are not reported: they retry until the database
 *   answers (a write after the reaper took the execution is refused by its fence) or the worker stops.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionHeartbeatMany, executionReleaseMany, executionReleaseUnheld } from '../db/queries/lease.ts'
import type { Logger } from '../logger.ts'
import { abortableSleep } from '../lib/service.ts'
import { LeaseLostError } from './abort-reasons.ts'
import type { Completer } from './completer.ts'
import type { Run } from './run.ts'
import type { WorkerEvents } from './worker-options.ts'

/**
 * The guard runs every heartbeatMs / 4, but at most this far apart whatever the heartbeat: after a
 * freeze, the timers that fell due run in order, so only a handler step due within this period of
 * the freeze can run before the guard.
 */
const GUARD_INTERVAL_MAX_MS = 50
/** The guard runs at most this often. */
const GUARD_INTERVAL_MIN_MS = 10

/** What the lease keeper needs; durations in ms. */
export interface LeaseKeeperParams {
  db: Kysely<DB>
  /** Hand-backs run in `completer.exclusive`, never alongside an outcome write (heartbeats need not: see runOnce). */
  completer: Completer
  workerId: string
  log: Logger
  leaseMs: number
  heartbeatMs: number
  /** A held lease is lost: the callee aborts the run and `release`s it. Runs whose outcome is being written are not reported. */
  onLost: (run: Run, reason: LeaseLostError) => void
  /** Told of each heartbeat the database answered. */
  events?: Pick<WorkerEvents, 'heartbeat'>
}

/** The held leases, their heartbeat and their guard; see the file header. */
export class LeaseKeeper {
  private readonly p: LeaseKeeperParams
  private readonly leases = new Map<string, Run>()
  /** Runs given up with their lease after their handler started (giveUp), until when (monotonic ms) they are remembered. */
  private readonly givenUp = new Map<string, number>()
  private readonly stopping = new AbortController()
  private loopDone: Promise<void> | undefined
  private guardTimer: NodeJS.Timeout | undefined
  private failures = 0

  constructor(params: LeaseKeeperParams) {
    this.p = params
  }

  /** Number of leases held. */
  get size(): number {
    return this.leases.size
  }

  /**
   * Starts holding a freshly claimed run's lease. An earlier run of the same execution still here
   * lost its lease: it expired while this process was frozen or starved, and the reaper requeued it
   * without counting an attempt (it had not begun, as far as the database knew), so this worker
   * claimed it again at the same attempt. The fence (execution, worker, attempt) cannot tell the two
   * leases apart: the earlier run is reported lost, so that it is aborted and writes nothing.
   */
  hold(run: Run): void {
    const earlier = this.leases.get(run.ref.id)
    this.leases.set(run.ref.id, run)
    if (earlier !== undefined && earlier !== run)
      this.p.onLost(earlier, new LeaseLostError('lease lost: it expired, and this worker claimed the execution again'))
    // the guard runs only while a lease is held: an idle worker is not woken 20 times a second
    if (this.loopDone !== undefined && !this.stopping.signal.aborted) this.startGuard()
  }

  /** The held run of an execution; undefined when this worker holds no lease on it. */
  get(executionId: string): Run | undefined {
    return this.leases.get(executionId)
  }

  /** True while `run`'s lease is held. */
  holds(run: Run): boolean {
    return this.leases.get(run.ref.id) === run
  }

  /** Stops holding `run`'s lease (outcome written, or lease gone): no more heartbeats for it. */
  release(run: Run): void {
    if (this.leases.get(run.ref.id) === run) this.leases.delete(run.ref.id)
    if (this.leases.size === 0) this.stopGuard()
  }

  /**
   * Stops holding a run whose handler had started and was aborted with its lease (lost, not
   * confirmed in time): its lease, if the database still gives it to this worker, is the reaper's to
   * take back once it expires, counting the attempt, never handBackUnheld's (which would requeue it
   * uncounted, to run again at the same attempt number). Remembered for twice the lease length.
   */
  giveUp(run: Run): void {
    this.release(run)
    const now = performance.now()
    this.forgetGivenUp(now)
    this.givenUp.set(run.ref.id, now + 2 * this.p.leaseMs)
  }

  /** Forgets the runs given up long enough ago that the reaper has taken their leases back. */
  private forgetGivenUp(now: number): void {
    for (const [id, until] of this.givenUp) if (until < now) this.givenUp.delete(id)
  }

  private stopGuard(): void {
    clearInterval(this.guardTimer)
    this.guardTimer = undefined
  }

  /** Every run held now (a copy). */
  held(): Run[] {
    return [...this.leases.values()]
  }

  /**
   * True while `run`'s lease surely outlasts one more heartbeat (monotonic clock). A claim answered
   * after the process was frozen (or starved) may already be past it: such a run must not start.
   */
  isSure(run: Run): boolean {
    return performance.now() < run.leaseSureUntilMs - this.p.heartbeatMs
  }

  /** Starts the heartbeat loop (and the guard timer, whenever a lease is held). */
  start(): void {
    if (this.loopDone !== undefined) return
    this.loopDone = this.loop()
    if (this.leases.size > 0) this.startGuard()
  }

  private startGuard(): void {
    if (this.guardTimer !== undefined) return
    this.guardTimer = setInterval(this.guard, this.guardIntervalMs)
    this.guardTimer.unref()
  }

  private get guardIntervalMs(): number {
    return Math.max(GUARD_INTERVAL_MIN_MS, Math.min(GUARD_INTERVAL_MAX_MS, Math.floor(this.p.heartbeatMs / 4)))
  }

  /** Stops the heartbeat (after its statement in flight) and the guard. Idempotent. */
  async stop(): Promise<void> {
    this.stopping.abort()
    await this.loopDone
    this.stopGuard()
  }

  private async loop(): Promise<void> {
    const signal = this.stopping.signal
    while (!signal.aborted) {
      await abortableSleep(this.p.heartbeatMs, signal)
      if (signal.aborted) break
      await this.runOnce()
    }
  }

  /** One heartbeat: renews every lease held and reports those that are gone. Never throws. */
  async runOnce(): Promise<void> {
    const held = [...this.leases.values()]
    const sentAtMs = performance.now()
    try {
      // Beside outcome writes and hand-backs, which it never waits for: it passes over the rows they
      // hold locked (executionHeartbeatManyQuery), so a write that waits on another session's lock
      // cannot hold up the renewal of the other leases.
      // started: every lease out of the local queue (running, or with its outcome being written)
      let running = 0
      const started = new Set<string>()
      for (const h of held) {
        if (h.state === 'running') running++
        if (h.state !== 'buffered') started.add(h.ref.id)
      }
      const answer = await executionHeartbeatMany(this.p.db, {
        workerId: this.p.workerId,
        leases: held.map((h) => h.ref),
        leaseMs: this.p.leaseMs,
        running,
        started,
      })
      this.failures = 0
      const tookMs = performance.now() - sentAtMs
      this.p.events?.heartbeat?.(tookMs, answer.renewed.size)
      if (tookMs > this.p.heartbeatMs) this.p.log.warn({ tookMs: Math.round(tookMs), leases: held.length }, 'heartbeat slower than its interval')
      for (const h of held) {
        if (answer.renewed.has(h.ref.id)) h.leaseSureUntilMs = sentAtMs + this.p.leaseMs
        // passed over (another transaction held its row): still held, renewed next time (the guard watches it meanwhile)
        else if (answer.held.has(h.ref.id)) continue
        else if (this.holds(h) && h.state !== 'finishing') {
          this.p.onLost(h, new LeaseLostError('lease lost: the execution was reaped, cancelled or taken over'))
        }
      }
    } catch (err: unknown) {
      this.failures++
      // The leases stay valid until the guard gives them up; nothing else to do but try again.
      this.p.log.warn({ err, failures: this.failures }, 'heartbeat failed')
    }
  }

  /**
   * Reports the leases not confirmed for leaseMs − heartbeatMs (monotonic clock), whatever the
   * heartbeat is doing: stuck in a partition, or not run at all while the process was frozen.
   */
  readonly guard = (): void => {
    const now = performance.now()
    const expiring = [...this.leases.values()].filter((h) => h.state !== 'finishing' && now >= h.leaseSureUntilMs - this.p.heartbeatMs)
    if (expiring.length === 0) return
    this.p.log.error({ count: expiring.length }, 'leases not confirmed in time: aborting their handlers before the leases expire')
    for (const h of expiring)
      this.p.onLost(
        h,
        new LeaseLostError('lease not confirmed in time: no heartbeat renewed it (the database did not answer, or another transaction held its row)'),
      )
  }

  /**
   * Hands `runs` back (pending, due now, attempt not counted) and stops holding them; returns how
   * many the database took back. On failure the reaper requeues them when their lease expires.
   */
  async handBack(runs: readonly Run[]): Promise<number> {
    if (runs.length === 0) return 0
    const released = await this.p.completer.exclusive(() => this.releaseInDatabase(runs, true))
    for (const run of runs) this.release(run)
    return released.length
  }

  /**
   * Hands back runs that never started (a surplus of the prefetch buffer) without holding up the
   * heartbeat: they stop being held first, so no later heartbeat touches their rows, and the release
   * runs after the heartbeat or outcome write in flight, outside the completer's turn. A release that
   * waits on another transaction then delays only itself, not the renewal of the leases of running
   * handlers. On failure their leases expire and the reaper requeues them. Returns those the
   * database took back (not one whose lease was lost meanwhile).
   */
  async handBackUnstarted(runs: readonly Run[]): Promise<Run[]> {
    if (runs.length === 0) return []
    for (const run of runs) this.release(run)
    await this.p.completer.exclusive(async () => {})
    return this.releaseInDatabase(runs, false)
  }

  /**
   * Hands back the leases the database gives this worker beyond those it holds: what a claim took
   * whose answer was lost. Call with no claim in flight (the claim loop, after a claim failed). Throws
   * when the statement fails: the caller tries again before its next claim.
   */
  async handBackUnheld(): Promise<number> {
    this.forgetGivenUp(performance.now())
    // the runs given up are left to the reaper (giveUp)
    const kept = [...this.leases.keys(), ...this.givenUp.keys()]
    return this.p.completer.exclusive(() => executionReleaseUnheld(this.p.db, { workerId: this.p.workerId, held: kept }))
  }

  /** The release statement of a hand-back: those of `runs` the database took back; none, logged, when it failed. */
  private releaseInDatabase(runs: readonly Run[], started: boolean): Promise<Run[]> {
    return executionReleaseMany(this.p.db, { workerId: this.p.workerId, leases: runs.map((h) => h.ref), started }).then(
      (ids) => {
        const released = new Set(ids)
        return runs.filter((run) => released.has(run.claimed.id))
      },
      (err: unknown) => {
        this.p.log.warn({ err }, 'could not hand back executions; the reaper will requeue them when their lease expires')
        return []
      },
    )
  }
}
