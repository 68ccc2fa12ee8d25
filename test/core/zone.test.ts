/**
 * Which time-zone names a submit takes (isIanaTimeZone): the IANA zones the runtime knows, and
 * none of the runtime's other names. pgsched.time_zone_known keeps the same rule; the two are
 * compared name by name in test/db/submit-job-function.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { isIanaTimeZone, isValidTimeZone } from '../../src/core/zone.ts'

/** The zones of the old `systemv` file, removed from the IANA database in 2020 and still known to ICU. */
const SYSTEMV = ['AST4', 'AST4ADT', 'CST6', 'CST6CDT', 'EST5', 'EST5EDT', 'HST10', 'MST7', 'MST7MDT', 'PST8', 'PST8PDT', 'YST9', 'YST9YDT'].map(
  (z) => `SystemV/${z}`,
)

describe('isIanaTimeZone', () => {
  it('takes Etc/GMT with a whole-hour offset from -14 to +12, written without a leading zero, in any case', () => {
    const names = ['Etc/GMT', 'Etc/GMT0', 'etc/gmt+5', 'ETC/GMT-14']
    for (let h = 0; h <= 14; h++) names.push(`Etc/GMT-${h}`)
    for (let h = 0; h <= 12; h++) names.push(`Etc/GMT+${h}`)
    expect(names.filter((tz) => !isIanaTimeZone(tz))).toEqual([])
  })

  it('refuses other names with a slash and a digit, which PostgreSQL reads as POSIX rules and the runtime does not read at all', () => {
    const names = [
      'Etc/GMT+05',
      'Etc/GMT-01',
      'Etc/GMT+13',
      'Etc/GMT+15',
      'Etc/GMT-15',
      'Etc/UTC+1',
      'Europe/Berlin1',
      'Asia/Kathmandu+5',
      'America/Foo3',
      'Foo/Bar5',
    ]
    expect(names.filter((tz) => isIanaTimeZone(tz))).toEqual([])
    expect(names.filter((tz) => isValidTimeZone(tz))).toEqual([])
  })

  it('refuses the legacy names the runtime knows that are no zones of the IANA database: SystemV/ and the names removed in 2020', () => {
    const names = [...SYSTEMV, 'US/Pacific-New', 'Canada/East-Saskatchewan', 'systemv/est5edt', 'us/pacific-new', 'CANADA/EAST-SASKATCHEWAN']
    // the runtime's zone data (ICU) takes them, and so did a submit
    expect(names.filter((tz) => !isValidTimeZone(tz))).toEqual([])
    expect(names.filter((tz) => isIanaTimeZone(tz))).toEqual([])
  })

  it('still takes the zones of the same areas', () => {
    expect(['US/Pacific', 'Canada/Saskatchewan', 'America/Regina', 'EST5EDT', 'America/Argentina/Buenos_Aires'].filter((tz) => !isIanaTimeZone(tz))).toEqual([])
  })
})
