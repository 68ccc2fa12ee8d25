import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const t = useTestDb()

async function insertJob(overrides: Record<string, unknown> = {}): Promise<string> {
  const row = await t.db
    .insertInto('pgsched.jobs')
    .values({ tenant: 'acme', type: 'noop', payload: '{}', ...overrides })
    .returning('id')
    .executeTakeFirstOrThrow()
  return row.id
}

/**
 * Executions live in three tables (migration 0028; pgsched.executions is a read-only view over
 * them): what may be claimed in due, what a worker holds in runs, what ended in execution_history.
 * Each helper inserts a valid row of its table, `overrides` aside.
 */
const executionColumns = (jobId: string) => ({
  job_id: jobId,
  tenant: 'acme',
  queue: 'default',
  type: 'noop',
  priority: 0,
  scheduled_for: new Date(),
  run_at: new Date(),
  max_attempts: 3,
  timeout_ms: 1000,
})

async function insertDue(jobId: string, overrides: Record<string, unknown> = {}): Promise<void> {
  await t.db
    .insertInto('pgsched.due')
    .values({ ...executionColumns(jobId), ...overrides })
    .execute()
}

async function insertRun(jobId: string, overrides: Record<string, unknown> = {}): Promise<void> {
  await t.db
    .insertInto('pgsched.runs')
    .values({
      ...executionColumns(jobId),
      execution_id: randomUUID(),
      worker_id: '00000000-0000-7000-8000-000000000000',
      attempt: 1,
      lease_expires_at: new Date(Date.now() + 60_000),
      started_at: new Date(),
      created_at: new Date(),
      ...overrides,
    })
    .execute()
}

async function insertHistory(jobId: string, overrides: Record<string, unknown> = {}): Promise<void> {
  await t.db
    .insertInto('pgsched.execution_history')
    .values({ ...executionColumns(jobId), state: 'succeeded', attempt: 1, started_at: new Date(), finished_at: new Date(), ...overrides })
    .execute()
}

describe('schema constraints', () => {
  it.each([
    ['priority above 1000', { priority: 1001 }, 'jobs_priority_check'],
    ['priority below -1000', { priority: -1001 }, 'jobs_priority_check'],
    ['an unknown job state', { state: 'sleeping' }, 'jobs_state_check'],
    ['zero max attempts', { max_attempts: 0 }, 'jobs_max_attempts_check'],
    ['a type with spaces', { type: 'send email' }, 'jobs_type_check'],
    ['an empty tenant', { tenant: '' }, 'jobs_tenant_check'],
    ['a zero timeout', { timeout_ms: 0 }, 'jobs_timeout_ms_check'],
    ['a backoff cap below its base', { backoff_base_ms: 5000, backoff_max_ms: 10 }, 'jobs_backoff_check'],
  ])('rejects a job with %s', async (_name, overrides, constraint) => {
    await expect(insertJob(overrides)).rejects.toThrow(constraint)
  })

  // migration 0032 replaced the checks' bounded patterns ({0,127}, {0,63}, {32}…) by unbounded ones with
  // length tests: each new check must accept exactly the values the old pattern did
  const nameCases = (max: number) => [
    'a',
    'A9',
    'send-email',
    'billing.v2:retry/x_y',
    'x'.repeat(max),
    'x'.repeat(max + 1),
    '',
    '-x',
    '.x',
    '_x',
    'send email',
    'é',
    'x\n',
    'x$',
    `${'x'.repeat(max - 1)}-`,
  ]
  it.each([
    ['type', '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$', nameCases(128)],
    ['queue', '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$', nameCases(64)],
    [
      'traceparent',
      '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$',
      [
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        '00-0af7651916cd43dd8448eb211c80319c0-b7ad6b716920333-01',
        '00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01',
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1',
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-012',
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-101',
        '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        '00-0AF7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0-',
        '00--af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      ],
    ],
  ])('accepts as %s exactly the values its original pattern accepted', async (column, pattern, values) => {
    for (const value of values) {
      const before = (await sql<{ ok: boolean }>`select ${value}::text ~ ${pattern}::text as ok`.execute(t.db)).rows[0]?.ok
      const overrides = { [column]: value }
      const accepted = await insertJob(overrides).then(
        () => true,
        (err: unknown) => {
          expect(String(err)).toContain(`jobs_${column}_check`)
          return false
        },
      )
      expect([value, accepted]).toEqual([value, before])
    }
  })

  it('makes UUIDv7 ids from the database clock to a fraction of a millisecond, each later statement a greater id', async () => {
    const { rows } = await sql<{ before: string; id: string; after: string }>`
      select (extract(epoch from clock_timestamp()) * 1000000)::bigint::text as before, pgsched.uuid_v7()::text as id,
             (extract(epoch from clock_timestamp()) * 1000000)::bigint::text as after`.execute(t.db)
    const r = rows[0]
    if (!r) throw new Error('no row')
    expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    const hex = r.id.replaceAll('-', '')
    // unix_ts_ms (48 bits), then the fraction of that millisecond in 1/4096 steps (rand_a, 12 bits)
    const us = Number.parseInt(hex.slice(0, 12), 16) * 1000 + (Number.parseInt(hex.slice(13, 16), 16) * 1000) / 4096
    expect(us).toBeGreaterThanOrEqual(Number(r.before) - 1)
    expect(us).toBeLessThanOrEqual(Number(r.after) + 1)
    let last = ''
    for (let i = 0; i < 200; i++) {
      const id = (await sql<{ id: string }>`select pgsched.uuid_v7()::text as id`.execute(t.db)).rows[0]?.id ?? ''
      expect(id > last).toBe(true)
      last = id
    }
  })

  it('gives jobs time-ordered UUIDv7 ids', async () => {
    const a = await insertJob()
    const b = await insertJob()
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(b > a).toBe(true)
  })

  it.each([
    ['no attempts left', { attempt: 3 }, 'due_attempt_check'],
    ['a negative attempt', { attempt: -1 }, 'due_attempt_check'],
    ['priority above 1000', { priority: 1001 }, 'due_priority_check'],
    ['priority below -1000', { priority: -1001 }, 'due_priority_check'],
  ])('rejects a due execution with %s', async (_name, overrides, constraint) => {
    const jobId = await insertJob()
    await insertDue(jobId, { scheduled_for: new Date('2030-01-01T00:00:00Z') }) // the defaults pass
    await expect(insertDue(jobId, overrides)).rejects.toThrow(constraint)
  })

  it.each([
    ['attempt 0 (the claim makes attempt 1)', { attempt: 0 }, 'runs_attempt_check'],
    ['more attempts than allowed', { attempt: 4 }, 'runs_attempt_check'],
  ])('rejects a running execution with %s', async (_name, overrides, constraint) => {
    const jobId = await insertJob()
    await insertRun(jobId) // the defaults pass
    await expect(insertRun(jobId, overrides)).rejects.toThrow(constraint)
  })

  it.each([
    ['an unknown state', { state: 'done', finished_at: null }, 'executions_state_check'],
    ['running without a lease', { state: 'running', finished_at: null }, 'executions_lease_check'],
    [
      'a lease while pending',
      { state: 'pending', finished_at: null, worker_id: '00000000-0000-7000-8000-000000000000', lease_expires_at: new Date() },
      'executions_lease_check',
    ],
    ['succeeded without a finish time', { finished_at: null }, 'executions_finished_check'],
    ['a finish time while pending', { state: 'pending' }, 'executions_finished_check'],
    ['more attempts than allowed', { attempt: 4 }, 'executions_attempt_check'],
    ['no tenant while it can still run', { state: 'pending', finished_at: null, tenant: null }, 'executions_tenant_check'],
  ])('rejects an execution in the history with %s', async (_name, overrides, constraint) => {
    const jobId = await insertJob()
    await insertHistory(jobId, { scheduled_for: new Date('2030-01-01T00:00:00Z') }) // the defaults pass
    await expect(insertHistory(jobId, overrides)).rejects.toThrow(constraint)
  })

  it('allows one due execution per job and fire time', async () => {
    const jobId = await insertJob()
    const at = new Date('2030-01-01T00:00:00Z')
    await insertDue(jobId, { scheduled_for: at })
    await expect(insertDue(jobId, { scheduled_for: at })).rejects.toThrow(/duplicate key value violates unique constraint "due_fire_time_key"/)
  })

  it('allows one execution per job and fire time in the history', async () => {
    const jobId = await insertJob()
    const at = new Date('2030-01-01T00:00:00Z')
    await insertHistory(jobId, { scheduled_for: at })
    await expect(insertHistory(jobId, { scheduled_for: at })).rejects.toThrow(
      /duplicate key value violates unique constraint "executions_p\d+_job_id_scheduled_for_key"/,
    )
  })

  it.each([
    ['a cron trigger without an expression', { kind: 'cron' }, 'triggers_shape_check'],
    ['an interval under one second', { kind: 'interval', interval_ms: 10 }, 'triggers_interval_ms_check'],
    ['an unknown misfire policy', { kind: 'interval', interval_ms: 60000, misfire_policy: 'maybe' }, 'triggers_misfire_policy_check'],
    ['an unknown overlap policy', { kind: 'interval', interval_ms: 60000, overlap_policy: 'sometimes' }, 'triggers_overlap_policy_check'],
    [
      'an end before its start',
      { kind: 'interval', interval_ms: 60000, start_at: new Date(2030, 1, 1), end_at: new Date(2029, 1, 1) },
      'triggers_window_check',
    ],
  ])('rejects a trigger with %s', async (_name, overrides, constraint) => {
    const jobId = await insertJob()
    await expect(
      t.db
        .insertInto('pgsched.triggers')
        .values({ job_id: jobId, ...overrides } as never)
        .execute(),
    ).rejects.toThrow(constraint)
  })

  it('rejects an API key hash that is not 32 bytes', async () => {
    await expect(sql`insert into pgsched.api_keys (tenant, key_prefix, key_hash) values ('acme', 'psk_', '\\x00'::bytea)`.execute(t.db)).rejects.toThrow(
      'api_keys_key_hash_check',
    )
  })
})
