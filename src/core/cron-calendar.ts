/**
 * Matching a cron expression against wall-clock times, with no time zone: a wall time is a
 * "naive" millisecond count (the local date and time read as if it were UTC), so calendar
 * arithmetic is Date.UTC arithmetic. `nextWallMatch` finds the first matching wall time at or
 * after a given one, field by field, in time proportional to the number of months and days it
 * skips (never to the seconds elapsed).
 */

/** Field values of a parsed expression, as cron-parser's parse gives them (plus the day rule). */
export interface CronFields {
  second: readonly number[]
  minute: readonly number[]
  hour: readonly number[]
  /** 1–31, and 'L' for the last day of the month. */
  dayOfMonth: readonly (number | 'L')[]
  /** 1–12. */
  month: readonly number[]
  /** 0–7 (0 and 7 are Sunday), and 'nL' for the last weekday n of the month. */
  dayOfWeek: readonly (number | string)[]
  /** k of `n#k` (the k-th weekday n of the month), or 0. */
  nthDay: number
  /** Day-of-month and day-of-week must both match (either field starts with `*` or `?`); otherwise either may. */
  bothDaysMustMatch: boolean
}

/** Lookup tables: for a value v, the smallest allowed value ≥ v, or -1. */
export interface CronCalendar {
  nextSecond: Int8Array
  nextMinute: Int8Array
  nextHour: Int8Array
  months: readonly boolean[]
  dom: readonly boolean[]
  lastDom: boolean
  dow: readonly boolean[]
  lastDow: readonly boolean[]
  nthDay: number
  bothDaysMustMatch: boolean
}

function nextTable(values: readonly number[], size: number): Int8Array {
  const table = new Int8Array(size + 1).fill(-1)
  const allowed = new Set(values)
  for (let v = size - 1, next = -1; v >= 0; v--) {
    if (allowed.has(v)) next = v
    table[v] = next
  }
  return table
}

export function compileCalendar(f: CronFields): CronCalendar {
  const months = Array<boolean>(13).fill(false)
  for (const m of f.month) months[m] = true
  const dom = Array<boolean>(32).fill(false)
  let lastDom = false
  for (const d of f.dayOfMonth) {
    if (d === 'L') lastDom = true
    else dom[d] = true
  }
  const dow = Array<boolean>(7).fill(false)
  const lastDow = Array<boolean>(7).fill(false)
  for (const d of f.dayOfWeek) {
    if (typeof d === 'number') dow[d % 7] = true
    else lastDow[Number.parseInt(d, 10) % 7] = true
  }
  return {
    nextSecond: nextTable(f.second, 60),
    nextMinute: nextTable(f.minute, 60),
    nextHour: nextTable(f.hour, 24),
    months,
    dom,
    lastDom,
    dow,
    lastDow,
    nthDay: f.nthDay,
    bothDaysMustMatch: f.bothDaysMustMatch,
  }
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate()
}

function dayMatches(c: CronCalendar, year: number, month: number, day: number): boolean {
  const last = daysInMonth(year, month)
  const domMatch = c.dom[day] === true || (c.lastDom && day === last)
  const weekday = new Date(Date.UTC(year, month - 1, day)).getUTCDay()
  const dowMatch =
    c.nthDay > 0 ? c.dow[weekday] === true && Math.ceil(day / 7) === c.nthDay : c.dow[weekday] === true || (c.lastDow[weekday] === true && day + 7 > last)
  return c.bothDaysMustMatch ? domMatch && dowMatch : domMatch || dowMatch
}

/** How far ahead a search looks before concluding there is no match (the longest gap between fire times of an accepted expression is about 40 years: `0 0 * 2 1#5`, a fifth Monday in February, fires in 2072 and then in 2112). */
const SEARCH_YEARS = 60

/**
 * The first wall time at or after `from` (naive ms, rounded up to the second) that matches, or
 * Infinity when none does within SEARCH_YEARS.
 */
export function nextWallMatch(c: CronCalendar, from: number): number {
  const start = new Date(Math.ceil(from / 1000) * 1000)
  let year = start.getUTCFullYear()
  let month = start.getUTCMonth() + 1
  let day = start.getUTCDate()
  let hour = start.getUTCHours()
  let minute = start.getUTCMinutes()
  let second = start.getUTCSeconds()
  const lastYear = year + SEARCH_YEARS
  const nextDay = () => {
    hour = minute = second = 0
    if (++day > daysInMonth(year, month)) {
      day = 1
      if (++month > 12) {
        month = 1
        year++
      }
    }
  }
  while (year <= lastYear) {
    if (!c.months[month]) {
      hour = minute = second = 0
      day = 1
      if (++month > 12) {
        month = 1
        year++
      }
      continue
    }
    if (!dayMatches(c, year, month, day)) {
      nextDay()
      continue
    }
    const h = c.nextHour[hour] as number
    if (h < 0) {
      nextDay()
      continue
    }
    if (h > hour) {
      hour = h
      minute = second = 0
    }
    const m = c.nextMinute[minute] as number
    if (m < 0) {
      if (++hour > 23) nextDay()
      else minute = second = 0
      continue
    }
    if (m > minute) {
      minute = m
      second = 0
    }
    const s = c.nextSecond[second] as number
    if (s < 0) {
      if (++minute > 59) {
        if (++hour > 23) nextDay()
        else minute = second = 0
      } else {
        second = 0
      }
      continue
    }
    return Date.UTC(year, month - 1, day, hour, minute, s)
  }
  return Number.POSITIVE_INFINITY
}
