/**
 * The worker: claims due executions and runs their handlers.
 *
 *   claim loop ── room? ──▶ executionClaimBatch(n = free slots + prefetch room)
 *        ▲                        │ leased, queued locally by priority
 *        │ wake: NOTIFY, slot     ▼
 *        │ freed, retry timer,  buffer ── slot free ──▶ handler(ctx) ──▶ Completer (batched, fenced writes)
 *        └ poll ──────────────────┘
 *   prefetch: while handlers are short, the worker claims ahead of its free
 *   slots (at most what its handlers are expected to start within
 *   PREFETCH_HORIZON_MS, capped by the prefetch option): larger, fewer claims.
 *   Buffered executions are leased and heartbeated like running ones. When a
 *   notification announces work of higher priority than the best buffered,
 *   the buffer stops starting lower-priority runs until the claim it
 *   triggers returns, so priority order holds across the buffer.
 *   heartbeat: every heartbeatMs one statement renews every lease held; an
 *   execution missing from the answer lost its lease → its handler is aborted.
 *   After maxHeartbeatFailures failed heartbeats in a row (database unreachable)
 *   every handler is aborted, before the lease (> 3 heartbeats) can expire.
 *   lease guard: a heartbeat that hangs (a partition that drops packets) never
 *   fails, and a process frozen (SIGSTOP, VM pause) sends nothing, so a timer
 *   also aborts every handler whose lease was last confirmed more than
 *   leaseMs − heartbeatMs ago on the monotonic clock, before the database
 *   lease can run out and another worker start the execution.
 *
 * Abort reasons (`ctx.signal.reason.name`): TimeoutError (recorded as a
 * retriable failure), LeaseLostError, CancelledError, ShutdownError.
 */
import { hostname } from 'node:os'
import type { Kysely } from 'kysely'
import { uuidV7 } from '../lib/uuid-v7.ts'
import type { DB } from '../db/schema.ts'
import { executionClaimBatch, type ClaimedExecution } from '../db/queries/claim.ts'
import { executionHeartbeatMany, executionReleaseMany, type LeaseRef } from '../db/queries/lease.ts'
import { serverAutovacuumOn } from '../db/queries/ops.ts'
import {
  IDLE_MIN_PRIORITY,
  workerMarkStopped,
  workerRegister,
  workerSignOffWaiting,
  workerSignUpWaiting,
} from '../db/queries/workers.ts'
import { FatalError, toError } from '../errors.ts'
import type { Logger } from '../logger.ts'
import { abortableSleep } from '../lib/service.ts'
import { Completer, type WriteResult } from './completer.ts'
import type { HandlerRegistry } from './handlers.ts'
import { Notifier } from './notifier.ts'
import { RunContext } from './run-context.ts'

export const MAX_RESULT_BYTES = 65_536

export interface WorkerOptions {
  /** The worker process gives it a pool with generic plans forced (see createDb's genericPlans). */
  db: Kysely<DB>
  /** For the LISTEN connection. */
  databaseUrl: string
  log: Logger
  handlers: HandlerRegistry
  queues: readonly string[]
  concurrency: number
  leaseMs: number
  heartbeatMs: number
  maxHeartbeatFailures: number
  pollIntervalMs: number
  shutdownGraceMs: number
  outputDir: string
  /** Most executions claimed ahead of free slots (0 = claim only for free slots). Default 0. */
  prefetch?: number
  id?: string
}

/** Retry interval of a wait sign-up refused because a submit was in flight. */
const SIGN_UP_RETRY_MS = 20

/** Prefetch holds at most what the handlers are expected to start within this time. */
export const PREFETCH_HORIZON_MS = 100

class AbortReason extends Error {
  constructor(name: string, message: string) {
    super(message)
    this.name = name
  }
}

interface InFlight {
  ref: LeaseRef
  claimed: ClaimedExecution
  /** Claim order: ties in priority start in the order the claim returned them. */
  seq: number
  /** Created when the handler first reads ctx.signal, or at abort. */
  controller: AbortController | undefined
  abortReason: AbortReason | undefined
  /** Set while running: ends the wait for the handler early (see execute). */
  onAbort: ((value: 'aborted') => void) | undefined
  /** The handler's context, once started. */
  ctx: RunContext | undefined
  started: boolean
  /** Outcome handed to the completer: no longer "lost" if the heartbeat misses it. */
  finishing: boolean
  lost: boolean
  /** Monotonic time (performance.now()) the database lease surely lasts until: when the last confirmed claim or renewal was sent, plus leaseMs. */
  leaseSureUntilMs: number
}

export class Worker {
  readonly id: string
  private readonly o: WorkerOptions
  private readonly log: Logger
  private readonly completer: Completer
  private readonly notifier: Notifier
  /** Executions whose lease this worker holds (handler running or outcome being written). */
  private readonly leases = new Map<string, InFlight>()
  /** Handlers running (slots in use). */
  private active = 0
  /** Claimed executions waiting for a slot, highest priority first. */
  private buffer: InFlight[] = []
  /** A start of buffered runs is scheduled (see pump). */
  private pumpScheduled = false
  private claimSeq = 0
  /** Mean handler run time (ms, moving average); undefined until a run ended. */
  private avgRunMs: number | undefined
  /**
   * While set, buffered runs below `priority` wait until a claim sent after the
   * announcement (number > afterClaim) has returned with the announced work.
   */
  private priorityFence: { priority: number; afterClaim: number } | undefined
  private claimsSent = 0
  /**
   * This worker's min_priority in pgsched.waiting_workers (undefined: not listed): submits of due
   * work at or above it notify this worker. IDLE_MIN_PRIORITY when its queues were empty; the best
   * buffered priority + 1 while it holds prefetched work; not listed while it has a backlog only.
   */
  private listedMin: number | undefined
  private stopping = false
  private started = false
  private wakeResolve: (() => void) | undefined
  /** A wake that arrived while the loop was busy: the next sleep returns at once. */
  private wakePending = false
  private wakeTimer: NodeJS.Timeout | undefined
  private wakeAt = Infinity
  private claimLoopDone: Promise<void> | undefined
  private heartbeatLoopDone: Promise<void> | undefined
  private readonly stopHeartbeat = new AbortController()
  private leaseGuard: NodeJS.Timeout | undefined
  private heartbeatFailures = 0
  private readonly idleWaiters: Array<() => void> = []
  private readonly tasks = new Set<Promise<void>>()
  /** Outcome writes in progress. */
  private readonly recordings = new Set<Promise<void>>()

  constructor(options: WorkerOptions) {
    this.o = options
    this.id = options.id ?? uuidV7()
    this.log = options.log.child({ component: 'worker', workerId: this.id })
    this.completer = new Completer({ db: options.db, workerId: this.id, log: this.log })
    this.notifier = new Notifier({
      databaseUrl: options.databaseUrl,
      log: this.log,
      handlers: {
        onWork: (queues, delayMs, priority) => {
          if (!queues.some((q) => this.o.queues.includes(q))) return
          if (delayMs > 0) return this.wakeIn(delayMs)
          // Work above the best buffered priority: hold lower buffered runs until it is claimed.
          // (An empty buffer may still be refilled by a claim sent before the announcement.)
          const best = this.bestWaitingPriority() ?? -Infinity
          if (priority !== undefined && priority > best) {
            this.priorityFence = { priority: Math.max(priority, this.priorityFence?.priority ?? -Infinity), afterClaim: this.claimsSent }
          }
          this.wake()
        },
        onCancel: (ids) => {
          for (const id of ids) this.abortExecution(id, new AbortReason('CancelledError', 'execution cancelled'))
        },
        onReconnect: () => this.wake(),
      },
    })
  }

  /** Job types this worker claims. */
  get types(): string[] {
    return this.o.handlers.types()
  }

  /** Number of handlers running now. */
  get running(): number {
    return this.active
  }

  async start(): Promise<void> {
    if (this.started) throw new Error('worker already started')
    this.started = true
    await workerRegister(this.o.db, {
      id: this.id,
      host: hostname(),
      pid: process.pid,
      queues: this.o.queues,
      types: this.types,
      concurrency: this.o.concurrency,
    })
    // Checked before any claim, and never a reason not to start.
    const autovacuum = await serverAutovacuumOn(this.o.db).catch(() => true)
    await this.notifier.start()
    this.claimLoopDone = this.claimLoop()
    this.heartbeatLoopDone = this.heartbeatLoop()
    // At most 50 ms apart, whatever the heartbeat: after a freeze, the timers that fell due run in
    // order, so only a handler step due within this period of the freeze can run before the guard.
    this.leaseGuard = setInterval(() => this.guardLeases(), Math.max(10, Math.min(50, Math.floor(this.o.heartbeatMs / 4))))
    this.leaseGuard.unref()
    this.log.info({ queues: this.o.queues, types: this.types, concurrency: this.o.concurrency }, 'worker started')
    if (!autovacuum) {
      this.log.warn(
        'autovacuum is off on this server: every claim leaves a dead entry in the claim index that only VACUUM removes, ' +
          'so claims slow down as they pile up; turn autovacuum on or run VACUUM pgsched.executions regularly',
      )
    }
  }

  /**
   * Claims once (up to the free slots) and starts the handlers; returns how
   * many executions were claimed. The claim loop calls this; tests may too.
   */
  async runOnce(): Promise<number> {
    // A priority fence claims even with the buffer full: the announced work goes ahead of it.
    const room = this.priorityFence === undefined ? this.room() : Math.max(this.room(), this.o.concurrency)
    if (room <= 0 || this.stopping) {
      this.priorityFence = undefined
      return 0
    }
    const sentAtMs = performance.now()
    const claimNo = ++this.claimsSent
    let claimed: ClaimedExecution[] = []
    try {
      claimed = await executionClaimBatch(this.o.db, {
        workerId: this.id,
        queues: this.o.queues,
        types: this.types,
        limit: room,
        leaseMs: this.o.leaseMs,
      })
    } finally {
      // The fence holds until a claim sent after the announcement reaches below its priority (the
      // claim goes by priority) or runs out: until then more of the announced work may be waiting.
      const fence = this.priorityFence
      if (fence && fence.afterClaim < claimNo) {
        if (claimed.length < room || claimed.some((c) => c.priority < fence.priority)) this.priorityFence = undefined
        else fence.afterClaim = claimNo
      }
      this.startBuffered()
    }
    if (claimed.length > 0) this.log.debug({ count: claimed.length, room }, 'claimed executions')
    for (const c of claimed) {
      const inflight: InFlight = {
        ref: { id: c.id, jobId: c.jobId, attempt: c.attempt },
        claimed: c,
        seq: this.claimSeq++,
        controller: undefined,
        abortReason: undefined,
        onAbort: undefined,
        ctx: undefined,
        started: false,
        finishing: false,
        lost: false,
        leaseSureUntilMs: sentAtMs + this.o.leaseMs,
      }
      this.leases.set(c.id, inflight)
      this.buffer.push(inflight)
    }
    if (claimed.length > 0) this.buffer.sort(byPriority)
    this.startBuffered()
    return claimed.length
  }

  /** Executions claimed ahead of free slots that handlers are expected to start within the horizon. */
  private prefetchAllowed(): number {
    const max = this.o.prefetch ?? 0
    if (max <= 0 || this.avgRunMs === undefined) return 0
    return Math.min(max, Math.floor((this.o.concurrency * PREFETCH_HORIZON_MS) / Math.max(this.avgRunMs, 0.01)))
  }

  /**
   * The best priority among buffered executions that will still be waiting once a scheduled start
   * (see pump) has filled the free slots.
   */
  private bestWaitingPriority(): number | undefined {
    const starting = this.pumpScheduled ? Math.max(0, this.o.concurrency - this.active) : 0
    return this.buffer[starting]?.claimed.priority
  }

  /** How many executions the next claim may take. */
  private room(): number {
    return this.o.concurrency - this.active + this.prefetchAllowed() - this.buffer.length
  }

  /**
   * For a freed slot: starts buffered executions in the event loop's check phase, after the
   * poll phase has delivered any notification that arrived meanwhile, so an announced higher
   * priority fences the buffer before the slot takes lower-priority work from it (handlers
   * completing in the timers phase would otherwise start their successors first).
   */
  private pump(): void {
    if (this.pumpScheduled) return
    this.pumpScheduled = true
    setImmediate(() => {
      this.pumpScheduled = false
      this.startBuffered()
    })
  }

  /** Starts buffered executions while slots are free (not past a priority fence). */
  private startBuffered(): void {
    while (this.active < this.o.concurrency && this.buffer.length > 0 && !this.stopping) {
      const next = this.buffer[0] as InFlight
      if (this.priorityFence && next.claimed.priority < this.priorityFence.priority) return
      this.buffer.shift()
      this.track(this.execute(next))
    }
  }

  private track(task: Promise<void>): void {
    this.tasks.add(task)
    void task.finally(() => this.tasks.delete(task))
  }

  private async claimLoop(): Promise<void> {
    let errorDelayMs = 100
    let backlog = false
    while (!this.stopping) {
      const room = this.room()
      // With a backlog, refill in batches (half the capacity) rather than one slot at a time:
      // fewer, larger claims. Without one, claim as soon as anything is due (lowest latency).
      // A priority fence (higher-priority work announced) claims at once.
      const minBatch = backlog ? Math.max(1, Math.floor((this.o.concurrency + this.prefetchAllowed()) / 2)) : 1
      try {
        if (this.priorityFence === undefined && (room <= 0 || (room < minBatch && this.active + this.buffer.length > 0))) {
          await this.updateListing(true)
          await this.sleep(this.o.pollIntervalMs)
          continue
        }
        const n = await this.runOnce()
        backlog = room > 0 && n === room
        errorDelayMs = 100
        const listing = await this.updateListing(backlog)
        if (listing === 'refused') {
          // The idle sign-up was refused (a submit in flight): claim again shortly.
          await this.sleep(SIGN_UP_RETRY_MS)
          continue
        }
        // Just signed up as idle: claim once more (a submit that committed before the sign-up did not notify).
        if (!backlog && listing === 'changed') continue
      } catch (err: unknown) {
        this.log.warn({ err }, 'claim failed; retrying')
        await this.sleep(errorDelayMs)
        errorDelayMs = Math.min(errorDelayMs * 2, 5_000)
        continue
      }
      if (!backlog) await this.sleep(this.o.pollIntervalMs)
    }
  }

  /**
   * Brings this worker's wake-up listing up to date: idle (any due work) when
   * the last claim found its queues drained, the best buffered priority + 1
   * while prefetched work waits, else not listed. 'refused': the idle sign-up
   * was refused because a submit was in flight.
   */
  private async updateListing(backlog: boolean): Promise<'unchanged' | 'changed' | 'refused'> {
    const best = this.bestWaitingPriority()
    const desired = !backlog ? IDLE_MIN_PRIORITY : best !== undefined && best < 1000 ? best + 1 : undefined
    if (desired === this.listedMin) return 'unchanged'
    if (this.stopping) return 'changed'
    if (desired === undefined) {
      await workerSignOffWaiting(this.o.db, { id: this.id })
    } else if (!(await workerSignUpWaiting(this.o.db, { id: this.id, queues: this.o.queues, minPriority: desired }))) {
      return 'refused'
    }
    this.listedMin = desired
    return 'changed'
  }

  /** Waits until woken or `ms` passes. */
  private sleep(ms: number): Promise<void> {
    if (this.wakePending || this.stopping) {
      this.wakePending = false
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeResolve = undefined
        resolve()
      }, ms)
      this.wakeResolve = () => {
        clearTimeout(timer)
        this.wakeResolve = undefined
        resolve()
      }
    })
  }

  private wake(): void {
    if (this.wakeResolve) this.wakeResolve()
    else this.wakePending = true
  }

  /** Wakes the claim loop in `delayMs` (keeps only the earliest such timer). */
  private wakeIn(delayMs: number): void {
    const at = Date.now() + delayMs
    if (at >= this.wakeAt) return
    clearTimeout(this.wakeTimer)
    this.wakeAt = at
    this.wakeTimer = setTimeout(() => {
      this.wakeAt = Infinity
      this.wakeTimer = undefined
      this.wake()
    }, delayMs + 1)
  }

  private abortExecution(id: string, reason: AbortReason): void {
    const inflight = this.leases.get(id)
    if (!inflight || inflight.finishing || inflight.abortReason) return
    inflight.lost = reason.name !== 'TimeoutError' && reason.name !== 'ShutdownError'
    if (inflight.lost) this.leases.delete(id)
    inflight.abortReason = reason
    if (!inflight.started) {
      // Not started yet: just drop it from the buffer (a shutdown hands it back).
      const at = this.buffer.indexOf(inflight)
      if (at >= 0) this.buffer.splice(at, 1)
      return
    }
    inflight.controller?.abort(reason)
    inflight.onAbort?.('aborted')
  }

  private async execute(inflight: InFlight): Promise<void> {
    const c = inflight.claimed
    inflight.started = true
    this.active++
    const startedAtMs = performance.now()
    const ctx = new RunContext(c, inflight, this.log, this.o.outputDir)
    inflight.ctx = ctx
    const timer = setTimeout(this.timeOut, c.timeoutMs, inflight)
    // The handler starts in a microtask: startBuffered starts every free slot's run first.
    const settled = Promise.resolve(inflight).then(this.runHandler).then(settledOk, settledError)
    // The first of: the handler settles, or the run is aborted (timeout, lost lease, cancel, shutdown).
    let resolveFirst: (value: Settled | 'aborted') => void = () => undefined
    const first = new Promise<Settled | 'aborted'>((resolve) => (resolveFirst = resolve))
    inflight.onAbort = resolveFirst
    if (inflight.abortReason) resolveFirst('aborted')
    void settled.then(resolveFirst)
    let recording: Promise<void> | undefined
    try {
      const outcome = await first
      clearTimeout(timer)
      const reason = inflight.abortReason
      if (outcome === 'aborted' || reason) {
        if (reason?.name === 'TimeoutError') {
          ctx.log.warn({ timeoutMs: c.timeoutMs }, 'execution timed out')
          recording = this.record(inflight, ctx, { kind: 'fail', error: reason, fatal: false, timedOut: true })
        } else if (reason?.name === 'ShutdownError') {
          // handed back by stop()
        } else {
          ctx.log.warn({ reason: reason?.message }, 'execution aborted: lease lost')
          await ctx.closeOutput()
        }
      } else if (outcome.ok) {
        const resultJson = JSON.stringify(outcome.value ?? null) ?? 'null'
        // UTF-8 is at most 3 bytes per UTF-16 unit: only a long result needs counting.
        const bytes = resultJson.length * 3 > MAX_RESULT_BYTES ? Buffer.byteLength(resultJson) : 0
        if (bytes > MAX_RESULT_BYTES) {
          const error = new FatalError(
            `result is ${bytes} bytes as JSON, over the ${MAX_RESULT_BYTES}-byte limit; write large output to ctx.output instead`,
          )
          recording = this.record(inflight, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
        } else {
          recording = this.record(inflight, ctx, { kind: 'complete', resultJson })
        }
      } else {
        const error = toError(outcome.error)
        recording = this.record(inflight, ctx, { kind: 'fail', error, fatal: error instanceof FatalError, timedOut: false })
      }
    } finally {
      clearTimeout(timer)
      // The slot is busy until the handler really returns, even if it ignored the abort.
      await settled
      this.active--
      const ranMs = performance.now() - startedAtMs
      this.avgRunMs = this.avgRunMs === undefined ? ranMs : this.avgRunMs + (ranMs - this.avgRunMs) / 16
      this.pump()
      this.wake()
      if (this.active === 0) for (const w of this.idleWaiters.splice(0)) w()
    }
    // The slot is free as soon as the handler returns; the outcome is written (batched) meanwhile,
    // and the lease stays in the heartbeat until it is.
    if (recording) {
      this.recordings.add(recording)
      try {
        await recording
      } finally {
        this.recordings.delete(recording)
      }
    }
  }

  /** Runs the handler of a started run (shared by every run: no closure per run). */
  private readonly runHandler = (inflight: InFlight): unknown => {
    // A claim answered after the process was frozen (or starved) may already be past its safe
    // lease time: never start such a handler; the execution is someone else's by now.
    if (performance.now() >= inflight.leaseSureUntilMs - this.o.heartbeatMs) {
      this.abortExecution(inflight.claimed.id, new AbortReason('LeaseLostError', 'lease not confirmed in time: not started'))
      return undefined
    }
    const handler = this.o.handlers.get(inflight.claimed.type)
    if (!handler) throw new FatalError(`no handler for type "${inflight.claimed.type}"`)
    return handler.run(inflight.ctx as RunContext)
  }

  /** A run's timeout timer. */
  private readonly timeOut = (inflight: InFlight): void => {
    this.abortExecution(inflight.claimed.id, new AbortReason('TimeoutError', `timed out after ${inflight.claimed.timeoutMs} ms`))
  }

  /** Writes an outcome, retrying while the database is unreachable and the lease still held. */
  private async record(
    inflight: InFlight,
    ctx: RunContext,
    outcome: { kind: 'complete'; resultJson: string } | { kind: 'fail'; error: Error; fatal: boolean; timedOut: boolean },
  ): Promise<void> {
    if (inflight.lost) return
    inflight.finishing = true
    const closing = ctx.closeOutput()
    const outputUri = closing === null ? null : await closing
    const { ref } = inflight
    let delayMs = 100
    for (;;) {
      let result: WriteResult
      try {
        result =
          outcome.kind === 'complete'
            ? await this.completer.complete({ ...ref, resultJson: outcome.resultJson, outputUri })
            : await this.completer.fail({
                ...ref,
                fatal: outcome.fatal,
                outputUri,
                errorJson: JSON.stringify({
                  message: outcome.error.message,
                  name: outcome.error.name,
                  fatal: outcome.fatal,
                  timedOut: outcome.timedOut || undefined,
                  attempt: ref.attempt,
                  workerId: this.id,
                  at: new Date().toISOString(),
                }),
              })
      } catch {
        if (inflight.lost || !this.leases.has(ref.id)) {
          ctx.log.warn('outcome not recorded: lease lost while the database was unreachable')
          return
        }
        await abortableSleep(delayMs, this.stopHeartbeat.signal)
        delayMs = Math.min(delayMs * 2, 2_000)
        continue
      }
      this.leases.delete(ref.id)
      if (!result.accepted) {
        ctx.log.warn({ outcome: outcome.kind }, 'outcome rejected: lease lost (fenced)')
      } else if (outcome.kind === 'complete') {
        // Checked first: building the run's child logger for a message nobody reads costs more than the run.
        if (this.log.isLevelEnabled('debug')) ctx.log.debug('execution succeeded')
      } else if (result.retry?.state === 'pending') {
        ctx.log.warn({ err: outcome.error, retryInMs: result.retry.retryInMs }, 'execution failed; will retry')
        this.wakeIn(result.retry.retryInMs)
      } else {
        ctx.log.warn({ err: outcome.error, fatal: outcome.fatal }, 'execution failed')
      }
      return
    }
  }

  private async heartbeatLoop(): Promise<void> {
    const signal = this.stopHeartbeat.signal
    while (!signal.aborted) {
      await abortableSleep(this.o.heartbeatMs, signal)
      if (signal.aborted) break
      await this.heartbeatOnce()
    }
  }

  /** Renews every lease held; aborts handlers whose lease is gone. */
  async heartbeatOnce(): Promise<void> {
    const held = [...this.leases.values()]
    const sentAtMs = performance.now()
    try {
      // Never alongside an outcome write: both lock this worker's rows, in different orders.
      const renewed = await this.completer.exclusive(() =>
        executionHeartbeatMany(this.o.db, {
          workerId: this.id,
          leases: held.map((h) => h.ref),
          leaseMs: this.o.leaseMs,
        }),
      )
      this.heartbeatFailures = 0
      const tookMs = performance.now() - sentAtMs
      if (tookMs > this.o.heartbeatMs) this.log.warn({ tookMs: Math.round(tookMs), leases: held.length }, 'heartbeat slower than its interval')
      for (const h of held) {
        if (renewed.has(h.ref.id)) h.leaseSureUntilMs = sentAtMs + this.o.leaseMs
        else if (this.leases.get(h.ref.id) === h && !h.finishing) {
          this.abortExecution(h.ref.id, new AbortReason('LeaseLostError', 'lease lost: the execution was reaped, cancelled or taken over'))
        }
      }
    } catch (err: unknown) {
      this.heartbeatFailures++
      this.log.warn({ err, failures: this.heartbeatFailures }, 'heartbeat failed')
      if (this.heartbeatFailures >= this.o.maxHeartbeatFailures) {
        this.log.error({ count: this.leases.size }, 'database unreachable: aborting every handler before its lease expires')
        for (const h of [...this.leases.values()]) {
          h.finishing = false
          this.abortExecution(h.ref.id, new AbortReason('LeaseLostError', 'database unreachable: lease cannot be renewed'))
        }
      }
    }
  }

  /**
   * Aborts the handlers whose lease has not been confirmed for leaseMs − heartbeatMs
   * (monotonic clock), whatever the heartbeat is doing: stuck in a partition,
   * or not run at all while the process was frozen. Their outcome is not written.
   */
  guardLeases(): void {
    const now = performance.now()
    const expiring = [...this.leases.values()].filter((h) => !h.finishing && now >= h.leaseSureUntilMs - this.o.heartbeatMs)
    if (expiring.length === 0) return
    this.log.error({ count: expiring.length }, 'leases not confirmed in time: aborting their handlers before the leases expire')
    for (const h of expiring) {
      this.abortExecution(h.ref.id, new AbortReason('LeaseLostError', 'lease not confirmed in time: the database did not answer the heartbeat'))
    }
  }

  /**
   * Graceful stop: no more claims; running handlers get `shutdownGraceMs` to
   * finish; the rest are aborted and their executions handed back (pending,
   * due now) for another worker. Resolves when nothing is held.
   */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return
    this.stopping = true
    this.wake()
    await this.claimLoopDone
    clearTimeout(this.wakeTimer)
    if (this.listedMin !== undefined) {
      this.listedMin = undefined
      await workerSignOffWaiting(this.o.db, { id: this.id }).catch(() => undefined)
    }
    await this.notifier.stop()
    if (this.active > 0) {
      this.log.info({ running: this.active, graceMs: this.o.shutdownGraceMs }, 'waiting for running handlers')
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
        new Promise<void>((resolve) => setTimeout(resolve, this.o.shutdownGraceMs)),
      ])
    }
    await Promise.all([...this.recordings])
    await this.completer.flush()
    const unfinished = [...this.leases.values()].filter((h) => !h.finishing)
    for (const h of unfinished) this.abortExecution(h.ref.id, new AbortReason('ShutdownError', 'worker shutting down'))
    if (unfinished.length > 0) {
      const released = await this.completer.exclusive(() =>
        executionReleaseMany(this.o.db, { workerId: this.id, leases: unfinished.map((h) => h.ref) }),
      ).catch(
        (err: unknown) => {
          this.log.warn({ err }, 'could not hand back executions; the reaper will requeue them when their lease expires')
          return 0
        },
      )
      for (const h of unfinished) this.leases.delete(h.ref.id)
      this.log.info({ count: released }, 'handed back unfinished executions')
    }
    await this.completer.flush()
    this.stopHeartbeat.abort()
    await this.heartbeatLoopDone
    clearInterval(this.leaseGuard)
    await workerMarkStopped(this.o.db, { id: this.id }).catch(() => undefined)
    this.log.info('worker stopped')
  }

  /** Resolves when every started handler task has ended (for tests). */
  async drained(): Promise<void> {
    while (this.tasks.size > 0 || this.pumpScheduled) {
      if (this.tasks.size > 0) await Promise.all([...this.tasks])
      else await new Promise((resolve) => setImmediate(resolve))
    }
  }

  /** Claimed executions waiting for a slot (for tests and metrics). */
  get buffered(): number {
    return this.buffer.length
  }
}

/** Buffer order: the claim's order (priority, then due time), then claim order. */
function byPriority(a: InFlight, b: InFlight): number {
  return b.claimed.priority - a.claimed.priority || a.claimed.runAtMs - b.claimed.runAtMs || a.seq - b.seq
}

/** How a handler ended. */
type Settled = { ok: true; value: unknown } | { ok: false; error: unknown }
const settledOk = (value: unknown): Settled => ({ ok: true, value })
const settledError = (error: unknown): Settled => ({ ok: false, error })
