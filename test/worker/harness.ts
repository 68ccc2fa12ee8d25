/**
 * Builds in-process workers against the test database and stops them after
 * each test, checking that every run that took a slot also gave it back.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect } from 'vitest'
import { HandlerRegistry, type Handler } from '../../src/worker/handlers.ts'
import { createOutputStore, type OutputSettings } from '../../src/worker/output-stores.ts'
import type { OutputStore } from '../../src/worker/output-store.ts'
import { createLogger } from '../../src/logger.ts'
import { Worker } from '../../src/worker/worker.ts'
import type { WorkerOptions } from '../../src/worker/worker-options.ts'
import type { TestDb } from '../db.ts'

export const outputDir = mkdtempSync(join(tmpdir(), 'pgsched-output-'))

/** Output settings as the defaults of config.output, the store overridable. */
export function outputSettings(overrides: Partial<OutputSettings> = {}): OutputSettings {
  return { store: 'postgres', dir: outputDir, maxBytes: 1_048_576, ...overrides }
}

/** A file store in `outputDir`, for tests without a database. */
export function fileOutputStore(): OutputStore {
  return createOutputStore({ settings: outputSettings({ store: 'file' }), log: createLogger({ level: 'silent' }) })
}

export function useWorkers(t: TestDb) {
  const started: Array<{ worker: Worker; outputStore: OutputStore; slots: { taken: number; freed: number } }> = []
  afterEach(async () => {
    const stopping = started.splice(0)
    await Promise.all(stopping.map(({ worker }) => worker.stop()))
    await Promise.all(stopping.map(({ outputStore }) => outputStore.stop()))
    for (const { slots } of stopping) expect(slots.freed).toBe(slots.taken)
  })
  return async function startWorker(handlers: Handler[], overrides: Partial<WorkerOptions> = {}): Promise<Worker> {
    const slots = { taken: 0, freed: 0 }
    const events = overrides.events
    const outputStore = overrides.outputStore ?? createOutputStore({ settings: outputSettings(), db: t.db, log: t.log })
    const worker = new Worker({
      db: t.db,
      databaseUrl: t.url,
      log: t.log,
      handlers: new HandlerRegistry(handlers),
      queues: ['default'],
      concurrency: 10,
      leaseMs: 30_000,
      heartbeatMs: 5_000,
      pollIntervalMs: 200,
      shutdownGraceMs: 5_000,
      ...overrides,
      outputStore,
      events: {
        ...events,
        runStarted: (execution) => {
          slots.taken++
          events?.runStarted?.(execution)
        },
        runEnded: (execution, ranMs) => {
          slots.freed++
          events?.runEnded?.(execution, ranMs)
        },
      },
    })
    started.push({ worker, outputStore, slots })
    await outputStore.start()
    await worker.start()
    return worker
  }
}
