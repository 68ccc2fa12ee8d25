/** Builds in-process workers against the test database and stops them after each test. */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect } from 'vitest'
import { HandlerRegistry, type Handler } from '../../src/worker/handlers.ts'
import { Worker, type WorkerOptions } from '../../src/worker/worker.ts'
import type { TestDb } from '../db.ts'

export const outputDir = mkdtempSync(join(tmpdir(), 'pgsched-output-'))

export function useWorkers(t: TestDb) {
  const started: Worker[] = []
  afterEach(async () => {
    await Promise.all(started.splice(0).map((w) => w.stop()))
    for (const w of started) expect(w.running).toBe(0)
  })
  return async function startWorker(handlers: Handler[], overrides: Partial<WorkerOptions> = {}): Promise<Worker> {
    const worker = new Worker({
      db: t.db,
      databaseUrl: t.url,
      log: t.log,
      handlers: new HandlerRegistry(handlers),
      queues: ['default'],
      concurrency: 10,
      leaseMs: 30_000,
      heartbeatMs: 5_000,
      maxHeartbeatFailures: 3,
      pollIntervalMs: 200,
      shutdownGraceMs: 5_000,
      outputDir,
      ...overrides,
    })
    started.push(worker)
    await worker.start()
    return worker
  }
}
