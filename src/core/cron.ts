/**
 * Cron expressions: the sole importer of cron-parser. Five fields
 * (minute hour day month weekday) or six with seconds first, evaluated in an
 * IANA time zone. DST rule (cron-parser's): a local time that does not exist on
 * the spring-forward day fires at the same wall time shifted forward by the gap
 * (02:30 → 03:30), once; a local time that occurs twice on the fall-back day
 * fires once, at its first occurrence.
 */
import { CronExpressionParser } from 'cron-parser'

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
 * Checks a cron expression. Returns an error message naming the problem, or
 * undefined when it is valid.
 */
export function cronProblem(expression: string): string | undefined {
  const fields = expression.trim().split(/\s+/)
  if (!expression.trim().startsWith('@') && (fields.length < 5 || fields.length > 6)) {
    return `cron expression "${expression}" must have 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got ${fields.length}`
  }
  try {
    CronExpressionParser.parse(expression, { tz: 'UTC', strict: false }).next()
    return undefined
  } catch (err: unknown) {
    return `cron expression "${expression}" is invalid: ${err instanceof Error ? err.message : String(err)}`
  }
}

/** The first fire time strictly after `after`, or null if there is none. */
export function cronNextFireAt(expression: string, timezone: string, after: Date): Date | null {
  try {
    return CronExpressionParser.parse(expression, { tz: timezone, currentDate: after }).next().toDate()
  } catch {
    return null
  }
}
