/**
 * The string formats of a submit, defined once: normalizeSubmit checks values
 * with them, and the API registers the same functions as JSON-Schema formats
 * (api/validation.ts), so the published schema (`format: cron`, …) and the
 * server agree. Each problem function words the refusal for a field
 * (`label`), or returns undefined when the value is valid.
 *   date-time         an ISO-8601 instant with a time zone (RFC 3339; seconds may be left out)
 *   cron              a cron expression (core/cron.ts)
 *   time-zone         an IANA time zone name this runtime knows
 *   pgsched-duration  a duration (core/duration.ts) from 1 second to 366 days, in whole milliseconds
 *   pgsched-job-type  a job type a submit may use: a type's shape, not starting with `pgsched.`
 */
import { cronProblem, isIanaTimeZone } from './cron.ts'
import { DURATION_PATTERN, DURATION_RULE, readDuration } from './duration.ts'
import { INTERVAL_MS, RESERVED_TYPE_PREFIX, RESERVED_TYPE_RULE, TYPE_RULE, isTypeName } from './names.ts'

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/i

/** Longest cron expression (cron-parser's own limit, and pgsched.cron_problem's). */
export const CRON_MAX_LENGTH = 1024
/** A cron expression's shape: an @alias, or 5 or 6 fields. The fields' values are checked by `cronProblem`. */
export const CRON_PATTERN = '^\\s*(?:@[A-Za-z]+|[^\\s]+(?:\\s+[^\\s]+){4,5})\\s*$'
/** A time zone name's shape (Europe/Berlin, UTC, Etc/GMT+5); whether the zone exists is checked by `isIanaTimeZone`. */
export const TIME_ZONE_PATTERN = '^[A-Za-z][A-Za-z0-9_+/-]{0,63}$'
export { DURATION_PATTERN }

/**
 * The instants pgsched takes: years 0001 to 9999 in UTC. Outside them, PostgreSQL writes a
 * timestamp as text (a year before 1 with BC, one after 9999 with five digits) that no ISO-8601
 * reader takes back, so a job holding one could not be shown.
 */
export const INSTANT_RANGE = { min: Date.parse('0001-01-01T00:00:00Z'), max: Date.parse('9999-12-31T23:59:59.999Z') } as const
/** The range of instants, in words. */
export const INSTANT_RANGE_RULE = 'within the years 0001 to 9999 (UTC)'

/** Whether `date` is a valid instant within INSTANT_RANGE. */
export function instantInRange(date: Date): boolean {
  const ms = date.getTime()
  return ms >= INSTANT_RANGE.min && ms <= INSTANT_RANGE.max
}

/**
 * The instant `value` names, to the millisecond (`rounding` a finer fraction down, or up), or
 * undefined when it is not an ISO-8601 instant with a time zone,
 * names a day or time that does not exist (2031-02-29, 2030-04-31, 24:00, 12:60), which Date.parse
 * would move to another day, or lies outside INSTANT_RANGE (0000-01-01, or 9999-12-31T23:00-12:00).
 */
export function parseInstant(value: string, rounding: 'down' | 'up' = 'down'): Date | undefined {
  const m = ISO_INSTANT.exec(value)
  if (!m || !fieldsExist(m)) return undefined
  // Date keeps milliseconds: a finer fraction is cut off, or, rounding up, taken to the next millisecond
  // (a start that must not come early: startAt, an `at`)
  const finer = rounding === 'up' && /\.\d{3}\d*[1-9]\d*(?:Z|[+-])/i.test(value) ? 1 : 0
  const date = new Date(Date.parse(value) + finer)
  return instantInRange(date) ? date : undefined
}

/**
 * Why `value` is not an instant parseInstant takes with `rounding`, for a field named `label`
 * (undefined: it is one).
 */
export function instantProblem(value: string, label: string, rounding: 'down' | 'up' = 'down'): string | undefined {
  if (parseInstant(value, rounding)) return undefined
  const m = ISO_INSTANT.exec(value)
  if (!m) return `${label} must be an ISO-8601 instant with a time zone, such as 2030-01-31T09:00:00Z`
  if (!fieldsExist(m)) return `${label} ${JSON.stringify(value)} names a day or time that does not exist`
  if (rounding === 'up' && parseInstant(value, 'down')) {
    // within the range to the millisecond, but a start is taken up to the next one, which is past it
    return `${label} ${JSON.stringify(value)} rounds up to the next millisecond, past the last instant taken (${new Date(INSTANT_RANGE.max).toISOString()})`
  }
  return `${label} ${JSON.stringify(value)} must be ${INSTANT_RANGE_RULE}`
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const

/** Whether the date, time and offset fields of an ISO_INSTANT match name a real day and time of day. */
function fieldsExist(m: RegExpExecArray): boolean {
  const n = (group: number): number => Number(m[group] ?? 0)
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = [n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8)]
  if (month < 1 || month > 12 || day < 1) return false
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  if (day > (month === 2 ? (leap ? 29 : 28) : (DAYS_IN_MONTH[month - 1] ?? 31))) return false
  return hour <= 23 && minute <= 59 && second <= 59 && offsetHours <= 23 && offsetMinutes <= 59
}

/** The range of a recurring interval, in words. */
export const INTERVAL_RULE = `${DURATION_RULE}, from 1 second to 366 days`

/**
 * Why `value` cannot be an `{every}` interval, for a field named `label` (undefined when it can): not
 * a duration in INTERVAL_MS, or one with a fraction of a millisecond (`1.0005s`, `1000.5`), which
 * is refused rather than rounded: intervals are whole milliseconds.
 */
export function intervalProblem(value: unknown, label: string): string | undefined {
  const reading = readDuration(value)
  // in range with its fraction: at least the minimum, and not past the maximum by a fraction
  const inRange =
    reading !== undefined && reading.ms >= INTERVAL_MS.min && (reading.ms < INTERVAL_MS.max || (reading.ms === INTERVAL_MS.max && !reading.subMillisecond))
  if (!inRange) return `${label} must be ${INTERVAL_RULE}`
  if (reading.subMillisecond) return `${label} must be a whole number of milliseconds (intervals are whole milliseconds), got ${JSON.stringify(value)}`
  return undefined
}

/** Milliseconds of an `{every}` interval, or undefined when intervalProblem refuses it. */
export function parseIntervalMs(value: unknown): number | undefined {
  return intervalProblem(value, '') === undefined ? readDuration(value)?.ms : undefined
}

/** Why `value` cannot be the type of a submitted job (undefined when it can). */
export function submitTypeProblem(value: unknown, label: string): string | undefined {
  if (!isTypeName(value)) return `${label} must be ${TYPE_RULE}`
  return value.startsWith(RESERVED_TYPE_PREFIX) ? `${label} must ${RESERVED_TYPE_RULE}` : undefined
}

export type FormatName = 'date-time' | 'cron' | 'time-zone' | 'pgsched-duration' | 'pgsched-job-type'

/** Each format's check: the refusal for a field named `label`, or undefined when `value` is valid. */
export const FORMAT_PROBLEMS: Record<FormatName, (value: string, label: string) => string | undefined> = {
  'date-time': (value, label) => instantProblem(value, label),
  cron: (value) => cronProblem(value),
  'time-zone': (value, label) =>
    isIanaTimeZone(value)
      ? undefined
      : `${label} ${JSON.stringify(value)} is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted`,
  'pgsched-duration': (value, label) => intervalProblem(value, label),
  'pgsched-job-type': (value, label) => submitTypeProblem(value, label),
}
