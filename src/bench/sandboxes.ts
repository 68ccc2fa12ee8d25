/**
 * The sandbox scenarios of `scheduler bench` (opt-in: `--only sandbox`, or `burn-down-thread`,
 * `burn-down-process`): the burn-down of no-op jobs with the worker processes started with
 * SCHEDULER_SANDBOX=thread or process, paired run by run with the same burn-down in-process, to
 * show what a sandbox costs a job (a structured-clone message each way, the sandbox's own event
 * loop, for a process the IPC channel). All three run at SANDBOX_CONCURRENCY per worker process,
 * not the burn-down's 100: each slot keeps a sandbox, and 100 child processes per worker on a small
 * machine would measure their starts and scheduling more than the per-job cost. A sandbox's start
 * is measured apart (sandboxStart), outside any burn-down.
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { packageRoot } from '../lib/package-root.ts'
import { Sandbox } from '../worker/sandbox.ts'
import { processTreeCpuS } from './cpu.ts'
import type { Row } from './report.ts'
import { figure } from './stats.ts'
import type { BurnDownVariant } from './variants.ts'

export const SANDBOX_VARIANTS = ['burn-down-thread', 'burn-down-process'] as const
export type SandboxVariantName = (typeof SANDBOX_VARIANTS)[number]

/** Worker concurrency of the sandbox scenarios and of their paired in-process burn-down. */
export const SANDBOX_CONCURRENCY = 10
/** The rows of the paired in-process burn-down. */
export const SANDBOX_REFERENCE = { scenario: 'burn-down-in-process', what: 'in-process (SCHEDULER_SANDBOX=none), paired with the sandbox runs' }
/** Sandbox starts measured per mode. */
const STARTS = 5

const MODE: Record<SandboxVariantName, 'thread' | 'process'> = { 'burn-down-thread': 'thread', 'burn-down-process': 'process' }

export function sandboxVariants(names: readonly SandboxVariantName[]): BurnDownVariant[] {
  return names.map((name) => ({
    name,
    what: `every handler in a ${MODE[name]} sandbox (SCHEDULER_SANDBOX=${MODE[name]})`,
    workerEnv: { SCHEDULER_SANDBOX: MODE[name] },
  }))
}

/**
 * A sandbox's start, as the first job of each pooled sandbox pays it: STARTS sandboxes of the
 * variant's mode started one after another in this process, each loading the bench's handler
 * module, from creation until it is ready, then ended. Wall time, and CPU of this process with its
 * children (the thread's CPU counts in the process, a child process's once it has been waited for).
 */
export async function addSandboxStartRows(names: readonly SandboxVariantName[], add: (row: Row) => void): Promise<void> {
  const module = pathToFileURL(join(packageRoot(), 'dist', 'src', 'bench', 'handlers.js')).href
  for (const name of names) {
    const mode = MODE[name]
    const wall: number[] = []
    const cpu: number[] = []
    for (let k = 0; k < STARTS; k++) {
      const cpu0 = processTreeCpuS(process.pid)
      const t0 = performance.now()
      const sandbox = new Sandbox({ module, logLevel: 'warn', mode }, undefined)
      await sandbox.ready
      wall.push(performance.now() - t0)
      await sandbox.end()
      cpu.push((processTreeCpuS(process.pid) - cpu0) * 1000)
    }
    const what = `one ${mode} sandbox's start, loading the bench handlers (${STARTS} starts, apart from the burn-down)`
    add({ scenario: name, metric: `${what}: until ready`, unit: 'ms', figure: figure(wall) })
    add({ scenario: name, metric: `${what}: CPU, start to exit`, unit: 'ms', figure: figure(cpu) })
  }
}
