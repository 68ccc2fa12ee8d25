/**
 * Real `scheduler worker` processes for tests: spawned from the compiled CLI
 * (npm test builds first) with test/fixtures/handlers.js, against the test
 * file's database. Every process is killed after each test. The ledger table
 * the fixture handlers write is created and emptied here.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { sql } from 'kysely'
import { afterEach, beforeEach } from 'vitest'
import type { TestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

export interface WorkerProcess {
  pid: number
  child: ChildProcess
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Resolves when the worker logged that it started. */
  ready: Promise<void>
  output(): string
  alive(): boolean
}

export interface SpawnOptions {
  concurrency?: number
  env?: Record<string, string>
}

export interface LedgerRow {
  execution_id: string
  job_id: string
  attempt: number
  pid: number
  started_at: Date
  finished_at: Date | null
  outcome: string | null
  /** One handler invocation (the same worker can run an execution's attempt twice: a lease requeued without counting it). */
  run_id: string
  /** When the handler started by its own process's clock; started_at is when its row reached the database. */
  handler_started_at: Date
}

/** The ledger the fixture handlers write (test/fixtures/handlers.js): one row per handler run. */
export const LEDGER_DDL = `create table if not exists public.test_ledger (
  run_id uuid primary key, execution_id uuid not null, job_id uuid not null, attempt int not null, pid int not null,
  handler_started_at timestamptz not null, started_at timestamptz not null, finished_at timestamptz, outcome text)`

export function useWorkerProcesses(t: TestDb) {
  const live = new Set<WorkerProcess>()
  beforeEach(async () => {
    await sql.raw(LEDGER_DDL).execute(t.db)
    await sql`truncate public.test_ledger`.execute(t.db)
  })
  afterEach(async () => {
    for (const p of live) if (p.alive()) p.child.kill('SIGKILL')
    await Promise.all([...live].map((p) => p.exited))
    live.clear()
  })

  function spawnWorker(options: SpawnOptions = {}): WorkerProcess {
    const child = spawn('node', ['bin/scheduler', 'worker', '--handlers', 'test/fixtures/handlers.js', '--concurrency', String(options.concurrency ?? 10)], {
      env: {
        ...process.env,
        DATABASE_URL: t.url,
        LEDGER_DATABASE_URL: t.url,
        LOG_LEVEL: 'info',
        SCHEDULER_OUTPUT_DIR: '/tmp/pgsched-test-output',
        // Several workers per test: each would want the same metrics port.
        SCHEDULER_WORKER_METRICS_PORT: 'off',
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let text = ''
    let exitedFlag = false
    let markReady!: () => void
    const ready = new Promise<void>((resolve) => (markReady = resolve))
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      if (text.includes('"msg":"worker started"')) markReady()
    })
    child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString()))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, signal) => {
        exitedFlag = true
        resolve({ code, signal })
      }),
    )
    const p: WorkerProcess = {
      pid: child.pid as number,
      child,
      exited,
      ready: Promise.race([
        ready,
        exited.then(() => {
          throw new Error(`worker exited before starting:\n${text}`)
        }),
      ]),
      output: () => text,
      alive: () => !exitedFlag,
    }
    live.add(p)
    return p
  }

  async function ledger(): Promise<LedgerRow[]> {
    const { rows } = await sql<LedgerRow>`select * from public.test_ledger order by started_at`.execute(t.db)
    return rows
  }

  return { spawnWorker, ledger }
}

/** Executions that ran concurrently with themselves: overlapping ledger intervals of one execution id. */
export function selfOverlaps(rows: readonly LedgerRow[], deaths: ReadonlyMap<number, Date> = new Map()): string[] {
  const byExecution = new Map<string, LedgerRow[]>()
  for (const r of rows) byExecution.set(r.execution_id, [...(byExecution.get(r.execution_id) ?? []), r])
  const overlapping: string[] = []
  for (const [id, runs] of byExecution) {
    const spans = runs
      .map((r) => ({ start: r.started_at.getTime(), end: (r.finished_at ?? deaths.get(r.pid) ?? new Date(8.64e15)).getTime() }))
      .sort((a, b) => a.start - b.start)
    for (let i = 1; i < spans.length; i++) {
      if ((spans[i] as { start: number }).start < (spans[i - 1] as { end: number }).end) overlapping.push(id)
    }
  }
  return overlapping
}

export { waitFor }
