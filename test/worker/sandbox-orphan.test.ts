/**
 * A process sandbox does not outlive its worker: after a SIGKILL of `scheduler worker`, the sandbox
 * running a CPU-bound handler (which never yields, so never hears its channel close) ends too, before
 * the lease expires and another worker starts the execution again.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const started: number[] = []
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
})

/** Running (not a zombie waiting for its new parent to reap it). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/** The processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid) found.push(Number(entry))
    } catch {
      // ended meanwhile
    }
  }
  return found
}

describe('a process sandbox whose worker is SIGKILLed', () => {
  it('ends with it, though its handler never yields', async () => {
    const startedFile = join(mkdtempSync(join(tmpdir(), 'pgsched-orphan-')), 'started')
    const worker = spawn('node', ['bin/scheduler', 'worker', '--handlers', 'test/fixtures/sandbox-handlers.js', '--concurrency', '1'], {
      env: { ...process.env, DATABASE_URL: t.url, LOG_LEVEL: 'warn', SCHEDULER_WORKER_METRICS_PORT: 'off' },
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    started.push(worker.pid as number)
    const exited = once(worker, 'exit')
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.submitJob({ type: 'announced-spin.process', payload: { startedFile }, timeoutMs: 600_000 })
    // the handler has started in its sandbox (a child of the worker) and spins from then on
    const sandbox = await waitFor(() => (existsSync(startedFile) ? Number(readFileSync(startedFile, 'utf8')) : null), {
      timeoutMs: 30_000,
      what: 'the handler to start',
    })
    started.push(sandbox)
    expect(childrenOf(worker.pid as number)).toContain(sandbox)
    expect(running(sandbox)).toBe(true)
    worker.kill('SIGKILL')
    await exited
    await waitFor(() => !running(sandbox), { timeoutMs: 5_000, what: `the sandbox ${sandbox} to end with its worker` })
  })
})
