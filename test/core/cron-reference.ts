/**
 * A brute-force reference for cron fire times, written from the documented rule alone (it imports
 * neither cron-parser nor src/): the differential test compares the engine in src/core/cron.ts with
 * it. It walks instants one step at a time (a minute; a second for six fields), asks Intl for each
 * instant's wall time in the zone, and applies the rule literally:
 * - a matching wall time seen for the first time fires at that instant; seen again (clocks turned
 *   back), it fires again only when the hour field starts with `*` (such expressions follow elapsed
 *   time);
 * - when the wall clock jumps forward by more than one step (a gap), each skipped wall time w that
 *   matches fires at prevInstant + (w − prevWall), i.e. w shifted forward by the gap's length;
 * - equal instants are one fire time.
 * Obviously correct over fast: the only shortcuts are a memo of Intl's answers per zone and deriving
 * the wall times within an hour (or a minute) from its start when its two ends show no offset change
 * (see WallClock). A walk is O(window / step); keep windows short.
 */

/** A parsed expression: for each field, which values match (index = value). */
export interface ReferenceCron {
  readonly hasSeconds: boolean
  readonly seconds: readonly boolean[]
  readonly minutes: readonly boolean[]
  readonly hours: readonly boolean[]
  readonly months: readonly boolean[]
  /** Day-of-month values 1–31, and `L`. */
  readonly dom: readonly boolean[]
  readonly domLast: boolean
  /** Weekdays 0–6 (7 folded into 0), weekdays n of `nL`, and the `n#k` item. */
  readonly dow: readonly boolean[]
  readonly dowLast: readonly boolean[]
  readonly dowNth: { readonly weekday: number; readonly k: number } | undefined
  /** The day-of-month / day-of-week field starts with `*` or `?` (then a day must match both). */
  readonly domStar: boolean
  readonly dowStar: boolean
  /** The hour field starts with `*` (or `?`): a repeated wall time fires at both occurrences. */
  readonly hourStar: boolean
}

const ALIASES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
}

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] as const
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] as const

interface FieldRange {
  readonly name: string
  readonly min: number
  readonly max: number
  /** Names for min, min+1, … */
  readonly names?: readonly string[]
}

const SECOND: FieldRange = { name: 'second', min: 0, max: 59 }
const MINUTE: FieldRange = { name: 'minute', min: 0, max: 59 }
const HOUR: FieldRange = { name: 'hour', min: 0, max: 23 }
const DOM: FieldRange = { name: 'day-of-month', min: 1, max: 31 }
const MONTH: FieldRange = { name: 'month', min: 1, max: 12, names: MONTH_NAMES }
const DOW: FieldRange = { name: 'day-of-week', min: 0, max: 7, names: DAY_NAMES }

function fail(expression: string, why: string): never {
  throw new Error(`reference cron "${expression}": ${why}`)
}

function parseValue(expression: string, text: string, range: FieldRange): number {
  let value: number
  if (/^\d+$/.test(text)) value = Number(text)
  else {
    const i = range.names?.indexOf(text.toUpperCase()) ?? -1
    if (i < 0) fail(expression, `"${text}" is not a value of the ${range.name} field`)
    value = range.min + i
  }
  if (value < range.min || value > range.max) fail(expression, `${value} is out of range for the ${range.name} field`)
  return value
}

/** Marks the values of one plain item (`*`, `?`, `v`, `a-b`, each optionally `/step`). */
function markItem(expression: string, item: string, range: FieldRange, out: boolean[]): void {
  const [base = '', stepText, extra] = item.split('/')
  if (extra !== undefined) fail(expression, `"${item}" has two steps`)
  let step = 1
  if (stepText !== undefined) {
    if (!/^\d+$/.test(stepText) || Number(stepText) < 1) fail(expression, `bad step in "${item}"`)
    step = Number(stepText)
    if (step > range.max) fail(expression, `step ${step} is larger than the ${range.name} field's largest value`)
  }
  let lo: number
  let hi: number
  if (base === '*' || base === '?') {
    lo = range.min
    hi = range.max
  } else if (base.includes('-')) {
    const [a = '', b = '', more] = base.split('-')
    if (more !== undefined) fail(expression, `bad range "${base}"`)
    lo = parseValue(expression, a, range)
    hi = parseValue(expression, b, range)
    if (lo > hi) fail(expression, `range "${base}" runs backwards`)
  } else {
    lo = parseValue(expression, base, range)
    hi = stepText === undefined ? lo : range.max // `a/n` means a-max/n
  }
  for (let v = lo; v <= hi; v += step) out[v] = true
}

function parsePlainField(expression: string, text: string, range: FieldRange): boolean[] {
  const out = new Array<boolean>(range.max + 1).fill(false)
  for (const item of text.split(',')) markItem(expression, item, range, out)
  return out
}

/** Parses an expression by the documented grammar; throws on anything else. */
export function parseReferenceCron(expression: string): ReferenceCron {
  let text = expression.trim()
  if (text.startsWith('@')) {
    const alias = ALIASES[text.toLowerCase()]
    if (alias === undefined) fail(expression, 'unknown alias')
    text = alias
  }
  const fields = text.split(/\s+/)
  if (fields.length !== 5 && fields.length !== 6) fail(expression, 'needs 5 or 6 fields')
  const hasSeconds = fields.length === 6
  const [secText, minText, hourText, domText, monText, dowText] = (hasSeconds ? fields : ['0', ...fields]) as [string, string, string, string, string, string]

  // Day of month: plain items and `L`.
  const dom = new Array<boolean>(32).fill(false)
  let domLast = false
  for (const item of domText.split(',')) {
    if (item.toUpperCase() === 'L') domLast = true
    else markItem(expression, item, DOM, dom)
  }

  // Day of week: plain items, `nL` items, or a single `n#k`.
  const dowRaw = new Array<boolean>(8).fill(false)
  const dowLast = new Array<boolean>(7).fill(false)
  let dowNth: { weekday: number; k: number } | undefined
  const dowItems = dowText.split(',')
  for (const item of dowItems) {
    const nth = /^(\w+)#(\d+)$/.exec(item)
    const last = /^(\w+)L$/i.exec(item)
    if (nth) {
      if (dowItems.length !== 1) fail(expression, '`n#k` must be the only item of the day-of-week field')
      const k = Number(nth[2])
      if (k < 1 || k > 5) fail(expression, `"${item}": k must be 1–5`)
      dowNth = { weekday: parseValue(expression, nth[1] as string, DOW) % 7, k }
    } else if (last) {
      dowLast[parseValue(expression, last[1] as string, DOW) % 7] = true
    } else markItem(expression, item, DOW, dowRaw)
  }
  const dow = dowRaw.slice(0, 7)
  if (dowRaw[7]) dow[0] = true

  const starts = (field: string) => field.startsWith('*') || field.startsWith('?')
  return {
    hasSeconds,
    seconds: parsePlainField(expression, secText, SECOND),
    minutes: parsePlainField(expression, minText, MINUTE),
    hours: parsePlainField(expression, hourText, HOUR),
    months: parsePlainField(expression, monText, MONTH),
    dom,
    domLast,
    dow,
    dowLast,
    dowNth,
    domStar: starts(domText),
    dowStar: starts(dowText),
    hourStar: starts(hourText),
  }
}

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

/** Whether the wall time `wallMs` (local date and time written as if UTC) matches. */
export function referenceMatches(cron: ReferenceCron, wallMs: number): boolean {
  // Time of day first, by arithmetic (wall times are whole seconds after 1970).
  if (!cron.seconds[Math.floor(wallMs / 1000) % 60] || !cron.minutes[Math.floor(wallMs / MINUTE_MS) % 60] || !cron.hours[Math.floor(wallMs / HOUR_MS) % 24]) {
    return false
  }
  const d = new Date(wallMs)
  const year = d.getUTCFullYear()
  const month = d.getUTCMonth() + 1
  if (!cron.months[month]) return false
  const day = d.getUTCDate()
  // Arithmetic on the local date: 1970-01-01 was a Thursday (4); day 0 of the next month is the last.
  const weekday = (((Math.floor(wallMs / DAY_MS) + 4) % 7) + 7) % 7
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate()
  const domMatch = cron.dom[day] === true || (cron.domLast && day === daysInMonth)
  const dowMatch =
    cron.dow[weekday] === true ||
    (cron.dowLast[weekday] === true && day + 7 > daysInMonth) ||
    (cron.dowNth !== undefined && cron.dowNth.weekday === weekday && Math.ceil(day / 7) === cron.dowNth.k)
  // Vixie: either field starting with `*`/`?` → both must match; both restricted → either.
  return cron.domStar || cron.dowStar ? domMatch && dowMatch : domMatch || dowMatch
}

const formatters = new Map<string, Intl.DateTimeFormat>()
const memo = new Map<string, Map<number, number>>()
/** Entries kept per zone before the memo is cleared (bounds memory over thousands of windows). */
const MEMO_MAX_ENTRIES = 400_000

/** The wall time of instant `at` (whole seconds) in `timezone`, from Intl, as local-date-as-UTC ms. */
export function intlWallTime(timezone: string, at: number): number {
  let f = formatters.get(timezone)
  if (f === undefined) {
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
  let year = 0
  let month = 0
  let day = 0
  let hour = 0
  let minute = 0
  let second = 0
  for (const part of f.formatToParts(at)) {
    if (part.type === 'year') year = Number(part.value)
    else if (part.type === 'month') month = Number(part.value)
    else if (part.type === 'day') day = Number(part.value)
    else if (part.type === 'hour') hour = Number(part.value)
    else if (part.type === 'minute') minute = Number(part.value)
    else if (part.type === 'second') second = Number(part.value)
  }
  return Date.UTC(year, month - 1, day, hour, minute, second)
}

/** intlWallTime, remembered per zone (windows of one test run overlap around the same transitions). */
function memoWallTime(timezone: string, at: number): number {
  let m = memo.get(timezone)
  if (m === undefined) {
    m = new Map()
    memo.set(timezone, m)
  }
  let w = m.get(at)
  if (w === undefined) {
    if (m.size >= MEMO_MAX_ENTRIES) m.clear()
    w = intlWallTime(timezone, at)
    m.set(at, w)
  }
  return w
}

/** `at` rounded down to a multiple of `unitMs`. */
function floorTo(at: number, unitMs: number): number {
  return at - (((at % unitMs) + unitMs) % unitMs)
}

/**
 * Wall times of whole-second instants in one zone. With `askIntlEveryStep` Intl is asked for every
 * instant. Otherwise Intl is asked at the start of the instant's hour and of the next hour: when
 * those wall times are exactly one hour apart, no offset change shows within the hour and the wall
 * time is derived from the hour's start; else the same is done at the minute's boundaries; else
 * Intl is asked for the instant itself. (This misses only an offset change undone within the same
 * hour, which no zone has; the unit test checks the shortcut against asking every step.)
 */
class WallClock {
  readonly #timezone: string
  readonly #askIntlEveryStep: boolean
  /** The last hour looked at: its start, its start's wall time, and whether it is free of changes. */
  #hourStart = Number.NaN
  #hourWall = 0
  #hourLinear = false

  constructor(timezone: string, askIntlEveryStep: boolean) {
    this.#timezone = timezone
    this.#askIntlEveryStep = askIntlEveryStep
  }

  wallAt(at: number): number {
    if (this.#askIntlEveryStep) return intlWallTime(this.#timezone, at)
    const hourStart = floorTo(at, HOUR_MS)
    if (hourStart !== this.#hourStart) {
      this.#hourStart = hourStart
      this.#hourWall = memoWallTime(this.#timezone, hourStart)
      this.#hourLinear = memoWallTime(this.#timezone, hourStart + HOUR_MS) - this.#hourWall === HOUR_MS
    }
    if (this.#hourLinear) return this.#hourWall + (at - hourStart)
    const minuteStart = floorTo(at, MINUTE_MS)
    const w0 = memoWallTime(this.#timezone, minuteStart)
    if (memoWallTime(this.#timezone, minuteStart + MINUTE_MS) - w0 === MINUTE_MS) return w0 + (at - minuteStart)
    return memoWallTime(this.#timezone, at)
  }
}

/** The least pre-roll: longer than any DST repeat or gap of an ordinary zone. */
const PREROLL_MIN_MS = 3 * HOUR_MS
/** How far back offset changes are looked for to lengthen the pre-roll (Pacific/Apia skipped 24 h). */
const PREROLL_LOOKBACK_MS = 48 * HOUR_MS

/**
 * How long before `from` the walk starts: at least 3 hours, plus the largest difference between the
 * offset at `from` and an hourly sample of the 48 hours before, so that wall times repeated or
 * skipped just before `from` (a 24-hour gap included) are known.
 */
function prerollMs(timezone: string, from: number): number {
  const at = Math.floor(from / 1000) * 1000
  const offsetAt = (t: number) => intlWallTime(timezone, t) - t
  const now = offsetAt(at)
  let largest = 0
  for (let back = HOUR_MS; back <= PREROLL_LOOKBACK_MS; back += HOUR_MS) largest = Math.max(largest, Math.abs(offsetAt(at - back) - now))
  return PREROLL_MIN_MS + largest
}

export interface ReferenceOptions {
  /** Ask Intl for every step of the walk (slow; to verify the shortcut of wallAt). */
  readonly askIntlEveryStep?: boolean
}

/**
 * All fire times f of `expression` in `timezone` with from < f ≤ to, increasing. Cost: one step per
 * minute (per second for six fields) of [from − pre-roll, to].
 */
export function referenceFireTimes(expression: string, timezone: string, from: Date, to: Date, options: ReferenceOptions = {}): Date[] {
  const cron = parseReferenceCron(expression)
  const stepMs = cron.hasSeconds ? 1000 : 60_000
  const clock = new WallClock(timezone, options.askIntlEveryStep === true)
  const fromMs = from.getTime()
  const toMs = to.getTime()
  const begin = fromMs - prerollMs(timezone, fromMs)
  const fires = new Set<number>()
  const seen = new Set<number>()
  let prevAt: number | undefined
  let prevWall = 0
  for (let at = floorTo(begin, stepMs); at <= toMs; at += stepMs) {
    const wall = clock.wallAt(at)
    if (prevAt !== undefined && wall - prevWall > stepMs) {
      // A gap: the skipped wall times do not exist; each that matches fires shifted by the gap.
      for (let skipped = prevWall + stepMs; skipped < wall; skipped += stepMs) {
        if (!seen.has(skipped) && referenceMatches(cron, skipped)) fires.add(prevAt + (skipped - prevWall))
      }
    }
    if (referenceMatches(cron, wall) && (!seen.has(wall) || cron.hourStar)) fires.add(at)
    seen.add(wall)
    prevAt = at
    prevWall = wall
  }
  return [...fires]
    .filter((f) => f > fromMs && f <= toMs)
    .sort((a, b) => a - b)
    .map((f) => new Date(f))
}
