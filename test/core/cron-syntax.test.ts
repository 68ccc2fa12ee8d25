import { describe, expect, it } from 'vitest'
import { cronNextFireAt, cronProblem } from '../../src/core/cron.ts'
import { cronSyntaxNormalize, cronSyntaxProblem } from '../../src/core/cron-syntax.ts'

const FIELDS = '(minute hour day-of-month month day-of-week) or 6 with seconds first'

describe('cronSyntaxProblem', () => {
  it.each([
    '* * * * *',
    '*/5 * * * * *',
    '00 09 * * 1-5',
    '0 0 L * *',
    '0 0 1,15,l * *',
    '0 0 * * 5L',
    '0 0 * * fril,1L',
    '0 0 * * 7L',
    '0 0 * * 5#2',
    '0 0 * * fri#5',
    '0 0 ? * mon-fri/2',
    '? ? ? ? ?',
    '5/10 * * * *',
    '0 0 * JAN-MAR,jul,DEC *',
    '0 0 * * 0,7',
    '0 0 * * SUN,7',
    '*/5,10 * * * *',
    '0 0 1-10,5 * *',
    '0 0 29 2 *',
    '0 0 31 2 1',
    '0 0 31 1-12/2 *',
    '  0\t0 *  * *\n',
    '@daily',
    '@Hourly',
    '59 59 23 31 12 7',
  ])('accepts %j, and so does cron-parser', (expr) => {
    expect(cronSyntaxProblem(expr)).toBeUndefined()
    expect(cronProblem(expr)).toBeUndefined()
  })

  it.each([
    ['', `cron expression "" must have 5 fields ${FIELDS}, got 0`],
    ['* * *', `cron expression "* * *" must have 5 fields ${FIELDS}, got 3`],
    ['* * * * * * *', `cron expression "* * * * * * *" must have 5 fields ${FIELDS}, got 7`],
    ['@reboot', 'cron alias "@reboot" is not supported; use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or five fields'],
    [`${'0'.repeat(1100)} * * * *`, 'cron expression is 1108 characters long; at most 1024 are accepted'],
    ['60 * * * *', 'cron expression "60 * * * *": value 60 in the minute field is out of range (0-59)'],
    ['0 24 * * *', 'cron expression "0 24 * * *": value 24 in the hour field is out of range (0-23)'],
    ['0 0 0 * *', 'cron expression "0 0 0 * *": value 0 in the day-of-month field is out of range (1-31)'],
    ['0 0 * 13 *', 'cron expression "0 0 * 13 *": value 13 in the month field is out of range (1-12)'],
    ['0 0 * * 8', 'cron expression "0 0 * * 8": value 8 in the day-of-week field is out of range (0-7)'],
    ['60 0 0 * * *', 'cron expression "60 0 0 * * *": value 60 in the second field is out of range (0-59)'],
    ['0 0 * FOO *', 'cron expression "0 0 * FOO *": "FOO" in the month field is not a value (1-12 or JAN-DEC)'],
    ['0 0 * * January', 'cron expression "0 0 * * January": "January" in the day-of-week field is not a value (0-7 or SUN-SAT)'],
    ['MON * * * *', 'cron expression "MON * * * *": "MON" in the minute field is not a value (0-59)'],
    ['0 0 * MON *', 'cron expression "0 0 * MON *": "MON" in the month field is not a value (1-12 or JAN-DEC)'],
    ['5-1 * * * *', 'cron expression "5-1 * * * *": range 5-1 in the minute field starts after it ends'],
    ['0 0 * * FRI-MON', 'cron expression "0 0 * * FRI-MON": range FRI-MON in the day-of-week field starts after it ends'],
    ['*/0 * * * *', 'cron expression "*/0 * * * *": step 0 in the minute field must be at least 1'],
    ['*/61 * * * *', 'cron expression "*/61 * * * *": step 61 in the minute field is larger than its largest value (59)'],
    ['0 0 * * */8', 'cron expression "0 0 * * */8": step 8 in the day-of-week field is larger than its largest value (7)'],
    ['1,,2 * * * *', 'cron expression "1,,2 * * * *": the minute field has an empty list item'],
    ['1, * * * *', 'cron expression "1, * * * *": the minute field has an empty list item'],
    ['*-5 * * * *', 'cron expression "*-5 * * * *": "*-5" in the minute field is not a value, a range a-b or a step /n'],
    ['1-2-3 * * * *', 'cron expression "1-2-3 * * * *": "1-2-3" in the minute field is not a value, a range a-b or a step /n'],
    ['*/ * * * *', 'cron expression "*/ * * * *": "*/" in the minute field is not a value, a range a-b or a step /n'],
    ['0 é * * *', 'cron expression "0 é * * *": character "é" in the hour field is not allowed'],
    ['0 0 * * 1;2', 'cron expression "0 0 * * 1;2": character ";" in the day-of-week field is not allowed'],
    ['H * * * *', 'cron expression "H * * * *": "H" in the minute field is not supported (it picks a random value); name the value'],
    ['0 h/2 * * *', 'cron expression "0 h/2 * * *": "H" in the hour field is not supported (it picks a random value); name the value'],
    ['0 0 15W * *', 'cron expression "0 0 15W * *": "W" in the day-of-month field is not supported (nearest weekday)'],
    ['0 0 LW * *', 'cron expression "0 0 LW * *": "W" in the day-of-month field is not supported (nearest weekday)'],
    ['0 0 L-2 * *', 'cron expression "0 0 L-2 * *": "L-2" in the day-of-month field: L (the last day of the month) takes no number, range or step'],
    ['0 0 5L * *', 'cron expression "0 0 5L * *": "5L" in the day-of-month field: L (the last day of the month) takes no number, range or step'],
    [
      '0 0 * * L',
      'cron expression "0 0 * * L": "L" in the day-of-week field: L takes one day before it and nothing else (5L or FRIL: the last Friday of the month)',
    ],
    [
      '0 0 * * 8L',
      'cron expression "0 0 * * 8L": "8L" in the day-of-week field: L takes one day before it and nothing else (5L or FRIL: the last Friday of the month)',
    ],
    ['0 L * * *', 'cron expression "0 L * * *": "L" in the hour field is not supported (only day-of-month L and day-of-week nL)'],
    ['0 0 * JUL-L *', 'cron expression "0 0 * JUL-L *": "L" in the month field is not supported (only day-of-month L and day-of-week nL)'],
    ['0 0 1#2 * *', 'cron expression "0 0 1#2 * *": "#" in the day-of-month field is not supported (only the day-of-week field takes n#k)'],
    ['0 0 * * 5#2,1', 'cron expression "0 0 * * 5#2,1": "5#2" in the day-of-week field: n#k must be the field\'s only item'],
    ['0 0 * * 5#6', 'cron expression "0 0 * * 5#6": "5#6" in the day-of-week field: k in n#k must be 1-5'],
    ['0 0 * * 8#1', 'cron expression "0 0 * * 8#1": value 8 in the day-of-week field is out of range (0-7)'],
    ['0 0 * * *#2', 'cron expression "0 0 * * *#2": "*#2" in the day-of-week field is not n#k (a day 0-7 or SUN-SAT, then #, then 1-5)'],
    ['0 0 * * 1-5#2', 'cron expression "0 0 * * 1-5#2": "1-5#2" in the day-of-week field is not n#k (a day 0-7 or SUN-SAT, then #, then 1-5)'],
    ['0 0 30 2 *', 'cron expression "0 0 30 2 *" never fires: no day matches its day-of-month, month and day-of-week fields together'],
    ['0 0 31 4,6 ?', 'cron expression "0 0 31 4,6 ?" never fires: no day matches its day-of-month, month and day-of-week fields together'],
    ['0 0 30,31 FEB */2', 'cron expression "0 0 30,31 FEB */2" never fires: no day matches its day-of-month, month and day-of-week fields together'],
    ['0 0 */15 * 1#2', 'cron expression "0 0 */15 * 1#2" never fires: no day matches its day-of-month, month and day-of-week fields together'],
    ['0 0 */20 * 5L', 'cron expression "0 0 */20 * 5L" never fires: no day matches its day-of-month, month and day-of-week fields together'],
  ])('refuses %j with %j', (expr, message) => {
    expect(cronSyntaxProblem(expr)).toBe(message)
    expect(cronProblem(expr)).toBe(message)
  })
})

describe('cronSyntaxNormalize', () => {
  it.each([
    ['0 0 * * 0,7', '0 0 * * 0'],
    ['*/20,40 * * * *', '0,20,40 * * * *'],
    ['0 0 * * 5L,fril,1-7,0', '0 0 * * 0,1,2,3,4,5,6,5L'],
    ['0 0 l,1,L * *', '0 0 1,L * *'],
    ['0 0 * jan-mar,feb *', '0 0 * 1,2,3 *'],
    ['0  9 * * mon-fri', '0 9 * * MON-FRI'],
    ['@weekly', '0 0 * * 0'],
  ])('gives cron-parser %j as %j: one space, upper case, values listed twice kept once', (expr, cron) => {
    expect(cronSyntaxNormalize(expr)).toEqual({ cron })
  })
})

describe('long expressions', () => {
  it('an accepted expression that listing a repeated field would take past 1024 characters is still evaluated', () => {
    // A long value (leading zeros) beside a field that repeats a value: listing that field's values
    // used to take the text given to cron-parser past its limit, after the grammar (and SQL) accepted it.
    const expr = `${'0'.repeat(990)}5 *,0 * * *`
    expect(expr.length).toBeLessThanOrEqual(1024)
    expect(cronSyntaxProblem(expr)).toBeUndefined()
    expect(cronProblem(expr)).toBeUndefined()
    expect(cronNextFireAt(expr, 'UTC', new Date('2030-01-01T00:00:00Z'))?.toISOString()).toBe('2030-01-01T00:05:00.000Z')
  })
})
