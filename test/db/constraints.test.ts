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

async function insertExecution(jobId: string, overrides: Record<string, unknown> = {}): Promise<void> {
  await t.db
    .insertInto('pgsched.executions')
    .values({
      job_id: jobId,
      tenant: 'acme',
      queue: 'default',
      type: 'noop',
      priority: 0,
      scheduled_for: new Date(),
      run_at: new Date(),
      max_attempts: 3,
      timeout_ms: 1000,
      ...overrides,
    })
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

  it('gives jobs time-ordered UUIDv7 ids', async () => {
    const a = await insertJob()
    const b = await insertJob()
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(b > a).toBe(true)
  })

  it.each([
    ['an unknown state', { state: 'done' }, 'executions_state_check'],
    ['running without a lease', { state: 'running' }, 'executions_lease_check'],
    ['a lease while pending', { worker_id: '00000000-0000-7000-8000-000000000000', lease_expires_at: new Date() }, 'executions_lease_check'],
    ['succeeded without a finish time', { state: 'succeeded' }, 'executions_finished_check'],
    ['more attempts than allowed', { attempt: 4 }, 'executions_attempt_check'],
    ['no tenant while it can still run', { tenant: null }, 'executions_tenant_check'],
  ])('rejects an execution with %s', async (_name, overrides, constraint) => {
    const jobId = await insertJob()
    await expect(insertExecution(jobId, overrides)).rejects.toThrow(constraint)
  })

  it('allows one execution per job and fire time', async () => {
    const jobId = await insertJob()
    const at = new Date('2030-01-01T00:00:00Z')
    await insertExecution(jobId, { scheduled_for: at })
    await expect(insertExecution(jobId, { scheduled_for: at })).rejects.toThrow(
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
