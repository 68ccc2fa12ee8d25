/**
 * Batches outcome writes: every completion and failure recorded while a write
 * is in flight joins the next one, so under load many executions finish in one
 * statement each for success and failure. Under light load an outcome is written
 * after the current turn of the event loop (setImmediate): the outcomes recorded
 * in that turn share the write.
 *
 * `exclusive` runs another statement over the same worker's executions (a
 * hand-back) with no outcome write in flight: two statements of one worker
 * locking overlapping rows in different orders would deadlock. (The heartbeat
 * needs no turn: it never waits for a row lock.)
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionCompleteMany, executionFailMany, type Completion, type FailOutcome, type Failure } from '../db/queries/lease.ts'
import type { Logger } from '../logger.ts'

type Settle<T> = { resolve: (value: T) => void; reject: (err: unknown) => void }

/** What became of an outcome: accepted, or rejected because the lease was gone. */
export type WriteResult = { accepted: true; retry?: FailOutcome } | { accepted: false }

/** A completion written (shared: nothing is made per outcome). */
export const ACCEPTED: WriteResult = Object.freeze({ accepted: true })
/** A completion or failure the fence refused: the lease was gone (shared). */
export const REFUSED: WriteResult = Object.freeze({ accepted: false })

/** Told what became of a queued completion: written (accepted or refused), or not (the statement failed). */
export interface CompletionListener {
  written(completion: QueuedCompletion, result: WriteResult): void
  notWritten(completion: QueuedCompletion, err: unknown): void
  /** False when the completion's lease is no longer held: it is refused without being sent. */
  held?(completion: QueuedCompletion): boolean
}

/**
 * A completion queued with whom to tell (`Completer.queueComplete`): the worker's hot path, one
 * object per outcome and no promise.
 */
export interface QueuedCompletion extends Completion {
  readonly listener: CompletionListener
}

/** A completion queued through `complete`, which settles its promise. */
class PromisedCompletion implements QueuedCompletion {
  readonly id: string
  readonly jobId: string
  readonly attempt: number
  readonly resultJson: string
  readonly outputUri: string | null
  readonly listener = PROMISE_LISTENER
  readonly settle: Settle<WriteResult>

  constructor(item: Completion, settle: Settle<WriteResult>) {
    this.id = item.id
    this.jobId = item.jobId
    this.attempt = item.attempt
    this.resultJson = item.resultJson
    this.outputUri = item.outputUri
    this.settle = settle
  }
}

const PROMISE_LISTENER: CompletionListener = {
  written: (c, result) => (c as PromisedCompletion).settle.resolve(result),
  notWritten: (c, err) => (c as PromisedCompletion).settle.reject(err),
}

export class Completer {
  private completions: QueuedCompletion[] = []
  private failures: Array<{ item: Failure; settle: Settle<WriteResult> }> = []
  private flushing: Promise<void> | undefined
  /** Outcomes of the statements in flight. */
  private writing = 0
  private exclusiveRun: Promise<void> | undefined
  private readonly db: Kysely<DB>
  private readonly workerId: string
  private readonly log: Logger
  private readonly maxBatch: number

  constructor(params: { db: Kysely<DB>; workerId: string; log: Logger; maxBatch?: number }) {
    this.db = params.db
    this.workerId = params.workerId
    this.log = params.log
    this.maxBatch = params.maxBatch ?? 1000
  }

  /** Queues a completion; resolves once it is written (or rejects if the statement failed). */
  complete(item: Completion): Promise<WriteResult> {
    return new Promise((resolve, reject) => this.queueComplete(new PromisedCompletion(item, { resolve, reject })))
  }

  /** Queues a completion; its listener is told once the batch it joined is written or has failed. */
  queueComplete(completion: QueuedCompletion): void {
    this.completions.push(completion)
    this.kick()
  }

  fail(item: Failure): Promise<WriteResult> {
    return new Promise((resolve, reject) => {
      this.failures.push({ item, settle: { resolve, reject } })
      this.kick()
    })
  }

  /** Resolves when everything recorded so far is written. */
  async flush(): Promise<void> {
    while (this.flushing || this.exclusiveRun || this.completions.length > 0 || this.failures.length > 0) {
      this.kick()
      await (this.flushing ?? this.exclusiveRun)
    }
  }

  /** Runs `fn` once the outcome write in flight (if any) has ended, holding back new writes until it returns. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusiveRun !== undefined) await this.exclusiveRun
    let release: () => void = () => undefined
    this.exclusiveRun = new Promise<void>((resolve) => {
      release = resolve
    })
    try {
      await this.flushing
      return await fn()
    } finally {
      this.exclusiveRun = undefined
      release()
      this.kick()
    }
  }

  private kick(): void {
    if (this.flushing || this.exclusiveRun) return
    // After the current turn of the event loop: the runs one claim started together end together
    // (each in its own microtasks), and share one write instead of the first writing alone.
    this.flushing = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.writeAll())
      .finally(() => {
        this.flushing = undefined
        if (this.completions.length > 0 || this.failures.length > 0) this.kick()
      })
  }

  private async writeAll(): Promise<void> {
    const done = this.completions.splice(0, this.maxBatch)
    const failed = this.failures.splice(0, this.maxBatch)
    this.writing += done.length + failed.length
    try {
      await Promise.all([this.writeCompletions(done), this.writeFailures(failed)])
    } finally {
      this.writing -= done.length + failed.length
    }
  }

  /** Outcomes queued or in a statement not answered yet. */
  get pending(): number {
    return this.completions.length + this.failures.length + this.writing
  }

  private async writeCompletions(all: QueuedCompletion[]): Promise<void> {
    // A run no longer held whose completion was queued before this worker claimed its execution
    // again (at the same attempt: LeaseKeeper.hold) would pass the fence as the new lease's.
    let batch = all
    if (all.some((c) => c.listener.held?.(c) === false)) {
      batch = all.filter((c) => c.listener.held?.(c) !== false)
      for (const c of all) if (c.listener.held?.(c) === false) c.listener.written(c, REFUSED)
    }
    if (batch.length === 0) return
    let accepted: Set<string>
    try {
      accepted = await executionCompleteMany(this.db, { workerId: this.workerId, completions: batch })
    } catch (err: unknown) {
      this.log.warn({ err, count: batch.length }, 'writing completions failed')
      for (const c of batch) c.listener.notWritten(c, err)
      return
    }
    for (const c of batch) c.listener.written(c, accepted.has(c.id) ? ACCEPTED : REFUSED)
  }

  private async writeFailures(batch: Array<{ item: Failure; settle: Settle<WriteResult> }>): Promise<void> {
    if (batch.length === 0) return
    try {
      const outcomes = await executionFailMany(this.db, { workerId: this.workerId, failures: batch.map((b) => b.item) })
      const byId = new Map(outcomes.map((o) => [o.id, o]))
      for (const b of batch) {
        const o = byId.get(b.item.id)
        b.settle.resolve(o ? { accepted: true, retry: o } : REFUSED)
      }
    } catch (err: unknown) {
      this.log.warn({ err, count: batch.length }, 'writing failures failed')
      for (const b of batch) b.settle.reject(err)
    }
  }
}
