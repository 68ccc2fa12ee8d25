/**
 * The output of a run handed back when its worker stopped (its attempt not counted) ends with a marker
 * saying so: the next run of the execution, under the same attempt number, appends its own after it.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { handedBackMarker } from '../../src/core/output-uri.ts'
import { executionOutputRead } from '../../src/db/queries/output.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

describe('the output of a run handed back at shutdown', () => {
  it('ends with a marker, before the output of the run that follows under the same attempt number', async () => {
    let runs = 0
    let wrote: () => void = () => {}
    const written = new Promise<void>((resolve) => (wrote = resolve))
    const handler = defineHandler('hand-back.output', async (ctx) => {
      runs++
      ctx.output.write(`run ${runs} attempt ${ctx.attempt}\n`)
      if (runs === 1) {
        wrote()
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        throw ctx.signal.reason
      }
      return null
    })
    const first = await startWorker([handler], { shutdownGraceMs: 50 })
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'hand-back.output' })
    await written
    await first.stop()
    await startWorker([handler])
    const done = await waitFor(
      async () => {
        const e = await t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', job.id).executeTakeFirst()
        return e?.state === 'succeeded' ? e : null
      },
      { what: 'the rerun to succeed' },
    )
    expect(done.attempt).toBe(1)
    const rows = await executionOutputRead(t.db, { executionId: done.id, attempt: 1, afterSeq: null, limit: 100 })
    expect(Buffer.concat(rows.map((r) => r.data)).toString()).toBe(`run 1 attempt 1\n${handedBackMarker()}run 2 attempt 1\n`)
  })
})
