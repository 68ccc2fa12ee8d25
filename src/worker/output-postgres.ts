/**
 * The default output backend: chunks as rows of pgsched.execution_output,
 * every buffered run's chunk in one insert per flush (db/queries/output.ts).
 * Output URI: pgsched:output/<executionId>/<attempt>.
 */
import type { Kysely } from 'kysely'
import { postgresOutputUri } from '../core/output-uri.ts'
import { executionOutputAppendMany } from '../db/queries/output.ts'
import type { DB } from '../db/schema.ts'
import type { OutputBackend, OutputPart } from './output-store.ts'

/** A quarter second: output shows up in the API about as fast as a person reads it, in few statements. */
export const POSTGRES_OUTPUT_FLUSH_INTERVAL_MS = 250
/** 64 KiB: a chatty handler's chunks stay small rows (TOAST compresses them) and one flush stays short. */
export const POSTGRES_OUTPUT_FLUSH_BYTES = 65_536
/** Most bytes one insert carries (sent hex-encoded, so twice this on the wire). */
const POSTGRES_OUTPUT_BATCH_MAX_BYTES = 4 * 1_048_576

export function createPostgresOutputBackend(db: Kysely<DB>): OutputBackend {
  return {
    name: 'postgres',
    flushIntervalMs: POSTGRES_OUTPUT_FLUSH_INTERVAL_MS,
    flushBytes: POSTGRES_OUTPUT_FLUSH_BYTES,
    batchMaxBytes: POSTGRES_OUTPUT_BATCH_MAX_BYTES,
    uri: (target) => postgresOutputUri(target.executionId, target.attempt),
    async write(parts: readonly OutputPart[]) {
      await executionOutputAppendMany(db, {
        chunks: parts.map((p) => ({ executionId: p.target.executionId, attempt: p.target.attempt, data: p.data })),
      })
      return parts.map(() => ({ status: 'fulfilled', value: undefined }) as const)
    },
  }
}
