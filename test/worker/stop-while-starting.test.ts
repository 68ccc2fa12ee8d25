/**
 * A worker process stopped while it is still starting (a SIGTERM just after launch, as an
 * orchestrator's rollout may send): the stop waits for the start, then stops everything it started,
 * so no loop starts after the stop on destroyed pools, and nothing is logged after "worker stopped".
 */
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()

describe('a worker system stopped while it starts', () => {
  it('stops what the start brought up, with nothing after "worker stopped" and no error', async () => {
    const lines: Array<{ level: number; msg: string }> = []
    const { log } = capturingLogger('info', lines)
    const config = loadConfig({
      DATABASE_URL: t.url,
      SCHEDULER_WORKER_METRICS_PORT: 'off',
      SCHEDULER_REAPER_INTERVAL_MS: '100',
      SCHEDULER_DISPATCHER_INTERVAL_MS: '100',
    }) as Parameters<typeof createWorkerSystem>[0]['config']
    const system = createWorkerSystem({ config, log, handlers: [] })
    const starting = system.start()
    await system.stop() // asked before the start has returned
    await starting
    // the loops' intervals pass a few times: none of them runs any more
    await new Promise((r) => setTimeout(r, 500))
    const messages = lines.map((l) => l.msg)
    expect(messages).toContain('worker stopped')
    expect(messages.slice(messages.lastIndexOf('worker stopped') + 1), messages.join(' | ')).toEqual([])
    expect(
      lines.filter((l) => l.level >= 50),
      messages.join(' | '),
    ).toEqual([])
  })
})
