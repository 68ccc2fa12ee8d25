/**
 * Background loops. A service's work is a `runOnce()`; `runLoop` repeats it
 * every `intervalMs` until the signal aborts, logging failures without
 * stopping (the next round retries). Tests call `runOnce()` directly.
 */
import type { Logger } from '../logger.ts'

/** Resolves after `ms`, or at once when `signal` aborts. Never rejects. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
  })
}

export interface RunLoopParams {
  name: string
  intervalMs: number
  signal: AbortSignal
  log: Logger
  runOnce: () => Promise<unknown>
}

export async function runLoop(params: RunLoopParams): Promise<void> {
  let failures = 0
  while (!params.signal.aborted) {
    try {
      await params.runOnce()
      failures = 0
    } catch (err: unknown) {
      failures++
      const level = failures >= 5 ? 'error' : 'warn'
      params.log[level]({ err, loop: params.name, failures }, 'loop iteration failed; retrying')
    }
    await abortableSleep(params.intervalMs, params.signal)
  }
}

/** A running loop; `stop()` aborts it and resolves when its current iteration has ended. */
export interface LoopHandle {
  stop(): Promise<void>
}

/** Starts `runLoop` with its own abort signal. */
export function startLoop(params: Omit<RunLoopParams, 'signal'>): LoopHandle {
  const controller = new AbortController()
  const loop = runLoop({ ...params, signal: controller.signal })
  return {
    async stop() {
      controller.abort()
      await loop
    },
  }
}

/** Whether `work` settled within `ms` (it goes on either way). */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const settled = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ])
  clearTimeout(timer)
  return settled
}
