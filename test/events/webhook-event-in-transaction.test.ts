/**
 * A webhook subscription gets the events written after it was made, whenever their transactions
 * began: a job submitted in the application's own transaction, begun before the subscription was
 * made and committed after it, was captured (a stream read it) but stamped with its transaction's
 * start, before the subscription's, so the dispatcher never made its delivery.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import { expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { eventListAfter } from '../../src/db/queries/events.ts'
import { sequenceEvents } from '../../src/events/event-stream.ts'
import { WebhookDispatcher } from '../../src/maintenance/webhook-dispatcher.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

it('hands a job submitted after the subscription was made to the subscription, whenever its transaction began', async () => {
  const client = createClient({ db: t.db, tenant: 'acme', httpAllow: '127.0.0.1' })
  const conn = await t.pool.connect()
  let jobId: string
  try {
    await conn.query('begin')
    await conn.query('select 1') // the application's own work in its transaction
    await sleep(20)
    const subscription = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook', events: ['submitted'] }) // committed meanwhile
    await sleep(20)
    const { job } = await client.submitJob({ type: 'welcome' }, { trx: conn })
    jobId = job.id
    await conn.query('commit')
    await sequenceEvents(t.db)
    const captured = await eventListAfter(t.db, { after: '0', tenant: 'acme', filter: { jobId }, limit: 10 })
    expect(captured.map((e) => e.type)).toEqual(['submitted'])
    // stamped when written: after the subscription
    expect(captured[0]?.at.getTime()).toBeGreaterThanOrEqual(subscription.createdAt.getTime())
  } finally {
    conn.release()
  }
  await new WebhookDispatcher({ db: t.db, log: t.log }).runOnce()
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pgsched.jobs where type = 'pgsched.webhook' and payload -> 'event' ->> 'jobId' = ${jobId}`.execute(t.db)
  expect(rows[0]?.n).toBe(1)
})
