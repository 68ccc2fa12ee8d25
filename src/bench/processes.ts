/**
 * Child processes for the benchmark: workers and an API server started from
 * the compiled CLI, with an IPC channel for probe messages, their peak resident
 * memory read from /proc (Linux), and the HTTP load generator of the REST scenario.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from '../lib/package-root.ts'
import type { ProbeMessage } from './handlers.ts'
import type autocannon from 'autocannon'

export interface BenchProcess {
  child: ChildProcess
  ready: Promise<void>
  /** Peak resident set size in MB (VmHWM), or NaN where /proc is absent. */
  peakRssMb(): number
  stop(): Promise<void>
}

function spawnScheduler(
  launcher: 'scheduler-worker' | 'scheduler-api',
  args: string[],
  env: Record<string, string>,
  readyText: string,
  onProbe?: (m: ProbeMessage) => void,
): BenchProcess {
  // The launcher itself, as installed: its shebang carries the Node.js flags the product runs with.
  return spawnReady(launcher, join(packageRoot(), 'bin', launcher), args, { LOG_LEVEL: 'info', ...env }, readyText, onProbe)
}

/** The processes spawned and not exited yet (stopProcesses). */
const running = new Set<BenchProcess>()

/** Stops every process the bench spawned that is still running (a bench interrupted by a signal). */
export async function stopProcesses(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop()))
}

/** Spawns `command` (its output kept for the error should it exit first); ready once it prints `readyText`. */
function spawnReady(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  readyText: string,
  onProbe?: (m: ProbeMessage) => void,
): BenchProcess {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  })
  let output = ''
  let exited = false
  const exit = new Promise<void>((resolve) =>
    child.on('exit', () => {
      exited = true
      resolve()
    }),
  )
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (output.length < 100_000) output += chunk.toString()
      if (output.includes(readyText)) resolve()
    })
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
    void exit.then(() => reject(new Error(`${name} exited before it was ready:\n${output.slice(-2000)}`)))
  })
  if (onProbe) child.on('message', (m) => onProbe(m as ProbeMessage))
  const spawned: BenchProcess = {
    child,
    ready,
    peakRssMb() {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
        const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1])
        return kb / 1024
      } catch {
        return Number.NaN
      }
    },
    async stop() {
      if (!exited) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exit
      clearTimeout(timer)
    },
  }
  running.add(spawned)
  void exit.then(() => running.delete(spawned))
  return spawned
}

/** A worker process running the bench's handlers; `env` is added to (or overrides) its environment. */
export function spawnWorker(params: {
  databaseUrl: string
  concurrency: number
  env?: Record<string, string>
  onProbe?: (m: ProbeMessage) => void
}): BenchProcess {
  const handlers = join(packageRoot(), 'dist', 'src', 'bench', 'handlers.js')
  return spawnScheduler(
    'scheduler-worker',
    ['--handlers', handlers, '--concurrency', String(params.concurrency)],
    { DATABASE_URL: params.databaseUrl, LOG_LEVEL: 'info', SCHEDULER_DB_POOL_SIZE: '10', SCHEDULER_SHUTDOWN_GRACE_MS: '1000', ...params.env },
    '"msg":"worker started"',
    params.onProbe,
  )
}

/** An API process; `ready` resolves once /healthz answers (request logs are off for speed). */
export function spawnApi(params: { databaseUrl: string; port: number }): BenchProcess {
  const p = spawnScheduler(
    'scheduler-api',
    ['--port', String(params.port), '--host', '127.0.0.1'],
    { DATABASE_URL: params.databaseUrl, LOG_LEVEL: 'warn', SCHEDULER_DB_POOL_SIZE: '10' },
    '\u0000never',
  )
  const healthy = (async () => {
    const deadline = Date.now() + 30_000
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${params.port}/healthz`)).ok) return
      } catch {
        if (Date.now() > deadline) throw new Error('API process did not answer /healthz within 30 s')
      }
      await new Promise((r) => setTimeout(r, 50))
    }
  })()
  p.ready.catch(() => undefined)
  return { ...p, ready: Promise.race([healthy, p.ready]) }
}

/** The Node.js flags a launcher's shebang (`#!/usr/bin/env -S node <flags>`) runs with. */
function launcherFlags(launcher: 'scheduler-worker' | 'scheduler-api'): string[] {
  const shebang = readFileSync(join(packageRoot(), 'bin', launcher), 'utf8').split('\n', 1)[0] ?? ''
  const flags = /^#!.*\bnode((?:\s+--\S+)*)\s*$/.exec(shebang)?.[1]
  if (flags === undefined) throw new Error(`bin/${launcher}: no node flags found in its first line: ${shebang}`)
  return flags.split(/\s+/).filter((f) => f !== '')
}

/**
 * The steady scenario's reference server (bare-http.ts), with the Node.js flags of bin/scheduler-api
 * (read from its shebang), so that the two differ only in what runs inside them.
 */
export function spawnBareHttp(params: { databaseUrl: string; port: number }): BenchProcess {
  const flags = launcherFlags('scheduler-api')
  const script = join(packageRoot(), 'dist', 'src', 'bench', 'bare-http.js')
  const p = spawnReady('bare HTTP server', process.execPath, [...flags, script, '--port', String(params.port)], {}, 'listening')
  p.child.send({ databaseUrl: params.databaseUrl })
  return p
}

/**
 * Loads the HTTP load generator of the REST scenario, `autocannon`: an optional peer dependency,
 * installed with the repository's dev dependencies but not with the package.
 */
export async function loadAutocannon(): Promise<typeof autocannon> {
  try {
    return (await import('autocannon')).default
  } catch (err: unknown) {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw err
    throw new Error('the REST submit scenario needs the optional package "autocannon" (npm install autocannon), or leave it out with --only', {
      cause: err,
    })
  }
}
