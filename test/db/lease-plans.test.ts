/**
 * The lease statements (heartbeat, complete, fail, release) join their input
 * arrays to executions. Whatever the statistics say, each must read its input
 * once and find every row by key: a plan that rescans the input for each
 * execution row is quadratic in the batch (82 ms instead of 8 ms for 500
 * completions). The statistics here are the ones that once led the planner
 * there: taken while nothing was running, so the lease index looked empty,
 * over a history of finished runs.
 * Each statement runs as a generic prepared plan, as the worker's hot-path
 * pool plans every statement (plan_cache_mode = force_generic_plan). The claim
 * is checked the same way: it must take its rows through the claim index.
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
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { adminQuery, urlFor } from '../db.ts'
import { insertExecutions } from '../factories.ts'

const WORKER = randomUUID()
const N = 300
const HISTORY = 20_000

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Actual Rows': number
  'Actual Loops': number
  'Rows Removed by Filter'?: number
  'Rows Removed by Index Recheck'?: number
  'Rows Removed by Join Filter'?: number
  Plans?: PlanNode[]
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

/** Reads of executions partitions (the update itself aside). */
const partitionReads = (plan: PlanNode[]) => plan.filter((n) => n['Relation Name']?.startsWith('executions_p') && n['Node Type'] !== 'ModifyTable')

/** Rows a node looked at: those it returned and those it threw away, over all its loops. */
const rowsExamined = (n: PlanNode) => (n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * n['Actual Loops']

/**
 * The indexes a read went through: its own (index scans), or its bitmap's (a bitmap heap scan);
 * none for a sequential scan. Which of these the planner picks depends on its estimates, not on
 * what the product needs: that every row is found by an index, and few are read.
 */
const indexesOf = (n: PlanNode): string[] =>
  n['Index Name'] !== undefined ? [n['Index Name']] : (n.Plans ?? []).flatMap((c) => (c['Node Type'].startsWith('Bitmap') ? indexesOf(c) : []))

const rowsUpdated = (plan: PlanNode[]) => plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'executions')?.['Actual Rows']

/** EXPLAIN ANALYZE of the statement as a generic prepared plan, rolled back. */
async function genericPlan(url: string, db: Kysely<DB>, query: { compile(db: Kysely<DB>): CompiledQuery }): Promise<PlanNode[]> {
  const { sql: text, parameters } = query.compile(db)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('begin')
    await client.query('set local plan_cache_mode = force_generic_plan')
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
    await sql`truncate pgsched.executions, pgsched.jobs`.execute(t.db)
    // a history large enough that the planner finds rows by index rather than by reading every partition
    await insertExecutions(t.db, HISTORY, { state: 'succeeded', job: { type: 'plans.noop', tenant: 'plans' } })
    await createClient({ db: t.db, tenant: 'plans' }).submitJobs(Array.from({ length: N }, () => ({ type: 'plans.noop' })))
    await sql`analyze pgsched.executions`.execute(t.db)
    claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit: N, leaseMs: 60_000 })
    expect(claimed).toHaveLength(N)
  })

  const leases = () => claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt }))
  const statements = {
    heartbeat: () => executionHeartbeatManyQuery({ workerId: WORKER, leases: leases(), leaseMs: 60_000 }),
    complete: () => executionCompleteManyQuery({ workerId: WORKER, completions: leases().map((l) => ({ ...l, resultJson: 'null', outputUri: null })) }),
    fail: () =>
      executionFailManyQuery({
        workerId: WORKER,
        failures: leases().map((l) => ({ ...l, errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
      }),
    release: () => executionReleaseManyQuery({ workerId: WORKER, leases: leases() }),
  }

  for (const [name, query] of Object.entries(statements)) {
    it(`${name}: reads its input once and finds each execution by key`, async () => {
      const plan = await genericPlan(t.url, t.db, query())
      const inputScans = plan.filter((n) => n['Node Type'] === 'Function Scan')
      expect(inputScans.length).toBeGreaterThan(0)
      for (const scan of inputScans) expect(scan['Actual Loops']).toBe(1)
      const discarded = plan.reduce((sum, n) => sum + (n['Rows Removed by Join Filter'] ?? 0), 0)
      expect(discarded).toBeLessThan(N)
      expect(rowsUpdated(plan)).toBe(N)
      // every partition read goes through a key of the input row: the primary key (id, job_id) or
      // the fire-time key (job_id, scheduled_for), by an index scan or a bitmap of it ...
      const reads = partitionReads(plan)
      expect(reads.length).toBeGreaterThan(0)
      for (const r of reads) expect(indexesOf(r), r['Node Type']).toEqual([expect.stringMatching(/_(pkey|job_id_scheduled_for_key)$/)])
      // ... and looks at about one row per input row, never the history
      expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBeLessThanOrEqual(2 * N)
    })
  }

  /** Hands back what beforeEach claimed, so that N executions are pending and due again. */
  const handBack = () => executionReleaseMany(t.db, { workerId: WORKER, leases: leases() })

  it('claim: takes due executions through the claim index in priority order, reading about `limit` rows', async () => {
    await handBack()
    const limit = 100
    const plan = await genericPlan(
      t.url,
      t.db,
      executionClaimBatchQuery({ workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit, leaseMs: 60_000 }),
    )
    expect(rowsUpdated(plan)).toBe(limit)
    const reads = partitionReads(plan)
    for (const r of reads) expect(indexesOf(r).length, r['Node Type']).toBeGreaterThan(0)
    expect(reads.flatMap(indexesOf)).toContainEqual(expect.stringMatching(/_queue_priority_run_at_id_idx$/))
    // the index gives the priority order: nothing sorts all N due rows to keep `limit` of them
    for (const sort of plan.filter((n) => n['Node Type'].endsWith('Sort'))) {
      expect((sort.Plans ?? []).reduce((sum, c) => sum + c['Actual Rows'] * c['Actual Loops'], 0)).toBeLessThanOrEqual(limit)
    }
    // each partition yields at most `limit` due rows, then each claimed row is found by key
    expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBeLessThanOrEqual(limit * (partitions + 1))
  })

  it('claim for several queues: takes due executions by index, reading the due rows and never the history', async () => {
    await handBack()
    const limit = 100
    const plan = await genericPlan(
      t.url,
      t.db,
      executionClaimBatchQuery({ workerId: WORKER, queues: ['default', 'other'], types: ['plans.noop'], limit, leaseMs: 60_000 }),
    )
    expect(rowsUpdated(plan)).toBe(limit)
    const reads = partitionReads(plan)
    for (const r of reads) expect(indexesOf(r).length, r['Node Type']).toBeGreaterThan(0)
    // `queue = any(...)` takes every due row of the queues (and sorts them: see claim.ts), not more
    expect(reads.reduce((sum, r) => sum + rowsExamined(r), 0)).toBeLessThanOrEqual(N + limit)
  })
})
