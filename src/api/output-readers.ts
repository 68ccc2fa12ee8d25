/**
 * Reads an attempt's stored output back, from whichever store its output URI
 * names (core/output-uri.ts): Postgres chunks, S3 part objects, or a local
 * file. A reader keeps its place, so the output route can call next() again
 * while the handler is still writing (follow mode) and get only what is new.
 * The S3 client is made on the first s3:// read, from this process's settings
 * (endpoint, region; credentials from the SDK's usual sources).
 */
import { type FileHandle, open } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { Kysely } from 'kysely'
import type { FileOutputLocation, OutputLocation, PostgresOutputLocation, S3OutputLocation } from '../core/output-uri.ts'
import { executionOutputRead } from '../db/queries/output.ts'
import type { DB } from '../db/schema.ts'
import { createS3Objects, type S3Objects, type S3Settings } from '../lib/s3.ts'

/** One location's output, read from where the last call stopped. */
export interface OutputReader {
  /** What was stored since the last call, in order (empty: nothing new yet). At most about a page of chunks. */
  next(): Promise<Buffer[]>
  /** Lets go of what it holds (an open file). */
  close(): Promise<void>
}

/** Postgres rows per read: at most this many chunks (each ≤ 64 KiB, more after an outage) at once. */
const POSTGRES_READ_ROWS = 32
/** S3 parts fetched per read. */
const S3_READ_PARTS = 16
/** Bytes of a file per read. */
const FILE_READ_BYTES = 1_048_576

/** Thrown by open() when a file:// output is gone (pruned) or not on this host. */
export class OutputGoneError extends Error {}

/** Makes readers for output locations. */
export class OutputReaders {
  private readonly db: Kysely<DB>
  private readonly s3Settings: S3Settings
  private s3: Promise<S3Objects> | undefined

  constructor(deps: { db: Kysely<DB>; s3?: S3Settings }) {
    this.db = deps.db
    this.s3Settings = deps.s3 ?? {}
  }

  /** A reader at the start of `location`'s output. @throws OutputGoneError for a file that is not there. */
  async open(location: OutputLocation): Promise<OutputReader> {
    if (location.store === 'postgres') return this.postgres(location)
    if (location.store === 's3') return this.s3Reader(location)
    return fileReader(location)
  }

  private postgres(location: PostgresOutputLocation): OutputReader {
    let afterSeq: string | null = null
    return {
      next: async () => {
        const rows = await executionOutputRead(this.db, { ...location, afterSeq, limit: POSTGRES_READ_ROWS })
        const last = rows[rows.length - 1]
        if (last) afterSeq = last.seq
        return rows.map((r) => r.data)
      },
      close: async () => undefined,
    }
  }

  private s3Reader(location: S3OutputLocation): OutputReader {
    let after: string | undefined
    const objects = () => {
      if (!this.s3) {
        const creating = createS3Objects(this.s3Settings)
        this.s3 = creating
        // A failed client creation (no SDK, no region) is not kept: the next request tries again.
        void creating.catch(() => {
          if (this.s3 === creating) this.s3 = undefined
        })
      }
      return this.s3
    }
    return {
      next: async () => {
        const s3 = await objects()
        const keys = await s3.list(location.bucket, location.keyPrefix, after, S3_READ_PARTS)
        const parts: Buffer[] = []
        for (const key of keys) {
          const data = await s3.get(location.bucket, key)
          if (data) parts.push(data)
          after = key
        }
        return parts
      },
      close: async () => undefined,
    }
  }
}

async function fileReader(location: FileOutputLocation): Promise<OutputReader> {
  let handle: FileHandle
  try {
    handle = await open(fileURLToPath(location.url), 'r')
    if (!(await handle.stat()).isFile()) {
      await handle.close()
      throw new OutputGoneError('not a file')
    }
  } catch (err: unknown) {
    const code = (err as { code?: string }).code
    if (err instanceof OutputGoneError || code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') throw new OutputGoneError('no such file')
    throw err
  }
  let position = 0
  return {
    async next() {
      const buffer = Buffer.allocUnsafe(FILE_READ_BYTES)
      const { bytesRead } = await handle.read(buffer, 0, FILE_READ_BYTES, position)
      position += bytesRead
      return bytesRead > 0 ? [buffer.subarray(0, bytesRead)] : []
    },
    close: () => handle.close(),
  }
}
