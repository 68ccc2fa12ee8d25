/**
 * The lease statements (heartbeat, complete, fail, release) find the runs rows
 * of their input (migration 0028: the leases, apart from the history) by their
 * ids. Whatever the statistics say, each must find every runs row by its
 * primary key, once: an earlier form joined its input to runs, and a plan that
 * rescanned the input for each runs row was quadratic in the batch (82 ms
 * instead of 8 ms for 500 completions); one that found each row by its key and
 * then again by its ctid cost a TID rescan per row. None of them may read the
 * history (complete and fail write it, by key). The
 * statistics here are the ones that once led the planner there: taken while
 * nothing was running, so runs looked empty, over a history of finished runs.
 * Other workers' leases fill runs after that, as they do in production: were
 * the batch all of runs, reading runs whole (a hash join) would be the right
 * plan, and no test of finding rows by key.
 * Each statement runs as a generic prepared plan with the settings of the
 * worker's hot-path pool (force_generic_plan; no seq scan, hash or merge join).
 * The claim is checked the same way: it must take its rows from pgsched.due
 * through the claim index, read about `limit` of them, never touch the history,
 * and never join its rows to each other row by row (with no hash join, a join of
 * two of its CTEs compares every row with every other: 21 ms instead of 4 ms
 * for a claim of 400).
 * The assertions state what the product needs (rows found by index, few rows
 * read, no sort of every due row), not one plan shape: an index scan and a
 * bitmap scan of the same index are both fine, and which one the planner picks
 * depends on estimates that shift with timing and statistics.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import pg from 'pg'
// @ts-expect-error: pg's value serialiser has no type declarations
import { prepareValue } from 'pg/lib/utils.js'
import { sql, type CompiledQuery, type Kysely } from 'kysely'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch, executionClaimBatchQuery, type ClaimedExecution } from '../../src/db/queries/claim.ts'
import {
  executionCompleteManyQuery,
  executionFailManyQuery,
  executionHeartbeatManyQuery,
  executionReleaseMany,
  executionReleaseManyQuery,
} from '../../src/db/queries/lease.ts'
import { migrate } from '../../src/db/migrate.ts'
import { fairKeysAssign } from '../../src/db/queries/queues.ts'
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { adminQuery, urlFor } from '../db.ts'
import { insertExecutions } from '../factories.ts'

const WORKER = randomUUID()
const N = 300
const HISTORY = 20_000
/** Leases other workers hold while the statements under test run. */
const OTHER_LEASES = 10 * N
/** Due executions of a queue no claim here asks for. */
const ELSEWHERE = 5_000

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Actual Rows': number
  'Actual Loops': number
  'Rows Removed by Filter'?: number
  'Rows Removed by Index Recheck'?: number
  'Rows Removed by Join Filter'?: number
  Operation?: string
  /** Outer for the input a node works on; InitPlan, SubPlan for what it evaluates beside it. */
  'Parent Relationship'?: string
  Plans?: PlanNode[]
}

/** The rows a sort orders: those of its input, not of the CTEs and subplans it evaluates beside it. */
const sortedRows = (sort: PlanNode): number =>
  (sort.Plans ?? []).filter((c) => c['Parent Relationship'] === 'Outer').reduce((sum, c) => sum + c['Actual Rows'] * c['Actual Loops'], 0)

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

/** Rows that join conditions threw away, over the whole plan: about the batch at most, never its square. */
const joinDiscards = (plan: PlanNode[]) => plan.reduce((sum, n) => sum + (n['Rows Removed by Join Filter'] ?? 0), 0)

/** The joins that discarded rows, each with its children, for the message of a failed expectation. */
const discardingJoins = (plan: PlanNode[]) =>
  JSON.stringify(
    plan
      .filter((n) => (n['Rows Removed by Join Filter'] ?? 0) > 0)
      .map((n) => ({ ...n, Plans: n.Plans?.map((c) => ({ ...c, Plans: c.Plans?.map((g) => `${g['Node Type']} ${g['Relation Name'] ?? ''}`) })) })),
  )

/** Reads of `table` (its writes aside). */
const readsOf = (plan: PlanNode[], table: string) => plan.filter((n) => n['Relation Name'] === table && n['Node Type'] !== 'ModifyTable')

/**
 * Every node of the plan that concerns pgsched.execution_history: a read of the table or of one of
 * its partitions (executions_p000, ...), or a write of it.
 */
const historyNodes = (plan: PlanNode[]) => plan.filter((n) => n['Relation Name'] === 'execution_history' || n['Relation Name']?.startsWith('executions_p'))

/** Rows a node looked at: those it returned and those it threw away, over all its loops. */
const rowsExamined = (n: PlanNode) => (n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * n['Actual Loops']

/**
 * The indexes a read went through: its own (index scans), or its bitmap's (a bitmap heap scan);
 * none for a sequential scan. Which of these the planner picks depends on its estimates, not on
 * what the product needs: that every row is found by an index, and few are read.
 */
const indexesOf = (n: PlanNode): string[] =>
  n['Index Name'] !== undefined ? [n['Index Name']] : (n.Plans ?? []).flatMap((c) => (c['Node Type'].startsWith('Bitmap') ? indexesOf(c) : []))

/** The rows a write of `table` returned (each write here returns what it changed). */
const rowsWritten = (plan: PlanNode[], table: string, operation: 'Insert' | 'Update' | 'Delete') =>
  plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === table && n.Operation === operation)?.['Actual Rows']

/** EXPLAIN ANALYZE of the statement as a generic prepared plan, rolled back. */
async function genericPlan(url: string, db: Kysely<DB>, query: { compile(db: Kysely<DB>): CompiledQuery }): Promise<PlanNode[]> {
  const { sql: text, parameters } = query.compile(db)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('begin')
    // the settings of the worker's hot-path pool (pool.ts, indexPlans): a generic plan, no seq scan,
    // hash or merge join, no JIT
    for (const setting of ['plan_cache_mode = force_generic_plan', 'enable_seqscan = off', 'enable_hashjoin = off', 'enable_mergejoin = off', 'jit = off']) {
      await client.query(`set local ${setting}`)
    }
    await client.query(`prepare statement_under_test as ${text}`)
    // EXECUTE takes no bind parameters: the arguments go in as literals, in pg's own text form
    const args = parameters.map((p) => (p === null ? 'null' : client.escapeLiteral(String(prepareValue(p))))).join(', ')
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`explain (analyze, format json) execute statement_under_test(${args})`)
    await client.query('rollback')
    const plan = rows[0]?.['QUERY PLAN'][0]?.Plan
    if (!plan) throw new Error('no plan')
    return nodes(plan)
  } finally {
    await client.end()
  }
}

describe.each([1, 4])('lease statements with statistics taken while nothing ran, %i partition(s)', (partitions) => {
  const t = { name: `lp_${randomBytes(6).toString('hex')}` } as { name: string; url: string; db: Kysely<DB> }
  beforeAll(async () => {
    await adminQuery(`create database ${t.name}`)
    t.url = urlFor(t.name)
    await migrate({ databaseUrl: t.url, partitions })
    t.db = createDb({ databaseUrl: t.url, poolSize: 2 }).db
  })
  afterAll(async () => {
    await t.db?.destroy()
    await adminQuery(`drop database if exists ${t.name} with (force)`)
  })

  let claimed: ClaimedExecution[]
  beforeEach(async () => {
    await sql`truncate pgsched.execution_history, pgsched.due, pgsched.runs, pgsched.jobs`.execute(t.db)
    // a large history (each partition holds some), which none of these statements may read
    await insertExecutions(t.db, HISTORY, { state: 'succeeded', job: { type: 'plans.noop', tenant: 'plans' } })
    // due also holds other queues' work, which a claim of its queues must not read
    await insertExecutions(t.db, ELSEWHERE, { job: { type: 'plans.noop', tenant: 'plans', queue: 'elsewhere' } })
    await createClient({ db: t.db, tenant: 'plans' }).submitJobs(Array.from({ length: N }, () => ({ type: 'plans.noop' })))
    // statistics taken now: N + ELSEWHERE due, nothing running (runs empty), a large history
    await sql`analyze pgsched.execution_history, pgsched.due, pgsched.runs`.execute(t.db)
    claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit: N, leaseMs: 60_000 })
    expect(claimed).toHaveLength(N)
    // other workers hold leases too (taken after the statistics): a worker's batch is a part of runs, found by key
    await insertExecutions(t.db, OTHER_LEASES, { state: 'running', workerId: randomUUID(), job: { type: 'plans.noop', tenant: 'plans' } })
  })

  const leases = () => claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt }))
  const statements = {
    complete: () => executionCompleteManyQuery({ workerId: WORKER, completions: leases().map((l) => ({ ...l, resultJson: 'null', outputUri: null })) }),
    // the form for batches with a later attempt (an upsert of the history)
    'complete, upsert': () =>
      executionCompleteManyQuery({ workerId: WORKER, completions: leases().map((l) => ({ ...l, resultJson: 'null', outputUri: null })), upsert: true }),
    fail: () =>
      executionFailManyQuery({
        workerId: WORKER,
        failures: leases().map((l) => ({ ...l, errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
      }),
    release: () => executionReleaseManyQuery({ workerId: WORKER, leases: leases(), started: false }),
  }

  /** How each statement changes the runs rows of its input (each write returns the rows it changed). */
  const runsWrite = { complete: 'Delete', 'complete, upsert': 'Delete', fail: 'Delete', release: 'Delete' } as const

  for (const [name, query] of Object.entries(statements)) {
    it(`${name}: finds each lease by the primary key of runs, once, and never reads the history`, async () => {
      const plan = await genericPlan(t.url, t.db, query())
      // runs is read once for the batch: not probed again for each input row, no row fetched again by its ctid
      for (const r of readsOf(plan, 'runs')) expect(r['Actual Loops'], r['Node Type']).toBe(1)
      expect(plan.filter((n) => n['Node Type'] === 'Tid Scan')).toEqual([])
      expect(joinDiscards(plan), discardingJoins(plan)).toBeLessThan(N)
      expect(rowsWritten(plan, 'runs', runsWrite[name as keyof typeof statements])).toBe(N)
      // every read of runs goes through its primary key (execution_id), by an index scan or a bitmap of it ...
      const reads = readsOf(plan, 'runs')
      expect(reads.length).toBeGreaterThan(0)
      for (const r of reads) expect(indexesOf(r), r['Node Type']).toEqual(['runs_pkey'])
      // ... and looks at one row per input row
      expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBe(N)
      // the history is never read: at most written (complete, fail), its conflicts found by its key
      for (const h of historyNodes(plan)) expect(h['Node Type'], h['Relation Name']).toBe('ModifyTable')
    })
  }

  it('heartbeat: locks the leases it can through the primary key of runs (passing over locked rows), renews them by their ctids in one scan, lists every lease once more by the key, and never reads the history', async () => {
    const plan = await genericPlan(t.url, t.db, executionHeartbeatManyQuery({ workerId: WORKER, leases: leases(), leaseMs: 60_000, running: 0 }))
    const reads = readsOf(plan, 'runs')
    for (const r of reads) expect(r['Actual Loops'], r['Node Type']).toBe(1)
    expect(joinDiscards(plan), discardingJoins(plan)).toBeLessThan(N)
    expect(rowsWritten(plan, 'runs', 'Update')).toBe(N)
    // one scan of the locked rows' ctids for the update, not a rescan per row
    const tid = reads.filter((r) => r['Node Type'] === 'Tid Scan')
    expect(tid.map(rowsExamined)).toEqual([N])
    // the lock and the listing: each one scan of runs_pkey for all the ids, one row per input row
    const byKey = reads.filter((r) => r['Node Type'] !== 'Tid Scan')
    expect(byKey.map(indexesOf)).toEqual([['runs_pkey'], ['runs_pkey']])
    expect(byKey.map(rowsExamined)).toEqual([N, N])
    for (const h of historyNodes(plan)) expect(h['Node Type'], h['Relation Name']).toBe('ModifyTable')
  })

  /** Hands back what beforeEach claimed, so that N executions are pending and due again. */
  const handBack = () => executionReleaseMany(t.db, { workerId: WORKER, leases: leases(), started: false })

  it('claim: takes due executions through the claim index in priority order, reading about `limit` rows, never the history', async () => {
    await handBack()
    const limit = 100
    const plan = await genericPlan(
      t.url,
      t.db,
      executionClaimBatchQuery({ workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit, leaseMs: 60_000 }),
    )
    // `limit` rows leave due and become leases
    expect(rowsWritten(plan, 'due', 'Delete')).toBe(limit)
    expect(rowsWritten(plan, 'runs', 'Insert')).toBe(limit)
    expect(joinDiscards(plan), discardingJoins(plan)).toBeLessThan(limit)
    const reads = readsOf(plan, 'due')
    // by index, and the delete by the ctids of the rows the claim locked
    for (const r of reads) if (r['Node Type'] !== 'Tid Scan') expect(indexesOf(r).length, r['Node Type']).toBeGreaterThan(0)
    expect(reads.filter((r) => r['Node Type'] === 'Tid Scan').map(rowsExamined)).toEqual([limit])
    expect(reads.flatMap(indexesOf)).toContain('due_claim_idx')
    // the index gives the priority order: nothing sorts all N due rows to keep `limit` of them
    for (const sort of plan.filter((n) => n['Node Type'].endsWith('Sort'))) {
      expect(sortedRows(sort)).toBeLessThanOrEqual(limit)
    }
    // the claim index yields `limit` due rows, then the delete finds each claimed row by its ctid
    expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBeLessThanOrEqual(2 * limit)
    // the history is not read; its one node is the insert of executions of cancelled jobs (none here)
    for (const h of historyNodes(plan)) {
      expect(h['Node Type'], h['Relation Name']).toBe('ModifyTable')
      expect(h['Actual Rows'], h['Relation Name']).toBe(0)
    }
  })

  it('claim for several queues: takes due executions by index, reading the due rows of its queues and never the history', async () => {
    await handBack()
    const limit = 100
    const plan = await genericPlan(
      t.url,
      t.db,
      executionClaimBatchQuery({ workerId: WORKER, queues: ['default', 'other'], types: ['plans.noop'], limit, leaseMs: 60_000 }),
    )
    expect(rowsWritten(plan, 'due', 'Delete')).toBe(limit)
    expect(rowsWritten(plan, 'runs', 'Insert')).toBe(limit)
    expect(joinDiscards(plan), discardingJoins(plan)).toBeLessThan(limit)
    const reads = readsOf(plan, 'due')
    // `queue = any(...)` takes every due row of the queues (and sorts them: see claim.ts), not more:
    // not the ELSEWHERE due rows of the other queue ...
    expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBeLessThanOrEqual(N + limit)
    // ... found by index (and deleted by the locked rows' ctids)
    for (const r of reads) if (r['Node Type'] !== 'Tid Scan') expect(indexesOf(r).length, r['Node Type']).toBeGreaterThan(0)
    expect(reads.filter((r) => r['Node Type'] === 'Tid Scan').map(rowsExamined)).toEqual([limit])
    // the history is not read; its one node is the insert of executions of cancelled jobs (none here)
    for (const h of historyNodes(plan)) {
      expect(h['Node Type'], h['Relation Name']).toBe('ModifyTable')
      expect(h['Actual Rows'], h['Relation Name']).toBe(0)
    }
  })
})

describe('fair claim over many tenants', () => {
  const t = { name: `lp_${randomBytes(6).toString('hex')}` } as { name: string; url: string; db: Kysely<DB> }
  const TENANTS = 60
  beforeAll(async () => {
    await adminQuery(`create database ${t.name}`)
    t.url = urlFor(t.name)
    await migrate({ databaseUrl: t.url, partitions: 4 })
    t.db = createDb({ databaseUrl: t.url, poolSize: 2 }).db
  })
  afterAll(async () => {
    await t.db?.destroy()
    await adminQuery(`drop database if exists ${t.name} with (force)`)
  })

  it('reads the fair order from due_fair_idx: about `limit` rows, however many tenants have due work', async () => {
    await sql`insert into pgsched.queues (name, fair_share) values ('fair', true)`.execute(t.db)
    for (let i = 0; i < TENANTS; i++) {
      const tenant = `tenant-${i}`
      await insertExecutions(t.db, 20, { job: { type: 'plans.noop', tenant, queue: 'fair' } })
      await insertExecutions(t.db, 2, { state: 'running', workerId: randomUUID(), job: { type: 'plans.noop', tenant, queue: 'fair' } })
    }
    await sql`insert into pgsched.tenants (name, weight) select 'tenant-' || i, 1 + i % 3 from generate_series(0, ${TENANTS - 1}::int) i`.execute(t.db)
    // the factory's executions wait for their keys, as those a retry writes do
    expect(await fairKeysAssign(t.db, 'fair')).toBe(20 * TENANTS)
    await sql`analyze pgsched.due, pgsched.runs`.execute(t.db)
    const limit = 100
    for (const form of ['admitted', 'limited'] as const) {
      const plan = await genericPlan(
        t.url,
        t.db,
        executionClaimBatchQuery({
          workerId: WORKER,
          queues: ['fair'],
          types: ['plans.noop'],
          limit,
          leaseMs: 60_000,
          ...(form === 'admitted' ? { admit: { fair: true, horizonMs: 100, rateSpacing: 1 } } : { limited: { capacity: 10_000, keyLimit: null, fair: true } }),
        }),
      )
      expect(rowsWritten(plan, 'due', 'Delete'), form).toBe(limit)
      expect(joinDiscards(plan), form).toBeLessThan(limit)
      const reads = readsOf(plan, 'due')
      expect(reads.flatMap(indexesOf), form).toContain('due_fair_idx')
      // nothing sorts the due work of every tenant: the index gives the fair order
      for (const sort of plan.filter((n) => n['Node Type'].endsWith('Sort'))) {
        expect(sortedRows(sort), form).toBeLessThanOrEqual(limit)
      }
      expect(
        reads.reduce((sum, r) => sum + rowsExamined(r), 0),
        form,
      ).toBeLessThanOrEqual(2 * limit)
    }
  })
})

describe('claim with a limit per concurrency key over many keys', () => {
  const t = { name: `lp_${randomBytes(6).toString('hex')}` } as { name: string; url: string; db: Kysely<DB> }
  const KEYS = 60
  beforeAll(async () => {
    await adminQuery(`create database ${t.name}`)
    t.url = urlFor(t.name)
    await migrate({ databaseUrl: t.url, partitions: 4 })
    t.db = createDb({ databaseUrl: t.url, poolSize: 2 }).db
  })
  afterAll(async () => {
    await t.db?.destroy()
    await adminQuery(`drop database if exists ${t.name} with (force)`)
  })

  it('checks each candidate against what its key runs without comparing every candidate with every running key', async () => {
    await sql`insert into pgsched.queues (name, key_concurrency_limit) values ('keyed', 3)`.execute(t.db)
    for (let i = 0; i < KEYS; i++) {
      const tenant = `key-${i}`
      await insertExecutions(t.db, 10, { job: { type: 'plans.noop', tenant, queue: 'keyed' } })
      await insertExecutions(t.db, 1, { state: 'running', workerId: randomUUID(), job: { type: 'plans.noop', tenant, queue: 'keyed' } })
    }
    // each tenant's executions share one key (the factory sets none)
    await sql`update pgsched.due set concurrency_key = tenant`.execute(t.db)
    await sql`update pgsched.runs set concurrency_key = tenant`.execute(t.db)
    await sql`analyze pgsched.due, pgsched.runs`.execute(t.db)
    const limit = 100
    const plan = await genericPlan(
      t.url,
      t.db,
      executionClaimBatchQuery({
        workerId: WORKER,
        queues: ['keyed'],
        types: ['plans.noop'],
        limit,
        leaseMs: 60_000,
        limited: { capacity: null, keyLimit: 3 },
      }),
    )
    // two more of each key may start (3 minus the one running): 100 of the 600 candidates
    expect(rowsWritten(plan, 'due', 'Delete')).toBe(limit)
    expect(joinDiscards(plan), discardingJoins(plan)).toBeLessThan(limit)
  })
})
