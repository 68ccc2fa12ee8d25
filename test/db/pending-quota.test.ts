/**
 * What the pending quota costs a submit (migration 0064): pgsched.admit_submits counts the pending
 * executions of the tenant's own jobs, up to maxPending, from due_quota_idx alone, whose predicate
 * leaves the webhook deliveries out. However many deliveries are pending, the count reads no row of
 * pgsched.due: a filter on the type over an index without it would fetch each delivery's row.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { WEBHOOK_JOB_TYPE } from '../../src/core/events.ts'
import { useTestDb } from '../db.ts'
import { insertExecutions } from '../factories.ts'

const t = useTestDb()

describe('the pending quota', () => {
  it("counts the tenant's own pending executions without reading a row of due, however many of its deliveries are pending", async () => {
    await createClient({ db: t.db }).tenants.update('acme', { maxPending: 100 })
    // deliveries in two queues (the subscriptions'), around and between acme's own jobs and another tenant's
    await insertExecutions(t.db, 2, { job: { tenant: 'acme', type: 'k', queue: 'default' } })
    await insertExecutions(t.db, 3_000, { job: { tenant: 'acme', type: WEBHOOK_JOB_TYPE, queue: 'default' } })
    await insertExecutions(t.db, 1_000, { job: { tenant: 'acme', type: WEBHOOK_JOB_TYPE, queue: 'hooks' } })
    await insertExecutions(t.db, 3, { job: { tenant: 'acme', type: 'k', queue: 'other' } })
    await insertExecutions(t.db, 500, { job: { tenant: 'zeta', type: 'k', queue: 'default' } })
    // the visibility map set, as autovacuum keeps it (an index-only read of a page not all-visible reads the row)
    await sql`vacuum (analyze) pgsched.due`.execute(t.db)

    const { admitted, heapBlocks, quotaIndexScans } = await t.db.transaction().execute(async (trx) => {
      // this session's reads not yet sent to the statistics, before and after
      const reads = async () => {
        const { rows } = await sql<{ heap_blocks: string; quota_index_scans: string }>`
          select pg_stat_get_xact_blocks_fetched('pgsched.due'::regclass) as heap_blocks,
                 pg_stat_get_xact_numscans('pgsched.due_quota_idx'::regclass) as quota_index_scans`.execute(trx)
        return { heapBlocks: Number(rows[0]?.heap_blocks), quotaIndexScans: Number(rows[0]?.quota_index_scans) }
      }
      const before = await reads()
      const { rows } = await sql<{ admitted: number }>`select admitted from pgsched.admit_submits('acme', 96, false)`.execute(trx)
      const after = await reads()
      return { admitted: rows[0]?.admitted, heapBlocks: after.heapBlocks - before.heapBlocks, quotaIndexScans: after.quotaIndexScans - before.quotaIndexScans }
    })
    // 5 of its own pending: 95 more fit, not 96; the 4,000 deliveries do not count
    expect(admitted).toBe(0)
    expect(
      await t.db
        .transaction()
        .execute(async (trx) => (await sql<{ a: number }>`select admitted as a from pgsched.admit_submits('acme', 95, false)`.execute(trx)).rows[0]?.a),
    ).toBe(95)
    expect(quotaIndexScans).toBeGreaterThan(0)
    // the few blocks counted are the visibility map's (read by index-only scans, counted as the
    // table's); reading the deliveries' rows would be a block or more per page of them (tens here)
    expect(heapBlocks).toBeLessThan(10)
  })
})
