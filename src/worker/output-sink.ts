/**
 * One attempt's ctx.output: a Writable that never blocks and never fails. Each
 * write is copied into the store's buffer for the run (OutputStore flushes it)
 * until the attempt's cap; the first write past the cap adds the truncation
 * marker, and everything after it (and after close) is discarded silently.
 * Made on the handler's first touch of ctx.output, never otherwise.
 */
import { Writable } from 'node:stream'
import { truncationMarker } from '../core/output-uri.ts'

/** The run whose output this is. */
export interface OutputTarget {
  jobId: string
  executionId: string
  attempt: number
}

/** Where a sink puts what it accepted (the store's buffer for the run). */
export interface OutputSinkOwner {
  enqueue(sink: OutputSink, data: Buffer): void
}

/** Highest buffered length before write() returns false; writes complete at once, so this only spares handlers needless waits for 'drain'. */
const HIGH_WATER_MARK_BYTES = 1_048_576

const ignore = (): void => undefined

/** See the file header. The store keeps its per-run buffer state on the sink (the fields below `writable`). */
export class OutputSink {
  readonly target: OutputTarget
  /** When the handler first touched its output (ms since the epoch); names S3 part objects. */
  readonly openedAtMs = Date.now()
  readonly writable: Writable
  /** Bytes kept, counted against the cap. */
  private kept = 0
  private truncated = false
  private readonly maxBytes: number
  private readonly owner: OutputSinkOwner

  /** Set by close: later writes are discarded. */
  closed = false
  /** Accepted and not yet stored, oldest first. */
  pending: Buffer[] = []
  pendingBytes = 0
  /** Discarded since the last stored chunk because the store fell behind (written as a marker). */
  droppedBytes = 0
  /** Chunks stored so far. */
  partsStored = 0
  /** executions.output_uri names this attempt's output (or no longer needs to). */
  uriRecorded = false
  /** Close gave up waiting for the store: what is left is dropped, a failed chunk is not retried. */
  abandoned = false
  /** Called once nothing of this sink is pending or being stored (set while close waits). */
  onDrained: (() => void) | undefined

  constructor(target: OutputTarget, maxBytes: number, owner: OutputSinkOwner) {
    this.target = target
    this.maxBytes = maxBytes
    this.owner = owner
    this.writable = new Writable({
      decodeStrings: false,
      highWaterMark: HIGH_WATER_MARK_BYTES,
      write: (chunk: Buffer | string, encoding: BufferEncoding, callback: () => void) => {
        this.accept(chunk, encoding)
        callback()
      },
    })
    // A write after the handler's own end() must not become an uncaught 'error' event.
    this.writable.on('error', ignore)
  }

  /** Adds a line of pgsched's own (a marker), whatever the cap, unless closed. */
  note(text: string): void {
    if (!this.closed) this.owner.enqueue(this, Buffer.from(text))
  }

  /** Keeps what fits under the cap; copies buffers (the handler may reuse them once write returns). */
  private accept(chunk: Buffer | string, encoding: BufferEncoding): void {
    if (this.closed) return
    const data = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk
    if (data.length === 0) return
    const room = this.maxBytes - this.kept
    if (data.length <= room) {
      this.kept += data.length
      this.owner.enqueue(this, typeof chunk === 'string' ? data : Buffer.from(data))
      return
    }
    if (room > 0) {
      this.kept = this.maxBytes
      this.owner.enqueue(this, Buffer.from(data.subarray(0, room)))
    }
    if (!this.truncated) {
      this.truncated = true
      this.owner.enqueue(this, Buffer.from(truncationMarker(this.maxBytes)))
    }
  }
}
