/**
 * Start slots (start-slots.ts): each value is released once its delay has passed, never before,
 * in slot order, and slots close together share one timer instead of one each.
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { StartSlots } from '../../src/worker/start-slots.ts'

afterEach(() => vi.restoreAllMocks())

describe('start slots', () => {
  it('releases each value at or after its slot, earliest slot first, whatever the order they came in', async () => {
    const slots = new StartSlots<number>()
    const delays = [30, 5, 18, 5.5, 0.2, 12]
    const t0 = performance.now()
    const released: Array<{ i: number; at: number }> = []
    await Promise.all(delays.map((d, i) => slots.after(i, d).then((v) => released.push({ i: v, at: performance.now() - t0 }))))
    expect(released.map((r) => r.i)).toEqual([4, 1, 3, 5, 2, 0])
    for (const r of released) expect(r.at).toBeGreaterThanOrEqual(delays[r.i] as number)
    expect(slots.size).toBe(0)
  })

  it('serves many slots within a few milliseconds with a few timers, not one per value', async () => {
    const slots = new StartSlots<number>()
    const timers = vi.spyOn(globalThis, 'setTimeout')
    // a claim's 1,000 slots 3 µs apart (a rate of 300,000 per second): about 3 ms in all
    await Promise.all(Array.from({ length: 1000 }, (_, i) => slots.after(i, i * 0.003)))
    expect(timers.mock.calls.length).toBeGreaterThan(0)
    expect(timers.mock.calls.length).toBeLessThanOrEqual(10)
  })
})
