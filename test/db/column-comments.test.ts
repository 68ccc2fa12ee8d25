/**
 * What `\d+` tells an operator: every column of the executions view and of the webhook delivery
 * log has a comment (migration 0049), and the columns pgsched.due and pgsched.runs share with the
 * history say what they mean there too; every column of pgsched.workers has one, and the comments
 * of jobs.state, executions.last_worker_id and executions.error say what those hold (migration 0060);
 * so does every column of the events view (migration 0061), and every column of the API keys,
 * schedules, queue settings and the other tables whose name does not say it all (migration 0062).
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { JOB_STATUSES } from '../../src/core/job-status.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { executionCompleteMany, executionFailMany } from '../../src/db/queries/lease.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb({ truncate: false })

async function uncommented(relation: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select a.attname as name
      from pg_attribute a
     where a.attrelid = ${`pgsched.${relation}`}::regclass and a.attnum > 0 and not a.attisdropped
       and col_description(a.attrelid, a.attnum) is null
     order by a.attnum`.execute(t.db)
  return rows.map((r) => r.name)
}

describe('column comments', () => {
  it('explain every column of the executions view and of the webhook delivery log', async () => {
    expect(await uncommented('executions')).toEqual([])
    expect(await uncommented('webhook_deliveries')).toEqual([])
  })

  it('explain every column of the API keys, schedules, queues, fair-share and key-rate rows, webhook subscriptions and output chunks whose name does not say it all', async () => {
    // what is left is named plainly (a key, a creation or change time, a copy of the job's field)
    expect(await uncommented('api_keys')).toEqual(['id', 'created_at'])
    expect(await uncommented('triggers')).toEqual(['job_id', 'created_at', 'updated_at'])
    expect(await uncommented('queues')).toEqual(['name', 'updated_at'])
    expect(await uncommented('fair_clocks')).toEqual(['updated_at'])
    expect(await uncommented('queue_key_slots')).toEqual([])
    expect(await uncommented('webhook_subscriptions')).toEqual(['id', 'tenant', 'created_at'])
    expect(await uncommented('event_listeners')).toEqual(['id', 'created_at'])
    expect(await uncommented('waiting_workers')).toEqual([])
    expect(await uncommented('execution_output')).toEqual(['execution_id', 'created_at'])
    expect((await uncommented('jobs')).filter((c) => ['payload', 'idempotency_key', 'backoff_max_ms'].includes(c))).toEqual([])
  })

  it("explain every column of due and runs that the history explains, leaving only the job's plain copies", async () => {
    const plain = ['execution_id', 'job_id', 'type', 'priority', 'max_attempts', 'timeout_ms', 'created_at']
    expect(await uncommented('due')).toEqual(plain)
    expect(await uncommented('runs')).toEqual(plain)
  })
})

describe('what the comments say an operator reads', () => {
  const comment = async (relation: string, column: string): Promise<string> => {
    const { rows } = await sql<{ c: string | null }>`
      select col_description(a.attrelid, a.attnum) as c from pg_attribute a
       where a.attrelid = ${`pgsched.${relation}`}::regclass and a.attname = ${column}`.execute(t.db)
    return rows[0]?.c ?? ''
  }

  it('names the job statuses the product shows in the comment of jobs.state, and no other', async () => {
    const text = await comment('jobs', 'state')
    for (const status of JOB_STATUSES) expect(text).toContain(status)
    expect(text).not.toMatch(/NOT_STARTED|\bSTARTED\b/)
  })

  it('explain every column of the events view', async () => {
    expect(await uncommented('events')).toEqual([])
  })

  it('explain every column of workers, which say whether a worker is alive and where it runs', async () => {
    expect(await uncommented('workers')).toEqual([])
    expect(await comment('workers', 'last_seen_at')).toContain('pgsched.worker_live')
  })

  it('do not call the tenant of due and runs nullable: it never is there', async () => {
    for (const relation of ['due', 'runs']) {
      const { rows } = await sql<{ notnull: boolean }>`
        select attnotnull as notnull from pg_attribute where attrelid = ${`pgsched.${relation}`}::regclass and attname = 'tenant'`.execute(t.db)
      expect(rows[0]?.notnull).toBe(true)
      expect(await comment(relation, 'tenant')).not.toContain('null')
    }
  })

  it('hold, as their comments say, the previous attempt’s worker and error in last_worker_id and error while a retry runs', async () => {
    const first = '00000000-0000-7000-8000-0000000c0c01'
    const second = '00000000-0000-7000-8000-0000000c0c02'
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'comment.retry', queue: 'comment-retries', maxAttempts: 3, backoffBaseMs: 0 })
    const view = async () =>
      (
        await sql<{
          state: string
          attempt: number
          worker_id: string | null
          last_worker_id: string | null
          latest: string | null
          error: { attempt: number } | null
        }>`
          select state, attempt, worker_id, last_worker_id, coalesce(worker_id, last_worker_id) as latest, error
            from pgsched.executions where job_id = ${job.id}::uuid`.execute(t.db)
      ).rows[0]
    const claim = (workerId: string) =>
      executionClaimBatch(t.db, { workerId, queues: ['comment-retries'], types: ['comment.retry'], limit: 1, leaseMs: 60_000 })

    const [attempt1] = await claim(first)
    if (!attempt1) throw new Error('attempt 1 was not claimed')
    expect(await view()).toMatchObject({ state: 'running', attempt: 1, worker_id: first, last_worker_id: null, latest: first, error: null })

    const errorJson = JSON.stringify({ message: 'no', name: 'Error', attempt: 1, workerId: first, at: new Date().toISOString() })
    await executionFailMany(t.db, { workerId: first, failures: [{ ...attempt1, errorJson, fatal: false, outputUri: null }] })
    expect(await view()).toMatchObject({ state: 'pending', attempt: 1, worker_id: null, last_worker_id: first, latest: first, error: { attempt: 1 } })

    await waitFor(async () => (await claim(second)).length === 1)
    expect(await view()).toMatchObject({ state: 'running', attempt: 2, worker_id: second, last_worker_id: first, latest: second, error: { attempt: 1 } })
    expect(await comment('executions', 'last_worker_id')).toContain('coalesce(worker_id, last_worker_id)')
    expect(await comment('executions', 'error')).toContain('previous attempt')

    await executionCompleteMany(t.db, { workerId: second, completions: [{ ...attempt1, attempt: 2, resultJson: '{}', outputUri: null }] })
    expect(await view()).toMatchObject({ state: 'succeeded', attempt: 2, worker_id: null, last_worker_id: second, latest: second, error: null })
    expect(await comment('executions', 'error')).toContain('null once an attempt succeeded')
  })
})
