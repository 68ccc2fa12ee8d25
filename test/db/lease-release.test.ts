/**
 * A hand-back (executionReleaseMany) answers with the executions it took back: those whose lease the
 * worker still held. The worker counts only these as handed back (metrics, events), not one whose
 * lease was lost meanwhile (reaped, cancelled).
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionReleaseMany } from '../../src/db/queries/lease.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const W = '00000000-0000-7000-8000-00000000e001'

describe('executionReleaseMany', () => {
  it('answers with the ids of the executions it handed back, not of a lease already gone', async () => {
    await createClient({ db: t.db, tenant: 'acme' }).submitJobs([{ type: 'r' }, { type: 'r' }, { type: 'r' }])
    const claimed = await executionClaimBatch(t.db, { workerId: W, queues: ['default'], types: ['r'], limit: 10, leaseMs: 60_000 })
    expect(claimed).toHaveLength(3)
    const [lost, ...kept] = claimed
    if (!lost) throw new Error('nothing claimed')
    // its lease lost (as the reaper or a cancel would end it)
    await sql`delete from pgsched.runs where execution_id = ${lost.id}::uuid`.execute(t.db)
    const released = await executionReleaseMany(t.db, { workerId: W, leases: claimed, started: false })
    expect(released.sort()).toEqual(kept.map((c) => c.id).sort())
    expect(await executionReleaseMany(t.db, { workerId: W, leases: claimed, started: false })).toEqual([])
  })
})
