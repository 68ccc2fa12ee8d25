import { describe, expect, it } from 'vitest'
import { cronFireTimes, cronLatestFireTimes, cronNextFireAt, cronProblem } from '../../src/core/cron.ts'
import { zoneLookups } from '../../src/core/zone.ts'

/** Fire times in [from, to] as local "MM-DD HH:mm" strings of `tz`. */
function local(expr: string, tz: string, from: string, to: string): string[] {
  const out: string[] = []
  for (const f of cronFireTimes(expr, tz, new Date(new Date(from).getTime() - 1))) {
    if (f > new Date(to)) break
    out.push(f.toLocaleString('sv-SE', { timeZone: tz }).slice(5, 16))
  }
  return out
}

describe('cron fire times across daylight-saving changes', () => {
  it('fire a nonexistent spring-forward time once, shifted by the gap', () => {
    expect(local('30 2 * * *', 'America/New_York', '2030-03-09T00:00:00Z', '2030-03-12T00:00:00Z')).toEqual(['03-09 02:30', '03-10 03:30', '03-11 02:30'])
    expect(local('30 2 * * *', 'Europe/Berlin', '2030-03-30T00:00:00Z', '2030-04-02T00:00:00Z')).toEqual(['03-30 02:30', '03-31 03:30', '04-01 02:30'])
  })

  it('fire a repeated fall-back time once, at its first occurrence', () => {
    const it = cronFireTimes('30 2 * * *', 'Europe/Berlin', new Date('2030-10-26T12:00:00Z'))
    const berlin = [it.next().value, it.next().value] as Date[]
    expect(berlin.map((d) => d.toISOString())).toEqual(['2030-10-27T00:30:00.000Z', '2030-10-28T01:30:00.000Z'])
    expect(local('30 1 * * *', 'America/New_York', '2030-11-02T00:00:00Z', '2030-11-05T00:00:00Z')).toEqual(['11-02 01:30', '11-03 01:30', '11-04 01:30'])
  })

  it('follow elapsed time when the hour is a wildcard: 23 hourly runs in spring, 25 in autumn', () => {
    const count = (from: string, to: string) => local('30 * * * *', 'Europe/Berlin', from, to).length
    expect(count('2030-03-30T23:00:00Z', '2030-03-31T22:00:00Z')).toBe(23) // local 03-31 00:00–24:00
    expect(count('2030-10-26T22:00:00Z', '2030-10-27T23:00:00Z')).toBe(25) // local 10-27 00:00–24:00
  })

  it('give the same answer whenever they are asked, also from just after a change', () => {
    // cron-parser alone answers 03-11 from 03:00–03:29 EDT (losing the shifted 03:30) and a second
    // 02:30 from inside the repeated hour in Berlin.
    expect(cronNextFireAt('30 2 * * *', 'America/New_York', new Date('2030-03-10T07:10:00Z'))?.toISOString()).toBe('2030-03-10T07:30:00.000Z')
    expect(cronNextFireAt('30 2 * * *', 'Europe/Berlin', new Date('2030-10-27T01:10:00Z'))?.toISOString()).toBe('2030-10-28T01:30:00.000Z')
    expect(cronNextFireAt('30 1 * * *', 'America/New_York', new Date('2030-11-03T06:10:00Z'))?.toISOString()).toBe('2030-11-04T06:30:00.000Z')
  })
})

describe('cronLatestFireTimes', () => {
  it('returns the latest fire times before a bound, oldest first, from the forward sequence', () => {
    const got = cronLatestFireTimes('30 2 * * *', 'Europe/Berlin', new Date('2030-10-20T00:00:00Z'), new Date('2030-10-30T00:00:00Z'), 4)
    expect(got.map((d) => d.toISOString())).toEqual([
      '2030-10-26T00:30:00.000Z',
      '2030-10-27T00:30:00.000Z',
      '2030-10-28T01:30:00.000Z',
      '2030-10-29T01:30:00.000Z',
    ])
  })

  it('stops at `from` and costs about `max` steps however long ago `from` is', () => {
    const few = cronLatestFireTimes('*/10 * * * * *', 'UTC', new Date('2030-01-01T00:00:00Z'), new Date('2030-01-01T00:00:35Z'), 100)
    expect(few.map((d) => d.toISOString().slice(17, 19))).toEqual(['00', '10', '20', '30'])
    // Ten years of seconds: walking them from `from` (3 × 10^8 steps) would not end within the test's timeout.
    const many = cronLatestFireTimes('* * * * * *', 'Europe/Berlin', new Date('2020-01-01T00:00:00Z'), new Date('2030-06-01T00:00:00Z'), 50)
    expect(many).toHaveLength(50)
    expect(many[0]?.toISOString()).toBe('2030-05-31T23:59:10.000Z')
    expect(many[49]?.toISOString()).toBe('2030-05-31T23:59:59.000Z')
  })
})

/** The first `n` fire times after `after`, as ISO strings. */
function next(expr: string, tz: string, after: string, n: number): string[] {
  const out: string[] = []
  for (const f of cronFireTimes(expr, tz, new Date(after))) {
    out.push(f.toISOString().replace('.000Z', 'Z'))
    if (out.length >= n) break
  }
  return out
}

/** The same sequence, asked for one fire time at a time from the previous one (the dispatcher's way). */
function stepwise(expr: string, tz: string, after: string, n: number): string[] {
  const out: string[] = []
  let at = new Date(after)
  for (let i = 0; i < n; i++) {
    at = cronNextFireAt(expr, tz, at) as Date
    out.push(at.toISOString().replace('.000Z', 'Z'))
  }
  return out
}

// Australia/Lord_Howe shifts by 30 minutes (02:00 → 02:30 in October, 02:00 → 01:30 in April);
// Pacific/Chatham shifts at 02:45 local (02:45 → 03:45 in September, 03:45 → 02:45 in April).
describe('cron fire times in zones whose DST shift is not a whole hour on the hour', () => {
  it('*/15 in Chatham across the April change returns, firing at both occurrences of the repeated quarter hours', () => {
    // It used to return 13:00Z again and again (the worker hung).
    expect(next('*/15 * * * *', 'Pacific/Chatham', '2025-04-05T13:00:00Z', 6)).toEqual([
      '2025-04-05T13:15:00Z', // 03:00 CHADT
      '2025-04-05T13:30:00Z',
      '2025-04-05T13:45:00Z',
      '2025-04-05T14:00:00Z', // 02:45 CHAST, the second 02:45
      '2025-04-05T14:15:00Z',
      '2025-04-05T14:30:00Z',
    ])
    expect(next('*/15 * * * *', 'Pacific/Chatham', '2025-04-05T12:50:00Z', 2)).toEqual(['2025-04-05T13:00:00Z', '2025-04-05T13:15:00Z'])
  })

  it('every daily "m h * * *" schedule in Lord_Howe keeps one run per local day across both changes', () => {
    // 46 of these 96 used to end silently with next_fire_at null after the April change.
    for (let hour = 0; hour < 24; hour++) {
      for (const minute of [0, 15, 30, 45]) {
        const expr = `${minute} ${hour} * * *`
        const times = next(expr, 'Australia/Lord_Howe', '2025-04-03T00:00:00Z', 6)
        const days = times.map((t) => new Date(t).toLocaleDateString('sv-SE', { timeZone: 'Australia/Lord_Howe' }))
        expect(new Set(days).size, expr).toBe(6)
        const after = next(expr, 'Australia/Lord_Howe', '2025-10-02T00:00:00Z', 6)
        expect(new Set(after.map((t) => new Date(t).toLocaleDateString('sv-SE', { timeZone: 'Australia/Lord_Howe' }))).size, expr).toBe(6)
      }
    }
    expect(next('0 12 * * *', 'Australia/Lord_Howe', '2025-04-05T01:00:00Z', 2)).toEqual(['2025-04-06T01:30:00Z', '2025-04-07T01:30:00Z'])
  })

  it('a nonexistent time fires once, shifted by the gap (30 minutes in Lord_Howe, an hour in Chatham)', () => {
    // 02:00 on 5 October does not exist in Lord_Howe: it runs at 02:30 (+11), 15:30Z. It used to be skipped.
    expect(next('0 2 * * *', 'Australia/Lord_Howe', '2025-10-04T00:00:00Z', 2)).toEqual(['2025-10-04T15:30:00Z', '2025-10-05T15:00:00Z'])
    // 03:00 on 28 September does not exist in Chatham: it runs at 04:00 (+13:45), 14:15Z. A day used to be skipped.
    expect(next('0 3 * * *', 'Pacific/Chatham', '2025-09-27T14:00:01Z', 2)).toEqual(['2025-09-27T14:15:00Z', '2025-09-28T13:15:00Z'])
  })

  it('a time just after the gap exists and fires at itself: 02:30 in Lord_Howe on 5 October', () => {
    // It used to run at 03:30, as if the gap were an hour.
    expect(next('30 2 * * *', 'Australia/Lord_Howe', '2025-10-04T00:00:00Z', 2)).toEqual(['2025-10-04T15:30:00Z', '2025-10-05T15:30:00Z'])
  })

  it('a repeated time with a named hour fires once, at its first occurrence (03:00 in Chatham on 6 April)', () => {
    expect(next('0 3 * * *', 'Pacific/Chatham', '2025-04-05T12:00:00Z', 2)).toEqual(['2025-04-05T13:15:00Z', '2025-04-06T14:15:00Z'])
    // Asked between the two occurrences, it used to fire the second 03:00 (14:15Z) as well.
    expect(next('0 3 * * *', 'Pacific/Chatham', '2025-04-05T14:00:01Z', 1)).toEqual(['2025-04-06T14:15:00Z'])
  })

  it("the dispatcher's step-by-step sequence equals the one-pass sequence (monthly 03:38 on the 29th in Chatham keeps 2024-09-29)", () => {
    const onePass = next('38 3 29 * *', 'Pacific/Chatham', '2024-08-01T00:00:00Z', 4)
    expect(onePass).toEqual(['2024-08-28T14:53:00Z', '2024-09-28T14:53:00Z', '2024-10-28T13:53:00Z', '2024-11-28T13:53:00Z'])
    expect(stepwise('38 3 29 * *', 'Pacific/Chatham', '2024-08-01T00:00:00Z', 4)).toEqual(onePass)
    for (const [expr, tz] of [
      ['*/15 * * * *', 'Pacific/Chatham'],
      ['0 3 * * *', 'Pacific/Chatham'],
      ['*/20 1-3 * * *', 'Australia/Lord_Howe'],
    ] as const) {
      expect(stepwise(expr, tz, '2025-04-04T00:00:00Z', 40), expr).toEqual(next(expr, tz, '2025-04-04T00:00:00Z', 40))
    }
  })

  it("the day 2011-12-30 that Samoa skipped: its runs move to the next day and merge with that day's", () => {
    expect(next('0 12 * * *', 'Pacific/Apia', '2011-12-28T00:00:00Z', 4)).toEqual([
      '2011-12-28T22:00:00Z', // 28 Dec 12:00 (-10)
      '2011-12-29T22:00:00Z', // 29 Dec 12:00 (-10)
      '2011-12-30T22:00:00Z', // 31 Dec 12:00 (+14), also 30 Dec 12:00 shifted by the 24-hour gap
      '2011-12-31T22:00:00Z', // 1 Jan 12:00
    ])
  })
})

describe('bounded work', () => {
  it('a per-second schedule just after a DST change asks the zone database a bounded number of times, not once per second', () => {
    // Asked afresh from 1,000 instants in the 3 hours after the change, then for 3,600 fire times in
    // a row: the old search rescanned every second since the change (200–490 ms per call).
    const change = Date.parse('2031-03-30T01:00:00Z') // Europe/Berlin, CET → CEST
    const before = zoneLookups()
    for (let i = 0; i < 1_000; i++) {
      const after = new Date(change + i * 10_800)
      expect(cronNextFireAt('* * * * * *', 'Europe/Berlin', after)?.getTime()).toBe(Math.floor(after.getTime() / 1000) * 1000 + 1000)
    }
    const seq = cronFireTimes('* * * * * *', 'Europe/Berlin', new Date(change))
    for (let i = 1; i <= 3_600; i++) expect(seq.next().value?.getTime()).toBe(change + i * 1000)
    // A few days of daily samples around the change and one bisection (17 steps) to find it.
    expect(zoneLookups() - before).toBeLessThan(60)
  })
})

describe('day-of-month and day-of-week (Vixie cron)', () => {
  it('both must match when either field starts with * or ?', () => {
    expect(local('0 0 1-31 * */2', 'UTC', '2030-01-01T00:00:00Z', '2030-01-09T00:00:00Z')).toEqual([
      '01-01 00:00',
      '01-03 00:00',
      '01-05 00:00',
      '01-06 00:00',
      '01-08 00:00',
    ])
    expect(local('0 0 */10 * 1', 'UTC', '2030-01-01T00:00:00Z', '2030-03-01T00:00:00Z')).toEqual(['01-21 00:00', '02-11 00:00'])
    expect(local('0 0 ? * MON', 'UTC', '2030-01-01T00:00:00Z', '2030-01-15T00:00:00Z')).toEqual(['01-07 00:00', '01-14 00:00'])
  })

  it('either may match when both are restricted', () => {
    expect(local('0 0 1,15 * 1', 'UTC', '2030-01-01T00:00:00Z', '2030-01-22T00:00:00Z')).toEqual([
      '01-01 00:00',
      '01-07 00:00',
      '01-14 00:00',
      '01-15 00:00',
      '01-21 00:00',
    ])
  })

  it('L, nL and n#k', () => {
    expect(local('0 0 L * *', 'UTC', '2028-01-01T00:00:00Z', '2028-03-31T00:00:00Z')).toEqual(['01-31 00:00', '02-29 00:00', '03-31 00:00'])
    expect(local('0 0 * * 5L', 'UTC', '2030-01-01T00:00:00Z', '2030-02-28T00:00:00Z')).toEqual(['01-25 00:00', '02-22 00:00'])
    expect(local('0 0 * * 1#2', 'UTC', '2030-01-01T00:00:00Z', '2030-02-28T00:00:00Z')).toEqual(['01-14 00:00', '02-11 00:00'])
    // The fifth Monday of February: only a 29 February that is a Monday.
    expect(next('0 0 * 2 1#5', 'UTC', '2026-01-01T00:00:00Z', 2)).toEqual(['2044-02-29T00:00:00Z', '2072-02-29T00:00:00Z'])
  })
})

describe('cron syntax', () => {
  it.each([
    ['H * * * *', '"H" in the minute field is not supported'],
    ['0 H(0-5) * * *', '"H" in the hour field is not supported'],
    ['@reboot', 'cron alias "@reboot" is not supported'],
    ['*/61 * * * *', 'step 61 in the minute field is larger than its largest value (59)'],
    ['0 */24 * * *', 'step 24 in the hour field is larger than its largest value (23)'],
    ['*/60 * * * * *', 'step 60 in the second field is larger than its largest value (59)'],
  ])('refuses %s, naming the problem', (expr, problem) => {
    expect(cronProblem(expr)).toContain(problem)
  })

  it('takes Sunday written as both 0 and 7 as one day', () => {
    expect(cronProblem('0 12 * * 0,7')).toBeUndefined()
    expect(local('0 12 * * 0,7', 'UTC', '2025-01-01T00:00:00Z', '2025-01-20T00:00:00Z')).toEqual(['01-05 12:00', '01-12 12:00', '01-19 12:00'])
  })

  it('accepts the documented aliases and day names', () => {
    for (const expr of ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly', '0 0 * * MON-FRI', '0 0 1 JAN *']) {
      expect(cronProblem(expr)).toBeUndefined()
    }
    expect(local('@daily', 'UTC', '2025-01-01T00:00:00Z', '2025-01-02T00:00:00Z')).toEqual(['01-01 00:00', '01-02 00:00'])
  })
})
