/**
 * The cron grammar pgsched accepts (docs/recurring-jobs.md, "Cron syntax, field by field"), checked
 * before cron-parser so that every refusal names the field and the problem. The SQL function
 * `pgsched.cron_problem` (migrations/0010_cron_validation.sql) is the same check, rule for rule and
 * message for message, so an expression submitted through SQL is refused exactly when the client
 * and the API refuse it; test/db/cron-validation.test.ts holds the two together. Only ASCII is
 * ever case-folded or taken as whitespace, so both sides agree on every input.
 * Callers: core/cron.ts (`normalize`, before cron-parser).
 */

/** The aliases accepted for a whole expression, and what they stand for. */
const ALIASES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
}

/** cron-parser refuses longer expressions; listing every value of every field needs about half. */
const MAX_EXPRESSION_CHARS = 1024

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] as const
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] as const
/** Days in each month, February with its 29th (it exists in leap years). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const

interface FieldSpec {
  name: string
  min: number
  max: number
  /** Names standing for min, min + 1, …; empty where the field takes numbers only. */
  names: readonly string[]
  /** What a value of the field may be, for messages. */
  values: string
}

const SECOND: FieldSpec = { name: 'second', min: 0, max: 59, names: [], values: '0-59' }
const FIELDS: readonly FieldSpec[] = [
  { name: 'minute', min: 0, max: 59, names: [], values: '0-59' },
  { name: 'hour', min: 0, max: 23, names: [], values: '0-23' },
  { name: 'day-of-month', min: 1, max: 31, names: [], values: '1-31' },
  { name: 'month', min: 1, max: 12, names: MONTH_NAMES, values: '1-12 or JAN-DEC' },
  { name: 'day-of-week', min: 0, max: 7, names: DAY_NAMES, values: '0-7 or SUN-SAT' },
]

const SPACE = /[ \t\n\r\f\v]+/
const TRIM = /^[ \t\n\r\f\v]+|[ \t\n\r\f\v]+$/g
const HASHED = /(^|[,/-])H(?![a-z])/i
const BAD_CHAR = /[^0-9A-Za-z*?,/#-]/u
const DAY_LAST = /^([0-7]|SUN|MON|TUE|WED|THU|FRI|SAT)L$/
const NTH_DAY = /^([0-9]+|[A-Za-z]+)#([0-9]+)$/
const ITEM = /^(?:([*?])|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:\/([0-9]+))?$/
const MONTH_NAME = /JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC/g
const DAY_NAME = /SUN|MON|TUE|WED|THU|FRI|SAT/g

const upper = (s: string): string => s.replace(/[a-z]+/g, (c) => c.toUpperCase())
const lower = (s: string): string => s.replace(/[A-Z]+/g, (c) => c.toLowerCase())

/**
 * One list item's meaning: the values it stands for (day-of-week values modulo 7) and its
 * specials (`L`, `nL` with n modulo 7), or the problem.
 */
type Item = { values: number[]; specials: string[] } | { problem: string }

/** A value as written (digits or a name) → its number, or the problem. */
function fieldValue(token: string, spec: FieldSpec, at: string): number | { problem: string } {
  if (/^[0-9]+$/.test(token)) {
    const n = Number(token)
    if (n < spec.min || n > spec.max) return { problem: `${at}value ${token} in the ${spec.name} field is out of range (${spec.min}-${spec.max})` }
    return n
  }
  const i = spec.names.indexOf(upper(token))
  if (i < 0) return { problem: `${at}"${token}" in the ${spec.name} field is not a value (${spec.values})` }
  return spec.min + i
}

function parseItem(item: string, spec: FieldSpec, itemCount: number, at: string): Item {
  const name = spec.name
  const u = upper(item)
  const dow = name === 'day-of-week'
  if (item === '') return { problem: `${at}the ${name} field has an empty list item` }
  if (name === 'day-of-month' && u === 'L') return { values: [], specials: ['L'] }
  const last = dow ? DAY_LAST.exec(u) : null
  if (last) {
    const n = fieldValue(last[1] as string, spec, at) as number
    return { values: [], specials: [`${n % 7}L`] }
  }
  if (u.includes('#')) {
    if (!dow) return { problem: `${at}"#" in the ${name} field is not supported (only the day-of-week field takes n#k)` }
    const m = NTH_DAY.exec(item)
    if (!m) return { problem: `${at}"${item}" in the day-of-week field is not n#k (a day 0-7 or SUN-SAT, then #, then 1-5)` }
    const n = fieldValue(m[1] as string, spec, at)
    if (typeof n !== 'number') return n
    const k = Number(m[2])
    if (k < 1 || k > 5) return { problem: `${at}"${item}" in the day-of-week field: k in n#k must be 1-5` }
    if (itemCount > 1) return { problem: `${at}"${item}" in the day-of-week field: n#k must be the field's only item` }
    return { values: [n % 7], specials: [`#${k}`] }
  }
  const rest = name === 'month' ? u.replace(MONTH_NAME, '') : dow ? u.replace(DAY_NAME, '') : u
  if (rest.includes('W')) return { problem: `${at}"W" in the ${name} field is not supported (nearest weekday)` }
  if (rest.includes('L')) {
    if (name === 'day-of-month') return { problem: `${at}"${item}" in the day-of-month field: L (the last day of the month) takes no number, range or step` }
    if (dow)
      return { problem: `${at}"${item}" in the day-of-week field: L takes one day before it and nothing else (5L or FRIL: the last Friday of the month)` }
    return { problem: `${at}"L" in the ${name} field is not supported (only day-of-month L and day-of-week nL)` }
  }
  const m = ITEM.exec(item)
  if (!m) return { problem: `${at}"${item}" in the ${name} field is not a value, a range a-b or a step /n` }
  const [, wildcard, from, to, step] = m
  let lo = spec.min
  let hi = spec.max
  if (wildcard === undefined) {
    const a = fieldValue(from as string, spec, at)
    if (typeof a !== 'number') return a
    const b = to === undefined ? (step === undefined ? a : spec.max) : fieldValue(to, spec, at)
    if (typeof b !== 'number') return b
    if (a > b) return { problem: `${at}range ${from}-${to} in the ${name} field starts after it ends` }
    lo = a
    hi = b
  }
  let by = 1
  if (step !== undefined) {
    by = Number(step)
    if (by === 0) return { problem: `${at}step ${step} in the ${name} field must be at least 1` }
    if (by > spec.max) return { problem: `${at}step ${step} in the ${name} field is larger than its largest value (${spec.max})` }
  }
  const values: number[] = []
  for (let v = lo; v <= hi; v += by) values.push(dow ? v % 7 : v)
  return { values, specials: [] }
}

/**
 * A field's items checked; returns the field as cron-parser should read it (upper case; when
 * items repeat a value, the sorted distinct values, because cron-parser refuses duplicates where
 * crontab ignores them), its values and specials, or the problem.
 */
function parseField(field: string, spec: FieldSpec, at: string): { text: string; values: Set<number>; specials: Set<string> } | { problem: string } {
  if (HASHED.test(field)) {
    return { problem: `${at}"H" in the ${spec.name} field is not supported (it picks a random value); name the value` }
  }
  const bad = BAD_CHAR.exec(field)
  if (bad) return { problem: `${at}character "${bad[0]}" in the ${spec.name} field is not allowed` }
  const items = field.split(',')
  const values = new Set<number>()
  const specials = new Set<string>()
  let written = 0
  for (const item of items) {
    const parsed = parseItem(item, spec, items.length, at)
    if ('problem' in parsed) return parsed
    for (const v of parsed.values) values.add(v)
    for (const s of parsed.specials) specials.add(s)
    written += parsed.values.length + parsed.specials.length
  }
  const distinct = [...[...values].sort((a, b) => a - b), ...[...specials].sort()]
  const text = written > distinct.length && items.length > 1 ? distinct.join(',') : upper(field)
  return { text, values, specials }
}

type ParsedField = { values: Set<number>; specials: Set<string> }

/** A field as the list of its values (`n#k` as itself): the same field, at most about 170 characters. */
function valuesOf(p: ParsedField): string {
  const nth = [...p.specials].find((x) => x.startsWith('#'))
  if (nth !== undefined) return `${[...p.values][0]}${nth}`
  return [...[...p.values].sort((a, b) => a - b), ...[...p.specials].sort()].join(',')
}

/**
 * Whether any day of any year matches the day fields (Vixie cron: both must match when either
 * field starts with * or ?, otherwise either may). Whether a day matches depends only on its month,
 * the month's length, the weekday of the month's first day and the day itself, and every
 * combination of those recurs (February with 28 and with 29 days), so trying each is exact.
 */
function someDayMatches(dom: ParsedField, month: ParsedField, dow: ParsedField, bothDaysMustMatch: boolean): boolean {
  const nth = [...dow.specials].find((s) => s.startsWith('#'))
  const k = nth === undefined ? 0 : Number(nth.slice(1))
  for (const m of month.values) {
    for (const length of m === 2 ? [28, 29] : [MONTH_DAYS[m - 1] as number]) {
      for (let firstWeekday = 0; firstWeekday < 7; firstWeekday++) {
        for (let day = 1; day <= length; day++) {
          const weekday = (firstWeekday + day - 1) % 7
          const domMatch = dom.values.has(day) || (dom.specials.has('L') && day === length)
          const dowMatch =
            k > 0 ? dow.values.has(weekday) && Math.ceil(day / 7) === k : dow.values.has(weekday) || (dow.specials.has(`${weekday}L`) && day + 7 > length)
          if (bothDaysMustMatch ? domMatch && dowMatch : domMatch || dowMatch) return true
        }
      }
    }
  }
  return false
}

/**
 * Checks `expression` against the grammar and returns it as cron-parser should read it: aliases
 * expanded, fields separated by one space, upper case, repeated values dropped. Or the problem,
 * a message naming the field and what is wrong.
 */
export function cronSyntaxNormalize(expression: string): { cron: string } | { problem: string } {
  const trimmed = expression.replace(TRIM, '')
  const length = [...trimmed].length
  if (length > MAX_EXPRESSION_CHARS) {
    return { problem: `cron expression is ${length} characters long; at most ${MAX_EXPRESSION_CHARS} are accepted` }
  }
  if (trimmed.startsWith('@')) {
    const cron = ALIASES[lower(trimmed)]
    if (cron === undefined) {
      return { problem: `cron alias "${trimmed}" is not supported; use one of ${Object.keys(ALIASES).join(', ')} or five fields` }
    }
    return { cron }
  }
  const fields = trimmed === '' ? [] : trimmed.split(SPACE)
  if (fields.length < 5 || fields.length > 6) {
    return {
      problem: `cron expression "${expression}" must have 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got ${fields.length}`,
    }
  }
  const specs = fields.length === 6 ? [SECOND, ...FIELDS] : FIELDS
  const at = `cron expression "${expression}": `
  const parsed = []
  for (const [i, field] of fields.entries()) {
    const p = parseField(field, specs[i] as FieldSpec, at)
    if ('problem' in p) return p
    parsed.push(p)
  }
  const [dom, month, dow] = parsed.slice(-3) as ParsedField[] as [ParsedField, ParsedField, ParsedField]
  const bothDaysMustMatch = /^[*?]/.test(fields[fields.length - 3] as string) || /^[*?]/.test(fields[fields.length - 1] as string)
  if (!someDayMatches(dom, month, dow, bothDaysMustMatch)) {
    return { problem: `cron expression "${expression}" never fires: no day matches its day-of-month, month and day-of-week fields together` }
  }
  const cron = parsed.map((p) => p.text).join(' ')
  // Listing a field's values can take an accepted expression past cron-parser's length limit (a long
  // value beside a field that repeats one): then every field is given as its values, which always fits.
  return { cron: cron.length <= MAX_EXPRESSION_CHARS ? cron : parsed.map(valuesOf).join(' ') }
}

/**
 * Checks a cron expression against the product's grammar. Returns a message naming the field and
 * the problem, or undefined when the grammar accepts it (cron-parser then evaluates it).
 */
export function cronSyntaxProblem(expression: string): string | undefined {
  const n = cronSyntaxNormalize(expression)
  return 'problem' in n ? n.problem : undefined
}
