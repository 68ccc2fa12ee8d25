/**
 * One validation for cron expressions: the SQL function pgsched.cron_problem (what
 * pgsched.submit_job checks) against the client's cronProblem (the grammar of core/cron-syntax.ts,
 * then cron-parser), on a hand-picked corpus and a seeded fuzz of generated and mangled
 * expressions. Both must accept or both refuse, with the same message whenever the grammar
 * refused; and cron-parser must accept everything the grammar accepts.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { cronProblem } from '../../src/core/cron.ts'
import { cronSyntaxProblem } from '../../src/core/cron-syntax.ts'
import { seededRandom } from '../../src/lib/seeded-random.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

// biome-ignore format: one line per kind of expression
const VALID = [
  // plain, wildcards, whitespace
  '* * * * *', '? ? ? ? ?', '0 0 * * *', '00 09 * * *', '59 23 31 12 7', '0 0 1 1 0', ' 0 0 * * * ', '0\t0\t*\t*\t*', '0 0 * * *\n',
  '0   0  *  *   *', '* * * * * *', '0 0 0 * * *', '59 59 23 31 12 7', '*/10 * * * * *', '0,30 * * * * *', '005 * * * *',
  // ranges, lists, steps
  '0-59 * * * *', '0 0-23 * * *', '0 0 1-31 * *', '0 0 * 1-12 *', '0 0 * * 0-7', '0 0 * * 1-5', '5-5 * * * *', '0 9-17 * * 1-5',
  '*/5 * * * *', '*/59 * * * *', '0 */23 * * *', '0 0 */31 * *', '0 0 * */12 *', '0 0 * * */7', '?/15 * * * *', '0-30/10 * * * *',
  '5/10 * * * *', '0 5/6 * * *', '0 0 10/5 * *', '0 0 * 3/3 *', '0 0 * * 1/2', '1,2,3 * * * *', '0 0 1,15 * *', '0 0 * 1,6,12 *',
  '0 0 * * 0,3,6', '1-5,10-15,30 * * * *', '0 0 1-7/2,20-25 * *', '0 0 * * 1-5/2,0',
  // names
  '0 0 * JAN *', '0 0 * jan *', '0 0 * Jan-Mar *', '0 0 * JAN-DEC/3 *', '0 0 * jan,jul,DEC *', '0 0 * * MON', '0 0 * * mon-fri',
  '0 0 * * SUN-SAT', '0 0 * * sun,sat', '0 0 * * MON/2', '0 0 * FEB/2 *', '0 0 * 1-MAR *', '0 0 * * 1-FRI',
  // specials
  '0 0 L * *', '0 0 l * *', '0 0 1,L * *', '0 0 L,15 * *', '0 0 L 2 *', '0 0 * * 5L', '0 0 * * 0L', '0 0 * * 7L', '0 0 * * FRIL',
  '0 0 * * fril', '0 0 * * 1L,5L', '0 0 * * 1,5L', '0 0 * * 5#1', '0 0 * * 5#5', '0 0 * * FRI#2', '0 0 * * sun#3', '0 0 * * 7#1',
  '0 0 * 2 1#5', '0 0 L * 5L', '0 0 * 2 5L',
  // duplicates (accepted; cron-parser is handed each value once)
  '0 0 * * 0,7', '0 0 * * 7,0', '0 0 * * SUN,7', '0 0 * * SUN,0,7', '*/5,10 * * * *', '1,1 * * * *', '0 0 1-10,5 * *', '*,5 * * * *',
  '0 0 * JAN,1 *', '0 0 * * 1-7,0', '0 0 * * 0-6,7', '0 0 L,l * *', '0 0 * * 5L,FRIL', '0 0 * * 0L,7L', '0-59,30 * * * * *',
  // day of month that exists in some listed month
  '0 0 29 2 *', '0 0 31 1-12 *', '0 0 30,31 2,3 *', '0 0 31 2 1', '0 0 30 2 MON', '0 0 31 4 5L', '0 0 31 4,6 1#1', '0 0 */15 2 *',
  // aliases
  '@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly', '@DAILY', ' @hourly ', '@Weekly',
  // both day fields restricted (either may match), or some day matches both
  '0 0 1-7 * 1#2', '0 0 L 2 1#1', '0 0 8-14 * 1#2', '0 0 */29 * 1#5', '0 0 */7 2 1#5', '0 0 */11 * 5L', '0 0 29 2 */7', '0 0 30 2 1',
]

// biome-ignore format: one line per kind of expression
const INVALID = [
  // field count, length, aliases
  '', '   ', '*', '* * *', '* * * *', '* * * * * * *', '0 0 * * * * * *', `${'0'.repeat(1100)} * * * *`, '@reboot', '@every 5m',
  '@', '@daily *', '@minutely', '@weekdays', '@yearly@',
  // out of range
  '60 * * * *', '0 24 * * *', '0 0 0 * *', '0 0 32 * *', '0 0 * 0 *', '0 0 * 13 *', '0 0 * * 8', '60 0 0 * * *', '99999999999999999999 * * * *',
  '0-60 * * * *', '0 0 * * 0-8', '0 0 * 0-12 *',
  // names in the wrong place or misspelt
  '0 0 * FOO *', '0 0 * * January', 'MON * * * *', '0 0 MON * *', '0 0 * MON *', '0 0 * * JAN', '0 0 * * MONDAY', '0 0 * JANUARY *',
  // ranges and steps
  '5-1 * * * *', '0 0 * * FRI-MON', '0 0 * DEC-JAN *', '*/0 * * * *', '*/00 * * * *', '*/61 * * * *', '0 */24 * * *', '0 0 */32 * *',
  '0 0 * */13 *', '0 0 * * */8', '*/60 * * * * *', '*-5 * * * *', '1-2-3 * * * *', '*/ * * * *', '/5 * * * *', '1/2/3 * * * *',
  '5- * * * *', '-5 * * * *', '*/x * * * *', '*/5-10 * * * *', '** * * * *', '*? * * * *',
  // lists
  '1,,2 * * * *', '1, * * * *', ',1 * * * *', ', * * * *',
  // characters
  '0 é * * *', '0 0 * * 1;2', '0 0 * * 1.5', '0\u00a00 * * * *', '0 0 * * 1😀', '0 0 (1) * *', '0 0 * * +1', '0 0 * * 1 #', '%s * * * *',
  // H
  'H * * * *', 'h * * * *', '0 H(0-5) * * *', '0 h/2 * * *', 'H/15 * * * *', '0 0 * * 1-H', '0 0 H * *',
  // L, W, #
  '0 0 15W * *', '0 0 LW * *', '0 0 W * *', '0 W * * *', '0 0 L-2 * *', '0 0 L/2 * *', '0 0 5L * *', '0 0 1-L * *', '0 0 * * L',
  '0 0 * * 8L', '0 0 * * LL', '0 0 * * 5L/2', '0 0 * * 1-5L', '0 L * * *', '0 0 * JUL-L *', '0 0 * L *', 'L * * * *',
  '0 0 1#2 * *', '0 0 * 1#2 *', '0 0 * * 5#2,1', '0 0 * * 1,5#2', '0 0 * * 5#6', '0 0 * * 5#0', '0 0 * * 8#1', '0 0 * * *#2',
  '0 0 * * 1-5#2', '0 0 * * 5#2#3', '0 0 * * #2', '0 0 * * 5#', '0 0 * * FOO#2', '0 0 * * 5L#2',
  // never fires
  '0 0 30 2 *', '0 0 31 2 *', '0 0 30,31 2 *', '0 0 31 4,6 *', '0 0 31 4,6,9,11 ?', '0 0 30,31 FEB */2', '0 0 31 APR-APR *',
  '0 0 31 2-2/5 ?', '0 0 0 31 4 *',
  // never fires: both day fields must match (one starts with * or ?) and no day matches both
  '0 0 */17 * 1#5', '* 7 */17 06/8 WEDL', '0 0 ?/10 2 0#5', '0 0 */15 * 1#2', '0 0 */20 * 5L',
]

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC']
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT']
const SPECS = [
  { min: 0, max: 59, names: [] as string[] },
  { min: 0, max: 59, names: [] as string[] },
  { min: 0, max: 23, names: [] as string[] },
  { min: 1, max: 31, names: [] as string[] },
  { min: 1, max: 12, names: MONTHS },
  { min: 0, max: 7, names: DAYS },
]
const JUNK = [...'0123456789*?,-/#LWHlwh@ \tJANFRImonxyz;.()+_%é😀\u00a0']

/** Expressions built from the grammar's pieces, now and then one piece out of range or misplaced. */
function generate(rand: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1))
  if (rand() < 0.03) return pick(['@yearly', '@Monthly', '@daily', '@reboot', '@hourly', '@every'])
  const six = rand() < 0.25
  const fields: string[] = []
  for (let f = six ? 0 : 1; f < 6; f++) {
    const spec = SPECS[f] as (typeof SPECS)[0]
    const sloppy = rand() < 0.08 // a value just outside the field, a zero or oversized step, a backwards range
    const value = (): string => {
      if (sloppy && rand() < 0.3)
        return String(
          pick([spec.min - 1, spec.max + 1, spec.max + 10])
            .toString()
            .replace('-', ''),
        )
      if (spec.names.length > 0 && rand() < 0.3) {
        const name = pick(spec.names)
        return rand() < 0.3 ? name.toLowerCase() : name
      }
      const v = int(spec.min, spec.max)
      return rand() < 0.05 ? `0${v}` : String(v)
    }
    const step = (): string => (sloppy && rand() < 0.3 ? String(pick([0, spec.max + 1])) : String(int(1, spec.max)))
    const item = (): string => {
      const r = rand()
      if (f === 3 && r < 0.08) return rand() < 0.8 ? 'L' : 'l'
      if (f === 5 && r < 0.08) return `${rand() < 0.5 ? int(0, 7) : pick(DAYS)}L`
      if (r < 0.25) return pick(['*', '*', '?'])
      if (r < 0.4) return `${pick(['*', '?'])}/${step()}`
      if (r < 0.65) return value()
      if (r < 0.75) return `${value()}/${step()}`
      let a = int(spec.min, spec.max)
      let b = int(spec.min, spec.max)
      if (a > b && !(sloppy && rand() < 0.5)) [a, b] = [b, a]
      return `${a}-${b}${rand() < 0.3 ? `/${step()}` : ''}`
    }
    if (f === 5 && rand() < 0.06) {
      fields.push(`${rand() < 0.7 ? int(0, 7) : pick(DAYS)}#${sloppy ? pick([0, 6]) : int(1, 5)}`)
      continue
    }
    const count = rand() < 0.7 ? 1 : int(2, 4)
    fields.push(Array.from({ length: count }, item).join(','))
  }
  if (rand() < 0.1) fields.splice(int(0, fields.length - 1), 1)
  return fields.join(rand() < 0.9 ? ' ' : pick(['  ', '\t', ' \n ']))
}

/** A generated expression with one to three characters inserted, deleted, doubled or replaced. */
function mutate(rand: () => number, expr: string): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T
  const chars = [...expr]
  for (let n = 1 + Math.floor(rand() * 3); n > 0; n--) {
    const i = Math.floor(rand() * (chars.length + 1))
    const op = rand()
    if (op < 0.35) chars.splice(i, 0, pick(JUNK))
    else if (op < 0.6) chars.splice(i, 1)
    else if (op < 0.75) chars.splice(i, 0, chars[i] ?? '*')
    else chars.splice(i, 1, pick(JUNK))
  }
  return chars.join('')
}

/** Random characters of the grammar and beyond. */
function junk(rand: () => number): string {
  return Array.from({ length: Math.floor(rand() * 24) }, () => JUNK[Math.floor(rand() * JUNK.length)]).join('')
}

interface Disagreement {
  expr: string
  ts: string | undefined
  sql: string | null
}

/** Every expression checked in SQL in one round trip, compared with the client's check. */
async function compare(exprs: string[]): Promise<{ disagreements: Disagreement[]; valid: number; invalid: number }> {
  const { rows } = await sql<{ ord: string; problem: string | null }>`
    select e.ord, pgsched.cron_problem(e.expr) as problem
    from unnest(${exprs}::text[]) with ordinality as e(expr, ord)
    order by e.ord`.execute(t.db)
  expect(rows).toHaveLength(exprs.length)
  const disagreements: Disagreement[] = []
  let valid = 0
  for (const [i, expr] of exprs.entries()) {
    const fromSql = (rows[i] as { problem: string | null }).problem
    const ts = cronProblem(expr)
    const syntax = cronSyntaxProblem(expr)
    if (ts === undefined) valid++
    const agree = (ts === undefined) === (fromSql === null) && (syntax === undefined || syntax === fromSql)
    if (!agree) disagreements.push({ expr, ts, sql: fromSql })
  }
  return { disagreements, valid, invalid: exprs.length - valid }
}

function report(disagreements: Disagreement[]): string {
  return `${disagreements.length} expressions answered differently, first ones:\n${disagreements
    .slice(0, 8)
    .map((d) => `  ${JSON.stringify(d.expr)}\n    ts:  ${d.ts ?? 'valid'}\n    sql: ${d.sql ?? 'valid'}`)
    .join('\n')}`
}

describe('pgsched.cron_problem', () => {
  it('answers the hand-picked corpus as the client does, and as intended', async () => {
    expect(VALID.length + INVALID.length).toBeGreaterThanOrEqual(150)
    const { disagreements } = await compare([...VALID, ...INVALID])
    expect(disagreements, report(disagreements)).toEqual([])
    expect(VALID.filter((e) => cronProblem(e) !== undefined)).toEqual([])
    expect(INVALID.filter((e) => cronProblem(e) === undefined)).toEqual([])
    // every refusal of the corpus comes from the grammar, with a message naming the problem
    expect(INVALID.filter((e) => cronSyntaxProblem(e) === undefined)).toEqual([])
  })

  it('answers thousands of generated and mangled expressions as the client does (seeded fuzz)', async () => {
    const rand = seededRandom(20_301)
    const exprs: string[] = []
    for (let i = 0; i < 2500; i++) exprs.push(generate(rand))
    for (let i = 0; i < 1500; i++) exprs.push(mutate(rand, generate(rand)))
    for (let i = 0; i < 500; i++) exprs.push(junk(rand))
    const { disagreements, valid, invalid } = await compare(exprs)
    expect(disagreements, report(disagreements)).toEqual([])
    // both kinds in quantity, so agreement means something
    expect(valid).toBeGreaterThan(1000)
    expect(invalid).toBeGreaterThan(1000)
    // cron-parser accepts everything the grammar accepts: its own errors never reach a user
    const parserOnly = exprs.filter((e) => cronSyntaxProblem(e) === undefined && cronProblem(e) !== undefined)
    expect(parserOnly.slice(0, 8)).toEqual([])
  })

  it('returns null for null', async () => {
    const { rows } = await sql<{ problem: string | null }>`select pgsched.cron_problem(null) as problem`.execute(t.db)
    expect(rows[0]?.problem).toBeNull()
  })
})

describe('pgsched.submit_job with a cron schedule', () => {
  it('refuses an expression the client refuses, with its message and errcode 22023, and stores nothing', async () => {
    const message = cronProblem('60 * * * *')
    expect(message).toBe('cron expression "60 * * * *": value 60 in the minute field is out of range (0-59)')
    await expect(sql`select pgsched.submit_job('x', cron => '60 * * * *')`.execute(t.db)).rejects.toMatchObject({ message, code: '22023' })
    await expect(sql`select pgsched.submit_job('x', cron => '0 0 31 4,6 *')`.execute(t.db)).rejects.toThrow('never fires')
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
    expect(await t.db.selectFrom('pgsched.triggers').selectAll().execute()).toEqual([])
  })

  it('stores an expression with a value listed twice, which the dispatcher evaluates', async () => {
    await sql`select pgsched.submit_job('x', cron => ' 0 12 * * 0,7 ')`.execute(t.db)
    expect(await t.db.selectFrom('pgsched.triggers').select('cron_expression').execute()).toEqual([{ cron_expression: '0 12 * * 0,7' }])
  })
})
