/**
 * CPU time of processes, from /proc (Linux): a worker process by its pid with its descendants (the
 * child processes of process sandboxes: those alive, and those that exited and were waited for),
 * and PostgreSQL as the sum over every `postgres` process on the machine (backends, walwriter,
 * autovacuum, …), each to the nanosecond where /proc/<pid>/schedstat is there. A meter takes
 * per-process deltas, so a backend or a child that starts during the window counts from zero. The threads of a process (thread sandboxes) count in its own figure.
 * Elsewhere the figures are NaN.
 */
import { readdirSync, readFileSync } from 'node:fs'

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100

interface Stat {
  name: string
  ppid: number
  /** utime + stime, in seconds. */
  cpuS: number
  /** cutime + cstime: the children it has waited for, in seconds. */
  childrenS: number
}

/** One process's /proc/<pid>/stat; undefined when it is gone. */
function readStat(pid: number): Stat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The name is in parentheses and may hold spaces; the fields after it are space-separated.
    const close = stat.lastIndexOf(')')
    const name = stat.slice(stat.indexOf('(') + 1, close)
    const fields = stat.slice(close + 2).split(' ')
    const ticks = (i: number) => Number(fields[i]) / TICKS_PER_S
    return { name, ppid: Number(fields[1]), cpuS: ticks(11) + ticks(12), childrenS: ticks(13) + ticks(14) }
  } catch {
    return undefined
  }
}

/** Every process on the machine now (empty without /proc). */
function allProcesses(): Map<number, Stat> {
  const out = new Map<number, Stat>()
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return out
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const s = readStat(Number(entry))
    if (s) out.set(Number(entry), s)
  }
  return out
}

/**
 * CPU seconds of `pid` and its descendants: its own, that of the children it waited for, and that of
 * each live descendant (whose exit moves its figure into its parent's children's time: the sum
 * stays). Undefined when `pid` is gone.
 */
function treeCpuS(pid: number, all: ReadonlyMap<number, Stat>): number | undefined {
  const root = all.get(pid) ?? readStat(pid)
  if (!root) return undefined
  const children = new Map<number, number[]>()
  for (const [p, s] of all) {
    const siblings = children.get(s.ppid)
    if (siblings) siblings.push(p)
    else children.set(s.ppid, [p])
  }
  let total = 0
  const stack = [pid]
  for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
    const s = p === pid ? root : all.get(p)
    if (!s) continue
    total += s.cpuS + s.childrenS
    stack.push(...(children.get(p) ?? []))
  }
  return total
}

/** CPU seconds `pid` and its descendants have used so far (see treeCpuS); NaN when gone or without /proc. */
export function processTreeCpuS(pid: number): number {
  return treeCpuS(pid, allProcesses()) ?? Number.NaN
}

/**
 * CPU seconds of a single-threaded process to the nanosecond (/proc/<pid>/schedstat's time on CPU),
 * or `fallback` (its stat figure, in 10 ms ticks) without it. A PostgreSQL backend that runs a few
 * milliseconds in a short window shows 0 or 10 ms in ticks: summed over a short run, the ticks made
 * a figure that was 0 once.
 */
function preciseCpuS(pid: number, fallback: number): number {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
    return Number.isFinite(ns) ? ns / 1e9 : fallback
  } catch {
    return fallback
  }
}

/** Each PostgreSQL process's CPU seconds (its processes have one thread each). */
function postgresOf(all: ReadonlyMap<number, Stat>): Map<number, number> {
  const out = new Map<number, number>()
  for (const [pid, s] of all) if (s.name === 'postgres') out.set(pid, preciseCpuS(pid, s.cpuS))
  return out
}

export interface CpuReading {
  /** CPU seconds of each watched process (with its descendants) since the meter started. */
  processes: Record<string, number>
  /** CPU seconds of all postgres processes since the meter started. */
  postgres: number
  /** Wall-clock seconds since the meter started. */
  elapsedS: number
}

/** Starts measuring the given processes (name → pid) and PostgreSQL; `read()` gives the CPU used since. */
export function cpuMeter(watch: Record<string, number | undefined>): { read(): CpuReading } {
  const started = performance.now()
  const at = (all: ReadonlyMap<number, Stat>) =>
    Object.fromEntries(Object.entries(watch).map(([k, pid]) => [k, pid === undefined ? undefined : treeCpuS(pid, all)]))
  const first = allProcesses()
  const baseline = at(first)
  const postgresBaseline = postgresOf(first)
  return {
    read() {
      const all = allProcesses()
      const now = at(all)
      const processes: Record<string, number> = {}
      for (const k of Object.keys(watch)) {
        const [a, b] = [baseline[k], now[k]]
        processes[k] = a === undefined || b === undefined ? Number.NaN : b - a
      }
      let postgres = 0
      const current = postgresOf(all)
      for (const [pid, cpuS] of current) postgres += cpuS - (postgresBaseline.get(pid) ?? 0)
      return { processes, postgres: current.size === 0 ? Number.NaN : postgres, elapsedS: (performance.now() - started) / 1000 }
    },
  }
}
