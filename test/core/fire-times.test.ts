import { describe, expect, it } from 'vitest'
import { applyOverlap, fireTimesAsOf, firstFireAt, planFires, type TriggerSchedule } from '../../src/core/fire-times.ts'

const T0 = Date.parse('2030-01-01T00:00:00Z')
const at = (seconds: number) => new Date(T0 + seconds * 1000)
const secs = (dates: readonly Date[]) => dates.map((d) => (d.getTime() - T0) / 1000)

const every10s = (over: Partial<TriggerSchedule> = {}): TriggerSchedule => ({
  kind: 'cron',
  cronExpression: '*/10 * * * * *',
  timezone: 'UTC',
  intervalMs: null,
  startAt: null,
  endAt: null,
  misfirePolicy: 'fire_once',
  misfireMaxRuns: 100,
  ...over,
})
const interval10s = (over: Partial<TriggerSchedule> = {}): TriggerSchedule => every10s({ kind: 'interval', cronExpression: null, intervalMs: 10_000, ...over })

describe('planFires', () => {
  it.each([
    ['cron', every10s],
    ['interval', interval10s],
  ])('fires every on-time fire time of a %s schedule and moves to the next one after now', (_kind, make) => {
    expect(planFires(make(), at(0), at(0), 5000)).toEqual({ fireAt: [at(0)], misfired: false, nextFireAt: at(10) })
    // Three fire times late by at most the threshold: all on time.
    expect(secs(planFires(make(), at(10), at(33), 5000).fireAt)).toEqual([30])
    expect(planFires(make(), at(10), at(33), 25_000)).toEqual({ fireAt: [at(10), at(20), at(30)], misfired: false, nextFireAt: at(40) })
  })

  it.each([
    ['cron', every10s],
    ['interval', interval10s],
  ])('plans the fire times of a %s schedule up to a horizon after now, and none past it', (_kind, make) => {
    expect(planFires(make(), at(10), at(12), 5000, at(35))).toEqual({ fireAt: [at(10), at(20), at(30)], misfired: false, nextFireAt: at(40) })
    // a horizon before now plans up to now
    expect(planFires(make(), at(10), at(12), 5000, at(0))).toEqual({ fireAt: [at(10)], misfired: false, nextFireAt: at(20) })
    // with missed fire times, up to now only: the misfire policy sees what it saw without a horizon
    expect(planFires(make(), at(10), at(33), 5000, at(60))).toEqual(planFires(make(), at(10), at(33), 5000))
  })

  it.each([
    ['fire_once', [60]],
    ['skip', []],
    ['fire_all', [10, 20, 30, 40, 50, 60]],
  ] as const)('after 60 s of downtime applies %s to the missed fire times', (policy, expected) => {
    for (const make of [every10s, interval10s]) {
      const plan = planFires(make({ misfirePolicy: policy }), at(10), at(67), 5000)
      expect(secs(plan.fireAt)).toEqual(expected)
      expect(plan).toMatchObject({ misfired: true, nextFireAt: at(70) })
    }
  })

  it('caps fire_all at misfireMaxRuns, keeping the latest missed fire times', () => {
    for (const make of [every10s, interval10s]) {
      expect(secs(planFires(make({ misfirePolicy: 'fire_all', misfireMaxRuns: 4 }), at(10), at(67), 5000).fireAt)).toEqual([30, 40, 50, 60])
    }
  })

  it('runs on-time fire times after missed ones, and collapses all of them into one under fire_once', () => {
    // now = 63: 10…50 are missed (older than 58), 60 is on time.
    expect(secs(planFires(every10s({ misfirePolicy: 'skip' }), at(10), at(63), 5000).fireAt)).toEqual([60])
    expect(secs(planFires(every10s({ misfirePolicy: 'fire_once' }), at(10), at(63), 5000).fireAt)).toEqual([60])
    expect(secs(planFires(every10s({ misfirePolicy: 'fire_all', misfireMaxRuns: 2 }), at(10), at(63), 5000).fireAt)).toEqual([40, 50, 60])
  })

  it('stops at endAt and reports the schedule exhausted', () => {
    const plan = planFires(every10s({ misfirePolicy: 'fire_all', endAt: at(35) }), at(10), at(67), 5000)
    expect(plan).toEqual({ fireAt: [at(10), at(20), at(30)], misfired: true, nextFireAt: null })
    expect(planFires(interval10s({ endAt: at(20) }), at(20), at(20), 5000)).toEqual({ fireAt: [at(20)], misfired: false, nextFireAt: null })
  })

  it('jumps over a long outage without walking every missed fire time', () => {
    // A month of seconds: walking them (2.6 × 10^6 cron steps) would not end within the test's timeout.
    const plan = planFires(every10s({ cronExpression: '* * * * * *', misfirePolicy: 'fire_once' }), at(0), at(30 * 86_400), 5000)
    expect(secs(plan.fireAt)).toEqual([30 * 86_400])
    expect(plan.nextFireAt).toEqual(at(30 * 86_400 + 1))
  })

  it('fires a one-time trigger once, or not at all when it was missed under skip', () => {
    const once = (policy: TriggerSchedule['misfirePolicy']) => every10s({ kind: 'once', cronExpression: null, misfirePolicy: policy })
    expect(planFires(once('fire_once'), at(10), at(10), 5000)).toEqual({ fireAt: [at(10)], misfired: false, nextFireAt: null })
    expect(planFires(once('fire_once'), at(10), at(60), 5000)).toEqual({ fireAt: [at(10)], misfired: true, nextFireAt: null })
    expect(planFires(once('skip'), at(10), at(60), 5000)).toEqual({ fireAt: [], misfired: true, nextFireAt: null })
  })
})

describe('firstFireAt', () => {
  it('is the first fire time at or after max(now, startAt)', () => {
    expect(firstFireAt(every10s(), at(3))).toEqual(at(10))
    expect(firstFireAt(every10s({ startAt: at(40) }), at(3))).toEqual(at(40))
    expect(firstFireAt(interval10s(), at(3))).toEqual(at(3))
    expect(firstFireAt(interval10s({ startAt: at(40) }), at(3))).toEqual(at(40))
    expect(firstFireAt(every10s({ endAt: at(5) }), at(3))).toBeNull()
  })
})

describe('applyOverlap', () => {
  const fires = [at(10), at(20), at(30)]
  it('allow runs every fire time', () => {
    expect(applyOverlap('allow', true, null, fires)).toEqual({ execute: fires, queuedFireAt: null, dropped: 0 })
  })

  it('skip runs the first fire time only when the job is idle', () => {
    expect(applyOverlap('skip', false, null, fires)).toEqual({ execute: [at(10)], queuedFireAt: null, dropped: 2 })
    expect(applyOverlap('skip', true, null, fires)).toEqual({ execute: [], queuedFireAt: null, dropped: 3 })
  })

  it('queue keeps one fire time waiting and releases it first once the job is idle', () => {
    expect(applyOverlap('queue', true, null, fires)).toEqual({ execute: [], queuedFireAt: at(10), dropped: 2 })
    expect(applyOverlap('queue', true, at(5), fires)).toEqual({ execute: [], queuedFireAt: at(5), dropped: 3 })
    expect(applyOverlap('queue', false, at(5), fires)).toEqual({ execute: [at(5)], queuedFireAt: at(10), dropped: 2 })
    expect(applyOverlap('queue', false, at(5), [])).toEqual({ execute: [at(5)], queuedFireAt: null, dropped: 0 })
  })
})

describe('fireTimesAsOf', () => {
  it('lists the stored next fire time and those after it while it is still to come', () => {
    expect(secs(fireTimesAsOf(every10s(), at(10), at(3), 3))).toEqual([10, 20, 30])
    // due a moment ago, not yet handled: still on time, so it runs
    expect(secs(fireTimesAsOf(every10s({ misfirePolicy: 'skip' }), at(10), at(12), 3))).toEqual([10, 20, 30])
  })

  it.each([
    ['cron', every10s],
    ['interval', interval10s],
  ])('after an outage, lists of a %s schedule what a pass would run now under each misfire policy, then the fire times to come', (_kind, make) => {
    // stored next 10 s, now 67 s (the dispatcher down for about a minute), threshold 5 s: 10 … 60 missed
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'skip' }), at(10), at(67), 3))).toEqual([70, 80, 90])
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'fire_once' }), at(10), at(67), 3))).toEqual([60, 70, 80])
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'fire_all', misfireMaxRuns: 4 }), at(10), at(67), 6))).toEqual([30, 40, 50, 60, 70, 80])
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'fire_all' }), at(10), at(67), 2))).toEqual([10, 20])
    // one within the threshold is on time under every policy
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'skip' }), at(10), at(63), 2))).toEqual([60, 70])
    expect(secs(fireTimesAsOf(make({ misfirePolicy: 'skip' }), at(10), at(63), 2, 2_000))).toEqual([70, 80])
  })

  it('lists nothing of a schedule that ended during the outage, and the stored time of one it cannot evaluate', () => {
    expect(fireTimesAsOf(every10s({ misfirePolicy: 'skip', endAt: at(50) }), at(10), at(67), 3)).toEqual([])
    expect(secs(fireTimesAsOf(every10s({ misfirePolicy: 'fire_once', endAt: at(50) }), at(10), at(67), 3))).toEqual([50])
    expect(fireTimesAsOf(every10s({ cronExpression: 'not cron', misfirePolicy: 'skip' }), at(10), at(67), 3)).toEqual([at(10)])
  })
})
