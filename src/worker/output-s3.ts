/**
 * The S3 output backend (SCHEDULER_OUTPUT_STORE=s3://bucket/prefix): objects
 * cannot be appended, so each flush of a run is one part object,
 *   <prefix>/<executionId>/<attempt>/<openedAtMs, 13 digits>-<seq, 6 digits>
 * and an attempt's output is its parts in key order (the API lists and
 * concatenates them, also while the run goes on). openedAtMs keeps the parts of
 * an attempt handed back at shutdown and run again under the same number apart
 * from, and sorted before, the rerun's. Flushes every second or 5 MiB: fewer,
 * larger objects than the Postgres store's chunks. Output URI:
 * s3://bucket/<prefix>/<executionId>/<attempt>/.
 */
import { s3OutputUri } from '../core/output-uri.ts'
import { createS3Objects, type S3Objects, type S3Settings } from '../lib/s3.ts'
import type { OutputBackend, OutputPart, OutputTarget } from './output-store.ts'

const S3_OUTPUT_FLUSH_INTERVAL_MS = 1_000
/** 5 MiB, the smallest part S3 accepts in a multipart upload: a size object stores handle well. */
const S3_OUTPUT_FLUSH_BYTES = 5 * 1_048_576
const S3_OUTPUT_BATCH_MAX_BYTES = 32 * 1_048_576
/** Part uploads at once per pass. */
const S3_OUTPUT_PUT_CONCURRENCY = 8

export interface S3OutputBackendParams extends S3Settings {
  bucket: string
  /** Empty or ending in `/`. */
  keyPrefix: string
}

export function createS3OutputBackend(params: S3OutputBackendParams): OutputBackend {
  let objects: S3Objects | undefined
  const attemptPrefix = (t: OutputTarget) => `${params.keyPrefix}${t.executionId}/${t.attempt}/`
  const keyOf = (p: OutputPart) => `${attemptPrefix(p.target)}${String(p.openedAtMs).padStart(13, '0')}-${String(p.seq).padStart(6, '0')}`
  return {
    name: 's3',
    flushIntervalMs: S3_OUTPUT_FLUSH_INTERVAL_MS,
    flushBytes: S3_OUTPUT_FLUSH_BYTES,
    batchMaxBytes: S3_OUTPUT_BATCH_MAX_BYTES,
    uri: (t) => s3OutputUri(params.bucket, attemptPrefix(t)),
    async load() {
      objects = await createS3Objects(params)
    },
    async write(parts: readonly OutputPart[]) {
      objects ??= await createS3Objects(params)
      const s3 = objects
      const results: PromiseSettledResult<unknown>[] = []
      for (let i = 0; i < parts.length; i += S3_OUTPUT_PUT_CONCURRENCY) {
        const slice = parts.slice(i, i + S3_OUTPUT_PUT_CONCURRENCY)
        results.push(...(await Promise.allSettled(slice.map((p) => s3.put(params.bucket, keyOf(p), p.data)))))
      }
      return results
    },
  }
}
