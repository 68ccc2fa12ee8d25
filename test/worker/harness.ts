/**
 * Builds in-process workers against the test database and stops them after
 * each test, checking that every run that took a slot also gave it back.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect } from 'vitest'
import { HandlerRegistry, type Handler } from '../../src/worker/handlers.ts'
import { Worker } from '../../src/worker/worker.ts'
import type { WorkerOptions } from '../../src/worker/worker-options.ts'
import type { TestDb } from '../db.ts'

export const outputDir = mkdtempSync(join(tmpdir(), 'pgsched-output-'))

export function useWorkers(t: TestDb) {
  const started: Array<{ worker: Worker; slots: { taken: number; freed: number } }> = []
  afterEach(async () => {
    const stopping = started.splice(0)
    await Promise.all(stopping.map(({ worker }) => worker.stop()))
    for (const { slots } of stopping) expect(slots.freed).toBe(slots.taken)
  })
  return async function startWorker(handlers: Handler[], overrides: Partial<WorkerOptions> = {}): Promise<Worker> {
    const slots = { taken: 0, freed: 0 }
    const events = overrides.events
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
      outputDir,
      ...overrides,
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
    started.push({ worker, slots })
    await worker.start()
    return worker
  }
}
