/**
 * One claimed execution while this worker holds its lease, from the claim
 * until its outcome is written (or the lease is gone):
 *
 *   buffered ──slot──▶ running ──outcome to the writer──▶ finishing ──written──▶ released
 *      │                  │                                   │
 *      └── lease lost or cancelled ───────────────────────────┴──▶ lost (released, nothing written)
 *
 * A timeout or shutdown abort keeps the state and sets `abortReason`: a timed
 * out run still writes its failure, a shut down one is handed back. Only the
 * lease keeper (a LeaseLostError) can take a finishing run: the database is out
 * of reach, so the writer's retries must end before the lease can expire.
 */
import type { Span } from '@opentelemetry/api'
import type { ClaimedExecution } from '../db/queries/claim.ts'
import type { LeaseRef } from '../db/queries/lease.ts'
import type { AbortReason } from './abort-reasons.ts'
import type { AbortState, RunContext } from './run-context.ts'

/**
 * Where a run is in its life (see the diagram above). A string union rather than one object per
 * state: a run changes state three times, and a busy worker runs tens of thousands a second.
 */
export type RunState = 'buffered' | 'running' | 'finishing' | 'lost'

/** The worker's record of one held lease: shared by the queue, executor, writer and lease keeper. */
export interface Run extends AbortState {
  readonly ref: LeaseRef
  readonly claimed: ClaimedExecution
  /** Claim order, set by the local queue: ties in priority start in the order the claim returned them. */
  seq: number
  /** When the local queue took it in (monotonic ms). */
  queuedAtMs: number
  state: RunState
  /** Created when the handler first reads ctx.signal, or at abort. */
  controller: AbortController | undefined
  abortReason: AbortReason | undefined
  /** Set while running until the run is concluded: concludes it as aborted (the executor's). */
  onAbort: ((run: Run) => void) | undefined
  /** The executor's: when the handler was started (monotonic ms), its timeout timer, whether its outcome is decided, and the output being closed after an abort. */
  startedAtMs: number
  timer: NodeJS.Timeout | undefined
  concluded: boolean
  /** When an abort concluded it before its handler returned (monotonic ms); 0 otherwise. */
  abortedAtMs: number
  closing: Promise<unknown> | null
  /** Whether its handler runs in a sandbox, which ends it for real within its grace after an abort. */
  sandboxed: boolean
  /** Whether its handler has given its slot back (returned, or its sandbox ended). */
  slotFreed: boolean
  /** The handler's context, once started. */
  ctx: RunContext | undefined
  /**
   * Monotonic time (performance.now(), ms) the database lease surely lasts until: when the last
   * confirmed claim or renewal was sent, plus leaseMs.
   */
  leaseSureUntilMs: number
  /** Its process span, while an OpenTelemetry SDK records it (run-tracing.ts). */
  span: Span | undefined
}

/** A freshly claimed run, buffered. `leaseSureUntilMs`: when the claim was sent (monotonic ms) + leaseMs. */
export function createRun(claimed: ClaimedExecution, leaseSureUntilMs: number): Run {
  return {
    // the claimed row carries the lease's id, job id and attempt: no second object per run
    ref: claimed,
    claimed,
    seq: 0,
    queuedAtMs: 0,
    state: 'buffered',
    controller: undefined,
    abortReason: undefined,
    onAbort: undefined,
    startedAtMs: 0,
    timer: undefined,
    concluded: false,
    abortedAtMs: 0,
    closing: null,
    sandboxed: false,
    slotFreed: false,
    ctx: undefined,
    leaseSureUntilMs,
    span: undefined,
  }
}
