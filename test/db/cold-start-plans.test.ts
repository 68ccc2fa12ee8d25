/**
 * A worker started on an empty database (a new install, or before the first jobs) makes its
 * generic plans on empty tables, and keeps them for the life of each connection. Those plans must
 * still find rows by index once the tables fill: the hot-path pool runs with seq scans off
 * (createDb's indexPlans). Without it, the claim read each job's payload by scanning a `jobs`
 * partition, and a steady load (600 jobs/s over REST) read millions of rows a minute. Since
 * migration 0028 the claim reads each job through a lateral probe and the lease statements find
 * each lease through one (lease.ts), but without the setting the claim planned on a new
 * database's `due`, which has no pages yet, still scans it (the tables are emptied here by
 * TRUNCATE, as a new database's are: a table emptied by DELETE keeps its pages, and plans made on
 * it find rows by index either way). Hash and
 * merge joins are off there too: a plan made after an ANALYZE of small tables hashed the
 * dispatcher's one-row input against every row of `jobs` (always before migration 0038, sometimes
 * since). And JIT is off: with seq scans off, a scan that remains (the insert trigger's look-up of waiting_workers) costs enough to be compiled,
 * for tens of milliseconds, on a statement that runs for microseconds.
 */
import { randomUUID } from 'node:crypto'
import { sql, type Kysely } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany } from '../../src/db/queries/lease.ts'
import { triggerFireAndAdvance } from '../../src/db/queries/triggers.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { jobRowsRead, useTestDb } from '../db.ts'

// Emptied by TRUNCATE, as a new database's tables are (useTestDb's DELETEs leave the tables their
// pages), on a connection of its own whose statistics are flushed at once (flushed, below).
const t = useTestDb({ truncate: false })
const pools: Database[] = []
beforeEach(async () => {
  await flushed(async (db) => {
    await sql`truncate pgsched.execution_history, pgsched.due, pgsched.runs, pgsched.triggers, pgsched.job_idempotency_keys, pgsched.jobs,
                       pgsched.workers, pgsched.waiting_workers, pgsched.queues, pgsched.tenants`.execute(db)
  })
})
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.db.destroy()))
})

const WORKER = randomUUID()

/**
 * Seq scans so far of the tables the claim and the complete read (statistics flushed by the caller's
 * session): due, runs, the execution_history partitions (executions_p000, ...) and the jobs partitions.
 */
async function seqScans(db: Kysely<DB>): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select coalesce(sum(seq_scan), 0)::text as n from pg_stat_user_tables
     where schemaname = 'pgsched' and (relname in ('due', 'runs') or relname like 'executions_p%' or relname like 'jobs_p%')`.execute(db)
  return Number(rows[0]?.n)
}

/** Claims and completes `n` executions on the pool's one connection; returns the seq scans it caused. */
async function claimAndComplete(hot: Kysely<DB>, n: number): Promise<number> {
  const before = await seqScans(t.db)
  const claimed = await executionClaimBatch(hot, { workerId: WORKER, queues: ['default'], types: ['x'], limit: n, leaseMs: 60_000 })
  await executionCompleteMany(hot, {
    workerId: WORKER,
    completions: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: 'null', outputUri: null })),
  })
  // Statistics reach the shared view when a session flushes them: force it for the pool's session.
  await sql`select pg_stat_force_next_flush()`.execute(hot)
  await sql`select 1`.execute(hot)
  await sql`select pg_stat_clear_snapshot()`.execute(t.db)
  return (await seqScans(t.db)) - before
}

/**
 * Runs `fn` on a connection of its own, whose statistics are flushed before it returns (a TRUNCATE
 * counts a scan of each table it empties, a submit's trigger may scan too): a pool's session reports
 * them when it next flushes, which on a busy machine can be seconds later, inside a measurement of
 * the claim's scans.
 */
async function flushed(fn: (db: Kysely<DB>) => Promise<void>): Promise<void> {
  const own = createDb({ databaseUrl: t.url, poolSize: 1 })
  try {
    await fn(own.db)
    await sql`select pg_stat_force_next_flush()`.execute(own.db)
    await sql`select 1`.execute(own.db)
  } finally {
    await own.db.destroy()
  }
}

/** Submits `n` jobs, their statistics flushed (flushed). */
const submitFlushed = (n: number) =>
  flushed(async (db) => {
    await createClient({ db, tenant: 'acme' }).submitJobs(Array.from({ length: n }, () => ({ type: 'x' })))
  })

describe('generic plans made on empty tables', () => {
  it.each([
    { indexPlans: true, seqScans: 'none' },
    // why the hot pool runs with it: the claim planned on a new database's empty `due` scans it
    { indexPlans: false, seqScans: 'some' },
  ])('indexPlans $indexPlans: claim and complete on a filled table do $seqScans seq scans', async ({ indexPlans, seqScans: expected }) => {
    const hot = createDb({ databaseUrl: t.url, poolSize: 1, genericPlans: true, indexPlans })
    pools.push(hot)
    // Plans made now, on empty tables, and kept by the connection.
    await claimAndComplete(hot.db, 10)
    await submitFlushed(2_000)
    const scans = await claimAndComplete(hot.db, 10)
    if (expected === 'none') expect(scans).toBe(0)
    else expect(scans).toBeGreaterThan(0)
  })
})

describe('generic plans made on small, analyzed tables', () => {
  // Without indexPlans the plan hashed the one-row input against every job until migration 0038
  // (the job columns the pass reads became domains); since then the planner's choice there goes
  // either way from one ANALYZE to the next, so only the product's setting is asserted.
  it('indexPlans true: a dispatcher pass firing one job reads a few rows of jobs, with JIT off', async () => {
    const pool = createDb({ databaseUrl: t.url, poolSize: 1, genericPlans: true, indexPlans: true })
    pools.push(pool)
    const jobs = await createClient({ db: t.db, tenant: 'acme' }).submitJobs(Array.from({ length: 1_000 }, () => ({ type: 'x', schedule: { every: 'PT1H' } })))
    await sql`analyze pgsched.jobs`.execute(t.db)
    const fire = (jobId: string, scheduledFor: Date) =>
      pool.db.transaction().execute((trx) => triggerFireAndAdvance(trx, { fires: [{ jobId, scheduledFor }], advances: [] }))
    await fire(jobs[0]?.id as string, new Date(Date.now() + 3_600_000)) // the plan is made here
    const before = await jobRowsRead(pool.db)
    await fire(jobs[1]?.id as string, new Date(Date.now() + 3_600_000))
    expect((await jobRowsRead(pool.db)) - before).toBeLessThan(10)
    const { rows } = await sql<{ jit: string }>`select current_setting('jit') as jit`.execute(pool.db)
    expect(rows[0]?.jit).toBe('off')
  })
})

/** Rows of pgsched.runs read so far by seq scans. */
async function runsRowsScanned(db: Kysely<DB>): Promise<number> {
  await sql`select pg_stat_clear_snapshot()`.execute(db)
  const { rows } = await sql<{ n: string }>`
    select coalesce(sum(seq_tup_read), 0)::text as n from pg_stat_user_tables where schemaname = 'pgsched' and relname = 'runs'`.execute(db)
  return Number(rows[0]?.n)
}

describe('the runs of a job', () => {
  it('a dispatcher pass checks a fire time against the running executions by index, not by reading every run', async () => {
    const pool = createDb({ databaseUrl: t.url, poolSize: 1, genericPlans: true, indexPlans: true })
    pools.push(pool)
    const client = createClient({ db: t.db, tenant: 'acme' })
    const [recurring] = await client.submitJobs([{ type: 'x', schedule: { every: 'PT1H' } }])
    await client.submitJobs(Array.from({ length: 2_000 }, () => ({ type: 'x' })))
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['x'], limit: 2_000, leaseMs: 60_000 })
    expect(claimed).toHaveLength(2_000)
    const fire = (scheduledFor: Date) =>
      pool.db.transaction().execute((trx) => triggerFireAndAdvance(trx, { fires: [{ jobId: recurring?.id as string, scheduledFor }], advances: [] }))
    await fire(new Date(Date.now() + 3_600_000))
    await sql`select pg_stat_force_next_flush()`.execute(pool.db)
    const before = await runsRowsScanned(t.db)
    const { fired } = await fire(new Date(Date.now() + 7_200_000))
    expect(fired).toBe(1)
    await sql`select pg_stat_force_next_flush()`.execute(pool.db)
    expect((await runsRowsScanned(t.db)) - before).toBe(0)
  })
})
