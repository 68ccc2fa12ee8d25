/**
 * Writes each run's outcome through the Completer (batched, fenced by lease)
 * and then releases the lease. A result with no output file and no span (the
 * common case) is queued with the completer as one object and no promise;
 * the rest go through an async write. While the database is unreachable it retries
 * until it answers (a write that comes after the reaper took the execution is
 * refused by its fence) or the worker stops (the reaper requeues it). A failure
 * is stored as the execution-error JSON (core/execution-error.ts). Caller: the
 * Executor, once a handler returned or timed out; Worker.stop drains it.
 */
import { executionErrorJson } from '../core/execution-error.ts'
import type { Logger } from '../logger.ts'
import { loudLogger } from '../db/outage.ts'
import { abortableSleep } from '../lib/service.ts'
import type { Completer, CompletionListener, QueuedCompletion, WriteResult } from './completer.ts'
import type { LeaseKeeper } from './lease-keeper.ts'
import type { RunContext } from './run-context.ts'
import type { Run } from './run.ts'
import type { Span } from '@opentelemetry/api'
import { LeaseLostError } from './abort-reasons.ts'
import { spanFailed } from '../lib/tracing.ts'
import { endRunSpan, startSettleSpan } from './run-tracing.ts'
import type { WorkerEvents } from './worker-options.ts'

/** First delay before retrying a write the database did not answer; doubles per failure. */
const WRITE_RETRY_MIN_MS = 100
/** Longest delay between write retries. */
const WRITE_RETRY_MAX_MS = 2_000

/** How a run ended, as written: a JSON result, or an error (fatal: no retry; timedOut: ran out of its timeoutMs). */
export type Outcome = { kind: 'complete'; resultJson: string } | FailureOutcome
type FailureOutcome = { kind: 'fail'; error: Error; fatal: boolean; timedOut: boolean }

/** What the writer needs: the completer, the held leases it releases, and whom to tell of a retry. */
export interface OutcomeWriterParams {
  completer: Completer
  workerId: string
  log: Logger
  leases: Pick<LeaseKeeper, 'holds' | 'release'>
  /** A failure was recorded and the execution will be retried in `retryInMs`. */
  onRetryScheduled: (retryInMs: number) => void
  /** An outcome was recorded: the run no longer counts against its queue's limits. */
  onRecorded?: (queue: string) => void
  /** Told of each outcome the database accepted, and of each it refused (lease lost). */
  events?: Pick<WorkerEvents, 'outcomeWritten' | 'leaseLost'>
}

/** A run's result queued with the completer: the completion and whom it belongs to, in one object. */
class RunCompletion implements QueuedCompletion {
  readonly id: string
  readonly jobId: string
  readonly attempt: number
  readonly outputUri = null
  readonly resultJson: string
  readonly listener: CompletionListener
  readonly run: Run
  readonly ctx: RunContext

  constructor(run: Run, ctx: RunContext, resultJson: string, listener: CompletionListener) {
    this.id = run.ref.id
    this.jobId = run.ref.jobId
    this.attempt = run.ref.attempt
    this.resultJson = resultJson
    this.listener = listener
    this.run = run
    this.ctx = ctx
  }
}

/** Records outcomes; see the file header. */
export class OutcomeWriter implements CompletionListener {
  private readonly p: OutcomeWriterParams
  /** Async outcome writes in progress (queued completions are the completer's until it reports them). */
  private readonly writing = new Set<Promise<void>>()
  private readonly stopped = new AbortController()
  /** The worker's logger itself, not its outage filter (a proxy): asked for its level once per outcome. */
  private readonly loud: Logger

  constructor(params: OutcomeWriterParams) {
    this.p = params
    this.loud = loudLogger(params.log)
  }

  /**
   * Writes `outcome` for `run` (closing its output file first), then releases its lease. Nothing is
   * written for a lost run. Never throws; `drain` waits for what it started.
   */
  record(run: Run, ctx: RunContext, outcome: Outcome): void {
    if (outcome.kind === 'complete') {
      this.recordComplete(run, ctx, outcome.resultJson)
      return
    }
    if (run.state === 'lost') return
    run.state = 'finishing'
    this.track(run, ctx, this.write(run, ctx, outcome, ctx.closeOutput(), false))
  }

  /** `record` of a result (JSON text), without an outcome object. */
  recordComplete(run: Run, ctx: RunContext, resultJson: string): void {
    if (run.state === 'lost') return
    run.state = 'finishing'
    const closing = ctx.closeOutput()
    if (closing === null && run.span === undefined) {
      this.p.completer.queueComplete(new RunCompletion(run, ctx, resultJson, this))
      return
    }
    this.track(run, ctx, this.write(run, ctx, { kind: 'complete', resultJson }, closing, false))
  }

  /** Outcome writes not ended yet (retrying while the database does not answer, or in flight). */
  get pending(): number {
    return this.writing.size
  }

  /** Resolves once every write started so far has ended and the completer has flushed. */
  async drain(): Promise<void> {
    do {
      await Promise.all([...this.writing])
      // A queued completion whose statement failed goes on as an async write (notWritten).
      await this.p.completer.flush()
    } while (this.writing.size > 0)
  }

  /** Ends the retry waits: a write that fails from now on gives up and lets its lease expire. */
  stop(): void {
    this.stopped.abort()
  }

  /** The completer wrote a queued completion (accepted, or refused by the fence). */
  written(completion: QueuedCompletion, result: WriteResult): void {
    const { run, ctx } = completion as RunCompletion
    try {
      this.settled(run, ctx, result, undefined, undefined)
    } catch (err: unknown) {
      ctx.log.error({ err }, 'outcome written, but not reported')
    }
  }

  /** Whether a queued completion's run still holds its lease (the completer sends only those). */
  held(completion: QueuedCompletion): boolean {
    return this.p.leases.holds((completion as RunCompletion).run)
  }

  /** A queued completion's statement failed: it is retried as an async write. */
  notWritten(completion: QueuedCompletion, _err: unknown): void {
    const { run, ctx, resultJson } = completion as RunCompletion
    this.track(run, ctx, this.write(run, ctx, { kind: 'complete', resultJson }, null, true))
  }

  /** Keeps `writing` for drain; a write that rejects (not expected) lets the lease go, so the reaper requeues it. */
  private track(run: Run, ctx: RunContext, writing: Promise<void>): void {
    const tracked: Promise<void> = writing
      .catch((err: unknown) => {
        this.p.leases.release(run)
        endRunSpan(run, 'not recorded', err instanceof Error ? err : notRecorded(String(err)))
        ctx.log.error({ err }, 'outcome not recorded')
      })
      .finally(() => this.writing.delete(tracked))
    this.writing.add(tracked)
  }

  /**
   * Writes an outcome, retrying while the database does not answer. `closing`: the output file's
   * close (its URI); `failedBefore`: a write of it already failed, so the first step is the wait.
   */
  private async write(run: Run, ctx: RunContext, outcome: Outcome, closing: Promise<string | null> | null, failedBefore: boolean): Promise<void> {
    const outputUri = closing === null ? null : await closing
    const { ref } = run
    let delayMs = WRITE_RETRY_MIN_MS
    let failed = failedBefore
    for (;;) {
      // A lost run is no longer held: the lease keeper reported it (its lease not confirmed while the
      // database was unreachable, or this worker claimed its execution again at the same attempt,
      // which the fence would take for this run's), so its writes end here.
      if (!this.p.leases.holds(run)) {
        const why = failed ? 'lease lost while the database was unreachable' : 'lease lost before it was written'
        endRunSpan(run, 'lease lost', new LeaseLostError(`outcome not recorded: ${why}`))
        ctx.log.warn(`outcome not recorded: ${why}`)
        return
      }
      if (failed) {
        // Stopped: the heartbeat is over too, so the lease cannot be kept; the reaper requeues it.
        if (this.stopped.signal.aborted) {
          this.p.leases.release(run)
          endRunSpan(run, 'not recorded', notRecorded('outcome not recorded: the worker stopped while the database was unreachable'))
          ctx.log.warn('outcome not recorded: the worker stopped while the database was unreachable')
          return
        }
        await abortableSleep(delayMs, this.stopped.signal)
        delayMs = Math.min(delayMs * 2, WRITE_RETRY_MAX_MS)
      }
      let result: WriteResult
      const settle = startSettleSpan(run, outcome.kind)
      try {
        result =
          outcome.kind === 'complete'
            ? await this.p.completer.complete({ id: ref.id, jobId: ref.jobId, attempt: ref.attempt, resultJson: outcome.resultJson, outputUri })
            : await this.p.completer.fail({
                id: ref.id,
                jobId: ref.jobId,
                attempt: ref.attempt,
                fatal: outcome.fatal,
                outputUri,
                errorJson: executionErrorJson({
                  message: outcome.error.message,
                  name: outcome.error.name,
                  fatal: outcome.fatal,
                  timedOut: outcome.timedOut,
                  attempt: ref.attempt,
                  workerId: this.p.workerId,
                  at: new Date().toISOString(),
                }),
              })
      } catch (err: unknown) {
        if (settle) {
          spanFailed(settle, err instanceof Error ? err : new Error(String(err)))
          settle.end()
        }
        failed = true
        continue
      }
      this.settled(run, ctx, result, settle, outcome.kind === 'fail' ? outcome : undefined)
      return
    }
  }

  /**
   * After the database answered an outcome write (`failure`: the failure written, none for a
   * completion): releases the lease, ends the spans, tells the worker and logs.
   */
  private settled(run: Run, ctx: RunContext, result: WriteResult, settle: Span | undefined, failure: FailureOutcome | undefined): void {
    const error = failure?.error
    this.p.leases.release(run)
    if (result.accepted) this.p.onRecorded?.(run.claimed.queue)
    const written = !result.accepted ? undefined : failure === undefined ? 'succeeded' : result.retry?.state === 'pending' ? 'retried' : 'failed'
    // A write the fence refused: the attempt's lease was already gone, so its outcome is not recorded.
    const refused =
      written === undefined ? new LeaseLostError('outcome refused: the lease was lost (reaped, cancelled or taken over) before it was written') : undefined
    if (settle) {
      settle.setAttribute('pgsched.outcome', written ?? 'refused')
      if (refused) spanFailed(settle, refused)
      settle.end()
    }
    if (run.span) endRunSpan(run, written ?? 'lease lost', error ?? refused)
    const events = this.p.events
    if (written === undefined) {
      events?.leaseLost?.(run.claimed)
      ctx.log.warn({ outcome: failure === undefined ? 'complete' : 'fail' }, 'outcome rejected: lease lost (fenced)')
      return
    }
    events?.outcomeWritten?.(run.claimed, written)
    if (written === 'succeeded') {
      // Checked first: building the run's child logger for a message nobody reads costs more than the run.
      if (this.loud.isLevelEnabled('debug')) ctx.log.debug('execution succeeded')
    } else if (written === 'retried') {
      const retryInMs = result.accepted ? (result.retry?.retryInMs ?? 0) : 0
      ctx.log.warn({ err: error, retryInMs }, 'execution failed; will retry')
      this.p.onRetryScheduled(retryInMs)
    } else if (failure !== undefined) {
      ctx.log.warn({ err: error, fatal: failure.fatal }, 'execution failed')
    }
  }
}

/** The error a run span ends with when its outcome was not recorded and no other error says why. */
function notRecorded(message: string): Error {
  const error = new Error(message)
  error.name = 'OutcomeNotRecordedError'
  return error
}
