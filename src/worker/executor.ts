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
import { FatalError, toError } from '../errors.ts'
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
  outcomes: Pick<OutcomeWriter, 'record'>
  /** Aborts a run (the worker's abort: marks it, and drops a lost one from the leases). */
  abort: (run: Run, reason: AbortReason) => void
  /** The run's handler returned (or it never started): its slot is free. `ranMs` on the monotonic clock. */
  ended: (run: Run, ranMs: number) => void
}

/** How a handler ended. */
type Settled = { ok: true; value: unknown } | { ok: false; error: unknown }
const settledOk = (value: unknown): Settled => ({ ok: true, value })
const settledError = (error: unknown): Settled => ({ ok: false, error })

/** Runs handlers; see the file header. */
export class Executor {
  private readonly p: ExecutorParams
  /** The runs of rate-limited queues waiting for their start slot (one timer for all). */
  private readonly slots = new StartSlots<Run>()

  constructor(params: ExecutorParams) {
    this.p = params
  }

  /** Runs `run`'s handler in the slot it was given; resolves when the slot is free. Never rejects. */
  async execute(run: Run): Promise<void> {
    const c = run.claimed
    run.state = 'running'
    const startedAtMs = performance.now()
    // A run's lines (the handler's ctx.log, its failures) carry the handler's errors: never held back as an outage.
    const ctx = new RunContext(c, run, loudLogger(this.p.log), this.p.outputStore)
    run.ctx = ctx
    const timer = setTimeout(this.timeOut, c.timeoutMs, run)
    // The handler starts in a microtask: the worker starts every free slot's run first. A run of a
    // rate-limited queue starts at its slot (unless aborted while it waits).
    const start = c.startDelayMs ? this.slots.after(run, c.startDelayMs) : Promise.resolve(run)
    const settled = start.then(this.runHandler).then(settledOk, settledError)
    // The first of: the handler settles, or the run is aborted (timeout, lost lease, cancel, shutdown).
    let resolveFirst: (value: Settled | 'aborted') => void = () => undefined
    const first = new Promise<Settled | 'aborted'>((resolve) => (resolveFirst = resolve))
    run.onAbort = resolveFirst
    if (run.abortReason) resolveFirst('aborted')
    void settled.then(resolveFirst)
    try {
      const outcome = await first
      clearTimeout(timer)
      const reason = run.abortReason
      if (outcome === 'aborted' || reason) {
        if (reason instanceof TimeoutError) {
          ctx.log.warn({ timeoutMs: c.timeoutMs }, 'execution timed out')
          void this.p.outcomes.record(run, ctx, { kind: 'fail', error: reason, fatal: false, timedOut: true })
        } else if (!(reason instanceof ShutdownError)) {
          // A shut down run is handed back by Worker.stop; a lost or cancelled one is not ours any more.
          ctx.log.warn({ reason: reason?.message }, 'execution aborted: lease lost')
          await ctx.closeOutput()
        }
      } else if (outcome.ok) {
        this.recordResult(run, ctx, outcome.value)
      } else {
        const error = toError(outcome.error)
        void this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: error instanceof FatalError, timedOut: false })
      }
    } catch (err: unknown) {
      ctx.log.error({ err }, 'execution not concluded')
    } finally {
      clearTimeout(timer)
      // The slot is busy until the handler really returns, even if it ignored the abort.
      await settled
      this.p.ended(run, performance.now() - startedAtMs)
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
      void this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
      return
    }
    // Only a long result needs counting.
    const bytes = resultJson.length * MAX_BYTES_PER_UTF16_UNIT > MAX_RESULT_BYTES ? Buffer.byteLength(resultJson) : 0
    if (bytes > MAX_RESULT_BYTES) {
      const error = new FatalError(`result is ${bytes} bytes as JSON, over the ${MAX_RESULT_BYTES}-byte limit; write large output to ctx.output instead`)
      void this.p.outcomes.record(run, ctx, { kind: 'fail', error, fatal: true, timedOut: false })
    } else {
      void this.p.outcomes.record(run, ctx, { kind: 'complete', resultJson })
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
    // A traced run's handler runs in its span's context (spans it makes are the run's children).
    if (run.span) return inRunSpan(run, () => (placement ? this.p.sandboxed?.pool.run({ ...placement, handler, ctx }) : handler.run(ctx)))
    return placement ? this.p.sandboxed?.pool.run({ ...placement, handler, ctx }) : handler.run(ctx)
  }

  /** A run's timeout timer (shared by every run: no closure per run). */
  private readonly timeOut = (run: Run): void => {
    this.p.abort(run, new TimeoutError(`timed out after ${run.claimed.timeoutMs} ms`))
  }
}
