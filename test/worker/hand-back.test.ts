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
    let claimedByA = 0
    const client = createClient({ db: t.db, tenant: 'acme' })
    const a = await startWorker([handler('a')], {
      concurrency: 2,
      prefetch: 1000,
      events: {
        handedBack: (executions: readonly unknown[]) => {
          handedBack += executions.length
        },
        claimed: (count: number) => {
          claimedByA += count
        },
      },
    })
    // short runs first: worker a's prefetch allowance (2 slots × 100 ms / the mean run time) grows;
    // 60 of them, so that a slow first run (a cold start) hardly weighs in the mean any more
    await client.submitJobs(Array.from({ length: 60 }, () => ({ type: 'work', payload: { ms: 0 } })))
    await waitFor(() => ranBy.a?.length === 60, { what: 'the short jobs to run on worker a' })
    ranBy.a = []
    claimedByA = 0
    // worker a, alone, claims a backlog ahead. Its mean run time moves 1/16 of the way to each
    // 400 ms run, so it holds more than a second's worth of waiting runs, and hands back all but
    // its allowance, only if it claimed about 23 or more (an allowance from short runs under about
    // 9 ms); it claims no more after. Worker b starts only then, so which of two waiting workers
    // claims first plays no part.
    const slow = await client.submitJobs(Array.from({ length: 30 }, () => ({ type: 'work', payload: { ms: 400 } })))
    await waitFor(() => claimedByA >= 24, { what: 'worker a to claim 24 or more ahead' })
    const b = await startWorker([handler('b')], { concurrency: 2, prefetch: 1000 })
    const ids = new Set(slow.map((s) => s.id))
    await waitFor(
      async () => {
        const { rows } = await sql<{
          n: number
        }>`select count(*)::int as n from pgsched.executions where state = 'succeeded' and job_id = any(${[...ids]}::uuid[])`.execute(t.db)
        return rows[0]?.n === 30
      },
      { what: 'the 30 slow jobs to succeed', timeoutMs: 30_000 },
    )
    expect(handedBack).toBeGreaterThan(0)
    // worker b, idle while worker a held the backlog, ran a share of it
    expect(ranBy.b?.length).toBeGreaterThanOrEqual(8)
    // every job ran once, and a handed-back execution's attempt was not counted
    expect([...(ranBy.a ?? []), ...(ranBy.b ?? [])].sort()).toEqual([...ids].sort())
    const { rows } = await sql<{ attempt: number; n: number }>`
      select attempt, count(*)::int as n from pgsched.executions where job_id = any(${[...ids]}::uuid[]) group by attempt`.execute(t.db)
    expect(rows).toEqual([{ attempt: 1, n: 30 }])
    expect(a.id).not.toBe(b.id)
  })
})
