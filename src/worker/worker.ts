/**
 * The worker: a claim loop that hands runs to the executor and outcomes to the
 * writer, with the local queue and the lease keeper as its other parts.
 *
 *   claim loop ── room? ──▶ QueueClaims.claim(n = free slots + prefetch room)
 *        ▲                        │ leased (LeaseKeeper), queued by priority (LocalQueue)
 *        │ wake: NOTIFY, slot     ▼
 *        │ freed, retry timer,  queue ── slot free ──▶ Executor: handler(ctx) ──▶ OutcomeWriter ──▶ Completer
 *        └ poll (WakeUp) ─────────┘
 *
 * Buffered runs are leased and heartbeated like running ones. A notification of
 * higher priority than the best buffered fences the queue until the claim it
 * triggers returns, so priority order holds across the buffer. A lost lease or
 * a cancel aborts the run; stop() gives handlers shutdownGraceMs, then aborts
 * the rest and hands their executions back. Abort reasons: abort-reasons.ts.
 */
import { handedBackMarker } from '../core/output-uri.ts'
import { hostname } from 'node:os'
import { settlesWithin } from '../lib/service.ts'
import { uuidV7 } from '../lib/uuid-v7.ts'
import type { ClaimedExecution } from '../db/queries/claim.ts'
import { executionsLeasedTo } from '../db/queries/lease.ts'
import { AUTOVACUUM_OFF_WARNING, serverAutovacuumOn } from '../db/queries/ops.ts'
import { workerChannel, workerMarkStopped, workerRegister } from '../db/queries/workers.ts'
import type { Logger } from '../logger.ts'
import { tracingOn } from '../lib/tracing.ts'
import { CancelledError, LeaseLostError, ShutdownError, endsLease, type AbortReason } from './abort-reasons.ts'
import { Completer } from './completer.ts'
import { Executor } from './executor.ts'
import { LeaseKeeper } from './lease-keeper.ts'
import { LocalQueue } from './local-queue.ts'
import { Notifier } from './notifier.ts'
import { OutcomeWriter } from './outcome-writer.ts'
import { QueueClaims } from './queue-claims.ts'
import { createRun, type Run } from './run.ts'
import { endRunSpan, startRunSpans } from './run-tracing.ts'
import { SandboxPool, sandboxPlacements } from './sandbox-pool.ts'
import { WakeUp } from './wake-up.ts'
import { guardedEvents, type WorkerEvents, type WorkerOptions } from './worker-options.ts'

/** First delay before claiming again after a failed claim; doubles per failure. */
const CLAIM_RETRY_MIN_MS = 100
/** Longest delay between claim retries. */
const CLAIM_RETRY_MAX_MS = 5_000
/** How long an aborted sandboxed handler gets to end by itself, by default. */
const SANDBOX_GRACE_MS_DEFAULT = 500
/** How long a stop waits, after the sandbox grace, for an ended sandbox to exit. */
const SANDBOX_END_WAIT_MS = 2_000
/** How long an idle sandbox is kept for the next run. */
const SANDBOX_IDLE_MS = 60_000
/** How soon a worker claims again from a queue its concurrency limit held back. */
const LIMITED_QUEUE_RECLAIM_MS = 50
/**
 * How long a stop waits for the database, once the handlers' grace has ended, at each of its steps
 * (the outcomes of ended runs, the hand-back, the heartbeat's last statement, the sign-off). A
 * database that does not answer within it is given up: what was not recorded or handed back is
 * requeued by the reaper when its lease expires, and the process can end.
 */
export const STOP_DATABASE_WAIT_MS = 5_000

/** A worker process's scheduler side: claims, runs and records executions (see the file header). */
export class Worker {
  readonly id: string
  private readonly o: WorkerOptions
  private readonly log: Logger
  private readonly completer: Completer
  private readonly notifier: Notifier
  private readonly queue: LocalQueue<Run>
  private readonly claims: QueueClaims
  private readonly wakeUp: WakeUp
  private readonly leases: LeaseKeeper
  private readonly outcomes: OutcomeWriter
  private readonly executor: Executor
  private readonly sandboxes: SandboxPool | undefined
  private readonly events: WorkerEvents | undefined
  private stopping = false
  private started = false
  private claimLoopDone: Promise<void> | undefined
  private readonly idleWaiters: Array<() => void> = []
  /** Runs whose freed slot a stop waits for, each with what to call then. */
  private readonly slotWaiters = new Map<Run, () => void>()
  private readonly sandboxGraceMs: number

  constructor(o: WorkerOptions) {
    this.o = o
    this.id = o.id ?? uuidV7()
    this.sandboxGraceMs = o.sandboxGraceMs ?? SANDBOX_GRACE_MS_DEFAULT
    this.log = o.log.child({ component: 'worker', workerId: this.id })
    const log = this.log
    this.events = o.events && guardedEvents(o.events, log)
    this.completer = new Completer({ db: o.db, workerId: this.id, log })
    this.queue = new LocalQueue({ concurrency: o.concurrency, prefetch: o.prefetch ?? 0 })
    this.claims = new QueueClaims({
      ...{ db: o.db, workerId: this.id, queues: o.queues, types: o.handlers.types(), leaseMs: o.leaseMs },
      onError: (err) => log.warn({ err }, 'claim failed; keeping what earlier claims of the round took'),
    })
    const channel = workerChannel(this.id)
    this.wakeUp = new WakeUp({ db: o.db, workerId: this.id, queues: o.queues, types: o.handlers.types(), pollIntervalMs: o.pollIntervalMs, channel })
    // db, leaseMs and heartbeatMs from the options.
    const events = this.events
    this.leases = new LeaseKeeper({ ...o, completer: this.completer, workerId: this.id, log, onLost: this.abort, events })
    const onRetryScheduled = (retryInMs: number) => this.wakeUp.wakeIn(retryInMs)
    // The end of a run of a limited queue frees room under its limit: claim again at once.
    const onRecorded = (queue: string) => {
      if (this.claims.isLimited(queue)) this.wakeUp.wake()
    }
    this.outcomes = new OutcomeWriter({ completer: this.completer, workerId: this.id, log, leases: this.leases, onRetryScheduled, onRecorded, events })
    const { handlers, outputStore } = o
    const placements = sandboxPlacements(handlers, { mode: o.sandbox, memoryLimitMb: o.sandboxMemoryMb }, log)
    if (placements.size > 0) {
      const graceMs = this.sandboxGraceMs
      this.sandboxes = new SandboxPool({ log, logLevel: log.level, graceMs, idleMs: SANDBOX_IDLE_MS, maxIdle: o.concurrency })
    }
    const sandboxed = this.sandboxes && { placements, pool: this.sandboxes }
    const executorParams = { handlers, log, outputStore, sandboxed, leases: this.leases, outcomes: this.outcomes }
    this.executor = new Executor({ ...executorParams, abort: this.abort, ended: this.runEnded })
    this.notifier = new Notifier({
      databaseUrl: o.databaseUrl,
      log,
      channel,
      handlers: {
        onWork: (queues, delayMs, priority, workers, later) => {
          if (!queues.some((q) => o.queues.includes(q)) || (workers && !workers.includes(this.id))) return
          // later work: the moments meant for this worker (or for any), else the first one
          if (delayMs > 0)
            return this.wakeUp.wakeInEach(later ? later.filter((l) => l.workers === null || l.workers.includes(this.id)).map((l) => l.ms) : [delayMs])
          this.queue.announce(priority)
          this.wakeUp.wake()
        },
        onSettings: (queues) => {
          if (queues.some((q) => o.queues.includes(q))) this.claims.settingsChanged()
        },
        onCancel: (ids) => void this.cancelNotified(ids),
        // Not listed while deaf (no submit names it), listed again once it hears.
        onLost: () => {
          this.claims.hearing(false)
          void this.wakeUp.deafened()
        },
        onReconnect: () => {
          this.claims.hearing(true)
          void this.wakeUp.listening()
        },
      },
    })
  }

  /** Job types this worker claims. */
  get types(): string[] {
    return this.o.handlers.types()
  }

  /** What the worker holds now (for metrics): runs in slots, runs claimed and waiting for one, sandboxes alive and idle. */
  get holding(): { running: number; buffered: number; sandboxes: number; idleSandboxes: number } {
    const sandboxes = this.sandboxes
    return { running: this.queue.running, buffered: this.queue.waiting, sandboxes: sandboxes?.size ?? 0, idleSandboxes: sandboxes?.idleSize ?? 0 }
  }

  async start(): Promise<void> {
    if (this.started) throw new Error('worker already started')
    this.started = true
    const { db, queues, concurrency } = this.o
    await workerRegister(db, { id: this.id, host: hostname(), pid: process.pid, queues, types: this.types, concurrency, leaseMs: this.o.leaseMs })
    // Checked before any claim, and never a reason not to start.
    const autovacuum = await serverAutovacuumOn(db).catch(() => true)
    await this.notifier.start()
    this.claims.hearing(this.notifier.listening)
    this.claimLoopDone = this.claimLoop()
    this.leases.start()
    this.log.info({ queues, types: this.types, concurrency }, 'worker started')
    if (!autovacuum) this.log.warn(AUTOVACUUM_OFF_WARNING)
  }

  /** Claims once (free slots + prefetch room) and starts handlers; returns how many were claimed. The claim loop calls this. */
  async runOnce(): Promise<number> {
    const room = this.queue.claimRoom()
    if (room <= 0 || this.stopping) {
      this.queue.dropFence()
      return 0
    }
    const sentAtMs = performance.now()
    const claimNo = this.queue.claimSent()
    // Traceparents are read, and runs traced, only while an OpenTelemetry SDK is registered.
    const traced = tracingOn()
    let claimed: ClaimedExecution[] = []
    let tookMs = 0
    try {
      // the runs that start at once are marked begun by the claim; the rest by a heartbeat once they start
      const result = await this.claims.claim(room, traced, this.queue.startsNow())
      tookMs = performance.now() - sentAtMs
      claimed = result.claimed
      // A queue at its concurrency limit: no wake-up announces another worker's run ending.
      if (result.full) this.wakeUp.wakeIn(LIMITED_QUEUE_RECLAIM_MS)
    } finally {
      this.queue.claimReturned(claimNo, claimed, room)
      this.startWaiting()
    }
    if (claimed.length > 0) {
      this.log.debug({ count: claimed.length, room }, 'claimed executions')
      const runs = claimed.map((c) => createRun(c, sentAtMs + this.o.leaseMs))
      if (traced) startRunSpans(runs, this.id, sentAtMs, performance.now())
      for (const run of runs) this.leases.hold(run)
      this.queue.add(runs, performance.now())
      this.startWaiting()
    }
    this.events?.claimed?.(claimed.length, this.queue.waiting, claimed, tookMs)
    return claimed.length
  }

  private async claimLoop(): Promise<void> {
    let errorDelayMs = CLAIM_RETRY_MIN_MS
    let backlog = false
    // a claim failed: it may have committed with its answer lost, its leases this worker's and unknown to it
    let unsure = false
    while (!this.stopping) {
      const room = this.queue.room()
      try {
        if (unsure) {
          const lost = await this.leases.handBackUnheld()
          unsure = false
          if (lost > 0) this.log.warn({ count: lost }, 'handed back executions a claim took whose answer was lost')
        }
        if (!this.queue.wantsClaim(backlog)) {
          await this.wakeUp.whileFull(this.queue.bestWaitingPriority())
          continue
        }
        const idle = this.wakeUp.listedIdle
        const n = await this.runOnce()
        backlog = room > 0 && n === room
        errorDelayMs = CLAIM_RETRY_MIN_MS
        if (backlog && idle) await this.passWakeOn()
        await this.wakeUp.afterClaim(backlog, this.queue.bestWaitingPriority(), this.queue.slotsFull)
      } catch (err: unknown) {
        unsure = true
        this.log.warn({ err }, 'claim failed; retrying')
        await this.wakeUp.sleep(errorDelayMs)
        errorDelayMs = Math.min(errorDelayMs * 2, CLAIM_RETRY_MAX_MS)
      }
    }
  }

  /**
   * This worker was listed idle and its claim filled its room: due work may be left that a submit
   * announced to it alone (wake-ups name workers by their concurrency, not their free slots). Names
   * the other waiting workers for it; on a database error their polls still claim it.
   */
  private async passWakeOn(): Promise<void> {
    try {
      const named = await this.wakeUp.passOn()
      if (named > 0) this.log.debug({ named }, 'passed the wake-up on to other waiting workers')
    } catch (err: unknown) {
      this.log.warn({ err }, 'passing the wake-up on failed; the other workers claim the rest at their poll')
    }
  }

  /** Starts waiting runs while slots are free (not past a priority fence). */
  private startWaiting(): void {
    if (this.stopping) return
    for (let run = this.queue.next(); run !== undefined; run = this.queue.next()) {
      this.events?.runStarted?.(run.claimed)
      this.executor.execute(run)
    }
  }

  /**
   * For a freed slot: starts waiting runs in the event loop's check phase, after the poll phase has
   * delivered any notification that arrived meanwhile, so an announced higher priority fences the
   * queue before the slot takes lower-priority work from it (handlers completing in the timers phase
   * would otherwise start their successors first).
   */
  private pump(): void {
    if (this.queue.scheduleStart()) setImmediate(this.pumped)
  }

  private readonly pumped = (): void => {
    this.queue.scheduledStartRan()
    this.startWaiting()
  }

  /** A run's slot is free (the executor's `ended`; shared by every run). */
  private readonly runEnded = (run: Run, ranMs: number): void => {
    this.queue.ended(ranMs)
    if (this.slotWaiters.size > 0) this.slotWaiters.get(run)?.()
    if (this.queue.waiting > 0 && !this.stopping) this.handBackSurplus()
    this.pump()
    this.wakeUp.roomFreed()
    if (this.queue.running === 0) for (const w of this.idleWaiters.splice(0)) w()
    this.events?.runEnded?.(run.claimed, ranMs)
  }

  /** Resolves once each of `runs` has freed its slot (its handler returned, or its sandbox ended). */
  private slotsFreed(runs: readonly Run[]): Promise<void> {
    return Promise.all(
      runs.map(
        (run) =>
          new Promise<void>((resolve) =>
            this.slotWaiters.set(run, () => {
              this.slotWaiters.delete(run)
              resolve()
            }),
          ),
      ),
    ).then(() => undefined)
  }

  /**
   * Hands back the waiting runs this worker's handlers would start only after SURPLUS_HORIZON_MS
   * (claimed ahead while runs were short, and runs have grown longer since): pending and due again,
   * their attempt not counted, so that workers with free slots take them instead of waiting while
   * this one works through its buffer. Their due rows wake the waiting workers.
   */
  private handBackSurplus(): void {
    const surplus = this.queue.takeSurplus(performance.now())
    if (surplus.length === 0) return
    for (const run of surplus) endRunSpan(run, 'handed back')
    // outside the completer's turn, so that it never holds up the heartbeat of running handlers; on a
    // database error it is logged, and the reaper requeues them once their leases expire
    void this.leases.handBackUnstarted(surplus).then((released) => {
      if (released.length === 0) return
      this.log.info(
        { count: released.length, waiting: this.queue.waiting },
        'handed back claimed executions its handlers would start only after 1 s, for workers with free slots',
      )
      // those the database took back (not one whose lease was lost meanwhile)
      this.events?.handedBack?.(released.map((r) => r.claimed))
    })
  }

  /**
   * A notification on `pgsched_cancel` named executions: those this worker holds are aborted once the
   * database shows their runs gone (a cancel deletes them before its notification is delivered). One
   * still leased to this worker was cancelled by nobody: the notification is ignored, and logged. When
   * the database cannot be asked, nothing is aborted here: a run really cancelled stops when its next
   * heartbeat finds its lease gone.
   */
  private async cancelNotified(ids: readonly string[]): Promise<void> {
    const held = ids.filter((id) => this.leases.get(id) !== undefined)
    if (held.length === 0) return
    let leased: Set<string>
    try {
      leased = await executionsLeasedTo(this.o.db, { workerId: this.id, ids: held })
    } catch (err: unknown) {
      this.log.warn({ err, executionIds: held }, 'a cancel notification could not be checked: the runs it names stop at their next heartbeat if cancelled')
      return
    }
    const ignored = held.filter((id) => leased.has(id))
    if (ignored.length > 0) {
      this.log.warn({ executionIds: ignored }, 'a cancel notification named runs still leased to this worker: no cancel sent it, so they go on')
    }
    for (const id of held) {
      const run = this.leases.get(id)
      if (run && !leased.has(id)) this.abort(run, new CancelledError('execution cancelled'))
    }
  }

  /**
   * Aborts a run. A lost lease or a cancel makes it lost (its lease released, nothing written); a
   * buffered run just leaves the queue (a shutdown hands it back). A finishing run's outcome is with
   * the writer, which retries until the database answers or the worker stops: nothing aborts it.
   */
  private readonly abort = (run: Run, reason: AbortReason): void => {
    if (run.state === 'lost' || run.state === 'finishing' || run.abortReason !== undefined) return
    const buffered = run.state === 'buffered'
    run.abortReason = reason
    if (endsLease(reason)) {
      run.state = 'lost'
      // a run whose handler started is the reaper's to requeue, counting its attempt
      if (buffered) this.leases.release(run)
      else this.leases.giveUp(run)
      if (reason instanceof LeaseLostError) this.events?.leaseLost?.(run.claimed)
      endRunSpan(run, reason instanceof LeaseLostError ? 'lease lost' : 'cancelled', reason)
    }
    if (buffered) {
      this.queue.remove(run)
      return
    }
    run.controller?.abort(reason)
    run.onAbort?.(run)
  }

  /**
   * Graceful stop: no more claims; running handlers get `shutdownGraceMs` to
   * finish; the rest are aborted and their executions handed back (pending,
   * due now) for another worker. Resolves when nothing is held.
   */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return
    this.stopping = true
    this.wakeUp.close()
    // each step that waits for the database is bounded (see STOP_DATABASE_WAIT_MS): a claim in flight,
    // the sign-off from the waiting list, the LISTEN connection's end
    // (whether the database answers is judged by the outcomes' drain below, not by these: a claim can
    // be slow on a busy database that still takes the outcomes)
    const waitMs = this.o.stopDatabaseWaitMs ?? STOP_DATABASE_WAIT_MS
    await settlesWithin(this.claimLoopDone ?? Promise.resolve(), waitMs)
    await settlesWithin(this.wakeUp.signOff(), waitMs)
    await settlesWithin(this.notifier.stop(), waitMs)
    // The runs claimed ahead that have not started do not start now: handed back at once (due again,
    // their attempt not counted) for workers with free slots, rather than after the grace period, or
    // never should the process be killed before it ends (docker stop's SIGKILL after 10 s).
    const buffered = this.leases.held().filter((run) => run.state === 'buffered')
    if (buffered.length > 0) {
      for (const run of buffered) this.abort(run, new ShutdownError('worker shutting down'))
      for (const run of buffered) endRunSpan(run, 'handed back')
      let released = 0
      const handedBack = this.leases.handBackUnstarted(buffered).then((runs) => {
        released = runs.length
      })
      // (not counted as pgsched_worker_executions_handed_back_total, which counts the hand-backs of
      // a running worker whose handlers grew slower)
      if (await settlesWithin(handedBack, waitMs)) this.log.info({ count: released }, 'handed back executions claimed ahead that had not started')
    }
    if (this.queue.running > 0) {
      this.log.info({ running: this.queue.running, graceMs: this.o.shutdownGraceMs }, 'waiting for running handlers')
      let graceTimer: NodeJS.Timeout | undefined
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
        new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, this.o.shutdownGraceMs))),
      ])
      clearTimeout(graceTimer)
    }
    // The outcomes of ended runs are retried while the database does not answer: a stop must end even
    // if it never does.
    let answering = await settlesWithin(this.outcomes.drain(), waitMs)
    const unfinished = this.leases.held().filter((run) => run.state !== 'finishing')
    for (const run of unfinished) this.abort(run, new ShutdownError('worker shutting down'))
    if (unfinished.length > 0) {
      // A sandboxed handler goes on until its sandbox lets it go (it returned, or was ended after the
      // sandbox grace): handed back before, its execution could start on another worker beside it.
      const sandboxed = unfinished.filter((run) => run.sandboxed && !run.slotFreed)
      if (sandboxed.length > 0) await settlesWithin(this.slotsFreed(sandboxed), this.sandboxGraceMs + SANDBOX_END_WAIT_MS)
      // Their output is stored (and later writes discarded) while the lease is still ours: a rerun
      // of the same attempt number must not find chunks of this run arriving after its own.
      // (marked as ended here: the rerun, whose attempt number is the same, appends its own after it)
      await Promise.all(unfinished.map((run) => run.ctx?.closeOutput(handedBackMarker())))
      let released = 0
      const handedBack = this.leases.handBack(unfinished).then((n) => {
        released = n
      })
      if (!answering || !(await settlesWithin(handedBack, waitMs))) answering = false
      for (const run of unfinished) endRunSpan(run, 'handed back')
      if (answering) this.log.info({ count: released }, 'handed back unfinished executions')
    }
    // Outcomes of handlers that returned as the grace period ended, after the first drain.
    if (answering) answering = await settlesWithin(this.outcomes.drain(), waitMs)
    if (!answering) {
      this.log.warn(
        { outcomesNotRecorded: this.outcomes.pending + this.completer.pending, notHandedBack: unfinished.length, waitedMs: waitMs },
        'the database did not answer while the worker stopped: its executions not recorded or handed back are requeued by the reaper when their leases expire',
      )
    }
    this.outcomes.stop()
    await settlesWithin(this.leases.stop(), waitMs)
    await this.sandboxes?.close()
    if (answering) await settlesWithin(workerMarkStopped(this.o.db, { id: this.id }), waitMs)
    this.log.info('worker stopped')
  }
}
