/**
 * The differential harness for cron fire times: seeded random expressions from the documented
 * grammar, evaluated in zones with unusual daylight-saving rules at random instants and around every
 * UTC-offset change, compared between an engine (`cronFireTimes` of src/core/cron.ts, passed in) and
 * the brute-force reference (cron-reference.ts). For each case it also asks the engine again from
 * some of its own fire times (the dispatcher asks from each fire time: the answer must not depend on
 * when it is asked) and times every engine call. Used by cron-differential.test.ts (npm test) and
 * cron-differential.system.test.ts (the longer form).
 */
import { seededRandom } from '../../src/lib/seeded-random.ts'
import { intlWallTime, parseReferenceCron, referenceFireTimes, referenceMatches } from './cron-reference.ts'

/** The engine under test: fire times strictly after `after`, increasing, endless. */
export type FireTimesEngine = (expression: string, timezone: string, after: Date) => Generator<Date, void, undefined>

/** Helpers over one PRNG stream. */
export class Random {
  readonly #next: () => number
  constructor(seed: number) {
    this.#next = seededRandom(seed)
  }
  /** Uniform in [0, 1). */
  float(): number {
    return this.#next()
  }
  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.#next() * (hi - lo + 1))
  }
  chance(p: number): boolean {
    return this.#next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#next() * items.length)] as T
  }
  /** One of `choices`, drawn with probability proportional to its weight. */
  weighted<T>(choices: readonly (readonly [number, () => T])[]): T {
    const total = choices.reduce((s, [w]) => s + w, 0)
    let x = this.#next() * total
    for (const [w, make] of choices) {
      x -= w
      if (x < 0) return make()
    }
    return (choices[choices.length - 1] as readonly [number, () => T])[1]()
  }
}

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] as const
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] as const

/** A name as a user might write it: upper, lower or capitalised. */
function spell(r: Random, name: string): string {
  return r.weighted([
    [2, () => name],
    [1, () => name.toLowerCase()],
    [1, () => name.charAt(0) + name.slice(1).toLowerCase()],
  ])
}

/** `a-b` with lo ≤ a ≤ b ≤ hi. */
function range(r: Random, lo: number, hi: number): [number, number] {
  const a = r.int(lo, hi)
  return [a, r.int(a, hi)]
}

/** 2–4 distinct increasing values in [lo, hi]. */
function list(r: Random, lo: number, hi: number): number[] {
  const values = new Set<number>()
  const n = r.int(2, 4)
  while (values.size < n) values.add(r.int(lo, hi))
  return [...values].sort((a, b) => a - b)
}

/** Second or minute field (0–59). */
function sixtyField(r: Random, common: readonly string[]): string {
  return r.weighted([
    [3, () => r.pick(common)],
    [3, () => `*/${r.pick([1, 2, 5, 7, 10, 15, 20, 30, 45])}`],
    [2, () => String(r.int(0, 59))],
    [1, () => range(r, 0, 59).join('-')],
    [1, () => `${range(r, 0, 59).join('-')}/${r.int(1, 20)}`],
    [2, () => list(r, 0, 59).join(',')],
    [1, () => `${r.int(0, 59)}/${r.int(1, 30)}`],
    [1, () => '*'],
  ])
}

function hourField(r: Random): string {
  return r.weighted([
    [2, () => '*'],
    [2, () => `*/${r.pick([2, 3, 4, 5, 6, 7, 12])}`],
    [3, () => String(r.pick([0, 1, 2, 3, 4]))], // the hours DST changes touch
    [1, () => String(r.int(0, 23))],
    [1, () => range(r, 0, 5).join('-')],
    [0.5, () => range(r, 0, 23).join('-')],
    [2, () => list(r, 0, 5).join(',')],
    [0.5, () => list(r, 0, 23).join(',')],
    [1, () => `${r.int(0, 5)}/${r.int(1, 12)}`],
    [1, () => `${range(r, 0, 12).join('-')}/${r.int(1, 6)}`],
  ])
}

function dayOfMonthField(r: Random): string {
  return r.weighted([
    [10, () => '*'],
    [1, () => '?'],
    [1, () => String(r.int(1, 31))],
    [1, () => range(r, 1, 31).join('-')],
    [0.5, () => '1-31'],
    [1, () => list(r, 1, 31).join(',')],
    [1, () => 'L'],
    [0.5, () => `${r.int(1, 28)},L`],
    [0.5, () => `*/${r.int(2, 10)}`],
    [0.5, () => `${r.int(1, 10)}/${r.int(2, 10)}`],
  ])
}

function monthField(r: Random): string {
  return r.weighted([
    [12, () => '*'],
    [1, () => String(r.int(1, 12))],
    [1, () => spell(r, r.pick(MONTH_NAMES))],
    [
      1,
      () => {
        const [a, b] = range(r, 1, 12)
        return r.chance(0.5) ? `${a}-${b}` : `${spell(r, MONTH_NAMES[a - 1] as string)}-${spell(r, MONTH_NAMES[b - 1] as string)}`
      },
    ],
    [1, () => list(r, 1, 12).join(',')],
    [0.5, () => `*/${r.int(2, 6)}`],
  ])
}

function dayOfWeekField(r: Random): string {
  return r.weighted([
    [10, () => '*'],
    [1, () => '?'],
    [1, () => String(r.int(0, 7))],
    [1, () => spell(r, r.pick(DAY_NAMES))],
    [1, () => r.pick(['1-5', 'MON-FRI', 'mon-fri', '0-6', '1-7', '5-7', 'SAT-SAT'])],
    [1, () => r.pick(['0,6', 'SAT,SUN', '1,3,5', '0,7', '2,4', 'sun,wed'])],
    [1, () => `*/${r.int(2, 4)}`],
    [1, () => `${r.int(0, 7)}L`],
    [1, () => `${r.int(0, 7)}#${r.int(1, 5)}`],
    [0.5, () => `${r.int(0, 6)},${r.int(0, 7)}L`],
    [0.5, () => `${r.int(0, 6)}/${r.int(2, 3)}`],
  ])
}

/** Expressions a user writes often, and the anchors of the rule (DST hours, the Vixie examples, aliases). */
const FIXED_EXPRESSIONS = [
  '0 2 * * *',
  '30 2 * * *',
  '0 3 * * *',
  '45 2 * * *',
  '15 2 * * *',
  '0 1 * * *',
  '30 1 * * *',
  '0 0 * * *',
  '30 3 * * *',
  '0 2 * * 0',
  '0 2 1 * *',
  '0 0 1-31 * */2',
  '0 0 1,15 * 1',
  '*/15 * * * *',
  '30 * * * *',
  '@daily',
  '@midnight',
  '@hourly',
  '@weekly',
  '@monthly',
  '@yearly',
  '@annually',
] as const

/**
 * Whether some day ever matches, by brute force with the reference's own matcher: every local day
 * of 2024–2084 (each month starts on each weekday in that span, February with 28 and with 29 days),
 * at the first hour, minute and second the expression names. An expression that never fires is
 * refused at submit, so it is not a case.
 */
export function firesSomeday(expression: string): boolean {
  const cron = parseReferenceCron(expression)
  const [hour, minute, second] = [cron.hours, cron.minutes, cron.seconds].map((values) => values.indexOf(true)) as [number, number, number]
  for (let day = Date.UTC(2024, 0, 1); day < Date.UTC(2085, 0, 1); day += 86_400_000) {
    if (referenceMatches(cron, day + ((hour * 60 + minute) * 60 + Math.max(second, 0)) * 1000)) return true
  }
  return false
}

/** A random expression of the documented grammar that fires someday: 5 fields, or 6 with seconds first. */
export function randomCronExpression(r: Random, sixFields: boolean): string {
  if (!sixFields && r.chance(0.12)) return r.pick(FIXED_EXPRESSIONS)
  for (;;) {
    const fields = [sixtyField(r, ['0', '30', '15', '45']), hourField(r), dayOfMonthField(r), monthField(r), dayOfWeekField(r)]
    if (sixFields) fields.unshift(sixtyField(r, ['0', '30', '0,30', '*/10']))
    const expression = fields.join(' ')
    if (firesSomeday(expression)) return expression
  }
}

/** Zones with every kind of offset change the rule has to handle, and plain ones. */
export const DIFFERENTIAL_ZONES = [
  'Australia/Lord_Howe', // 30-minute shift
  'Pacific/Chatham', // shift at 02:45 local
  'America/Santiago', // changes at midnight (24:00 → 01:00, 00:00 → 23:00)
  'Asia/Tehran', // DST until 2022
  'Europe/Dublin', // negative DST in tzdb
  'America/New_York',
  'Europe/Berlin',
  'Europe/London',
  'UTC',
  'Asia/Kolkata',
  'America/Sao_Paulo', // DST until 2019, changes at midnight
  'Pacific/Apia', // 2011-12-30 skipped (a 24-hour gap); DST until 2021
  'America/St_Johns', // −03:30 / −02:30
] as const

/** A UTC-offset change: the first instant with the new offset. */
export interface ZoneTransition {
  readonly timezone: string
  readonly at: number
  /** Offset after minus offset before, in minutes (positive: a gap; negative: a repeat). */
  readonly shiftMinutes: number
}

function offsetMs(timezone: string, at: number): number {
  const whole = Math.floor(at / 1000) * 1000
  return intlWallTime(timezone, whole) - whole
}

/** Sampling interval of the transition scan (no zone changes offset twice within it). */
const TRANSITION_SCAN_STEP_MS = 6 * 3_600_000

/** Every offset change of `timezone` in [fromMs, toMs), to the second: sampled, then bisected. */
export function zoneTransitions(timezone: string, fromMs: number, toMs: number): ZoneTransition[] {
  const out: ZoneTransition[] = []
  let prev = offsetMs(timezone, fromMs)
  for (let t = fromMs; t < toMs; t += TRANSITION_SCAN_STEP_MS) {
    const end = Math.min(t + TRANSITION_SCAN_STEP_MS, toMs)
    const next = offsetMs(timezone, end)
    if (next !== prev) {
      let lo = t
      let hi = end
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000
        if (offsetMs(timezone, mid) === prev) lo = mid
        else hi = mid
      }
      out.push({ timezone, at: hi, shiftMinutes: (next - prev) / 60_000 })
    }
    prev = next
  }
  return out
}

/** One comparison: fire times in (after, until] of `expression` in `timezone`. */
export interface DifferentialCase {
  readonly expression: string
  readonly timezone: string
  readonly after: Date
  readonly until: Date
  /** The offset change the window was placed around, if any. */
  readonly transition?: ZoneTransition
}

export interface CaseGenerationOptions {
  readonly seed: number
  readonly count: number
  /** Years whose every offset change gets windows (each zone). */
  readonly transitionYears: readonly number[]
  /** Further changes to place windows around: [zone, from, to] ISO bounds to scan. */
  readonly historical?: readonly (readonly [string, string, string])[]
  /** Random instants are drawn from [randomFrom, randomTo). */
  readonly randomFrom: string
  readonly randomTo: string
  /** Multiplies the longest 5-field window (1: up to 2 days). */
  readonly windowScale?: number
}

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

/** A window start that is sometimes on a minute, sometimes on a second, sometimes anywhere. */
function roughen(r: Random, at: number): number {
  return r.weighted([
    [2, () => Math.floor(at / MINUTE_MS) * MINUTE_MS],
    [1, () => Math.floor(at / 1000) * 1000],
    [1, () => Math.floor(at)],
  ])
}

/**
 * Seeded cases: half placed around offset changes (round-robin over every change of
 * `transitionYears` in every zone, and the historical ones), windows starting up to a few hours
 * before the change (some just after it); half at random instants in random zones.
 */
export function differentialCases(options: CaseGenerationOptions): DifferentialCase[] {
  const r = new Random(options.seed)
  const scale = options.windowScale ?? 1
  const transitions: ZoneTransition[] = []
  for (const timezone of DIFFERENTIAL_ZONES) {
    for (const year of options.transitionYears) transitions.push(...zoneTransitions(timezone, Date.UTC(year, 0, 1), Date.UTC(year + 1, 0, 1)))
  }
  for (const [timezone, from, to] of options.historical ?? []) transitions.push(...zoneTransitions(timezone, Date.parse(from), Date.parse(to)))
  const randomFrom = Date.parse(options.randomFrom)
  const randomTo = Date.parse(options.randomTo)
  const cases: DifferentialCase[] = []
  for (let i = 0; i < options.count; i++) {
    const sixFields = r.chance(0.2)
    const expression = randomCronExpression(r, sixFields)
    const windowMs = sixFields
      ? r.int(1 * HOUR_MS, 3 * HOUR_MS)
      : r.weighted([
          [5, () => r.int(1 * HOUR_MS, 6 * HOUR_MS)],
          [3, () => r.int(6 * HOUR_MS, 24 * HOUR_MS)],
          [2, () => r.int(24 * HOUR_MS, Math.round(48 * HOUR_MS * scale))],
        ])
    const transition = i % 2 === 0 && transitions.length > 0 ? transitions[(i / 2) % transitions.length] : undefined
    if (transition !== undefined) {
      const before = sixFields ? r.int(0, 90 * MINUTE_MS) : r.int(0, 4 * HOUR_MS)
      const start = r.chance(0.15) ? transition.at + r.int(0, HOUR_MS) : transition.at - before
      const after = roughen(r, start)
      cases.push({ expression, timezone: transition.timezone, after: new Date(after), until: new Date(after + windowMs), transition })
    } else {
      const after = roughen(r, randomFrom + r.float() * (randomTo - randomFrom))
      cases.push({ expression, timezone: r.pick(DIFFERENTIAL_ZONES), after: new Date(after), until: new Date(after + windowMs) })
    }
  }
  return cases
}

export type DifferenceKind =
  /** The engine's fire times in the window differ from the reference's. */
  | 'mismatch'
  /** The engine threw (or its sequence ended) before passing the window's end. */
  | 'error'
  /** Asked again from one of its fire times, the engine's first answer is not its next fire time. */
  | 'step'
  /** The case ran out of its time budget (an engine that loops between values). */
  | 'budget'

export interface Difference {
  readonly kind: DifferenceKind
  readonly case: DifferentialCase
  /** Index of the first differing fire time (mismatch), or of the fire time asked from (step). */
  readonly index: number
  readonly engine: readonly number[]
  readonly reference: readonly number[]
  readonly message?: string
}

export interface DifferentialOptions {
  /** Engine fire times re-asked per case (the ones nearest the transition first). */
  readonly stepChecksPerCase: number
  /** A case stops taking values once it has run this long (checked between calls). */
  readonly caseBudgetMs: number
  /** Called before each case (e.g. to record it where a hung process can be diagnosed). */
  readonly onCase?: (c: DifferentialCase, i: number) => void
}

export interface CallTiming {
  readonly ms: number
  readonly case: DifferentialCase
  /** The instant the slow call's generator was asked from. */
  readonly from: Date
  /** Which call of that generator was slow: 0 for the first `.next()`. */
  readonly call: number
}

export interface DifferentialReport {
  readonly cases: number
  readonly fireTimesCompared: number
  readonly stepChecks: number
  readonly differences: readonly Difference[]
  /** Fresh generator to its first value: one dispatcher call. */
  readonly firstCallMs: readonly number[]
  /** Every further `.next()` of a window walk. */
  readonly nextCallMs: readonly number[]
  /** All of a window's values, from a fresh generator to the first value past the window. */
  readonly windowMs: readonly number[]
  readonly slowestCall: CallTiming | undefined
  readonly engineTotalMs: number
  readonly referenceTotalMs: number
}

/** Values taken beyond the reference's count before a case is called a mismatch (bounds a loop). */
const EXTRA_VALUES = 10

/**
 * Runs every case against `engine` and the reference. The engine is synchronous: a `.next()` that
 * never returns cannot be interrupted in-process, so the harness bounds what it can (values taken,
 * time per case between calls) and the callers keep their totals small; a hang shows as a test
 * that does not finish, and `onCase` records which case it was.
 */
export function runDifferential(engine: FireTimesEngine, cases: readonly DifferentialCase[], options: DifferentialOptions): DifferentialReport {
  const differences: Difference[] = []
  const firstCallMs: number[] = []
  const nextCallMs: number[] = []
  const windowMs: number[] = []
  let slowestCall: CallTiming | undefined
  let fireTimesCompared = 0
  let stepChecks = 0
  let engineTotalMs = 0
  let referenceTotalMs = 0
  const r = new Random(cases.length)
  const timed = <T>(c: DifferentialCase, into: number[], from: Date, index: number, call: () => T): T => {
    const t0 = performance.now()
    try {
      return call()
    } finally {
      const ms = performance.now() - t0
      into.push(ms)
      engineTotalMs += ms
      if (slowestCall === undefined || ms > slowestCall.ms) slowestCall = { ms, case: c, from, call: index }
    }
  }

  for (const [i, c] of cases.entries()) {
    options.onCase?.(c, i)
    const r0 = performance.now()
    const reference = referenceFireTimes(c.expression, c.timezone, c.after, c.until).map((d) => d.getTime())
    referenceTotalMs += performance.now() - r0
    const until = c.until.getTime()

    // The window, from one fresh generator.
    const engineTimes: number[] = []
    let beyond: number | undefined
    let failure: { kind: DifferenceKind; message: string } | undefined
    const w0 = performance.now()
    try {
      let generator: Generator<Date, void, undefined> | undefined
      for (let calls = 0; ; calls++) {
        const result = generator
          ? timed(c, nextCallMs, c.after, calls, () => (generator as Generator<Date, void, undefined>).next())
          : timed(c, firstCallMs, c.after, calls, () => {
              generator = engine(c.expression, c.timezone, c.after)
              return generator.next()
            })
        if (result.done) {
          failure = { kind: 'error', message: 'the sequence ended' }
          break
        }
        const at = result.value.getTime()
        if (at > until) {
          beyond = at
          break
        }
        engineTimes.push(at)
        if (engineTimes.length > reference.length + EXTRA_VALUES) break
        if (performance.now() - w0 > options.caseBudgetMs) {
          failure = { kind: 'budget', message: `no value past the window after ${options.caseBudgetMs} ms` }
          break
        }
      }
    } catch (err: unknown) {
      failure = { kind: 'error', message: err instanceof Error ? err.message : String(err) }
    }
    windowMs.push(performance.now() - w0)

    fireTimesCompared += Math.min(engineTimes.length, reference.length)
    const firstDiff = firstDifference(engineTimes, reference)
    if (firstDiff !== undefined) {
      differences.push({ kind: failure?.kind ?? 'mismatch', case: c, index: firstDiff, engine: engineTimes, reference, message: failure?.message })
      continue
    }
    if (failure !== undefined) {
      differences.push({ kind: failure.kind, case: c, index: engineTimes.length, engine: engineTimes, reference, message: failure.message })
      continue
    }

    // Asked again from its own fire times, the engine must answer the next one.
    const sequence = [...engineTimes, beyond as number]
    for (const k of stepCheckIndices(r, engineTimes, c.transition?.at, options.stepChecksPerCase)) {
      stepChecks++
      const from = engineTimes[k] as number
      let got: number | string
      try {
        const first = timed(c, firstCallMs, new Date(from), 0, () => engine(c.expression, c.timezone, new Date(from)).next())
        got = first.done ? 'the sequence ended' : first.value.getTime()
      } catch (err: unknown) {
        got = err instanceof Error ? err.message : String(err)
      }
      if (got !== sequence[k + 1]) {
        differences.push({
          kind: 'step',
          case: c,
          index: k,
          engine: sequence,
          reference,
          message: `asked after ${iso(from)}: ${typeof got === 'number' ? iso(got) : got}, expected ${iso(sequence[k + 1] as number)}`,
        })
        break
      }
    }
  }
  return {
    cases: cases.length,
    fireTimesCompared,
    stepChecks,
    differences,
    firstCallMs,
    nextCallMs,
    windowMs,
    slowestCall,
    engineTotalMs,
    referenceTotalMs,
  }
}

function firstDifference(a: readonly number[], b: readonly number[]): number | undefined {
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i
  return undefined
}

/** Up to `max` indices of fire times to re-ask from: nearest the transition first, then random ones. */
function stepCheckIndices(r: Random, times: readonly number[], transitionAt: number | undefined, max: number): number[] {
  const indices = times.map((_, i) => i)
  if (transitionAt !== undefined) indices.sort((a, b) => Math.abs((times[a] as number) - transitionAt) - Math.abs((times[b] as number) - transitionAt))
  else {
    for (let i = indices.length - 1; i > 0; i--) {
      const j = r.int(0, i)
      ;[indices[i], indices[j]] = [indices[j] as number, indices[i] as number]
    }
  }
  return indices.slice(0, max)
}

/** p in [0, 1]: the smallest value with at least a share p of the values at or below it. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] as number
}

function iso(at: number): string {
  return new Date(at).toISOString()
}

/** An instant with its wall time and offset in `timezone`: `2025-04-05T13:15:00.000Z (04-06 03:00:00 +13:45)`. */
export function describeInstant(at: number, timezone: string): string {
  const whole = Math.floor(at / 1000) * 1000
  const wall = intlWallTime(timezone, whole)
  const offsetMinutes = Math.round((wall - whole) / 60_000)
  const sign = offsetMinutes < 0 ? '-' : '+'
  const abs = Math.abs(offsetMinutes)
  const offset = `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`
  return `${iso(at)} (${new Date(wall).toISOString().slice(0, 19).replace('T', ' ')} ${offset})`
}

/** A difference as text with what is needed to reproduce it and the two lists around it. */
export function formatDifference(d: Difference): string {
  const c = d.case
  const around = (times: readonly number[]) =>
    times
      .slice(Math.max(0, d.index - 2), d.index + 3)
      .map((t, j) => `${Math.max(0, d.index - 2) + j === d.index ? '>' : ' '} ${describeInstant(t, c.timezone)}`)
      .join('\n      ') || '(none)'
  const lines = [
    `[${d.kind}] cron "${c.expression}" in ${c.timezone}, after ${iso(c.after.getTime())} until ${iso(c.until.getTime())}` +
      (c.transition ? ` (offset change at ${describeInstant(c.transition.at, c.timezone)}, ${c.transition.shiftMinutes} min)` : ''),
  ]
  if (d.message !== undefined) lines.push(`    ${d.message}`)
  lines.push(`    index ${d.index}; engine (${d.engine.length}):\n      ${around(d.engine)}`)
  lines.push(`    reference (${d.reference.length}):\n      ${around(d.reference)}`)
  return lines.join('\n')
}

/** One line of figures: cases, values compared, differences by kind, engine call times. */
export function summarizeDifferential(report: DifferentialReport, seed: number): string {
  const kinds = new Map<string, number>()
  for (const d of report.differences) kinds.set(d.kind, (kinds.get(d.kind) ?? 0) + 1)
  const stats = (values: readonly number[]) =>
    `p50 ${percentile(values, 0.5).toFixed(3)} p99 ${percentile(values, 0.99).toFixed(3)} max ${Math.max(...values).toFixed(3)} ms`
  return [
    `cron differential (seed ${seed}): ${report.cases} cases, ${report.fireTimesCompared} fire times compared, ${report.stepChecks} step checks`,
    `${report.differences.length} differences${kinds.size ? ` (${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')})` : ''}`,
    `engine first call ${stats(report.firstCallMs)}; next() ${stats(report.nextCallMs)}; window ${stats(report.windowMs)}`,
    `engine ${(report.engineTotalMs / 1000).toFixed(1)} s, reference ${(report.referenceTotalMs / 1000).toFixed(1)} s`,
    `slowest call ${describeSlowest(report.slowestCall)}`,
  ].join('; ')
}

/**
 * The least time of `tries` repeats of the slowest call (each from a fresh generator, the calls
 * before it untimed): a wall-clock figure on a shared machine includes whatever else ran (a
 * garbage collection, another process on the core), which a repeat does not meet again, while an
 * engine that searches without bound is slow at every repeat.
 */
export function retimeSlowest(engine: FireTimesEngine, slowest: CallTiming | undefined, tries = 5): number {
  if (slowest === undefined) return 0
  let least = Number.POSITIVE_INFINITY
  for (let i = 0; i < tries; i++) {
    const generator = engine(slowest.case.expression, slowest.case.timezone, slowest.from)
    for (let k = 0; k < slowest.call; k++) generator.next()
    const t0 = performance.now()
    generator.next()
    least = Math.min(least, performance.now() - t0)
  }
  return least
}

/** The slowest engine call and the case it belongs to. */
export function describeSlowest(slowest: CallTiming | undefined): string {
  if (slowest === undefined) return 'none'
  const c = slowest.case
  return `${slowest.ms.toFixed(1)} ms: "${c.expression}" in ${c.timezone} after ${iso(c.after.getTime())}`
}

/** The seed: CRON_DIFF_SEED when set (to reproduce a failure), else `fallback`. */
export function differentialSeed(fallback: number): number {
  const text = process.env.CRON_DIFF_SEED
  if (text === undefined || text === '') return fallback
  const seed = Number(text)
  if (!Number.isInteger(seed)) throw new Error(`CRON_DIFF_SEED must be an integer, got "${text}"`)
  return seed
}
