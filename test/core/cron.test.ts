import { describe, expect, it } from 'vitest'
import { CronEvaluationError, cronFireTimes, cronLatestFireTimes, cronNextFireAt, cronProblem } from '../../src/core/cron.ts'

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

/**
 * Up to `n` fire times after `after`, and the error that ended the sequence early, if any.
 * Every step is bounded, so this returns (it used to loop for ever on some of the cases below).
 */
function take(expr: string, tz: string, after: string, n: number): { times: Date[]; error: unknown } {
  const times: Date[] = []
  try {
    for (const f of cronFireTimes(expr, tz, new Date(after))) {
      times.push(f)
      if (times.length >= n) break
    }
  } catch (err: unknown) {
    return { times, error: err }
  }
  return { times, error: undefined }
}

describe('cron fire times in zones whose DST shift is not a whole hour on the hour', () => {
  // Pacific/Chatham shifts at 02:45 local; Australia/Lord_Howe shifts by 30 minutes. cron-parser
  // answers some of these with the same instant again and again, or gives up at its loop limit.
  const cases: Array<[expr: string, tz: string, after: string]> = [
    ['*/15 * * * *', 'Pacific/Chatham', '2025-04-05T13:00:00Z'],
    ['*/15 * * * *', 'Pacific/Chatham', '2025-04-05T12:50:00Z'],
    ['0 12 * * *', 'Australia/Lord_Howe', '2025-04-05T01:00:00Z'],
    ['0 3 * * *', 'Pacific/Chatham', '2025-04-05T14:00:01Z'],
  ]
  it.each(cases)('%s in %s after %s: strictly later fire times, or an error that says so; never a loop, never a silent end', (expr, tz, after) => {
    const { times, error } = take(expr, tz, after, 20)
    for (const [i, f] of times.entries()) expect(f.getTime()).toBeGreaterThan(i === 0 ? new Date(after).getTime() : (times[i - 1] as Date).getTime())
    if (times.length < 20) {
      expect(error).toBeInstanceOf(CronEvaluationError)
      expect((error as Error).message).toContain(`in time zone "${tz}"`)
    }
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
