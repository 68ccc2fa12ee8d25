/**
 * CPU time of processes, from /proc (Linux): a worker process by its pid, and PostgreSQL as the sum
 * over every `postgres` process on the machine (backends, walwriter, autovacuum, …). A meter takes
 * per-process deltas, so a backend that starts during the window counts from zero. Elsewhere the
 * figures are NaN.
 */
import { readdirSync, readFileSync } from 'node:fs'

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100

/** utime + stime of one process in seconds, with its command name; undefined when it is gone. */
function readStat(pid: number): { name: string; cpuS: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The name is in parentheses and may hold spaces; the fields after it are space-separated.
    const close = stat.lastIndexOf(')')
    const name = stat.slice(stat.indexOf('(') + 1, close)
    const fields = stat.slice(close + 2).split(' ')
    return { name, cpuS: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S }
  } catch {
    return undefined
  }
}

function postgresProcesses(): Map<number, number> {
  const out = new Map<number, number>()
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return out
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const s = readStat(Number(entry))
    if (s?.name === 'postgres') out.set(Number(entry), s.cpuS)
  }
  return out
}

export interface CpuReading {
  /** CPU seconds of each watched process since the meter started. */
  processes: Record<string, number>
  /** CPU seconds of all postgres processes since the meter started. */
  postgres: number
  /** Wall-clock seconds since the meter started. */
  elapsedS: number
}

/** Starts measuring the given processes (name → pid) and PostgreSQL; `read()` gives the CPU used since. */
export function cpuMeter(watch: Record<string, number | undefined>): { read(): CpuReading } {
  const started = performance.now()
  const startOf = (pid: number | undefined) => (pid === undefined ? undefined : readStat(pid)?.cpuS)
  const baseline = Object.fromEntries(Object.entries(watch).map(([k, pid]) => [k, startOf(pid)]))
  const postgresBaseline = postgresProcesses()
  return {
    read() {
      const processes: Record<string, number> = {}
      for (const [k, pid] of Object.entries(watch)) {
        const now = startOf(pid)
        processes[k] = now === undefined || baseline[k] === undefined ? Number.NaN : now - (baseline[k] as number)
      }
      let postgres = 0
      const current = postgresProcesses()
      for (const [pid, cpuS] of current) postgres += cpuS - (postgresBaseline.get(pid) ?? 0)
      return { processes, postgres: current.size === 0 ? Number.NaN : postgres, elapsedS: (performance.now() - started) / 1000 }
    },
  }
}
