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
 * that match it and still fail (`P`, `0s`, out of range) are refused by `durationProblem`.
 */
export const DURATION_PATTERN = `^(?:${COMPACT_DURATION.source.slice(1, -1)}|${ISO_DURATION.source.slice(1, -1)})$`

/** The accepted forms, in words (error messages, API docs). */
export const DURATION_RULE = 'milliseconds, a duration such as 10s, 5m, 1h30m or 1500ms, or an ISO-8601 duration such as PT10S or P1D (no years or months)'

/** Milliseconds per unit, in the order both patterns capture them: w, d, h, m, s, then ms (compact only). */
const GROUP_UNIT_MS = [604_800_000, 86_400_000, 3_600_000, 60_000, 1000, 1] as const

/** The milliseconds a match of either pattern captures; undefined when it captured no unit (`P`, ``). */
function matchedMs(m: RegExpExecArray): number | undefined {
  const groups = m.slice(1)
  if (groups.every((v) => v === undefined)) return undefined
  let ms = 0
  for (const [i, v] of groups.entries()) if (v !== undefined) ms += Number(v) * (GROUP_UNIT_MS[i] ?? 0)
  return Math.round(ms)
}

/** Milliseconds in an ISO-8601 duration, or undefined if it is not one we accept. */
export function parseIsoDurationMs(text: string): number | undefined {
  const m = ISO_DURATION.exec(text)
  if (!m || text.endsWith('T')) return undefined
  return matchedMs(m)
}

/**
 * Milliseconds in `value`: an integer number of milliseconds, a compact duration or an ISO-8601
 * duration. Undefined for anything else (fractions of a millisecond are rounded).
 */
export function parseDurationMs(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined
  if (typeof value !== 'string') return undefined
  const compact = COMPACT_DURATION.exec(value)
  return compact ? matchedMs(compact) : parseIsoDurationMs(value)
}
