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
  executionReleaseManyQuery,
} from '../../src/db/queries/lease.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { adminQuery, urlFor } from '../db.ts'

const WORKER = randomUUID()
const N = 300
const HISTORY = 20_000

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Actual Rows': number
  'Actual Loops': number
  'Rows Removed by Join Filter'?: number
  Plans?: PlanNode[]
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)]

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
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `explain (analyze, format json) execute statement_under_test(${args})`,
    )
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
    await sql`
      insert into pgsched.executions (job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts,
                                      timeout_ms, started_at, finished_at)
      select gen_random_uuid(), 'default', 'plans.noop', 0, now(), now(), 'succeeded', 1, 5, 1000, now(), now()
        from generate_series(1, ${HISTORY}::int)`.execute(t.db)
    await createClient({ db: t.db, tenant: 'plans' }).submitJobs(Array.from({ length: N }, () => ({ type: 'plans.noop' })))
    await sql`analyze pgsched.executions`.execute(t.db)
    claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit: N, leaseMs: 60_000 })
    expect(claimed).toHaveLength(N)
  })

  const leases = () => claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt }))
  const statements = {
    heartbeat: () => executionHeartbeatManyQuery({ workerId: WORKER, leases: leases(), leaseMs: 60_000 }),
    complete: () =>
      executionCompleteManyQuery({ workerId: WORKER, completions: leases().map((l) => ({ ...l, resultJson: 'null', outputUri: null })) }),
    fail: () =>
      executionFailManyQuery({
        workerId: WORKER,
        failures: leases().map((l) => ({ ...l, errorJson: '{"message":"x"}', fatal: false, outputUri: null })),
      }),
    release: () => executionReleaseManyQuery({ workerId: WORKER, leases: leases() }),
  }

  for (const [name, query] of Object.entries(statements)) {
    it(`${name}: reads its input once and probes executions by key`, async () => {
      const plan = await genericPlan(t.url, t.db, query())
      const inputScans = plan.filter((n) => n['Node Type'] === 'Function Scan')
      expect(inputScans.length).toBeGreaterThan(0)
      for (const scan of inputScans) expect(scan['Actual Loops']).toBe(1)
      const discarded = plan.reduce((sum, n) => sum + (n['Rows Removed by Join Filter'] ?? 0), 0)
      expect(discarded).toBeLessThan(N)
      // every leased row found and written, each partition read through an index only
      const update = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'executions')
      expect(update?.['Actual Rows']).toBe(N)
      const reads = plan.filter((n) => n['Relation Name']?.startsWith('executions_p') && n['Node Type'] !== 'ModifyTable')
      expect(reads.length).toBeGreaterThan(0)
      for (const r of reads) expect(r['Node Type']).toMatch(/^Index (Only )?Scan$/)
    })
  }

  it('claim: takes due executions through the claim index and finds every partition row by index', async () => {
    // hand back what beforeEach claimed, so that N executions are pending again
    await sql`update pgsched.executions set state = 'pending', worker_id = null, lease_expires_at = null where state = 'running'`.execute(t.db)
    const limit = 100
    const plan = await genericPlan(t.url, t.db, executionClaimBatchQuery({ workerId: WORKER, queues: ['default'], types: ['plans.noop'], limit, leaseMs: 60_000 }))
    const update = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'executions')
    expect(update?.['Actual Rows']).toBe(limit)
    const reads = plan.filter((n) => n['Relation Name']?.startsWith('executions_p') && n['Node Type'] !== 'ModifyTable')
    expect(reads.length).toBeGreaterThan(0)
    for (const r of reads) expect(r['Node Type']).toMatch(/^Index (Only )?Scan$/)
    const claimIndexScans = plan.filter((n) => (n as { 'Index Name'?: string })['Index Name']?.endsWith('_queue_priority_run_at_id_idx'))
    expect(claimIndexScans).toHaveLength(partitions)
    // each partition's claim index yields at most the limit (the merge stops there), not every pending row
    for (const scan of claimIndexScans) expect(scan['Actual Rows']).toBeLessThanOrEqual(limit)
  })

  it('claim for several queues: takes due executions by index, never reading a partition whole', async () => {
    await sql`update pgsched.executions set state = 'pending', worker_id = null, lease_expires_at = null where state = 'running'`.execute(t.db)
    const limit = 100
    const plan = await genericPlan(t.url, t.db, executionClaimBatchQuery({ workerId: WORKER, queues: ['default', 'other'], types: ['plans.noop'], limit, leaseMs: 60_000 }))
    const update = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'executions')
    expect(update?.['Actual Rows']).toBe(limit)
    const reads = plan.filter((n) => n['Relation Name']?.startsWith('executions_p') && n['Node Type'] !== 'ModifyTable')
    expect(reads.length).toBeGreaterThan(0)
    for (const r of reads) expect(r['Node Type']).toMatch(/^(Index (Only )?Scan|Bitmap Heap Scan)$/)
  })
})
