/** The submit's string formats: instants that name a day or time that does not exist are refused, not moved. */
import { describe, expect, it } from 'vitest'
import { FORMAT_PROBLEMS, parseInstant } from '../../src/core/formats.ts'

describe('parseInstant', () => {
  it('reads instants with a time zone, leap days of leap years included', () => {
    expect(parseInstant('2030-01-31T09:00:00Z')?.toISOString()).toBe('2030-01-31T09:00:00.000Z')
    expect(parseInstant('2032-02-29T23:59:59.999+01:00')?.toISOString()).toBe('2032-02-29T22:59:59.999Z')
    expect(parseInstant('2000-02-29T00:00Z')?.toISOString()).toBe('2000-02-29T00:00:00.000Z')
    expect(parseInstant('2030-12-31T00:00:00-14:00')?.toISOString()).toBe('2030-12-31T14:00:00.000Z')
  })

  it('refuses days and times that do not exist, which Date.parse would move to another day', () => {
    for (const value of [
      '2030-02-30T00:00:00Z',
      '2031-02-29T00:00:00Z',
      '1900-02-29T00:00:00Z',
      '2030-04-31T00:00:00Z',
      '2030-13-01T00:00:00Z',
      '2030-00-10T00:00:00Z',
      '2030-01-00T00:00:00Z',
      '2030-01-01T24:00:00Z',
      '2030-01-01T12:60:00Z',
      '2030-01-01T12:00:60Z',
      '2030-01-01T12:00:00+24:00',
      '2030-01-01T12:00:00+01:60',
    ]) {
      expect(parseInstant(value), value).toBeUndefined()
      expect(FORMAT_PROBLEMS['date-time'](value, 'schedule.at')).toBe(`schedule.at ${JSON.stringify(value)} names a day or time that does not exist`)
    }
  })

  it('takes the years 0001 to 9999 in UTC only, which PostgreSQL writes back as ISO-8601 text', () => {
    expect(parseInstant('0001-01-01T00:00:00Z')?.toISOString()).toBe('0001-01-01T00:00:00.000Z')
    expect(parseInstant('9999-12-31T23:59:59.999Z')?.toISOString()).toBe('9999-12-31T23:59:59.999Z')
    expect(parseInstant('0001-01-01T00:30:00+01:00')).toBeUndefined()
    expect(parseInstant('9999-12-31T23:00:00-12:00')).toBeUndefined()
    for (const value of ['0000-01-01T00:00:00Z', '9999-12-31T23:00:00-12:00']) {
      expect(FORMAT_PROBLEMS['date-time'](value, 'schedule.at')).toBe(`schedule.at ${JSON.stringify(value)} must be within the years 0001 to 9999 (UTC)`)
    }
  })

  it('refuses other shapes with the format it expects', () => {
    expect(parseInstant('2030-01-01 12:00:00Z')).toBeUndefined()
    expect(parseInstant('2030-01-01T12:00:00')).toBeUndefined()
    expect(FORMAT_PROBLEMS['date-time']('tomorrow', 'runAt')).toBe('runAt must be an ISO-8601 instant with a time zone, such as 2030-01-31T09:00:00Z')
  })
})
