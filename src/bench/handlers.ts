/**
 * Handlers the benchmark's worker processes load (`--handlers
 * dist/src/bench/handlers.js`). `bench.noop` does nothing; `bench.probe`
 * reports its start time (monotonicMs: the system's monotonic clock, which the
 * parent reads too, so the two processes' times compare exactly) and payload to
 * the parent process over IPC, and sleeps `payload.ms` if given.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { defineHandler } from '../worker/handlers.ts'

/** Milliseconds on the system-wide monotonic clock (CLOCK_MONOTONIC), shared by all processes on the machine. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}

export interface ProbeMessage {
  startedAtMs: number
  payload: unknown
}

export const benchNoop = defineHandler('bench.noop', () => null)

export const benchProbe = defineHandler('bench.probe', async (ctx) => {
  const message: ProbeMessage = { startedAtMs: monotonicMs(), payload: ctx.payload }
  process.send?.(message)
  const ms = (ctx.payload as { ms?: number } | null)?.ms
  if (ms) await sleep(ms, undefined, { signal: ctx.signal })
  return null
})
