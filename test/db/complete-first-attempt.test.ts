/**
 * The completion writes the history row of a first attempt with a plain insert (an execution gets
 * its history row when an attempt ends, so there is none yet), and of a later attempt with an
 * upsert that extends the row its earlier attempts left. Should a first attempt's execution have a
 * row after all, the batch is written again with upserts rather than failing.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany, executionCompleteManyQuery } from '../../src/db/queries/lease.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-00000000c0f1'

const completion = (id: string, jobId: string, attempt: number) => ({ id, jobId, attempt, resultJson: '{"ok":true}', outputUri: null })

describe('the completion of first attempts', () => {
  it('inserts the history of a batch of first attempts without a conflict clause, and upserts when any attempt is later', () => {
    const first = executionCompleteManyQuery({ workerId: WORKER, completions: [completion('a', 'b', 1), completion('c', 'd', 1)] }).compile(t.db).sql
    const later = executionCompleteManyQuery({ workerId: WORKER, completions: [completion('a', 'b', 1), completion('c', 'd', 2)] }).compile(t.db).sql
    const forced = executionCompleteManyQuery({ workerId: WORKER, completions: [completion('a', 'b', 1)], upsert: true }).compile(t.db).sql
    expect(first).toContain('insert into pgsched.execution_history')
    expect(first).not.toContain('on conflict')
    expect(later).toContain('on conflict (id, job_id) do update')
    expect(forced).toContain('on conflict (id, job_id) do update')
  })

  it('records a first attempt whose execution already has a history row, keeping that row’s attempt log', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'first.k', queue: 'first-attempts' })
    const other = await client.submitJob({ type: 'first.k', queue: 'first-attempts' })
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['first-attempts'], types: ['first.k'], limit: 2, leaseMs: 60_000 })
    expect(claimed.map((c) => c.attempt)).toEqual([1, 1])
    const mine = claimed.find((c) => c.jobId === job.id)
    if (!mine) throw new Error('the job was not claimed')
    // a history row a first attempt's execution cannot have through pgsched's own statements (written here by hand)
    await sql`insert into pgsched.execution_history (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts,
                                                     timeout_ms, tenant, attempt_log)
              select execution_id, job_id, queue, type, priority, scheduled_for, run_at, 'pending', 0, max_attempts, timeout_ms, tenant,
                     '[{"attempt":0,"outcome":"failed"}]'::jsonb
                from pgsched.runs where execution_id = ${mine.id}::uuid`.execute(t.db)

    const accepted = await executionCompleteMany(t.db, { workerId: WORKER, completions: claimed.map((c) => completion(c.id, c.jobId, c.attempt)) })

    expect([...accepted].sort()).toEqual(claimed.map((c) => c.id).sort())
    const { rows } = await sql<{ job_id: string; state: string; attempt: number; result: unknown; log: number | null }>`
      select job_id, state, attempt, result, jsonb_array_length(attempt_log) as log from pgsched.execution_history
       where job_id in (${job.id}::uuid, ${other.job.id}::uuid)`.execute(t.db)
    expect(rows.map((r) => [r.job_id === job.id ? 'mine' : 'other', r.state, r.attempt, r.result, r.log]).sort()).toEqual([
      ['mine', 'succeeded', 1, { ok: true }, 1],
      ['other', 'succeeded', 1, { ok: true }, null],
    ])
    expect(Number((await sql<{ n: string }>`select count(*) as n from pgsched.runs`.execute(t.db)).rows[0]?.n)).toBe(0)
  })
})
