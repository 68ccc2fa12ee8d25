/**
 * Migration 0028 (due and runs) on a database that already holds executions of 0027's form (one
 * row of pgsched.executions per execution, whatever its state): every execution is carried over
 * to where it now lives, and the view pgsched.executions shows exactly what the table showed.
 *   pending (attempt 0)                 a pgsched.due row, no history row
 *   pending retry (attempt 1)           a pgsched.due row at attempt 1, and its history row stays
 *                                       (state pending: it keeps the error, attempt log, last worker)
 *   running (attempt 1)                 a pgsched.runs row (same worker, attempt, lease), no history row
 *   running again (attempt 2, 3)        a pgsched.runs row, and a history row in state pending at the
 *                                       attempt before (the ended attempt's error, log and worker)
 *   succeeded, failed, cancelled        left in pgsched.execution_history as they were
 * Then the product's statements work on the rows carried over: the claim takes the due ones in
 * priority order, a completion fenced by a carried-over lease (worker, attempt) ends it keeping its
 * attempt log, and the reaper retries or fails the leases that expire.
 */
import { sql, type Kysely } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { executionRescueExpired } from '../../src/db/queries/rescue.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0028')
let db: Kysely<DB> | undefined
afterAll(async () => {
  await db?.destroy()
})

const uuid = (k: number) => `00000000-0000-7000-8000-${String(k).padStart(12, '0')}`
const job = (k: number) => uuid(100 + k)
// the executions, numbered in id order
const P0 = 1 // pending, due now, attempt 0
const P0_LOW = 2 // pending, due (an hour late), attempt 0, lower priority
const LATER = 3 // pending, due in an hour, with a start deadline and a concurrency key
const RETRY = 4 // pending retry: attempt 1 failed (error, attempt log, last worker), highest priority
const RUN1 = 5 // running attempt 1
const RUN2 = 6 // running attempt 2 (attempt 1 failed on another worker)
const RUN3 = 7 // running attempt 3 of 3 (attempts 1 and 2 failed)
const DONE = 8 // succeeded
const FAILED = 9 // failed, out of attempts
const CANCELLED = 10 // cancelled before it started (no tenant: allowed for ended rows)
// workers
const W_RETRY1 = uuid(201) // ran RETRY's attempt 1
const W_RUN1 = uuid(202)
const W_RUN2_1 = uuid(203) // ran RUN2's attempt 1
const W_RUN2 = uuid(204) // runs RUN2's attempt 2
const W_RUN3_2 = uuid(205) // ran RUN3's attempt 2
const W_RUN3 = uuid(206) // runs RUN3's attempt 3
const W_DONE = uuid(207)
const W_FAILED = uuid(208)
const W_CLAIM = uuid(209) // the worker that claims after the migration

const error = (attempt: number, workerId: string, message: string) => ({
  at: '2024-05-01T10:00:00.000Z',
  name: 'Error',
  message,
  attempt,
  workerId,
})
const logEntry = (attempt: number, workerId: string, message: string) => ({
  attempt,
  startedAt: '2024-05-01T09:59:00.000Z',
  endedAt: '2024-05-01T10:00:00.000Z',
  workerId,
  host: 'old-host',
  outcome: 'failed',
  error: error(attempt, workerId, message),
})
const jsonb = (v: unknown) => `'${JSON.stringify(v)}'::jsonb`

/**
 * The executions as 0027's code left them (lease.ts, claim.ts, rescue.ts of that version): a
 * retry keeps started_at, error, output_uri, attempt_log and last_worker_id of the attempt that
 * failed; a claim sets worker_id, lease_expires_at and started_at and keeps the rest.
 * Values are SQL expressions; the defaults are those of `common`.
 */
const common = {
  queue: `'q'`,
  type: `'t'`,
  tenant: `'a'`,
  priority: '0',
  max_attempts: '3',
  timeout_ms: '60000',
}
const rows: Record<number, Record<string, string>> = {
  [P0]: { run_at: `now() - interval '1 minute'`, attempt: '0', created_at: `now() - interval '1 minute'` },
  [P0_LOW]: { priority: '-5', run_at: `now() - interval '1 hour'`, attempt: '0', created_at: `now() - interval '1 hour'` },
  [LATER]: {
    priority: '50', // the highest, but not due yet: not claimed
    run_at: `now() + interval '1 hour'`,
    start_deadline: `now() + interval '70 minutes'`,
    concurrency_key: `'k1'`,
    tenant: `'b'`,
    attempt: '0',
  },
  [RETRY]: {
    priority: '10',
    run_at: `now() - interval '10 seconds'`,
    scheduled_for: `now() - interval '2 minutes'`,
    attempt: '1',
    started_at: `now() - interval '2 minutes'`,
    error: jsonb(error(1, W_RETRY1, 'retry me')),
    output_uri: `'file:///out/retry-1'`,
    attempt_log: jsonb([logEntry(1, W_RETRY1, 'retry me')]),
    last_worker_id: `'${W_RETRY1}'`,
  },
  [RUN1]: {
    state: `'running'`,
    attempt: '1',
    worker_id: `'${W_RUN1}'`,
    lease_expires_at: `now() + interval '1 minute'`,
    started_at: `now() - interval '5 seconds'`,
    concurrency_key: `'k2'`,
  },
  [RUN2]: {
    state: `'running'`,
    attempt: '2',
    priority: '3',
    worker_id: `'${W_RUN2}'`,
    lease_expires_at: `now() + interval '2 minutes'`,
    started_at: `now() - interval '3 seconds'`,
    error: jsonb(error(1, W_RUN2_1, 'first try failed')),
    output_uri: `'file:///out/run2-1'`,
    attempt_log: jsonb([logEntry(1, W_RUN2_1, 'first try failed')]),
    last_worker_id: `'${W_RUN2_1}'`,
  },
  [RUN3]: {
    state: `'running'`,
    attempt: '3',
    worker_id: `'${W_RUN3}'`,
    lease_expires_at: `now() + interval '3 minutes'`,
    started_at: `now() - interval '1 second'`,
    error: jsonb(error(2, W_RUN3_2, 'second try failed')),
    attempt_log: jsonb([logEntry(1, W_RUN3_2, 'first try failed'), logEntry(2, W_RUN3_2, 'second try failed')]),
    last_worker_id: `'${W_RUN3_2}'`,
  },
  [DONE]: {
    state: `'succeeded'`,
    attempt: '1',
    started_at: `now() - interval '1 hour'`,
    finished_at: `now() - interval '59 minutes'`,
    result: jsonb({ ok: true, n: 42 }),
    output_uri: `'file:///out/done'`,
    last_worker_id: `'${W_DONE}'`,
  },
  [FAILED]: {
    state: `'failed'`,
    attempt: '3',
    started_at: `now() - interval '2 hours'`,
    finished_at: `now() - interval '119 minutes'`,
    error: jsonb(error(3, W_FAILED, 'gave up')),
    attempt_log: jsonb([logEntry(1, W_FAILED, 'no'), logEntry(2, W_FAILED, 'no'), logEntry(3, W_FAILED, 'gave up')]),
    last_worker_id: `'${W_FAILED}'`,
  },
  [CANCELLED]: { state: `'cancelled'`, attempt: '0', tenant: 'null', finished_at: `now() - interval '3 hours'` },
}

/** Every row of pgsched.executions, all columns, as jsonb (timestamps to the microsecond). */
async function executions(): Promise<Array<Record<string, unknown>>> {
  const { rows } = await sql<{ e: Record<string, unknown> }>`select to_jsonb(e) as e from pgsched.executions e order by id`.execute(db as Kysely<DB>)
  return rows.map((r) => r.e)
}

/** The columns of pgsched.executions (table or view) in order, with their types. */
async function columns(): Promise<string[]> {
  const { rows } = await sql<{ c: string }>`
    select column_name || ' ' || data_type as c from information_schema.columns
     where table_schema = 'pgsched' and table_name = 'executions' order by ordinal_position`.execute(db as Kysely<DB>)
  return rows.map((r) => r.c)
}

let old: Array<Record<string, unknown>> = []
let oldColumns: string[] = []
const oldRow = (k: number) => old.find((r) => r.id === uuid(k)) as Record<string, unknown>

beforeAll(async () => {
  const url = before.url
  db = createDb({ databaseUrl: url, poolSize: 2 }).db
  for (const [key, fields] of Object.entries(rows)) {
    const k = Number(key)
    const row: Record<string, string> = { id: `'${uuid(k)}'`, job_id: `'${job(k)}'`, run_at: 'now()', ...common, ...fields }
    row.scheduled_for ??= row.run_at as string
    await sql
      .raw(`insert into pgsched.jobs (id, tenant, type, queue, priority, max_attempts)
            values ('${job(k)}', 'a', 't', 'q', ${row.priority}, ${row.max_attempts})`)
      .execute(db)
    await sql.raw(`insert into pgsched.executions (${Object.keys(row).join(', ')}) values (${Object.values(row).join(', ')})`).execute(db)
  }
  old = await executions()
  oldColumns = await columns()
  const states = old.map((r) => r.state)
  expect(states).toEqual(['pending', 'pending', 'pending', 'pending', 'running', 'running', 'running', 'succeeded', 'failed', 'cancelled'])

  await migrate({ databaseUrl: url })
})

describe('migration 0028 (due and runs)', () => {
  it('leaves pgsched.executions (now a view) showing the same rows, every column the same', async () => {
    const d = db as Kysely<DB>
    const { rows: kind } = await sql<{ relkind: string }>`select relkind from pg_class where oid = 'pgsched.executions'::regclass`.execute(d)
    expect(kind[0]?.relkind).toBe('v')
    expect(await columns()).toEqual(oldColumns)
    const now = await executions()
    // row by row first, so that each difference is reported and names its execution
    for (const row of old)
      expect
        .soft(
          now.find((r) => r.id === row.id),
          `${row.id} (was ${row.state})`,
        )
        .toEqual(row)
    expect(now).toEqual(old)
  })

  it('moves pending executions to pgsched.due, running ones to pgsched.runs, and keeps the history of ended attempts', async () => {
    const d = db as Kysely<DB>
    const { rows: due } = await sql<{ d: Record<string, unknown> }>`select to_jsonb(d) as d from pgsched.due d order by execution_id`.execute(d)
    const dueColumns = ['job_id', 'queue', 'type', 'priority', 'run_at', 'scheduled_for', 'attempt', 'max_attempts', 'timeout_ms', 'tenant']
    const pick = (r: Record<string, unknown>, keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, r[k]]))
    const dueKeys = [...dueColumns, 'concurrency_key', 'start_deadline', 'created_at']
    expect(due.map((r) => pick(r.d, ['execution_id', ...dueKeys]))).toEqual(
      [P0, P0_LOW, LATER, RETRY].map((k) => ({ execution_id: uuid(k), ...pick(oldRow(k), dueKeys) })),
    )
    expect(due.map((r) => r.d.attempt)).toEqual([0, 0, 0, 1])

    const { rows: runs } = await sql<{ r: Record<string, unknown> }>`select to_jsonb(r) as r from pgsched.runs r order by execution_id`.execute(d)
    const runKeys = [...dueKeys, 'worker_id', 'lease_expires_at', 'started_at', 'output_uri']
    expect(runs.map((r) => pick(r.r, ['execution_id', ...runKeys]))).toEqual(
      [RUN1, RUN2, RUN3].map((k) => ({ execution_id: uuid(k), ...pick(oldRow(k), runKeys) })),
    )
    expect(runs.map((r) => [r.r.worker_id, r.r.attempt])).toEqual([
      [W_RUN1, 1],
      [W_RUN2, 2],
      [W_RUN3, 3],
    ])

    // the history: the ended executions as they were, and a pending row (the attempt before, its
    // error, log and worker) for each execution that waits for or runs a retry
    const { rows: history } = await sql<Record<string, unknown>>`
      select id, state, attempt, worker_id, lease_expires_at, error, attempt_log, last_worker_id
        from pgsched.execution_history order by id`.execute(d)
    const kept = (k: number, state: string, attempt: number) => ({
      id: uuid(k),
      state,
      attempt,
      worker_id: null,
      lease_expires_at: null,
      error: oldRow(k).error,
      attempt_log: oldRow(k).attempt_log,
      last_worker_id: oldRow(k).last_worker_id,
    })
    expect(history).toEqual([
      kept(RETRY, 'pending', 1),
      kept(RUN2, 'pending', 1),
      kept(RUN3, 'pending', 2),
      kept(DONE, 'succeeded', 1),
      kept(FAILED, 'failed', 3),
      kept(CANCELLED, 'cancelled', 0),
    ])
    expect(history.find((h) => h.id === uuid(RUN2))?.last_worker_id).toBe(W_RUN2_1)
    // the ended ones are the very rows of before (all columns)
    const { rows: ended } = await sql<{ h: Record<string, unknown> }>`
      select to_jsonb(h) as h from pgsched.execution_history h where state <> 'pending' order by id`.execute(d)
    expect(ended.map((r) => r.h)).toEqual([DONE, FAILED, CANCELLED].map(oldRow))
  })

  it("works with the product's claim, completion and reaper", async () => {
    const d = db as Kysely<DB>
    const view = async (k: number) =>
      (await sql<{ e: Record<string, unknown> }>`select to_jsonb(e) as e from pgsched.executions e where id = ${uuid(k)}::uuid`.execute(d)).rows[0]?.e
    const claim = () => executionClaimBatch(d, { workerId: W_CLAIM, queues: ['q'], types: ['t'], limit: 1, leaseMs: 3_600_000 })

    // the due ones, one at a time: by priority (10, 0, -5), not by run_at; the later one is not due
    const claimed = [...(await claim()), ...(await claim()), ...(await claim())]
    expect(claimed.map((c) => [c.id, c.attempt])).toEqual([
      [uuid(RETRY), 2],
      [uuid(P0), 1],
      [uuid(P0_LOW), 1],
    ])
    expect(await claim()).toEqual([])
    // the retry runs its attempt 2 and still shows attempt 1's error, log and worker
    expect(await view(RETRY)).toMatchObject({
      state: 'running',
      attempt: 2,
      worker_id: W_CLAIM,
      error: oldRow(RETRY).error,
      attempt_log: oldRow(RETRY).attempt_log,
      last_worker_id: W_RETRY1,
    })

    // a carried-over lease fences by its worker and its attempt
    const completion = (workerId: string, attempt: number) =>
      executionCompleteMany(d, { workerId, completions: [{ id: uuid(RUN2), jobId: job(RUN2), attempt, resultJson: '{"done":2}', outputUri: null }] })
    expect(await completion(W_RUN1, 2)).toEqual(new Set())
    expect(await completion(W_RUN2, 1)).toEqual(new Set())
    expect(await completion(W_RUN2, 2)).toEqual(new Set([uuid(RUN2)]))
    const run2 = await view(RUN2)
    expect(run2).toMatchObject({
      state: 'succeeded',
      attempt: 2,
      worker_id: null,
      lease_expires_at: null,
      result: { done: 2 },
      error: null,
      started_at: oldRow(RUN2).started_at,
      attempt_log: oldRow(RUN2).attempt_log,
      last_worker_id: W_RUN2,
    })
    expect(run2?.finished_at).not.toBeNull()

    // the claimed ones end too (the retry keeps its log), so only RUN1 and RUN3 still hold leases
    const done = await executionCompleteMany(d, {
      workerId: W_CLAIM,
      completions: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: '{}', outputUri: null })),
    })
    expect(done).toEqual(new Set(claimed.map((c) => c.id)))
    expect(await view(RETRY)).toMatchObject({ state: 'succeeded', attempt: 2, attempt_log: oldRow(RETRY).attempt_log, last_worker_id: W_CLAIM })

    // their leases expire: RUN1 (attempt 1 of 3) is retried, RUN3 (attempt 3 of 3) fails
    const rescued = await executionRescueExpired(d, { limit: 100, now: new Date(Date.now() + 86_400_000) })
    expect(rescued).toMatchObject({ retried: 1, failed: 1 })
    const run1 = await view(RUN1)
    expect(run1).toMatchObject({ state: 'pending', attempt: 1, worker_id: null, last_worker_id: W_RUN1, started_at: oldRow(RUN1).started_at })
    expect(run1?.error).toMatchObject({ name: 'LeaseExpiredError', attempt: 1, workerId: W_RUN1 })
    expect(run1?.attempt_log).toMatchObject([{ attempt: 1, workerId: W_RUN1, outcome: 'lease expired' }])
    const { rows: due } = await sql<{ attempt: number }>`select attempt from pgsched.due where execution_id = ${uuid(RUN1)}::uuid`.execute(d)
    expect(due).toEqual([{ attempt: 1 }])
    const run3 = await view(RUN3)
    expect(run3).toMatchObject({ state: 'failed', attempt: 3, worker_id: null, last_worker_id: W_RUN3 })
    expect(run3?.finished_at).not.toBeNull()
    expect(run3?.attempt_log).toMatchObject([...(oldRow(RUN3).attempt_log as unknown[]), { attempt: 3, workerId: W_RUN3, outcome: 'lease expired' }])
    const { rows: left } = await sql<{ n: number }>`select count(*)::int as n from pgsched.runs`.execute(d)
    expect(left[0]?.n).toBe(0)
  })
})
