/**
 * Nothing waits silently: a job with work to run and no live worker for its type in its queue says
 * so in viewJob and over REST, and stops saying it once a worker serving both is running; the queue
 * listing and the API's metrics count such executions per queue.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const api = useTestApi(t)
const startWorker = useWorkers(t)
const orphan = defineHandler('orphan', async () => null)

describe('a job no worker serves', () => {
  it('says so while no live worker serves its type in its queue', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'orphan', schedule: { every: 'PT1H' } })
    const message =
      'no live worker serves type "orphan" in queue "default" (a live worker is one running now, not stopped and seen within its lease length (SCHEDULER_LEASE_MS, 30 s by default)): start one with a handler for it and --queues default'
    expect((await client.viewJob(job.id)).unserved).toBe(message)
    const res = await api.call(await api.keyFor('acme'), 'GET', `/v1/jobs/${job.id}`)
    expect(res.json().unserved).toBe(message)
    // a worker with the handler, on another queue: still unserved
    const elsewhere = await startWorker([orphan], { queues: ['other'] })
    expect((await client.viewJob(job.id)).unserved).toBe(message)
    await elsewhere.stop()
    // a worker that serves both
    const serving = await startWorker([orphan])
    expect((await client.viewJob(job.id)).unserved).toBeNull()
    // a worker seen within its lease length counts; one not seen for longer (killed: its leases are gone) no longer does
    const seenAgo = (ms: string) =>
      sql`update pgsched.workers set last_seen_at = now() - (lease_ms + ${ms}::int) * interval '1 millisecond' where id = ${serving.id}::uuid`
    await seenAgo('-1000').execute(t.db)
    expect((await client.viewJob(job.id)).unserved).toBeNull()
    await seenAgo('1000').execute(t.db)
    expect((await client.viewJob(job.id)).unserved).toBe(message)
    // a paused job has nothing to run
    await client.pauseJob(job.id)
    expect((await client.viewJob(job.id)).unserved).toBeNull()
  })

  it('is counted per queue in the queue listing and in the pgsched_queue_unserved metric', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    await client.submitJobs([
      { type: 'orphan' },
      { type: 'orphan' },
      { type: 'served' },
      { type: 'lost', schedule: { at: new Date(Date.now() + 3_600_000).toISOString() } },
    ])
    await startWorker([defineHandler('served', (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)))])
    const operator = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const res = await api.call(operator, 'GET', '/v1/queues/default')
    expect(res.statusCode).toBe(200)
    // the served one is claimed (running) or pending, but never unserved; the scheduled one counts
    expect(res.json()).toMatchObject({ unserved: 3, unservedTypes: ['lost', 'orphan'] })
    const metrics = (await api.app.inject({ method: 'GET', url: '/metrics' })).body
    expect(metrics).toMatch(/^pgsched_queue_unserved\{queue="default"\} 3$/m)
    // a worker for the rest: nothing unserved
    await startWorker([orphan, defineHandler('lost', () => null)])
    expect((await api.call(operator, 'GET', '/v1/queues/default')).json()).toMatchObject({ unserved: 0, unservedTypes: [] })
  })
})
