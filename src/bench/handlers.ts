/**
 * Handlers the benchmark's worker processes load (`--handlers
 * dist/src/bench/handlers.js`). `bench.noop` does nothing; `bench.probe`
 * reports its start time (ms since the epoch, sub-millisecond) and payload to
 * the parent process over IPC, and sleeps `payload.ms` if given.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { defineHandler } from '../worker/handlers.ts'

export interface ProbeMessage {
  startedAtMs: number
  payload: unknown
}

export const benchNoop = defineHandler('bench.noop', () => null)

export const benchProbe = defineHandler('bench.probe', async (ctx) => {
  const message: ProbeMessage = { startedAtMs: performance.timeOrigin + performance.now(), payload: ctx.payload }
  process.send?.(message)
  const ms = (ctx.payload as { ms?: number } | null)?.ms
  if (ms) await sleep(ms, undefined, { signal: ctx.signal })
  return null
})
