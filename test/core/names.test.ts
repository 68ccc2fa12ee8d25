/**
 * core/names.ts against the schema: every name pattern and limit is probed at
 * its boundary (the longest name accepted, one more character rejected, a bad
 * first character rejected; each range's ends accepted and one past them
 * rejected) both through the TypeScript rule and through the database: an
 * insert (check constraints of migration 0001) and pgsched.submit_job (0002).
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  IDEMPOTENCY_KEY_MAX_LENGTH,
  INTERVAL_MS,
  MAX_ATTEMPTS,
  MISFIRE_MAX_RUNS,
  PRIORITY,
  QUEUE_MAX_LENGTH,
  TENANT_MAX_LENGTH,
  TIMEOUT_MS,
  TYPE_MAX_LENGTH,
  isQueueName,
  isTenantName,
  isTypeName,
  type IntRange,
} from '../../src/core/names.ts'
import { normalizeSubmit } from '../../src/core/job.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, insertJob, insertTrigger, type JobOverrides } from '../factories.ts'

const t = useTestDb()

/** Whether the statement succeeds; false when it breaks a check (23514) or submit_job refuses it (22023). */
async function accepted(statement: () => Promise<unknown>): Promise<boolean> {
  try {
    await statement()
    return true
  } catch (err: unknown) {
    const code = (err as { code?: string }).code
    if (code === '23514' || code === '22023') return false
    throw err
  }
}

/** Whether normalizeSubmit accepts the job (the TypeScript side of the same rule). */
function normalizes(input: Parameters<typeof normalizeSubmit>[0]): boolean {
  try {
    normalizeSubmit(input, new Date())
    return true
  } catch {
    return false
  }
}

const nameCases = (max: number) =>
  [
    ['the longest name', 'a'.repeat(max), true],
    ['one character more', 'a'.repeat(max + 1), false],
    ['one character', '7', true],
    ['the empty name', '', false],
    ['a bad first character', '-a', false],
    ['a space', 'a b', false],
    ['every allowed punctuation', 'a_.:/-', true],
  ] as const

describe('core/names agrees with the schema', () => {
  it.each(nameCases(TYPE_MAX_LENGTH))('job type: %s', async (_case, type, ok) => {
    expect(isTypeName(type)).toBe(ok)
    expect(normalizes({ type })).toBe(ok)
    expect(await accepted(() => insertJob(t.db, { type }))).toBe(ok)
    expect(await accepted(() => sql`select pgsched.submit_job(${type}::text)`.execute(t.db))).toBe(ok)
  })

  it.each(nameCases(QUEUE_MAX_LENGTH))('queue: %s', async (_case, queue, ok) => {
    expect(isQueueName(queue)).toBe(ok)
    expect(normalizes({ type: 't', queue })).toBe(ok)
    expect(await accepted(() => insertJob(t.db, { queue }))).toBe(ok)
    expect(await accepted(() => sql`select pgsched.submit_job('t', queue => ${queue}::text)`.execute(t.db))).toBe(ok)
  })

  it('tenant: the database bounds the length that TENANT_PATTERN allows', async () => {
    const longest = 'a'.repeat(TENANT_MAX_LENGTH)
    expect(isTenantName(longest)).toBe(true)
    expect(isTenantName(`${longest}a`)).toBe(false)
    expect(isTenantName('@a')).toBe(false)
    expect(await accepted(() => insertJob(t.db, { tenant: longest }))).toBe(true)
    expect(await accepted(() => insertJob(t.db, { tenant: `${longest}a` }))).toBe(false)
    expect(await accepted(() => insertJob(t.db, { tenant: '' }))).toBe(false)
  })

  it('idempotency key: 1 to IDEMPOTENCY_KEY_MAX_LENGTH characters', async () => {
    const longest = 'k'.repeat(IDEMPOTENCY_KEY_MAX_LENGTH)
    expect(normalizes({ type: 't', idempotencyKey: longest })).toBe(true)
    expect(normalizes({ type: 't', idempotencyKey: `${longest}k` })).toBe(false)
    expect(await accepted(() => insertJob(t.db, { idempotencyKey: longest }))).toBe(true)
    expect(await accepted(() => insertJob(t.db, { idempotencyKey: `${longest}k` }))).toBe(false)
    expect(await accepted(() => insertJob(t.db, { idempotencyKey: '' }))).toBe(false)
    // characters are code points on both sides: an emoji is one (two UTF-16 units)
    const emoji = '\u{1F600}'.repeat(IDEMPOTENCY_KEY_MAX_LENGTH)
    expect(normalizes({ type: 't', idempotencyKey: emoji })).toBe(true)
    expect(normalizes({ type: 't', idempotencyKey: `${emoji}k` })).toBe(false)
    expect(await accepted(() => insertJob(t.db, { idempotencyKey: emoji }))).toBe(true)
    expect(await accepted(() => insertJob(t.db, { idempotencyKey: `${emoji}k` }))).toBe(false)
  })

  type SubmitInput = Parameters<typeof normalizeSubmit>[0]

  /** Each end of the range is accepted, one past it rejected: through normalizeSubmit and through `write`. */
  async function probeRange(range: IntRange, name: string, toInput: (v: number) => SubmitInput, write: (v: number) => Promise<unknown>) {
    for (const [value, ok] of [
      [range.min, true],
      [range.max, true],
      [range.min - 1, false],
      [range.max + 1, false],
    ] as const) {
      expect(normalizes(toInput(value)), `${name} = ${value} (TypeScript)`).toBe(ok)
      expect(await accepted(() => write(value)), `${name} = ${value} (database)`).toBe(ok)
    }
  }

  const job = (overrides: (v: number) => JobOverrides) => (v: number) => insertJob(t.db, overrides(v))

  it('priority: jobs, executions and submit_job', async () => {
    const input = (priority: number): SubmitInput => ({ type: 't', priority })
    await probeRange(
      PRIORITY,
      'priority',
      input,
      job((priority) => ({ priority })),
    )
    await probeRange(PRIORITY, 'priority', input, (priority) => sql`select pgsched.submit_job('t', priority => ${priority}::int)`.execute(t.db))
    const { id } = await insertJob(t.db)
    await probeRange(PRIORITY, 'priority', input, (priority) =>
      insertExecution(t.db, { jobId: id, priority, scheduledFor: new Date(Date.UTC(2030, 0, 1) + priority) }),
    )
  })

  it('max attempts, timeout and backoff: jobs and submit_job', async () => {
    const maxAttempts = (n: number): SubmitInput => ({ type: 't', maxAttempts: n })
    await probeRange(
      MAX_ATTEMPTS,
      'maxAttempts',
      maxAttempts,
      job((n) => ({ maxAttempts: n })),
    )
    await probeRange(MAX_ATTEMPTS, 'maxAttempts', maxAttempts, (n) => sql`select pgsched.submit_job('t', max_attempts => ${n}::int)`.execute(t.db))
    const timeout = (ms: number): SubmitInput => ({ type: 't', timeoutMs: ms })
    await probeRange(
      TIMEOUT_MS,
      'timeoutMs',
      timeout,
      job((ms) => ({ timeoutMs: ms })),
    )
    await probeRange(TIMEOUT_MS, 'timeoutMs', timeout, (ms) => sql`select pgsched.submit_job('t', timeout_ms => ${ms}::int)`.execute(t.db))
    await probeRange(
      BACKOFF_BASE_MS,
      'backoffBaseMs',
      (ms) => ({ type: 't', backoffBaseMs: ms, backoffMaxMs: BACKOFF_MAX_MS.max }),
      job((ms) => ({ backoffBaseMs: ms, backoffMaxMs: BACKOFF_MAX_MS.max })),
    )
    await probeRange(
      BACKOFF_MAX_MS,
      'backoffMaxMs',
      (ms) => ({ type: 't', backoffBaseMs: 0, backoffMaxMs: ms }),
      job((ms) => ({ backoffBaseMs: 0, backoffMaxMs: ms })),
    )
  })

  it('schedules: interval and misfire cap', async () => {
    await probeRange(
      INTERVAL_MS,
      'every',
      (ms) => ({ type: 't', schedule: { every: ms } }),
      (ms) => insertTrigger(t.db, { kind: 'interval', intervalMs: ms }),
    )
    await probeRange(
      MISFIRE_MAX_RUNS,
      'misfireMaxRuns',
      (n) => ({ type: 't', schedule: { every: 'PT1M' }, misfireMaxRuns: n }),
      (n) => insertTrigger(t.db, { kind: 'interval', misfireMaxRuns: n }),
    )
  })
})
