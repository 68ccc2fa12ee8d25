/**
 * The one duration parser of every entry point (REST, the TypeScript client,
 * the CLI): a number of milliseconds, a compact duration (`10s`, `5m`,
 * `1h30m`, `500ms`, `2d`, `1w`: units in that order, each at most once) or an
 * ISO-8601 duration of fixed length (`PT10S`, `PT1H30M`, `P1D`, `P1W`,
 * `PT0.5S`). Years and months are refused: their length varies; use a cron
 * schedule for calendar intervals. SQL's `interval` input (pgsched.submit_job)
 * reads the same strings: '10s', '1h30m', 'PT10S', '60000ms'.
 */

/** ISO-8601 durations of fixed length. "P" and "PT" alone match this pattern and are refused by the parser. */
const ISO_DURATION = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/
/** Compact durations, largest unit first. The empty string matches this pattern and is refused by the parser. */
const COMPACT_DURATION = /^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$/

/**
 * The text forms as one JSON-Schema pattern (for the API schema): compact or ISO-8601. Values
 * that match it and still fail (`P`, `0s`, out of range, `1.0005s`) are refused by `intervalProblem` (formats.ts).
 */
export const DURATION_PATTERN = `^(?:${COMPACT_DURATION.source.slice(1, -1)}|${ISO_DURATION.source.slice(1, -1)})$`

/** The accepted forms, in words (error messages, API docs). */
export const DURATION_RULE = 'milliseconds, a duration such as 10s, 5m, 1h30m or 1500ms, or an ISO-8601 duration such as PT10S or P1D (no years or months)'

/** Milliseconds per unit, in the order both patterns capture them: w, d, h, m, s, then ms (compact only). */
const GROUP_UNIT_MS = [604_800_000, 86_400_000, 3_600_000, 60_000, 1000, 1] as const
/** The group of seconds, the only one that may carry a fraction. */
const SECONDS_GROUP = 4

/**
 * A duration read exactly: its whole milliseconds, and whether a fraction of a millisecond was
 * left over (`1.0005s`, `PT1.0005S`, `1000.5`). Intervals are whole milliseconds, so such a
 * value is refused rather than rounded.
 */
export interface DurationReading {
  /** The whole milliseconds (rounded down when `subMillisecond`). */
  ms: number
  subMillisecond: boolean
}

/** What a match of either pattern captures; undefined when it captured no unit (`P`, ``). */
function matchedDuration(m: RegExpExecArray): DurationReading | undefined {
  const groups = m.slice(1)
  if (groups.every((v) => v === undefined)) return undefined
  let ms = 0
  let subMillisecond = false
  for (const [i, v] of groups.entries()) {
    if (v === undefined) continue
    if (i !== SECONDS_GROUP) {
      ms += Number(v) * (GROUP_UNIT_MS[i] ?? 0)
      continue
    }
    // read as decimal digits, not as a double: 1.001 * 1000 is 1000.9999999999999
    const [whole = '', fraction = ''] = v.split('.')
    ms += Number(whole) * 1000 + Number(fraction.slice(0, 3).padEnd(3, '0'))
    subMillisecond = /[1-9]/.test(fraction.slice(3))
  }
  return { ms, subMillisecond }
}

/**
 * `value` read as a duration: an integer number of milliseconds, a compact duration or an
 * ISO-8601 duration, with any fraction of a millisecond reported (a number with a fraction too).
 * Undefined for anything else.
 */
export function readDuration(value: unknown): DurationReading | undefined {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || Math.abs(value) > Number.MAX_SAFE_INTEGER) return undefined
    return { ms: Math.floor(value), subMillisecond: !Number.isInteger(value) }
  }
  if (typeof value !== 'string') return undefined
  const compact = COMPACT_DURATION.exec(value)
  if (compact) return matchedDuration(compact)
  const iso = ISO_DURATION.exec(value)
  return iso && !value.endsWith('T') ? matchedDuration(iso) : undefined
}

/**
 * Milliseconds in `value`: an integer number of milliseconds, a compact duration or an ISO-8601
 * duration. Undefined for anything else, and for a fraction of a millisecond (see readDuration).
 */
export function parseDurationMs(value: unknown): number | undefined {
  const reading = readDuration(value)
  return reading && !reading.subMillisecond ? reading.ms : undefined
}
