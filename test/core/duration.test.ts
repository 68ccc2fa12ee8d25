import { describe, expect, it } from 'vitest'
import { DURATION_PATTERN, parseDurationMs } from '../../src/core/duration.ts'
import { parseIntervalMs } from '../../src/core/formats.ts'

describe('parseDurationMs', () => {
  it.each([
    ['10s', 10_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['2d', 172_800_000],
    ['1w', 604_800_000],
    ['500ms', 500],
    ['1.5s', 1500],
    ['1h0m30s', 3_630_000],
    ['PT10S', 10_000],
    ['PT1H30M', 5_400_000],
    ['P1D', 86_400_000],
    ['P1W', 604_800_000],
    ['PT0.5S', 500],
    ['1.001s', 1001],
    ['PT1.5000S', 1500],
    [60_000, 60_000],
  ])('reads %j as %d ms', (value, ms) => {
    expect(parseDurationMs(value)).toBe(ms)
    if (typeof value === 'string') expect(new RegExp(DURATION_PATTERN, 'u').test(value)).toBe(true)
  })

  it.each([
    '',
    'P',
    'PT',
    '10',
    '10 s',
    '1m1h',
    '5M',
    'P1M',
    'P1Y',
    '1.5',
    '-5s',
    'PT-1S',
    '1.0005s',
    'PT1.0005S',
    '0.0001s',
    1.5,
    1000.5,
    Number.NaN,
    null,
    {},
  ])('refuses %j', (value) => {
    expect(parseDurationMs(value)).toBeUndefined()
  })

  it('bounds intervals to 1 second to 366 days', () => {
    expect(parseIntervalMs('1s')).toBe(1000)
    expect(parseIntervalMs('999ms')).toBeUndefined()
    expect(parseIntervalMs('366d')).toBe(31_622_400_000)
    expect(parseIntervalMs('367d')).toBeUndefined()
  })
})
