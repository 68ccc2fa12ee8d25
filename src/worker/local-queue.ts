/**
 * The worker's local queue: claimed runs waiting for a slot, the slots in use,
 * prefetch sizing and the priority fence. Pure (no I/O, no timers), so tests
 * drive it directly; the Worker calls it from its claim loop, run starts and
 * notifications. Invariants: waiting runs are kept in the claim's order
 * (priority desc, then due time, then claim order); `running` never exceeds
 * the concurrency; while a fence is up no waiting run below its priority
 * starts.
 */

/** Prefetch holds at most what the handlers are expected to start within this time. */
export const PREFETCH_HORIZON_MS = 100

/**
 * Waiting runs the handlers are expected to start only after this long are a surplus (handlers
 * turned out slower than when they were claimed): `takeSurplus` gives them up, down to the prefetch
 * allowance, so that they can go to workers with free slots.
 */
export const SURPLUS_HORIZON_MS = 1_000

/**
 * Prefetch holds at most about this many bytes of payload (as stored: PostgreSQL's size of each
 * claimed job's payload, after compression), whatever SCHEDULER_WORKER_PREFETCH allows: with payloads
 * near their 1 MiB limit, about 64 executions ahead instead of the cap's count.
 */
export const PREFETCH_PAYLOAD_BYTES = 64 * 1024 * 1024

/**
 * The moving averages (run time, payload size) move 1/16 of the way to each new value: steady under
 * jitter, they follow a shift within ~50 values.
 */
const AVERAGE_WINDOW = 16

/** `avg` moved towards `value` (`value` itself when there is no average yet). */
function movedAverage(avg: number | undefined, value: number): number {
  return avg === undefined ? value : avg + (value - avg) / AVERAGE_WINDOW
}

/** Below this mean run time (ms) prefetch sizing treats runs as this long (no division by zero). */
const RUN_TIME_FLOOR_MS = 0.01

/** What the queue needs of a run: its claim's ordering fields, and a claim sequence and time it sets. */
export interface Queued {
  readonly claimed: { readonly priority: number; readonly runAtMs: number; readonly orderMs?: number; readonly payloadBytes?: number }
  seq: number
  /** When `add` took it in (the caller's clock, ms). */
  queuedAtMs?: number
}

/** Size of the queue. */
export interface LocalQueueConfig {
  /** Slots: runs at once. */
  concurrency: number
  /** Most executions claimed ahead of free slots (0 = claim only for free slots). */
  prefetch: number
}

/**
 * While set, waiting runs below `priority` do not start until a claim sent after the announcement
 * (claim number > afterClaim) has returned with the announced work.
 */
interface PriorityFence {
  priority: number
  afterClaim: number
}

/**
 * Buffer order: the claim's order (priority, then due time, or the claim's time for a fair-share
 * claim: `orderMs`), then claim order.
 */
function byPriority(a: Queued, b: Queued): number {
  return b.claimed.priority - a.claimed.priority || (a.claimed.orderMs ?? a.claimed.runAtMs) - (b.claimed.orderMs ?? b.claimed.runAtMs) || a.seq - b.seq
}

/** Waiting runs in priority order plus the slots in use; see the file header. */
export class LocalQueue<T extends Queued> {
  private readonly concurrency: number
  private readonly prefetch: number
  /** Claimed runs waiting for a slot, highest priority first. */
  private readonly buffer: T[] = []
  private active = 0
  private claimSeq = 0
  /** Mean handler run time (ms, moving average); undefined until a run ended. */
  private avgRunMs: number | undefined
  /** Mean payload size of the claimed runs (bytes as stored, moving average over claims); undefined until a claim said. */
  private avgPayloadBytes: number | undefined
  private fence: PriorityFence | undefined
  private claimsSent = 0
  /** A start of waiting runs is scheduled (the worker's pump): the first free slots' runs are as good as started. */
  private startScheduled = false

  constructor(config: LocalQueueConfig) {
    if (!(config.concurrency >= 1)) throw new RangeError('concurrency must be at least 1')
    this.concurrency = config.concurrency
    this.prefetch = Math.max(0, config.prefetch)
  }

  /** Slots in use: runs taken by `next()` and not yet `ended()`. */
  get running(): number {
    return this.active
  }

  /** Every slot runs a handler. */
  get slotsFull(): boolean {
    return this.active >= this.concurrency
  }

  /** Runs waiting for a slot. */
  get waiting(): number {
    return this.buffer.length
  }

  /** Adds claimed runs (in the claim's order), taken in at `nowMs`, and keeps the buffer sorted. */
  add(runs: readonly T[], nowMs = 0): void {
    if (runs.length === 0) return
    let bytes = 0
    let sized = 0
    for (const run of runs) {
      run.seq = this.claimSeq++
      run.queuedAtMs = nowMs
      this.buffer.push(run)
      const b = run.claimed.payloadBytes
      if (b !== undefined) {
        bytes += b
        sized++
      }
    }
    this.buffer.sort(byPriority)
    if (sized > 0) {
      this.avgPayloadBytes = movedAverage(this.avgPayloadBytes, bytes / sized)
    }
  }

  /**
   * Takes the next run for a free slot, counting the slot as used: undefined when no slot is free,
   * nothing waits, or the next run is below the priority fence.
   */
  next(): T | undefined {
    if (this.active >= this.concurrency) return undefined
    const next = this.buffer[0]
    if (next === undefined || (this.fence !== undefined && next.claimed.priority < this.fence.priority)) return undefined
    this.buffer.shift()
    this.active++
    return next
  }

  /** Drops a waiting run (aborted before it started); false if it was not waiting. */
  remove(run: T): boolean {
    const at = this.buffer.indexOf(run)
    if (at < 0) return false
    this.buffer.splice(at, 1)
    return true
  }

  /** A run taken by `next()` ended after `ranMs`: frees its slot and feeds the run-time average. */
  ended(ranMs: number): void {
    this.active--
    this.avgRunMs = movedAverage(this.avgRunMs, ranMs)
  }

  /**
   * Executions claimed ahead of free slots that handlers are expected to start within the horizon,
   * holding at most PREFETCH_PAYLOAD_BYTES of payload at the claims' mean size.
   */
  prefetchAllowed(): number {
    if (this.prefetch <= 0 || this.avgRunMs === undefined) return 0
    const byTime = Math.floor((this.concurrency * PREFETCH_HORIZON_MS) / Math.max(this.avgRunMs, RUN_TIME_FLOOR_MS))
    const bySize = this.avgPayloadBytes === undefined ? Number.POSITIVE_INFINITY : Math.floor(PREFETCH_PAYLOAD_BYTES / Math.max(this.avgPayloadBytes, 1))
    return Math.min(this.prefetch, byTime, bySize)
  }

  /**
   * Removes and returns the waiting runs beyond the prefetch allowance, lowest in the buffer's order
   * first, once the handlers (at their mean run time) would start the last waiting run only after
   * SURPLUS_HORIZON_MS and a waiting run has already waited that long (at `nowMs`): a backlog that
   * does not move, not one slow run among short ones. None otherwise; none under a priority fence
   * (the announced work comes first).
   */
  takeSurplus(nowMs: number): T[] {
    const waiting = this.buffer.length
    if (waiting === 0 || this.avgRunMs === undefined || this.fence !== undefined) return []
    if ((waiting * this.avgRunMs) / this.concurrency <= SURPLUS_HORIZON_MS) return []
    if (!this.buffer.some((run) => nowMs - (run.queuedAtMs ?? nowMs) > SURPLUS_HORIZON_MS)) return []
    return this.buffer.splice(Math.max(0, this.prefetchAllowed()))
  }

  /**
   * How many of the next claim's runs start at once: the free slots that the waiting runs which start
   * before them leave (under a priority fence, only those at or above it start first).
   */
  startsNow(): number {
    let ahead = this.buffer.length
    const fence = this.fence
    if (fence !== undefined) {
      ahead = 0
      for (const run of this.buffer) if (run.claimed.priority >= fence.priority) ahead++
    }
    return Math.max(0, this.concurrency - this.active - ahead)
  }

  /** How many executions the next claim may take to fill free slots and the prefetch allowance. */
  room(): number {
    return this.concurrency - this.active + this.prefetchAllowed() - this.buffer.length
  }

  /**
   * The claim size: `room()`; under a priority fence, the room the waiting runs below it hold too
   * (the announced work goes ahead of them), and at least as many of them as the concurrency allows,
   * so work announced to a worker whose buffer is full still goes ahead of it. A worker with nothing
   * below the fence claims its room only: work it has no slot or prefetch room for is left to the
   * other workers (a submit names idle workers by their concurrency, not their free slots).
   */
  claimRoom(): number {
    const fence = this.fence
    if (fence === undefined) return this.room()
    let below = 0
    for (let i = this.buffer.length - 1; i >= 0 && (this.buffer[i] as T).claimed.priority < fence.priority; i--) below++
    return Math.max(this.room() + below, Math.min(this.concurrency, below))
  }

  /**
   * Whether the claim loop should claim now. With a backlog, refill in batches (half the capacity)
   * rather than one slot at a time: fewer, larger claims. Without one, claim as soon as anything is
   * due (lowest latency). A priority fence (higher-priority work announced) claims at once.
   */
  wantsClaim(backlog: boolean): boolean {
    if (this.fence !== undefined) return true
    const room = this.room()
    if (room <= 0) return false
    const minBatch = backlog ? Math.max(1, Math.floor((this.concurrency + this.prefetchAllowed()) / 2)) : 1
    return room >= minBatch || this.active + this.buffer.length === 0
  }

  /**
   * The best priority among waiting runs that will still be waiting once a scheduled start (see
   * `scheduleStart`) has filled the free slots; undefined when none will.
   */
  bestWaitingPriority(): number | undefined {
    const starting = this.startScheduled ? Math.max(0, this.concurrency - this.active) : 0
    return this.buffer[starting]?.claimed.priority
  }

  /**
   * Due work of `priority` was announced. Above the best waiting priority, it fences the buffer:
   * lower waiting runs hold until a claim sent from now on has taken it. (An empty buffer may still
   * be refilled by a claim sent before the announcement.)
   */
  announce(priority: number | undefined): void {
    if (priority === undefined || priority <= (this.bestWaitingPriority() ?? -Infinity)) return
    this.fence = { priority: Math.max(priority, this.fence?.priority ?? -Infinity), afterClaim: this.claimsSent }
  }

  /** A claim is being sent; returns its number for `claimReturned`. */
  claimSent(): number {
    return ++this.claimsSent
  }

  /**
   * Claim `claimNo` (of `room` executions) returned `claimed` (or failed: none). The fence holds until
   * a claim sent after the announcement reaches below its priority (the claim goes by priority) or
   * runs out: until then more of the announced work may be waiting.
   */
  claimReturned(claimNo: number, claimed: readonly { readonly priority: number }[], room: number): void {
    const fence = this.fence
    if (fence === undefined || fence.afterClaim >= claimNo) return
    if (claimed.length < room || claimed.some((c) => c.priority < fence.priority)) this.fence = undefined
    else fence.afterClaim = claimNo
  }

  /** Drops the priority fence (no claim will be sent for it: no room, or stopping). */
  dropFence(): void {
    this.fence = undefined
  }

  /** True while a priority fence holds back lower waiting runs. */
  get fenced(): boolean {
    return this.fence !== undefined
  }

  /** Notes that a start of waiting runs is scheduled; false if one already was. */
  scheduleStart(): boolean {
    if (this.startScheduled) return false
    this.startScheduled = true
    return true
  }

  /** The scheduled start is running now. */
  scheduledStartRan(): void {
    this.startScheduled = false
  }
}
