/**
 * A worker that claimed ahead while its runs were short, and whose runs then grew long, hands the
 * surplus of its buffer back (due again, its attempt not counted) so that an idle worker takes it:
 * a backlog is shared between workers, not worked through by the one that claimed it first.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('handing back a surplus', () => {
  it('gives a backlog claimed ahead to an idle worker once the runs grow long, each run once at attempt 1', async () => {
    const ranBy: Record<string, string[]> = { a: [], b: [] }
    const handler = (name: 'a' | 'b') =>
      defineHandler<{ ms: number }>('work', async (ctx) => {
        ranBy[name]?.push(ctx.jobId)
        await new Promise((r) => setTimeout(r, ctx.payload.ms))
      })
    let handedBack = 0
    const client = createClient({ db: t.db, tenant: 'acme' })
    const countHandedBack = (executions: readonly unknown[]) => {
      handedBack += executions.length
    }
    const a = await startWorker([handler('a')], { concurrency: 2, prefetch: 1000, events: { handedBack: countHandedBack } })
    // short runs first: worker a's prefetch allowance grows to its cap
    await client.submitJobs(Array.from({ length: 20 }, () => ({ type: 'work', payload: { ms: 0 } })))
    await waitFor(() => ranBy.a?.length === 20, { what: 'the short jobs to run on worker a' })
    const b = await startWorker([handler('b')], { concurrency: 2, prefetch: 1000 })
    await waitFor(async () => (await t.db.selectFrom('pgsched.waiting_workers').select('worker_id').execute()).length === 2, {
      what: 'both workers to wait for work',
    })
    ranBy.a = []
    const slow = await client.submitJobs(Array.from({ length: 60 }, () => ({ type: 'work', payload: { ms: 100 } })))
    const ids = new Set(slow.map((s) => s.id))
    await waitFor(
      async () => {
        const { rows } = await sql<{
          n: number
        }>`select count(*)::int as n from pgsched.executions where state = 'succeeded' and job_id = any(${[...ids]}::uuid[])`.execute(t.db)
        return rows[0]?.n === 60
      },
      { what: 'the 60 slow jobs to succeed', timeoutMs: 30_000 },
    )
    expect(handedBack).toBeGreaterThan(0)
    // worker b, idle while worker a held the backlog, ran a share of it
    expect(ranBy.b?.length).toBeGreaterThanOrEqual(10)
    // every job ran once, and a handed-back execution's attempt was not counted
    expect([...(ranBy.a ?? []), ...(ranBy.b ?? [])].sort()).toEqual([...ids].sort())
    const { rows } = await sql<{ attempt: number; n: number }>`
      select attempt, count(*)::int as n from pgsched.executions where job_id = any(${[...ids]}::uuid[]) group by attempt`.execute(t.db)
    expect(rows).toEqual([{ attempt: 1, n: 60 }])
    expect(a.id).not.toBe(b.id)
  })
})
