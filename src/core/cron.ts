/**
 * Cron expressions: parsing (the sole importer of cron-parser) and fire times. Five fields
 * (minute hour day-of-month month day-of-week) or six with seconds first, evaluated in an IANA
 * time zone by the rule in docs/recurring-jobs.md:
 * - a wall time that occurs once fires then;
 * - a wall time that occurs twice (clocks turned back) fires at its first occurrence, and also at
 *   its second when the hour field starts with `*` (the expression follows elapsed time);
 * - a wall time that does not exist (clocks turned forward) fires at that wall time shifted
 *   forward by the gap, i.e. read with the offset in force before the change;
 * - equal instants are one fire time.
 * The fire times form one fixed sequence, computed by walking the zone's offset segments
 * (src/core/zone.ts) and matching wall times in each (src/core/cron-calendar.ts): the answer never
 * depends on when it is asked, and each step costs work proportional to the months, days and
 * offset changes it passes, never to the seconds elapsed.
 */
import { CronExpressionParser } from 'cron-parser'
import { compileCalendar, type CronCalendar, nextWallMatch } from './cron-calendar.ts'
import { cronSyntaxNormalize } from './cron-syntax.ts'
import { nextChange, offsetAt, previousChange } from './zone.ts'

export { isIanaTimeZone, isValidTimeZone } from './zone.ts'

/**
 * Checks a cron expression. Returns an error message naming the problem, or
 * undefined when it is valid.
 */
export function cronProblem(expression: string): string | undefined {
  const n = cronSyntaxNormalize(expression)
  if ('problem' in n) return n.problem
  let compiled: CompiledCron
  try {
    compiled = compile(expression)
  } catch (err: unknown) {
    return `cron expression "${expression}" is invalid: ${err instanceof Error ? err.message : String(err)}`
  }
  try {
    firstFireAtOrAfter(compiled, 'UTC', Date.now())
    return undefined
  } catch {
    return `cron expression "${expression}" never fires`
  }
}

/** Why fire times could not be computed (an invalid expression or zone, or no fire time within the search horizon). */
export class CronEvaluationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CronEvaluationError'
  }
}

interface CompiledCron {
  calendar: CronCalendar
  /** The hour field starts with `*`: a repeated wall time fires at both occurrences. */
  followsElapsedTime: boolean
}

const compiledCache = new Map<string, CompiledCron>()
const COMPILED_CACHE_SIZE = 1000

function startsWild(field: string | undefined): boolean {
  return field !== undefined && (field.startsWith('*') || field.startsWith('?'))
}

function compile(expression: string): CompiledCron {
  let c = compiledCache.get(expression)
  if (c) return c
  const n = cronSyntaxNormalize(expression)
  if ('problem' in n) throw new Error(n.problem)
  const f = CronExpressionParser.parse(n.cron, { tz: 'UTC', strict: false }).fields
  // Whether a field starts with `*` is read from the expression as written: cronSyntaxNormalize may list the
  // values of a field that repeats one (`*,5`).
  const written = expression.trim()
  const fields = (written.startsWith('@') ? n.cron : written).split(/\s+/)
  const at = fields.length === 6 ? 1 : 0
  c = {
    calendar: compileCalendar({
      second: at === 1 ? f.second.values : [0],
      minute: f.minute.values,
      hour: f.hour.values,
      dayOfMonth: f.dayOfMonth.values,
      month: f.month.values,
      dayOfWeek: f.dayOfWeek.values,
      nthDay: f.dayOfWeek.nthDay,
      bothDaysMustMatch: startsWild(fields[at + 2]) || startsWild(fields[at + 4]),
    }),
    followsElapsedTime: startsWild(fields[at + 1]),
  }
  if (compiledCache.size >= COMPILED_CACHE_SIZE) compiledCache.clear()
  compiledCache.set(expression, c)
  return c
}

/** Longest span looked back over for the offset change a segment starts with (the largest change on record is a day). */
const CHANGE_LOOKBACK_MS = 2 * 86_400_000
/** Offset segments walked for one fire time before giving up (about a century of twice-yearly changes). */
const MAX_SEGMENTS = 250

/**
 * The first fire time at or after `from`. Walks the zone's offset segments: in the segment holding
 * `x` (offset `o`, starting with the change at `s` from offset `before`), the candidates are the
 * first matching wall time w ≥ x + o (at w − o, unless it is the second occurrence of a wall time
 * and the expression does not follow elapsed time) and, just after a forward change, the first
 * matching wall time in the gap (at w − before). A candidate past the segment's end is not valid
 * there: the walk goes on from the next change, keeping any gap candidate found.
 */
function firstFireAtOrAfter(c: CompiledCron, timezone: string, from: number): number {
  let x = Math.ceil(from / 1000) * 1000
  let pending = Number.POSITIVE_INFINITY
  for (let segment = 0; segment < MAX_SEGMENTS; segment++) {
    const o = offsetAt(timezone, x)
    const s = previousChange(timezone, x, CHANGE_LOOKBACK_MS)
    const before = s === undefined ? o : offsetAt(timezone, s - 1)
    if (s !== undefined && before < o) {
      const w = nextWallMatch(c.calendar, x + before)
      if (w < s + o) pending = Math.min(pending, w - before)
    }
    let w = nextWallMatch(c.calendar, x + o)
    if (s !== undefined && before > o && !c.followsElapsedTime && w < s + before) w = nextWallMatch(c.calendar, s + before)
    const candidate = Math.min(w - o, pending)
    if (candidate === Number.POSITIVE_INFINITY) break
    const end = nextChange(timezone, x, candidate)
    if (end === undefined) return candidate
    x = end
  }
  throw new Error('no fire time within the search horizon')
}

/**
 * Fire times strictly after `after`, in order, without end. Throws CronEvaluationError when the
 * next fire time cannot be computed: an invalid expression or zone, or no fire time within the
 * search horizon (60 years; an expression that never fires is refused when it is submitted).
 */
export function* cronFireTimes(expression: string, timezone: string, after: Date): Generator<Date, void, undefined> {
  let compiled: CompiledCron
  try {
    compiled = compile(expression)
    offsetAt(timezone, after.getTime())
  } catch (err: unknown) {
    throw new CronEvaluationError(`cron "${expression}" in time zone "${timezone}" is invalid: ${String(err)}`, { cause: err })
  }
  let x = after.getTime() + 1
  for (;;) {
    let next: number
    try {
      next = firstFireAtOrAfter(compiled, timezone, x)
    } catch (err: unknown) {
      throw new CronEvaluationError(
        `cannot compute the fire time of cron "${expression}" in time zone "${timezone}" after ${new Date(x - 1).toISOString()}: ${String(err)}`,
        { cause: err },
      )
    }
    yield new Date(next)
    x = next + 1
  }
}

/** The first fire time strictly after `after`, or null if there is none or the schedule is invalid. */
export function cronNextFireAt(expression: string, timezone: string, after: Date): Date | null {
  try {
    const first = cronFireTimes(expression, timezone, after).next()
    return first.done ? null : first.value
  } catch {
    return null
  }
}

/**
 * The latest `max` fire times f with from ≤ f < before, oldest first. Looks back from `before`
 * over a span that grows fourfold until it holds `max` fire times or reaches `from`, so the cost
 * follows `max`, however long ago `from` is.
 */
export function cronLatestFireTimes(expression: string, timezone: string, from: Date, before: Date, max: number): Date[] {
  if (max <= 0 || from >= before) return []
  const end = before.getTime()
  for (let span = 1000 * max; ; span *= 4) {
    const start = Math.max(from.getTime(), end - span)
    const out: Date[] = []
    for (const f of cronFireTimes(expression, timezone, new Date(start - 1))) {
      if (f.getTime() >= end) break
      out.push(f)
      if (out.length > 4 * max) out.splice(0, out.length - max)
    }
    if (out.length >= max || start === from.getTime()) return out.slice(-max)
  }
}
