/**
 * Where handlers' ctx.output goes. An OutputStore opens one handle per attempt
 * that touches ctx.output; the built-in stores (Postgres, S3, files) are one
 * BufferedOutputStore each over an OutputBackend that stores chunks.
 *
 * Buffering: writes land in the run's buffer at once (the handler never waits
 * for the store). One flush pass at a time sends every run's buffer as one
 * chunk per run, in one backend call: every flushIntervalMs, or at once when a
 * run has flushBytes buffered or closes. A failed chunk goes back to the front
 * of its buffer and the pass is retried with backoff; meanwhile a run whose
 * buffer passes backlogMaxBytes discards further writes and, once the store
 * answers, writes a marker saying how much was lost. After a run's first chunk
 * is stored, its execution row is told the output URI, so the API can stream
 * it while the handler runs. close() waits for the run's buffer to be stored,
 * at most closeTimeoutMs (then drops it), and returns the URI or null.
 */
import type { Writable } from 'node:stream'
import type { Kysely } from 'kysely'
import { droppedMarker } from '../core/output-uri.ts'
import { executionOutputUriSet } from '../db/queries/output.ts'
import type { DB } from '../db/schema.ts'
import { abortableSleep } from '../lib/service.ts'
import type { Logger } from '../logger.ts'
import { OutputSink, type OutputSinkOwner, type OutputTarget } from './output-sink.ts'

export type { OutputTarget } from './output-sink.ts'

/** One attempt's output as the run context holds it. */
export interface OutputHandle {
  /** ctx.output. */
  readonly writable: Writable
  /**
   * Stores what is buffered, after `note` when given (a line of pgsched's own, past the cap too);
   * resolves with the output URI, or null if nothing was stored. Never rejects.
   */
  close(note?: string): Promise<string | null>
}

/** Where a worker keeps handler output; see the file header. Implement it to plug in another store. */
export interface OutputStore {
  /** Called on a run's first touch of ctx.output (never for runs that do not touch it). */
  open(target: OutputTarget): OutputHandle
  /** Before the worker starts: loads what the store needs; rejects (ConfigError) if it cannot. */
  start(): Promise<void>
  /** After the worker stopped: stores what is still buffered (bounded wait), then stops its timers. */
  stop(): Promise<void>
}

/** The next chunk of one attempt's output. */
export interface OutputPart {
  target: OutputTarget
  /** 1 for the run's first chunk, then 2, 3, … (a failed chunk is sent again under the same number). */
  seq: number
  /** When the run first touched its output (ms since the epoch). */
  openedAtMs: number
  data: Buffer
}

/** Stores chunks for a BufferedOutputStore. */
export interface OutputBackend {
  /** For log lines: postgres, s3, file. */
  readonly name: string
  readonly flushIntervalMs: number
  /** A run with this much buffered is flushed at once. */
  readonly flushBytes: number
  /** Most bytes sent in one write() (a pass sends the rest in the next). */
  readonly batchMaxBytes: number
  /** The attempt's output URI (executions.output_uri). */
  uri(target: OutputTarget): string
  /** Stores each part; one result per part, in order (a rejection fails every part). */
  write(parts: readonly OutputPart[]): Promise<ReadonlyArray<PromiseSettledResult<unknown>>>
  /** Loads what it needs before the worker starts (the S3 SDK). */
  load?(): Promise<void>
}

export interface BufferedOutputStoreParams {
  backend: OutputBackend
  /** For recording output_uri on a running execution (the worker's pool); absent: only the outcome write records it. */
  db?: Kysely<DB>
  log: Logger
  /** Cap per attempt, in bytes; then the truncation marker. */
  maxBytes: number
  /** Default OUTPUT_BACKLOG_MAX_BYTES. */
  backlogMaxBytes?: number
  /** Default OUTPUT_CLOSE_TIMEOUT_MS. */
  closeTimeoutMs?: number
}

/**
 * Most bytes one run may have waiting for a store that does not answer before further writes are
 * dropped: 8 MiB, eight times the default cap, so with default settings only an unavailable store
 * drops anything, while a cap raised to gigabytes cannot make one run hold gigabytes in memory.
 */
export const OUTPUT_BACKLOG_MAX_BYTES = 8 * 1_048_576
/** Longest a run's close (and the store's stop) waits for its buffer to be stored before dropping it. */
export const OUTPUT_CLOSE_TIMEOUT_MS = 10_000
/** First delay before retrying a failed flush; doubles per failure up to the max. */
const FLUSH_RETRY_MIN_MS = 100
const FLUSH_RETRY_MAX_MS = 2_000

/** See the file header. */
export class BufferedOutputStore implements OutputStore, OutputSinkOwner {
  private readonly p: BufferedOutputStoreParams & Required<Pick<BufferedOutputStoreParams, 'backlogMaxBytes' | 'closeTimeoutMs'>>
  /** Runs with something buffered, in the order they first had it. */
  private readonly dirty = new Set<OutputSink>()
  /** Runs with a stored chunk whose execution row does not name their output yet. */
  private readonly unrecorded = new Set<OutputSink>()
  /** Runs whose chunk the current pass is storing. */
  private readonly inFlight = new Set<OutputSink>()
  private timer: NodeJS.Timeout | undefined
  private pumping: Promise<void> | undefined
  /** A run asked for a flush while a pass was running: run another at once. */
  private again = false
  private failing = false
  private readonly stopped = new AbortController()

  constructor(params: BufferedOutputStoreParams) {
    this.p = { backlogMaxBytes: OUTPUT_BACKLOG_MAX_BYTES, closeTimeoutMs: OUTPUT_CLOSE_TIMEOUT_MS, ...params }
  }

  async start(): Promise<void> {
    await this.p.backend.load?.()
  }

  open(target: OutputTarget): OutputHandle {
    const sink = new OutputSink(target, this.p.maxBytes, this)
    return {
      writable: sink.writable,
      close: (note?: string) => {
        if (note !== undefined) sink.note(note)
        return this.close(sink)
      },
    }
  }

  async stop(): Promise<void> {
    const deadline = Date.now() + this.p.closeTimeoutMs
    while ((this.dirty.size > 0 || this.pumping !== undefined) && Date.now() < deadline) {
      if (this.pumping === undefined) this.kick()
      await Promise.race([this.pumping, abortableSleep(FLUSH_RETRY_MIN_MS, this.stopped.signal)])
    }
    this.stopped.abort()
    clearTimeout(this.timer)
    this.timer = undefined
    let bytes = 0
    for (const sink of this.dirty) bytes += sink.pendingBytes
    if (bytes > 0) this.p.log.warn({ store: this.p.backend.name, count: this.dirty.size, bytes }, 'output not stored at shutdown')
    this.dirty.clear()
  }

  /** Takes accepted output into the run's buffer (OutputSinkOwner). */
  enqueue(sink: OutputSink, data: Buffer): void {
    // After a drop, the marker goes first: it stands where the dropped output was.
    const marker = sink.droppedBytes > 0 ? Buffer.from(droppedMarker(sink.droppedBytes)) : undefined
    if (sink.pendingBytes + (marker?.length ?? 0) + data.length > this.p.backlogMaxBytes) {
      sink.droppedBytes += data.length
      return
    }
    if (marker) {
      sink.droppedBytes = 0
      this.append(sink, marker)
    }
    this.append(sink, data)
    if (sink.pendingBytes >= this.p.backend.flushBytes) this.kick()
    else this.arm()
  }

  private append(sink: OutputSink, data: Buffer): void {
    sink.pending.push(data)
    sink.pendingBytes += data.length
    this.dirty.add(sink)
  }

  /** The marker for output dropped at the end of what the run wrote so far (nothing was accepted since). */
  private markDropped(sink: OutputSink): void {
    if (sink.droppedBytes === 0) return
    this.append(sink, Buffer.from(droppedMarker(sink.droppedBytes)))
    sink.droppedBytes = 0
  }

  private async close(sink: OutputSink): Promise<string | null> {
    sink.closed = true
    // The outcome write stores the URI with the outcome: no separate update for it any more.
    sink.uriRecorded = true
    this.markDropped(sink)
    if (sink.pendingBytes > 0 || this.inFlight.has(sink)) {
      let timer: NodeJS.Timeout | undefined
      const drained = new Promise<boolean>((resolve) => {
        sink.onDrained = () => resolve(true)
        timer = setTimeout(resolve, this.p.closeTimeoutMs, false)
      })
      this.kick()
      const stored = await drained
      clearTimeout(timer)
      sink.onDrained = undefined
      if (!stored) {
        const { executionId, attempt } = sink.target
        this.p.log.warn(
          { executionId, attempt, bytes: sink.pendingBytes, store: this.p.backend.name },
          'output not stored: the output store did not answer in time',
        )
        sink.abandoned = true
        sink.pending = []
        sink.pendingBytes = 0
        this.dirty.delete(sink)
      }
    }
    return sink.partsStored > 0 ? this.p.backend.uri(sink.target) : null
  }

  /** A flush in flushIntervalMs, unless one is due sooner. */
  private arm(): void {
    if (this.timer || this.pumping !== undefined || this.stopped.signal.aborted) return
    this.timer = setTimeout(this.kick, this.p.backend.flushIntervalMs)
    this.timer.unref()
  }

  /** A flush now (or right after the pass running). */
  private readonly kick = (): void => {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.pumping !== undefined) {
      this.again = true
      return
    }
    this.pumping = this.pump().finally(() => {
      this.pumping = undefined
      if (this.dirty.size > 0) this.arm()
    })
  }

  /** Flush passes until nothing asks for another; retries a failed one with backoff. */
  private async pump(): Promise<void> {
    let delayMs = FLUSH_RETRY_MIN_MS
    for (;;) {
      this.again = false
      const err = await this.flushOnce()
      if (err === undefined) {
        if (this.failing) this.p.log.info({ store: this.p.backend.name }, 'output store answering again')
        this.failing = false
        delayMs = FLUSH_RETRY_MIN_MS
        if (!this.again || this.dirty.size === 0) return
        continue
      }
      if (!this.failing) this.p.log.warn({ err, store: this.p.backend.name }, 'output not stored; retrying')
      this.failing = true
      if (this.stopped.signal.aborted) return
      await abortableSleep(delayMs, this.stopped.signal)
      delayMs = Math.min(delayMs * 2, FLUSH_RETRY_MAX_MS)
    }
  }

  /** One pass: each buffered run's output as one part, in one backend write. Returns the first failure. */
  private async flushOnce(): Promise<unknown> {
    const parts: OutputPart[] = []
    const sinks: OutputSink[] = []
    let bytes = 0
    for (const sink of this.dirty) {
      if (bytes >= this.p.backend.batchMaxBytes) {
        this.again = true
        break
      }
      const data = sink.pending.length === 1 ? (sink.pending[0] as Buffer) : Buffer.concat(sink.pending, sink.pendingBytes)
      sink.pending = []
      sink.pendingBytes = 0
      this.dirty.delete(sink)
      this.inFlight.add(sink)
      parts.push({ target: sink.target, seq: sink.partsStored + 1, openedAtMs: sink.openedAtMs, data })
      sinks.push(sink)
      bytes += data.length
    }
    if (parts.length === 0) return undefined
    let results: ReadonlyArray<PromiseSettledResult<unknown>>
    try {
      results = await this.p.backend.write(parts)
    } catch (err: unknown) {
      results = parts.map(() => ({ status: 'rejected', reason: err }))
    }
    let failure: unknown
    for (let i = 0; i < sinks.length; i++) {
      const sink = sinks[i] as OutputSink
      const result = results[i]
      this.inFlight.delete(sink)
      if (result?.status === 'fulfilled') {
        sink.partsStored++
        if (!sink.uriRecorded) this.unrecorded.add(sink)
        if (!sink.abandoned) this.markDropped(sink)
      } else if (!sink.abandoned) {
        failure ??= result?.reason ?? new Error('output part not stored')
        // Back in front of what the handler wrote since.
        const data = (parts[i] as OutputPart).data
        sink.pending.unshift(data)
        sink.pendingBytes += data.length
        this.dirty.add(sink)
      }
      if (sink.onDrained && sink.pendingBytes === 0) sink.onDrained()
    }
    await this.recordUris()
    return failure
  }

  /** Tells each still-running execution that stored its first chunk where its output is (one row each). */
  private async recordUris(): Promise<void> {
    const db = this.p.db
    for (const sink of this.unrecorded) {
      if (!sink.uriRecorded && db) {
        const { jobId, executionId, attempt } = sink.target
        try {
          await executionOutputUriSet(db, { id: executionId, jobId, attempt, uri: this.p.backend.uri(sink.target) })
        } catch (err: unknown) {
          // Tried again after the next pass; the outcome write records it anyway.
          this.p.log.warn({ err, executionId, attempt }, 'output uri not recorded; retrying')
          return
        }
        sink.uriRecorded = true
      }
      this.unrecorded.delete(sink)
    }
  }
}
