/**
 * Why a run's handler was aborted: what a handler sees as `ctx.signal.reason`.
 * One class per reason, so the worker branches with `instanceof`; each keeps
 * its class name as `name`, which handlers test and the stored error records.
 *   TimeoutError   the run passed its timeoutMs: written as a retriable failure.
 *   LeaseLostError / CancelledError  the execution is no longer this worker's: nothing is written.
 *   ShutdownError  the worker is stopping: the execution is handed back (pending, due now).
 */

/** The run passed its `timeoutMs`; its attempt is recorded as a retriable failure. */
export class TimeoutError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'TimeoutError'
  }
}

/** The lease was lost (reaped, taken over, or not confirmed in time): the outcome is not written. */
export class LeaseLostError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'LeaseLostError'
  }
}

/** The execution was cancelled (the cancel already wrote its state): the outcome is not written. */
export class CancelledError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'CancelledError'
  }
}

/** The worker is stopping and the grace period is over: the execution is handed back. */
export class ShutdownError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ShutdownError'
  }
}

/** Every reason a run is aborted for. */
export type AbortReason = TimeoutError | LeaseLostError | CancelledError | ShutdownError

/** True when the execution is no longer this worker's after an abort for `reason`. */
export function endsLease(reason: AbortReason): reason is LeaseLostError | CancelledError {
  return reason instanceof LeaseLostError || reason instanceof CancelledError
}
