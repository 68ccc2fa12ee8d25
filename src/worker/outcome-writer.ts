/**
 * Writes each run's outcome through the Completer (batched, fenced by lease)
 * and then releases the lease. While the database is unreachable it retries
 * until it answers (a write that comes after the reaper took the execution is
 * refused by its fence) or the worker stops (the reaper requeues it). A failure
 * is stored as the execution-error JSON (core/execution-error.ts). Caller: the
 * Executor, once a handler returned or timed out; Worker.stop drains it.
 */
import { executionErrorJson } from '../core/execution-error.ts'
import type { Logger } from '../logger.ts'
import { abortableSleep } from '../lib/service.ts'
import type { Completer, WriteResult } from './completer.ts'
import type { LeaseKeeper } from './lease-keeper.ts'
import type { RunContext } from './run-context.ts'
import type { Run } from './run.ts'
import { endRunSpan, startSettleSpan } from './run-tracing.ts'
import type { WorkerEvents } from './worker-options.ts'

/** First delay before retrying a write the database did not answer; doubles per failure. */
const WRITE_RETRY_MIN_MS = 100
/** Longest delay between write retries. */
const WRITE_RETRY_MAX_MS = 2_000

/** How a run ended, as written: a JSON result, or an error (fatal: no retry; timedOut: ran out of its timeoutMs). */
export type Outcome = { kind: 'complete'; resultJson: string } | { kind: 'fail'; error: Error; fatal: boolean; timedOut: boolean }

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

/** Records outcomes; see the file header. */
export class OutcomeWriter {
  private readonly p: OutcomeWriterParams
  /** Outcome writes in progress. */
  private readonly writing = new Set<Promise<void>>()
  private readonly stopped = new AbortController()

  constructor(params: OutcomeWriterParams) {
    this.p = params
  }

  /**
   * Writes `outcome` for `run` (closing its output file first), then releases its lease. Nothing is
   * written for a lost run. Never rejects.
   */
  async record(run: Run, ctx: RunContext, outcome: Outcome): Promise<void> {
    const writing = this.write(run, ctx, outcome)
    this.writing.add(writing)
    try {
      await writing
    } catch (err: unknown) {
      // Not expected; the lease is let go so the reaper requeues the execution.
      this.p.leases.release(run)
      endRunSpan(run, 'not recorded', err instanceof Error ? err : undefined)
      ctx.log.error({ err }, 'outcome not recorded')
    } finally {
      this.writing.delete(writing)
    }
  }

  /** Resolves once every write started so far has ended and the completer has flushed. */
  async drain(): Promise<void> {
    await Promise.all([...this.writing])
    await this.p.completer.flush()
  }

  /** Ends the retry waits: a write that fails from now on gives up and lets its lease expire. */
  stop(): void {
    this.stopped.abort()
  }

  private async write(run: Run, ctx: RunContext, outcome: Outcome): Promise<void> {
    if (run.state === 'lost') return
    run.state = 'finishing'
    const closing = ctx.closeOutput()
    const outputUri = closing === null ? null : await closing
    const { ref } = run
    const events = this.p.events
    let delayMs = WRITE_RETRY_MIN_MS
    for (;;) {
      let result: WriteResult
      const settle = startSettleSpan(run, outcome.kind)
      try {
        result =
          outcome.kind === 'complete'
            ? await this.p.completer.complete({ ...ref, resultJson: outcome.resultJson, outputUri })
            : await this.p.completer.fail({
                ...ref,
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
        settle?.recordException(err instanceof Error ? err : String(err))
        settle?.end()
        // A lost run is no longer held: the lease keeper reported it, so its writes end here.
        if (!this.p.leases.holds(run)) {
          endRunSpan(run, 'lease lost')
          ctx.log.warn('outcome not recorded: lease lost while the database was unreachable')
          return
        }
        // Stopped: the heartbeat is over too, so the lease cannot be kept; the reaper requeues it.
        if (this.stopped.signal.aborted) {
          this.p.leases.release(run)
          endRunSpan(run, 'not recorded')
          ctx.log.warn('outcome not recorded: the worker stopped while the database was unreachable')
          return
        }
        await abortableSleep(delayMs, this.stopped.signal)
        delayMs = Math.min(delayMs * 2, WRITE_RETRY_MAX_MS)
        continue
      }
      this.p.leases.release(run)
      if (result.accepted) this.p.onRecorded?.(run.claimed.queue)
      const written = !result.accepted ? undefined : outcome.kind === 'complete' ? 'succeeded' : result.retry?.state === 'pending' ? 'retried' : 'failed'
      if (settle) {
        settle.setAttribute('pgsched.outcome', written ?? 'refused')
        settle.end()
        endRunSpan(run, written ?? 'lease lost', outcome.kind === 'fail' ? outcome.error : undefined)
      }
      if (written === undefined) {
        events?.leaseLost?.(run.claimed)
        ctx.log.warn({ outcome: outcome.kind }, 'outcome rejected: lease lost (fenced)')
        return
      }
      events?.outcomeWritten?.(run.claimed, written)
      if (written === 'succeeded') {
        // Checked first: building the run's child logger for a message nobody reads costs more than the run.
        if (this.p.log.isLevelEnabled('debug')) ctx.log.debug('execution succeeded')
      } else if (written === 'retried') {
        const retryInMs = result.accepted ? (result.retry?.retryInMs ?? 0) : 0
        ctx.log.warn({ err: outcome.kind === 'fail' ? outcome.error : undefined, retryInMs }, 'execution failed; will retry')
        this.p.onRetryScheduled(retryInMs)
      } else if (outcome.kind === 'fail') {
        ctx.log.warn({ err: outcome.error, fatal: outcome.fatal }, 'execution failed')
      }
      return
    }
  }
}
