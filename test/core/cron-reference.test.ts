import { describe, expect, it } from 'vitest'
import { zoneTransitions } from './cron-differential.ts'
import { parseReferenceCron, referenceFireTimes } from './cron-reference.ts'

/** Reference fire times in (from, to] as ISO strings. */
function iso(expression: string, timezone: string, from: string, to: string): string[] {
  return referenceFireTimes(expression, timezone, new Date(from), new Date(to)).map((d) => d.toISOString().replace('.000', ''))
}

/** Reference fire times in (from, to] as local "MM-DD HH:mm" strings of the zone. */
function local(expression: string, timezone: string, from: string, to: string): string[] {
  return referenceFireTimes(expression, timezone, new Date(from), new Date(to)).map((d) => d.toLocaleString('sv-SE', { timeZone: timezone }).slice(5, 16))
}

describe('the reference cron evaluator', () => {
  it('fires a nonexistent time once, shifted by the gap, and a repeated one at its first occurrence (New York, Berlin)', () => {
    expect(iso('30 2 * * *', 'America/New_York', '2030-03-09T00:00:00Z', '2030-03-12T00:00:00Z')).toEqual([
      '2030-03-09T07:30:00Z',
      '2030-03-10T07:30:00Z', // 02:30 does not exist: 03:30 EDT
      '2030-03-11T06:30:00Z',
    ])
    expect(iso('30 1 * * *', 'America/New_York', '2030-11-02T00:00:00Z', '2030-11-05T00:00:00Z')).toEqual([
      '2030-11-02T05:30:00Z',
      '2030-11-03T05:30:00Z', // 01:30 EDT; not again at 01:30 EST
      '2030-11-04T06:30:00Z',
    ])
    expect(local('30 2 * * *', 'Europe/Berlin', '2030-03-30T00:00:00Z', '2030-04-02T00:00:00Z')).toEqual(['03-30 02:30', '03-31 03:30', '04-01 02:30'])
    expect(iso('30 2 * * *', 'Europe/Berlin', '2030-10-26T12:00:00Z', '2030-10-28T12:00:00Z')).toEqual(['2030-10-27T00:30:00Z', '2030-10-28T01:30:00Z'])
  })

  it('follows elapsed time when the hour starts with *: 23 hourly runs in spring, 25 in autumn (New York)', () => {
    expect(iso('30 * * * *', 'America/New_York', '2030-03-10T05:00:00Z', '2030-03-11T04:00:00Z')).toHaveLength(23)
    expect(iso('30 * * * *', 'America/New_York', '2030-11-03T04:00:00Z', '2030-11-04T05:00:00Z')).toHaveLength(25)
    // 01:00–01:59 occurs twice: an hour field starting with * fires at both, a named hour at the first.
    const back = ['2030-11-03T04:00:00Z', '2030-11-03T09:00:00Z'] as const
    expect(local('30 */1 * * *', 'America/New_York', ...back)).toEqual(['11-03 00:30', '11-03 01:30', '11-03 01:30', '11-03 02:30', '11-03 03:30'])
    expect(local('30 0-23 * * *', 'America/New_York', ...back)).toEqual(['11-03 00:30', '11-03 01:30', '11-03 02:30', '11-03 03:30'])
  })

  it('handles the 30-minute shift of Australia/Lord_Howe (2025-10-05 02:00 → 02:30; 2025-04-06 02:00 → 01:30)', () => {
    const day = ['2025-10-04T12:00:00Z', '2025-10-05T12:00:00Z'] as const
    expect(local('30 2 * * *', 'Australia/Lord_Howe', ...day)).toEqual(['10-05 02:30'])
    expect(iso('30 2 * * *', 'Australia/Lord_Howe', ...day)).toEqual(['2025-10-04T15:30:00Z'])
    expect(local('0 2 * * *', 'Australia/Lord_Howe', ...day)).toEqual(['10-05 02:30'])
    expect(local('15 2 * * *', 'Australia/Lord_Howe', ...day)).toEqual(['10-05 02:45'])
    expect(local('*/15 2 * * *', 'Australia/Lord_Howe', ...day)).toEqual(['10-05 02:30', '10-05 02:45'])
    // Fall back: 01:30–01:59 occurs twice (+11, then +10:30).
    const back = ['2025-04-05T12:00:00Z', '2025-04-05T17:00:00Z'] as const
    expect(iso('45 1 * * *', 'Australia/Lord_Howe', ...back)).toEqual(['2025-04-05T14:45:00Z'])
    expect(iso('45 * * * *', 'Australia/Lord_Howe', ...back)).toEqual([
      '2025-04-05T12:45:00Z',
      '2025-04-05T13:45:00Z',
      '2025-04-05T14:45:00Z', // 01:45 +11
      '2025-04-05T15:15:00Z', // 01:45 +10:30
      '2025-04-05T16:15:00Z',
    ])
  })

  it('handles the change at 02:45 of Pacific/Chatham', () => {
    // 2025-04-06 03:45 CHADT (+13:45) → 02:45 CHAST (+12:45): 03:00 fires only at its first occurrence.
    expect(iso('0 3 * * *', 'Pacific/Chatham', '2025-04-05T00:00:00Z', '2025-04-07T00:00:00Z')).toEqual(['2025-04-05T13:15:00Z', '2025-04-06T14:15:00Z'])
    expect(iso('0 3 * * *', 'Pacific/Chatham', '2025-04-05T14:00:01Z', '2025-04-07T00:00:00Z')).toEqual(['2025-04-06T14:15:00Z'])
    // A wildcard hour fires at both occurrences of 02:45–03:30: every 15 minutes of elapsed time.
    expect(iso('*/15 * * * *', 'Pacific/Chatham', '2025-04-05T13:00:00Z', '2025-04-05T15:00:00Z')).toEqual([
      '2025-04-05T13:15:00Z',
      '2025-04-05T13:30:00Z',
      '2025-04-05T13:45:00Z',
      '2025-04-05T14:00:00Z',
      '2025-04-05T14:15:00Z',
      '2025-04-05T14:30:00Z',
      '2025-04-05T14:45:00Z',
      '2025-04-05T15:00:00Z',
    ])
    // 2025-09-28 02:45 CHAST → 03:45 CHADT: 03:00 does not exist and fires at 04:00 CHADT.
    expect(local('0 3 * * *', 'Pacific/Chatham', '2025-09-27T12:00:00Z', '2025-09-28T12:00:00Z')).toEqual(['09-28 04:00'])
  })

  it('fires the times of a 24-hour gap shifted by a day, merged with the day after (Pacific/Apia, 2011-12-30 skipped)', () => {
    expect(local('0 12 * * *', 'Pacific/Apia', '2011-12-29T00:00:00Z', '2011-12-31T12:00:00Z')).toEqual(['12-29 12:00', '12-31 12:00'])
    expect(local('0 9 30 12 *', 'Pacific/Apia', '2011-12-29T00:00:00Z', '2011-12-31T12:00:00Z')).toEqual(['12-31 09:00'])
  })

  it('applies the Vixie day rule: both fields when either starts with * or ?, else either', () => {
    const week = ['2030-01-01T00:00:00Z', '2030-01-08T00:00:00Z'] as const // Tue 01-01 … Tue 01-08
    expect(local('0 0 1-31 * */2', 'UTC', ...week)).toEqual(['01-03 00:00', '01-05 00:00', '01-06 00:00', '01-08 00:00'])
    expect(local('0 0 ? * MON', 'UTC', ...week)).toEqual(['01-07 00:00'])
    expect(local('0 0 1,15 * 1', 'UTC', '2029-12-31T12:00:00Z', '2030-01-31T12:00:00Z')).toEqual([
      '01-01 00:00',
      '01-07 00:00',
      '01-14 00:00',
      '01-15 00:00',
      '01-21 00:00',
      '01-28 00:00',
    ])
  })

  it('reads L, nL, n#k, names and 7 as Sunday', () => {
    expect(local('0 12 L * *', 'UTC', '2028-01-01T00:00:00Z', '2028-04-01T00:00:00Z')).toEqual(['01-31 12:00', '02-29 12:00', '03-31 12:00'])
    expect(local('0 12 * * 5L', 'UTC', '2030-01-01T00:00:00Z', '2030-03-01T00:00:00Z')).toEqual(['01-25 12:00', '02-22 12:00'])
    expect(local('0 12 * * 1#2', 'UTC', '2030-01-01T00:00:00Z', '2030-03-01T00:00:00Z')).toEqual(['01-14 12:00', '02-11 12:00'])
    expect(local('0 12 * jan-mar sun#5', 'UTC', '2030-03-01T00:00:00Z', '2030-04-01T00:00:00Z')).toEqual(['03-31 12:00'])
    expect(local('0 12 * * 7', 'UTC', '2030-01-01T00:00:00Z', '2030-01-14T00:00:00Z')).toEqual(['01-06 12:00', '01-13 12:00'])
    expect(local('@monthly', 'UTC', '2030-01-01T00:00:00Z', '2030-03-01T00:00:00Z')).toEqual(['02-01 00:00', '03-01 00:00'])
    expect(parseReferenceCron('0 0 * * 1/3').dow).toEqual([true, true, false, false, true, false, false]) // 1,4,7
    expect(() => parseReferenceCron('0 0 * * 1#2,3')).toThrow(/only item/)
    expect(() => parseReferenceCron('*/61 * * * *')).toThrow(/larger/)
  })

  it('walks six fields by the second', () => {
    // 2030-03-10 02:00 EST → 03:00 EDT: 02:00:00–02:59:59 do not exist, each fires an hour later.
    const gap = ['2030-03-10T06:58:00Z', '2030-03-10T08:00:00Z'] as const
    expect(iso('*/30 59 1,2 * * *', 'America/New_York', ...gap)).toEqual([
      '2030-03-10T06:59:00Z',
      '2030-03-10T06:59:30Z',
      '2030-03-10T07:59:00Z', // 02:59:00 shifted to 03:59:00 EDT
      '2030-03-10T07:59:30Z',
    ])
  })

  it('gives the same answers when it asks Intl at every step as with its shortcut, around every offset change', () => {
    const around = (zone: string, from: string, to: string) => zoneTransitions(zone, Date.parse(from), Date.parse(to))
    const changes = [
      ...['Australia/Lord_Howe', 'Pacific/Chatham', 'America/Santiago', 'Europe/Dublin', 'America/St_Johns'].flatMap((zone) =>
        around(zone, '2025-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
      ),
      ...around('Pacific/Apia', '2011-12-01T00:00:00Z', '2012-01-01T00:00:00Z'),
    ]
    expect(changes.length).toBeGreaterThanOrEqual(11)
    for (const { timezone, at } of changes) {
      const from = new Date(at - 3 * 3_600_000)
      const to = new Date(at + 3 * 3_600_000)
      const fast = referenceFireTimes('* * * * *', timezone, from, to)
      expect(fast).toEqual(referenceFireTimes('* * * * *', timezone, from, to, { askIntlEveryStep: true }))
    }
    for (const [expression, timezone, from, to] of [
      ['*/20 * * * * *', 'America/New_York', '2030-03-10T06:30:00Z', '2030-03-10T07:30:00Z'],
      ['10 */5 2,3 * * *', 'Pacific/Chatham', '2025-04-05T12:30:00Z', '2025-04-05T14:30:00Z'],
      ['5,35 * 1 * * *', 'Australia/Lord_Howe', '2025-04-05T14:00:00Z', '2025-04-05T15:30:00Z'],
    ] as const) {
      const fast = referenceFireTimes(expression, timezone, new Date(from), new Date(to))
      expect(fast.length).toBeGreaterThan(0)
      expect(fast).toEqual(referenceFireTimes(expression, timezone, new Date(from), new Date(to), { askIntlEveryStep: true }))
    }
  })
})
