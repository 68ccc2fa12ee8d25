/**
 * Cron expressions: the sole importer of cron-parser. Five fields
 * (minute hour day month weekday) or six with seconds first, evaluated in an
 * IANA time zone. DST rule (docs/recurring-jobs.md):
 * - spring forward: a local time that does not exist fires once, at the same
 *   wall time shifted forward by the gap (02:30 → 03:30); if that is also a
 *   regular fire time, the two are one run;
 * - fall back: a local time that occurs twice fires once, at its first
 *   occurrence, when the expression names its hour; with a wildcard hour
 *   (`30 * * * *`, `*\/15 * * * *`) it fires at both (it follows elapsed time).
 * cron-parser alone forgets the shifted time when asked for the next fire time
 * from inside the gap's shadow (03:00–03:30 on that day), so every search
 * starts from before the latest DST transition when one happened recently:
 * the answer never depends on when it is asked.
 */
import { CronExpressionParser } from 'cron-parser'
import { cronSyntaxNormalize } from './cron-syntax.ts'

/** Whether `timezone` is an IANA zone name this runtime knows. */
export function isValidTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone })
    return true
  } catch {
    return false
  }
}

/**
 * An expression checked against the product's grammar (core/cron-syntax.ts, the same rules as the
 * SQL function pgsched.cron_problem) and rewritten for cron-parser: aliases expanded, upper case,
 * values listed twice kept once (`0,7` is one Sunday). Returns the expression to evaluate, or the
 * problem.
 */
function normalize(expression: string): { cron: string } | { problem: string } {
  return cronSyntaxNormalize(expression)
}

/** Parses an expression after `normalize`; throws on any problem. */
function parseCron(expression: string, options: { tz: string; currentDate: Date }) {
  const n = normalize(expression)
  if ('problem' in n) throw new Error(n.problem)
  return CronExpressionParser.parse(n.cron, { ...options, strict: false })
}

/**
 * Checks a cron expression. Returns an error message naming the problem, or
 * undefined when it is valid.
 */
export function cronProblem(expression: string): string | undefined {
  const n = normalize(expression)
  if ('problem' in n) return n.problem
  try {
    CronExpressionParser.parse(n.cron, { tz: 'UTC', strict: false }).next()
    return undefined
  } catch (err: unknown) {
    return `cron expression "${expression}" is invalid: ${err instanceof Error ? err.message : String(err)}`
  }
}

/** Longest DST shift looked back over (real zones shift by at most 2 hours). */
const DST_LOOKBACK_MS = 3 * 3_600_000

const formatters = new Map<string, Intl.DateTimeFormat>()

/** UTC offset of `timezone` at `at`, in minutes. */
function offsetMinutes(timezone: string, at: number): number {
  let f = formatters.get(timezone)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(timezone, f)
  }
  const p: Record<string, number> = {}
  for (const part of f.formatToParts(at)) if (part.type !== 'literal') p[part.type] = Number(part.value)
  const wall = Date.UTC(p.year ?? 0, (p.month ?? 1) - 1, p.day ?? 1, p.hour ?? 0, p.minute ?? 0, p.second ?? 0)
  return Math.round((wall - (at - (at % 1000))) / 60_000)
}

/** The instant of the latest offset change in (at − DST_LOOKBACK_MS, at], or undefined. */
function recentTransition(timezone: string, at: number): number | undefined {
  let lo = at - DST_LOOKBACK_MS
  let hi = at
  const before = offsetMinutes(timezone, lo)
  if (before === offsetMinutes(timezone, hi)) return undefined
  // Binary search to the millisecond (~24 steps): hi ends on the first instant with the new offset.
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2)
    if (offsetMinutes(timezone, mid) === before) lo = mid
    else hi = mid
  }
  return hi
}

/** Restarts of cron-parser in a row that may fail to move past the last fire time before giving up. */
const MAX_STALLED_RESTARTS = 3

/** Why fire times could not be computed (the library failed, or could not move forward). */
export class CronEvaluationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CronEvaluationError'
  }
}

/**
 * Fire times strictly after `after`, in order, without end. Throws CronEvaluationError when the
 * next fire time cannot be computed: an invalid expression or zone, or cron-parser failing in a
 * zone whose DST shift is not a whole hour (it can then hit its own search limit, or return the
 * same instant again). Each step is bounded: a repeated or earlier answer restarts the search one
 * second after the last fire time, and MAX_STALLED_RESTARTS of those in a row end the sequence
 * with an error, never a loop. A sequence never simply ends: an expression that could stop
 * firing is refused when it is submitted.
 */
export function* cronFireTimes(expression: string, timezone: string, after: Date): Generator<Date, void, undefined> {
  const at = after.getTime()
  const transition = timezone === 'UTC' ? undefined : recentTransition(timezone, at)
  const start = transition === undefined ? at : Math.min(at, transition - 1)
  const parse = (from: number) => {
    try {
      return parseCron(expression, { tz: timezone, currentDate: new Date(from) })
    } catch (err: unknown) {
      throw new CronEvaluationError(`cron "${expression}" in time zone "${timezone}" is invalid: ${String(err)}`, { cause: err })
    }
  }
  let it = parse(start)
  let last = Number.NEGATIVE_INFINITY
  let stalled = 0
  for (;;) {
    let next: number
    try {
      next = it.next().toDate().getTime()
    } catch (err: unknown) {
      const from = new Date(Math.max(last, start)).toISOString()
      throw new CronEvaluationError(`cannot compute the fire time of cron "${expression}" in time zone "${timezone}" after ${from}: ${String(err)}`, {
        cause: err,
      })
    }
    if (next <= last) {
      // cron-parser answered the same instant again (or an earlier one): search again past it.
      if (++stalled > MAX_STALLED_RESTARTS) {
        throw new CronEvaluationError(
          `cannot compute the fire time of cron "${expression}" in time zone "${timezone}" after ${new Date(last).toISOString()}: no progress`,
        )
      }
      it = parse(last + 1000)
      continue
    }
    stalled = 0
    last = next
    if (next > at) yield new Date(next)
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
 * The latest `max` fire times f with from ≤ f < before, oldest first, taken
 * from the forward sequence (cron-parser's backward iteration disagrees with
 * it around fall-back; it only picks where to start). Cost ~ max iterations,
 * however long ago `from` is.
 */
export function cronLatestFireTimes(expression: string, timezone: string, from: Date, before: Date, max: number): Date[] {
  if (max <= 0 || from >= before) return []
  let start = from.getTime()
  const back = parseCron(expression, { tz: timezone, currentDate: before })
  for (let i = 0; i <= max; i++) {
    let prev: number
    try {
      prev = back.prev().toDate().getTime()
    } catch {
      break
    }
    if (prev < start) break
    if (i === max) start = prev
  }
  const out: Date[] = []
  for (const f of cronFireTimes(expression, timezone, new Date(start - 1))) {
    if (f >= before) break
    out.push(f)
    if (out.length > max) out.shift()
  }
  return out
}
