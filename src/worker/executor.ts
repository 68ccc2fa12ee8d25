/**
 * Runs one buffered run's handler in the slot the local queue gave it: builds
 * its context, starts the handler in a microtask (so every free slot's run is
 * started first), times it out, ends the wait early when the run is aborted,
 * checks before starting that the lease is still sure, and hands the outcome
 * to the OutcomeWriter (a result over MAX_RESULT_BYTES is a fatal failure).
 * The slot stays busy until the handler really returns, even if it ignored the
 * abort. Caller: the Worker, for each run the queue releases to a slot.
 */
import { loudLogger } from '../db/outage.ts'
import { jsonValueProblem } from '../core/json-value.ts'
import { FatalError, handlerError, isFatal, toError } from '../errors.ts'
import type { Logger } from '../logger.ts'
import { LeaseLostError, ShutdownError, TimeoutError, type AbortReason } from './abort-reasons.ts'
import type { HandlerRegistry } from './handlers.ts'
import type { LeaseKeeper } from './lease-keeper.ts'
import type { OutcomeWriter } from './outcome-writer.ts'
import type { OutputStore } from './output-store.ts'
import { RunContext } from './run-context.ts'
import type { Run } from './run.ts'
import { inRunSpan } from './run-tracing.ts'
import type { Placement, SandboxPool } from './sandbox-pool.ts'
import { SandboxResult } from './sandbox.ts'
import { StartSlots } from './start-slots.ts'

/** Largest handler result stored, in bytes of JSON (UTF-8); bulk output belongs in ctx.output. */
export const MAX_RESULT_BYTES = 65_536

/** UTF-8 takes at most 3 bytes per UTF-16 unit: a result this many units long or shorter fits unmeasured. */
const MAX_BYTES_PER_UTF16_UNIT = 3
/**
 * A handler that returns this long (ms) or more after its run was aborted is logged (at warn) as one
 * that does not stop on ctx.signal; one that stops on it returns within moments.
 */
export const LATE_HANDLER_WARN_MS = 1000

/** The executor's collaborators: handlers, where output goes, and the worker's parts it reports to. */
export interface ExecutorParams {
  handlers: HandlerRegistry
  /** The worker's logger; each run's child logger is made from it on first use. */
  log: Logger
  /** Where handlers' ctx.output goes. */
  outputStore: OutputStore
  /** Handler types that run in a sandbox, and the pool that runs them. */
  sandboxed?: { placements: ReadonlyMap<string, Placement>; pool: SandboxPool }
  leases: Pick<LeaseKeeper, 'isSure'>
  outcomes: Pick<OutcomeWriter, 'record' | 'recordComplete'>
  /** Aborts a run (the worker's abort: marks it, and drops a lost one from the leases). */
  abort: (run: Run, reason: AbortReason) => void
  /** The run's handler returned (or it never started): its slot is free. `ranMs` on the monotonic clock. */
  ended: (run: Run, ranMs: number) => void
}

/** Whether a handler's return value is a promise (or another thenable) to wait for. */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'
}

/**
 * Runs handlers; see the file header. A run is driven by callbacks on its own record (no promise
 * chain or closure per run for a handler that returns a value): a busy worker starts tens of
 * thousands of runs a second, and their allocations are most of its garbage.
 */
export class Executor {
  private readonly p: ExecutorParams
  /** The runs of rate-limited queues waiting for their start slot (one timer for all). */
  private readonly slots = new StartSlots<Run>()
  /** Runs whose handlers start in the next microtask (one for all the runs started in a turn). */
  private starting: Run[] = []
  /** The worker's logger without its outage filter: a run's lines carry the handler's errors, never held back as an outage. */
  private readonly loud: Logger

  constructor(params: ExecutorParams) {
    this.p = params
    this.loud = loudLogger(params.log)
  }

  /**
   * Runs `run`'s handler in the slot it was given; `ended` is called once the slot is free (the
   * handler returned, even if it was aborted first). Never throws.
   */
  execute(run: Run): void {
    const c = run.claimed
    run.state = 'running'
    run.startedAtMs = performance.now()
    run.ctx = new RunContext(c, run, this.loud, this.p.outputStore)
    run.timer = setTimeout(this.timeOut, c.timeoutMs, run)
    // The first of: the handler settles, or the run is aborted (timeout, lost lease, cancel, shutdown).
    run.onAbort = this.aborted
    // The handler starts in a microtask: the worker starts every free slot's run first. A run of a
    // rate-limited queue starts at its slot (unless aborted while it waits).
    if (c.startDelayMs) {
      void this.slots.after(run, c.startDelayMs).then(this.startHandler)
    } else {
      if (this.starting.length === 0) queueMicrotask(this.startAll)
      this.starting.push(run)
    }
    if (run.abortReason) this.conclude(run, false, false, undefined)
  }

  /** Starts the handlers of the runs started in this turn, in order. */
  private readonly startAll = (): void => {
    const runs = this.starting
    this.starting = []
    for (const run of runs) this.startHandler(run)
  }

  /** Starts a run's handler and waits for it to settle: its value, its promise's, or what it threw. */
  private readonly startHandler = (run: Run): void => {
    let value: unknown
    try {
      value = this.runHandler(run)
    } catch (err: unknown) {
      this.handlerSettled(run, false, err)
      return
    }
    // a promise to wait for; any other thenable as `await` takes it (Promise.resolve): what its `then`
    // throws, or its getter, fails the attempt, and its callbacks count once. Reading it may throw
    // (a proxy's trap): that fails the attempt too, never the worker.
    let promise: PromiseLike<unknown> | undefined
    try {
      promise = isThenable(value) ? (value instanceof Promise ? value : Promise.resolve(value)) : undefined
    } catch (err: unknown) {
      this.handlerSettled(run, false, err)
      return
    }
    if (promise !== undefined) {
      promise.then(
        (v) => this.handlerSettled(run, true, v),
        (err: unknown) => this.handlerSettled(run, false, err),
      )
    } else {
      this.handlerSettled(run, true, value)
    }
  }

  /** The run was aborted before its outcome was decided (`run.onAbort`; shared by every run). */
  private readonly aborted = (run: Run): void => {
    if (run.concluded) return
    run.abortedAtMs = performance.now()
    // A sandboxed handler that timed out still runs until its sandbox has let it go (it returned, or
    // its sandbox was ended, within the grace): the timeout is recorded then, so that the retry it
    // makes due does not start beside it. Its lease is held, and renewed, meanwhile.
    if (run.sandboxed && run.abortReason instanceof TimeoutError) return
    this.conclude(run, false, false, undefined)
  }

  /** The handler returned or threw: the run's outcome, unless an abort came first; then its slot is free. */
  private handlerSettled(run: Run, ok: boolean, value: unknown): void {
    if (!run.concluded) this.conclude(run, true, ok, value)
    else if (run.abortedAtMs > 0) {
      const lateMs = Math.round(performance.now() - run.abortedAtMs)
      // A handler that goes on after its abort holds its slot, and its execution may run again
      // elsewhere meanwhile (after a timeout, a lost lease or a cancel and a rerun): said once it ends.
      if (lateMs >= LATE_HANDLER_WARN_MS) {
        run.ctx?.log.warn(
          { lateMs, reason: run.abortReason?.name },
          'handler returned long after its run was aborted: it does not stop on ctx.signal, so it held its slot, and its execution may have run again meanwhile (a process sandbox ends such a handler)',
        )
      }
    }
    // The slot is busy until the handler really returns, even if it ignored the abort (and until
    // the output of an aborted run is stored).
    if (run.closing !== null) void run.closing.then(() => this.freeSlot(run))
    else this.freeSlot(run)
  }

  /** The run's slot is free: tells the worker how long it ran. */
  private freeSlot(run: Run): void {
    clearTimeout(run.timer)
    run.slotFreed = true
    this.p.ended(run, performance.now() - run.startedAtMs)
  }

  /**
   * Decides a run's outcome, once: what the handler gave (`settled`: returned `value` if `ok`, else
   * threw it), or the abort's (a timeout is a failure; a lost lease or cancel writes nothing; a shut
   * down run is handed back by Worker.stop).
   */
  private conclude(run: Run, settled: boolean, ok: boolean, value: unknown): void {
    run.concluded = true
    run.onAbort = undefined
    clearTimeout(run.timer)
    const ctx = run.ctx as RunContext
    try {
      const reason = run.abortReason
      if (!settled || reason) {
        if (reason instanceof TimeoutError) {
          ctx.log.warn({ timeoutMs: run.claimed.timeoutMs }, 'execution timed out')
          this.p.outcomes.record(run, ctx, { kind: 'fail', error: reason, fatal: false, timedOut: true })
        } else if (!(reason instanceof ShutdownError)) {
          // A shut down run is handed back by Worker.stop; a lost or cancelled one is not ours any more.
          ctx.log.warn({ reason: reason?.message }, 'execution aborted: lease lost')
          const closing = ctx.closeOutput()
          if (closing !== null) run.closing = closing.catch((err: unknown) => ctx.log.error({ err }, 'execution not concluded'))
        }
      } else if (ok) {
        this.recordResult(run, ctx, value)
      } else {
        const error = handlerError(value)
        this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: isFatal(error), timedOut: false })
      }
    } catch (err: unknown) {
      // Nothing handed to the writer: fail the attempt rather than hold its lease, renewed by the
      // heartbeat, for as long as this worker lives
      ctx.log.error({ err }, 'execution not concluded')
      if (run.state === 'running' && !(run.abortReason instanceof ShutdownError)) {
        const error = new Error(`the outcome could not be recorded: ${toError(err).message}`)
        this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: false, timedOut: false })
      }
    }
  }

  /** Records a handler's result: stored as JSON, or a fatal failure if too large or not serialisable. */
  private recordResult(run: Run, ctx: RunContext, value: unknown): void {
    let resultJson: string
    try {
      // A sandboxed handler's result was serialised inside its sandbox.
      resultJson = value instanceof SandboxResult ? value.json : (JSON.stringify(value ?? null) ?? 'null')
    } catch (err: unknown) {
      const error = new FatalError(`result cannot be stored as JSON: ${toError(err).message}`, { cause: err })
      this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
      return
    }
    // Only a long result needs counting.
    const bytes = resultJson.length * MAX_BYTES_PER_UTF16_UNIT > MAX_RESULT_BYTES ? Buffer.byteLength(resultJson) : 0
    if (bytes > MAX_RESULT_BYTES) {
      const error = new FatalError(`result is ${bytes} bytes as JSON, over the ${MAX_RESULT_BYTES}-byte limit; write large output to ctx.output instead`)
      this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
      return
    }
    // PostgreSQL's jsonb refuses a NUL character and a lone surrogate: stored, such a result would fail
    // its outcome statement at every retry. JSON.stringify writes both as \u escapes, so only a text
    // holding one can have them, and only such a text is parsed back and looked through.
    const unstorable = resultJson.includes('\\u') ? jsonValueProblem(JSON.parse(resultJson), { root: 'result', maxDepth: Number.POSITIVE_INFINITY }) : undefined
    if (unstorable) {
      const error = new FatalError(`result cannot be stored as JSON: ${unstorable.path} ${unstorable.problem}`)
      this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
    } else {
      this.p.outcomes.recordComplete(run, ctx, resultJson)
    }
  }

  /** Runs the handler of a started run (shared by every run: no closure per run). */
  private readonly runHandler = (run: Run): unknown => {
    if (run.abortReason) return undefined // aborted while it waited for its start slot
    // A claim answered after the process was frozen (or starved) may already be past its safe
    // lease time: never start such a handler; the execution is someone else's by now.
    if (!this.p.leases.isSure(run)) {
      this.p.abort(run, new LeaseLostError('lease not confirmed in time: not started'))
      return undefined
    }
    const handler = this.p.handlers.get(run.claimed.type)
    if (!handler) throw new FatalError(`no handler for type "${run.claimed.type}"`)
    const ctx = run.ctx as RunContext
    const placement = this.p.sandboxed?.placements.get(handler.type)
    run.sandboxed = placement !== undefined
    // A traced run's handler runs in its span's context (spans it makes are the run's children).
    if (run.span) return inRunSpan(run, () => (placement ? this.p.sandboxed?.pool.run({ ...placement, handler, ctx }) : handler.run(ctx)))
    return placement ? this.p.sandboxed?.pool.run({ ...placement, handler, ctx }) : handler.run(ctx)
  }

  /** A run's timeout timer (shared by every run: no closure per run). */
  private readonly timeOut = (run: Run): void => {
    this.p.abort(run, new TimeoutError(`timed out after ${run.claimed.timeoutMs} ms`))
  }
}
