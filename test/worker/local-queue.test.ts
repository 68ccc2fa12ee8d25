/**
 * The local queue is pure: these tests need no database. They pin its order,
 * slot accounting, prefetch sizing and the priority fence.
 */
import { describe, expect, it } from 'vitest'
import { LocalQueue, PREFETCH_HORIZON_MS, PREFETCH_PAYLOAD_BYTES, SURPLUS_HORIZON_MS, type Queued } from '../../src/worker/local-queue.ts'

interface Item extends Queued {
  name: string
}

const item = (name: string, priority = 0, runAtMs = 0): Item => ({ name, claimed: { priority, runAtMs }, seq: -1 })

/** Takes runs for free slots until none is given. */
function startAll(q: LocalQueue<Item>): string[] {
  const names: string[] = []
  for (let next = q.next(); next !== undefined; next = q.next()) names.push(next.name)
  return names
}

describe('LocalQueue', () => {
  it('starts waiting runs by priority, then due time, then claim order', () => {
    const q = new LocalQueue<Item>({ concurrency: 10, prefetch: 0 })
    q.add([item('low', -1), item('late', 3, 200), item('early', 3, 100), item('first-tie', 0, 5)])
    q.add([item('second-tie', 0, 5)])
    expect(startAll(q)).toEqual(['early', 'late', 'first-tie', 'second-tie', 'low'])
  })

  it("keeps each fair-share claim's order: its runs go by claim time, not behind older work a later claim brings", () => {
    const q = new LocalQueue<Item>({ concurrency: 10, prefetch: 0 })
    const fair = (name: string, runAtMs: number, orderMs: number): Item => ({ name, claimed: { priority: 0, runAtMs, orderMs }, seq: -1 })
    // claim 1 (at 1000): tenant B's new work and tenant A's old; claim 2 (at 2000): more of A's old work
    q.add([fair('b', 900, 1000), fair('a1', 10, 1000)])
    q.add([fair('a2', 10, 2000), fair('a3', 10, 2000)])
    expect(startAll(q)).toEqual(['b', 'a1', 'a2', 'a3'])
  })

  it("tells how many of the next claim's runs start at once: the free slots the waiting runs leave, under a fence those above it", () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 0 })
    expect(q.startsNow()).toBe(4)
    q.add([item('a'), item('b', 1), item('c', 1)])
    expect(startAll(q)).toEqual(['b', 'c', 'a'])
    expect(q.startsNow()).toBe(1)
    q.add([item('d', 0), item('e', 9)])
    expect(q.startsNow()).toBe(0)
    q.ended(1)
    q.ended(1)
    expect(q.startsNow()).toBe(1) // of the three slots free, the two waiting take two
    expect(q.next()?.name).toBe('e')
    expect(q.startsNow()).toBe(1)
    q.announce(5) // the announced work goes before 'd': a fence
    expect(q.startsNow()).toBe(2)
  })

  it('gives out at most concurrency slots and takes a slot back when a run ends', () => {
    const q = new LocalQueue<Item>({ concurrency: 2, prefetch: 0 })
    q.add([item('a'), item('b'), item('c')])
    expect(startAll(q)).toEqual(['a', 'b'])
    expect(q.running).toBe(2)
    expect(q.waiting).toBe(1)
    q.ended(5)
    expect(startAll(q)).toEqual(['c'])
    expect(q.running).toBe(2)
  })

  it('drops a waiting run and reports whether it was waiting', () => {
    const q = new LocalQueue<Item>({ concurrency: 1, prefetch: 0 })
    const b = item('b')
    q.add([item('a'), b])
    expect(q.remove(b)).toBe(true)
    expect(q.remove(b)).toBe(false)
    expect(startAll(q)).toEqual(['a'])
  })

  it('gives up the waiting runs that would start only after the surplus horizon once one has waited that long, lowest first, down to the allowance', () => {
    const q = new LocalQueue<Item>({ concurrency: 2, prefetch: 1000 })
    q.add([item('warm')], 0)
    startAll(q)
    q.ended(0.1) // short runs: the allowance is the cap
    expect(q.prefetchAllowed()).toBe(1000)
    const names = Array.from({ length: 40 }, (_, i) => `slow-${String(i).padStart(2, '0')}`)
    q.add(
      names.map((n, i) => item(n, i === 39 ? 5 : 0, i)),
      1_000,
    )
    expect(startAll(q)).toEqual(['slow-39', 'slow-00'])
    // still short on average: 38 waiting runs start within the horizon, nothing to give up
    expect(q.takeSurplus(5_000)).toEqual([])
    // runs grow to 200 ms: the waiting runs would take far past the horizon to start
    const started: string[] = []
    for (let i = 0; i < 12; i++) {
      q.ended(200)
      started.push(...startAll(q))
    }
    // but none has waited the horizon yet: nothing goes (one slow run among short ones looks the same)
    expect(q.takeSurplus(1_000 + SURPLUS_HORIZON_MS)).toEqual([])
    const surplus = q.takeSurplus(1_001 + SURPLUS_HORIZON_MS)
    expect(surplus.length).toBeGreaterThan(0)
    expect(q.waiting).toBe(q.prefetchAllowed())
    expect(q.prefetchAllowed()).toBeLessThan(5)
    // the lowest of the buffer's order go: the latest due, never what starts next
    const kept = names.slice(1 + started.length, 1 + started.length + q.waiting)
    expect(surplus.map((r) => r.name)).toEqual(names.slice(1 + started.length + q.waiting, 39))
    expect(q.takeSurplus(10_000)).toEqual([])
    expect(startAll(q)).toEqual([])
    q.ended(200)
    expect(startAll(q)).toEqual(kept.slice(0, 1))
    // within the horizon nothing goes, however long the runs have waited
    const short = new LocalQueue<Item>({ concurrency: 10, prefetch: 0 })
    short.add([item('a')], 0)
    startAll(short)
    short.ended(SURPLUS_HORIZON_MS / 10)
    short.add(
      Array.from({ length: 10 }, (_, i) => item(`w${i}`)),
      0,
    )
    startAll(short)
    expect(short.takeSurplus(60_000)).toEqual([])
  })

  it('claims only for free slots until a run time is known, then prefetches what starts within the horizon', () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 50 })
    expect(q.prefetchAllowed()).toBe(0)
    expect(q.room()).toBe(4)
    q.add([item('a')])
    startAll(q)
    q.ended(20)
    // 4 slots × 100 ms horizon / 20 ms per run = 20 runs ahead
    expect(q.prefetchAllowed()).toBe((4 * PREFETCH_HORIZON_MS) / 20)
    expect(q.room()).toBe(4 + 20)
  })

  it('caps prefetch at its option and follows a moving average of run time', () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 50 })
    q.add([item('a')])
    startAll(q)
    q.ended(0)
    expect(q.prefetchAllowed()).toBe(50)
    for (let i = 0; i < 200; i++) {
      q.add([item('x')])
      startAll(q)
      q.ended(400)
    }
    // Converged to ~400 ms per run: 4 × 100 / 400 = 1
    expect(q.prefetchAllowed()).toBe(1)
  })

  it("holds at most PREFETCH_PAYLOAD_BYTES of payload ahead, at the claims' mean payload size", () => {
    const q = new LocalQueue<Item>({ concurrency: 10, prefetch: 1000 })
    const sized = (bytes: number): Item => ({ name: 'p', claimed: { priority: 0, runAtMs: 0, payloadBytes: bytes }, seq: -1 })
    q.add([sized(100), sized(300)])
    startAll(q)
    q.ended(0)
    q.ended(0)
    // small payloads (200 bytes on average): the cap decides
    expect(q.prefetchAllowed()).toBe(1000)
    // payloads of 1 MiB claimed from now on: the mean moves towards them and the allowance falls to
    // what 64 MiB holds at that size
    for (let i = 0; i < 200; i++) {
      q.add([sized(1024 * 1024)])
      startAll(q)
      q.ended(0)
    }
    expect(q.prefetchAllowed()).toBe(Math.floor(PREFETCH_PAYLOAD_BYTES / (1024 * 1024)))
    expect(q.room()).toBe(10 + 64)
  })

  it('never prefetches with prefetch 0', () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 0 })
    q.add([item('a')])
    startAll(q)
    q.ended(0.001)
    expect(q.prefetchAllowed()).toBe(0)
    expect(q.room()).toBe(4)
  })

  it('counts waiting and running runs against the room', () => {
    const q = new LocalQueue<Item>({ concurrency: 2, prefetch: 0 })
    q.add([item('a'), item('b'), item('c')])
    startAll(q)
    expect(q.room()).toBe(2 - 2 - 1)
  })

  it('refills in batches of half the capacity while there is a backlog, at once otherwise', () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 0 })
    expect(q.wantsClaim(true)).toBe(true) // nothing held: claim whatever the batch
    q.add([item('a'), item('b'), item('c')])
    startAll(q)
    expect(q.room()).toBe(1)
    expect(q.wantsClaim(false)).toBe(true)
    expect(q.wantsClaim(true)).toBe(false)
    q.ended(1)
    expect(q.wantsClaim(true)).toBe(true)
    q.add([item('d'), item('e')])
    startAll(q)
    expect(q.wantsClaim(false)).toBe(false) // no room
  })

  it('fences lower waiting runs when higher work is announced, until a later claim has taken it', () => {
    const q = new LocalQueue<Item>({ concurrency: 1, prefetch: 0 })
    q.add([item('busy', 0)])
    startAll(q)
    q.add([item('low-1', 0), item('low-2', 0)])
    q.announce(5)
    expect(q.fenced).toBe(true)
    q.ended(1)
    expect(startAll(q)).toEqual([]) // the freed slot waits for the announced work
    // Under the fence the claim is sized for the concurrency even with the buffer full.
    expect(q.room()).toBeLessThanOrEqual(0)
    const room = q.claimRoom()
    expect(room).toBe(1)
    const claimNo = q.claimSent()
    q.add([item('high', 5)])
    // The claim came back full and all at the fenced priority: more may be waiting.
    q.claimReturned(claimNo, [{ priority: 5 }], room)
    expect(q.fenced).toBe(true)
    expect(startAll(q)).toEqual(['high'])
    q.ended(1)
    // A claim that reaches below the fenced priority lifts it.
    q.claimReturned(q.claimSent(), [{ priority: 0 }], 1)
    expect(q.fenced).toBe(false)
    expect(startAll(q)).toEqual(['low-1'])
  })

  it('under a fence with nothing below it waiting, claims its room only: work it has no slot for is left to other workers', () => {
    const q = new LocalQueue<Item>({ concurrency: 4, prefetch: 0 })
    q.add([item('busy-1', 0), item('busy-2', 0), item('busy-3', 0)])
    startAll(q)
    q.announce(5)
    expect(q.fenced).toBe(true)
    expect(q.claimRoom()).toBe(1)
    // With a waiting run below the fence, its room too.
    q.add([item('low', 0)])
    expect(q.room()).toBe(0)
    expect(q.claimRoom()).toBe(1)
  })

  it('keeps the fence over a claim sent before the announcement, and lifts it when a later claim runs short', () => {
    const q = new LocalQueue<Item>({ concurrency: 2, prefetch: 0 })
    const before = q.claimSent()
    q.announce(3)
    q.claimReturned(before, [], 2)
    expect(q.fenced).toBe(true)
    q.claimReturned(q.claimSent(), [{ priority: 3 }], 2)
    expect(q.fenced).toBe(false)
  })

  it('ignores an announcement no better than the best waiting run', () => {
    const q = new LocalQueue<Item>({ concurrency: 1, prefetch: 0 })
    q.add([item('busy', 0)])
    startAll(q)
    q.add([item('waiting', 4)])
    q.announce(4)
    q.announce(undefined)
    expect(q.fenced).toBe(false)
    q.announce(5)
    expect(q.fenced).toBe(true)
    q.dropFence()
    expect(q.fenced).toBe(false)
  })

  it('reports the best waiting priority past the runs a scheduled start will take', () => {
    const q = new LocalQueue<Item>({ concurrency: 2, prefetch: 0 })
    q.add([item('a', 9), item('b', 7), item('c', 3)])
    startAll(q)
    expect(q.bestWaitingPriority()).toBe(3)
    q.ended(1)
    expect(q.bestWaitingPriority()).toBe(3)
    expect(q.scheduleStart()).toBe(true)
    expect(q.scheduleStart()).toBe(false)
    // One slot is free and a start is scheduled: 'c' is as good as started.
    expect(q.bestWaitingPriority()).toBeUndefined()
    q.scheduledStartRan()
    expect(q.bestWaitingPriority()).toBe(3)
  })
})
