/**
 * The handler's view of one run (`HandlerContext`). Its signal, child logger
 * and output (a handle of the worker's OutputStore) are created on first use: most runs touch none of them, and
 * per-run allocations are most of a busy worker's garbage. They are accessors
 * on the class, so `{ ...ctx }` copies only the data fields; a wrapper that
 * passes a modified context on can use `Object.create(ctx)` or name them. `console.log(ctx)` and
 * `JSON.stringify(ctx)` show the run's fields only, not what the worker keeps for it.
 */
import type { Writable } from 'node:stream'
import { inspect } from 'node:util'
import type { ClaimedExecution } from '../db/queries/claim.ts'
import type { Logger } from '../logger.ts'
import type { HandlerContext } from './handlers.ts'
import type { OutputHandle, OutputStore } from './output-store.ts'

/** Where the run's abort state lives (the worker's in-flight record). */
export interface AbortState {
  controller: AbortController | undefined
  abortReason: Error | undefined
}

export class RunContext implements HandlerContext {
  readonly payload: unknown
  readonly jobId: string
  readonly executionId: string
  readonly attempt: number
  readonly maxAttempts: number
  readonly type: string
  readonly queue: string
  readonly scheduledFor: Date
  private readonly abortState: AbortState
  private readonly parentLog: Logger
  private readonly outputStore: OutputStore
  private childLog: Logger | undefined
  private outputHandle: OutputHandle | undefined

  constructor(c: ClaimedExecution, abort: AbortState, parentLog: Logger, outputStore: OutputStore) {
    this.payload = c.payload
    this.jobId = c.jobId
    this.executionId = c.id
    this.attempt = c.attempt
    this.maxAttempts = c.maxAttempts
    this.type = c.type
    this.queue = c.queue
    this.scheduledFor = new Date(c.scheduledForMs)
    this.abortState = abort
    this.parentLog = parentLog
    this.outputStore = outputStore
  }

  get signal(): AbortSignal {
    const a = this.abortState
    if (!a.controller) {
      a.controller = new AbortController()
      if (a.abortReason) a.controller.abort(a.abortReason)
    }
    return a.controller.signal
  }

  get log(): Logger {
    this.childLog ??= this.parentLog.child({ jobId: this.jobId, executionId: this.executionId, kind: this.type, attempt: this.attempt })
    return this.childLog
  }

  get output(): Writable {
    this.outputHandle ??= this.outputStore.open({ jobId: this.jobId, executionId: this.executionId, attempt: this.attempt })
    return this.outputHandle.writable
  }

  /** The run's fields, as a handler sees them (what `JSON.stringify` and `console.log` show). */
  toJSON(): Record<string, unknown> {
    const { payload, jobId, executionId, attempt, maxAttempts, type, queue, scheduledFor } = this
    return { payload, jobId, executionId, attempt, maxAttempts, type, queue, scheduledFor }
  }

  [inspect.custom](depth: number, options: Parameters<typeof inspect>[1]): string {
    return `HandlerContext ${inspect(this.toJSON(), { ...options, depth: options?.depth == null ? null : depth })}`
  }

  /**
   * Stores what the handler wrote, if it touched its output, after `note` when given (resolves with the
   * output URI, or null if nothing was stored); null, synchronously, if not.
   */
  closeOutput(note?: string): Promise<string | null> | null {
    return this.outputHandle ? this.outputHandle.close(note) : null
  }
}
