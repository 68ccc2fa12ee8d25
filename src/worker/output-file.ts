/**
 * The file output backend (SCHEDULER_OUTPUT_STORE=file or file:///dir): one
 * file per attempt, `<dir>/<jobId>/<executionId>.<attempt>.log`, each chunk
 * appended. Only an API on the worker's host can read it back: pick it for a
 * single-host setup, or for a directory every host mounts.
 */
import { appendFile, mkdir } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { OutputBackend, OutputPart, OutputTarget } from './output-store.ts'

const FILE_OUTPUT_FLUSH_INTERVAL_MS = 250
const FILE_OUTPUT_FLUSH_BYTES = 65_536
const FILE_OUTPUT_BATCH_MAX_BYTES = 16 * 1_048_576

export function createFileOutputBackend(dir: string): OutputBackend {
  const root = resolve(dir)
  const pathOf = (t: OutputTarget) => join(root, t.jobId, `${t.executionId}.${t.attempt}.log`)
  return {
    name: 'file',
    flushIntervalMs: FILE_OUTPUT_FLUSH_INTERVAL_MS,
    flushBytes: FILE_OUTPUT_FLUSH_BYTES,
    batchMaxBytes: FILE_OUTPUT_BATCH_MAX_BYTES,
    uri: (t) => pathToFileURL(pathOf(t)).href,
    write(parts: readonly OutputPart[]) {
      return Promise.allSettled(
        parts.map(async (p) => {
          const path = pathOf(p.target)
          if (p.seq === 1) await mkdir(dirname(path), { recursive: true })
          // A retry after a failed append may repeat part of a chunk: acceptable for a local disk.
          await appendFile(path, p.data)
        }),
      )
    },
  }
}
