/**
 * Migration 0038 (single-column checks of pgsched.jobs as checks of domains) on a database that
 * already holds jobs: neither the table nor its indexes are rewritten (same relfilenodes), the rows
 * read the same, the checks reject what the table's checks rejected, naming the same constraint, and
 * the product's submit, claim and completion work on the rows carried over.
 */
import { sql, type Kysely } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { useDatabaseBefore } from '../db.ts'

const before = useDatabaseBefore('0038')
let db: Kysely<DB> | undefined
const d = () => db as Kysely<DB>
afterAll(async () => {
  await db?.destroy()
})

/** Every relation of pgsched.jobs (the partitioned table, its partitions and all their indexes) with its file. */
async function files(): Promise<Record<string, string>> {
  const { rows } = await sql<{ rel: string; file: string }>`
    select c.oid::regclass::text as rel, c.relfilenode::text as file
      from pg_class c
     where c.oid in (select 'pgsched.jobs'::regclass union all select inhrelid from pg_inherits where inhparent = 'pgsched.jobs'::regclass)
        or c.oid in (select indexrelid from pg_index where indrelid in
                       (select 'pgsched.jobs'::regclass union all select inhrelid from pg_inherits where inhparent = 'pgsched.jobs'::regclass))`.execute(d())
  return Object.fromEntries(rows.map((r) => [r.rel, r.file]))
}

const jobsRead = async () => (await sql<Record<string, unknown>>`select to_jsonb(j) as row from pgsched.jobs j order by id`.execute(d())).rows.map((r) => r.row)

let filesBefore: Record<string, string> = {}
let rowsBefore: unknown[] = []

beforeAll(async () => {
  const url = before.url
  db = createDb({ databaseUrl: url, poolSize: 2 }).db
  await createClient({ db, tenant: 'acme' }).submitJobs(
    Array.from({ length: 40 }, (_, i) => ({
      type: 'k',
      queue: i % 2 === 0 ? 'q' : 'default',
      priority: i - 20,
      payload: { i },
      ...(i % 5 === 0 ? { idempotencyKey: `key-${i}`, concurrencyKey: `c${i}` } : {}),
    })),
  )
  filesBefore = await files()
  rowsBefore = await jobsRead()
  expect(Object.keys(filesBefore).length).toBeGreaterThan(10)
  await migrate({ databaseUrl: url })
})

describe('migration 0038 (job checks as domains)', () => {
  it('rewrites neither pgsched.jobs nor its indexes, and the rows read the same', async () => {
    expect(await files()).toEqual(filesBefore)
    expect(await jobsRead()).toEqual(rowsBefore)
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_constraint
      where conrelid = 'pgsched.jobs'::regclass and contype = 'c'`.execute(d())
    expect(rows[0]?.n).toBe(3) // jobs_backoff_check (two columns), and the checks of the indexed tenant and state stay on the table
  })

  it.each([
    ['priority', '1001', 'jobs_priority_check'],
    ['state', `'sleeping'`, 'jobs_state_check'],
    ['type', `'send email'`, 'jobs_type_check'],
    ['queue', `'${'q'.repeat(65)}'`, 'jobs_queue_check'],
    ['tenant', `''`, 'jobs_tenant_check'],
    ['max_attempts', '0', 'jobs_max_attempts_check'],
    ['timeout_ms', '0', 'jobs_timeout_ms_check'],
    ['idempotency_key', `''`, 'jobs_idempotency_key_check'],
    ['concurrency_key', `''`, 'jobs_concurrency_key_check'],
    ['start_deadline_ms', '999', 'jobs_start_deadline_ms_check'],
    ['traceparent', `'00-x'`, 'jobs_traceparent_check'],
  ])('rejects a bad %s in an insert and in an update, naming %s', async (column, value, constraint) => {
    const cols: Record<string, string> = { tenant: `'a'`, type: `'t'`, queue: `'q'`, [column]: value }
    await expect(sql.raw(`insert into pgsched.jobs (${Object.keys(cols).join(', ')}) values (${Object.values(cols).join(', ')})`).execute(d())).rejects.toThrow(
      constraint,
    )
    await expect(
      sql.raw(`update pgsched.jobs set ${column} = ${value} where id = (select id from pgsched.jobs order by id limit 1)`).execute(d()),
    ).rejects.toThrow(constraint)
  })

  it('submits, claims and completes as before', async () => {
    const [submitted] = await createClient({ db: d(), tenant: 'acme' }).submitJobs([{ type: 'k', queue: 'q', priority: 900 }])
    const W = '00000000-0000-7000-8000-00000000a001'
    const claimed = await executionClaimBatch(d(), { workerId: W, queues: ['q'], types: ['k'], limit: 3, leaseMs: 60_000 })
    expect(claimed.map((c) => c.jobId)[0]).toBe(submitted?.id)
    expect(claimed.map((c) => c.priority)).toEqual([900, 18, 16])
    const done = await executionCompleteMany(d(), {
      workerId: W,
      completions: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: 'null', outputUri: null })),
    })
    expect(done.size).toBe(3)
  })
})
