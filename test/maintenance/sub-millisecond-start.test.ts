/**
 * No fire time before startAt, to the microsecond: pgsched.submit_job (from migration 0086), REST and
 * TypeScript take a finer fraction of startAt or schedule.at up to the millisecond, one of endAt down;
 * and the dispatcher, which counts in whole milliseconds, takes a start_at stored with microseconds
 * (by an earlier version's submit_job), an interval's first fire time, and the submit a cron's first
 * fire time is counted from up to the next millisecond rather than cutting the microseconds off.
 */
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import type { Clock } from '../../src/clock.ts'
import { createClient } from '../../src/client.ts'
import { TriggerScheduler } from '../../src/maintenance/trigger-scheduler.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const started: TriggerScheduler[] = []
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()))
})

function pinned(at: Date): Clock & { set(d: Date): void } {
  let current = at
  return { now: () => current, set: (d) => (current = d) }
}

/** The first execution's fire time and the trigger's start, as the database holds them (microseconds). */
async function firstFire(jobId: string): Promise<{ scheduledFor: string; startAt: string }> {
  const { rows } = await sql<{ scheduled_for: string; start_at: string }>`
    select to_char(e.scheduled_for at time zone 'UTC', 'HH24:MI:SS.US') as scheduled_for,
           to_char(tr.start_at at time zone 'UTC', 'HH24:MI:SS.US') as start_at
      from pgsched.executions e join pgsched.triggers tr on tr.job_id = e.job_id
     where e.job_id = ${jobId}::uuid order by e.scheduled_for limit 1`.execute(t.db)
  const row = rows[0]
  if (!row) throw new Error(`job ${jobId} has no execution`)
  return { scheduledFor: row.scheduled_for, startAt: row.start_at }
}

/** Runs the dispatcher before the start (a cron's first fire time is computed then), then just after its first fire time. */
async function dispatchAround(): Promise<void> {
  const clock = pinned(new Date('2029-12-31T23:59:59Z'))
  const dispatcher = new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000, aheadMs: 0, clock })
  started.push(dispatcher)
  await dispatcher.runOnce()
  clock.set(new Date('2030-01-01T00:00:01.500Z'))
  await dispatcher.runOnce()
}

describe('a start given to the microsecond', () => {
  it.each([
    ['cron', `cron => '* * * * * *'`, '00:00:01.000000'],
    ['every', `every => '1 second'`, '00:00:00.001000'],
  ])('from SQL, a %s schedule fires first at or after start_at, not in the millisecond before it', async (_kind, schedule, first) => {
    const { rows } = await sql<{ id: string }>`
      select pgsched.submit_job('tick', ${sql.raw(schedule)}, start_at => '2030-01-01 00:00:00.0005+00') as id`.execute(t.db)
    const id = rows[0]?.id as string
    await dispatchAround()
    expect(await firstFire(id)).toEqual({ scheduledFor: first, startAt: '00:00:00.001000' })
  })

  it.each([
    ['cron', `cron => '* * * * * *'`, '00:00:01.000000'],
    ['every', `every => '1 second'`, '00:00:00.001000'],
  ])('a %s schedule whose start_at was stored with microseconds (before migration 0086) fires first at or after it', async (_kind, schedule, first) => {
    const { rows } = await sql<{ id: string }>`select pgsched.submit_job('tick', ${sql.raw(schedule)}, start_at => '2030-01-01 00:00:00+00') as id`.execute(
      t.db,
    )
    const id = rows[0]?.id as string
    await sql`update pgsched.triggers
                 set start_at = '2030-01-01 00:00:00.0005+00',
                     next_fire_at = case when next_fire_at = '-infinity' then next_fire_at else '2030-01-01 00:00:00.0005+00' end
               where job_id = ${id}::uuid`.execute(t.db)
    await dispatchAround()
    expect(await firstFire(id)).toEqual({ scheduledFor: first, startAt: '00:00:00.000500' })
  })

  it('from TypeScript (as over REST), startAt and schedule.at go up to the millisecond and endAt down', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await client.submitJob({
      type: 'tick',
      schedule: { every: '1s' },
      startAt: '2030-01-01T00:00:00.0005Z',
      endAt: '2030-01-01T00:00:09.9999Z',
    })
    expect([job.schedule?.startAt?.toISOString(), job.schedule?.endAt?.toISOString()]).toEqual(['2030-01-01T00:00:00.001Z', '2030-01-01T00:00:09.999Z'])
    await dispatchAround()
    expect(await firstFire(job.id)).toEqual({ scheduledFor: '00:00:00.001000', startAt: '00:00:00.001000' })
    const once = await client.submitJob({ type: 'tick', schedule: { at: '2030-01-01T00:00:00.000001Z' } })
    expect(once.job.nextRunAt?.toISOString()).toBe('2030-01-01T00:00:00.001Z')
    // a millisecond given exactly stays as it is
    const exact = await client.submitJob({ type: 'tick', schedule: { at: '2030-01-01T00:00:00.250000Z' } })
    expect(exact.job.nextRunAt?.toISOString()).toBe('2030-01-01T00:00:00.250Z')
  })
})

describe('the next fire times the views report, where the stored one has microseconds', () => {
  it("name an interval schedule's fire times as the dispatcher then creates them, not a millisecond before", async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    // a submit whose first fire time (its created_at) has a fraction of a millisecond (all but one in a thousand)
    let job: Awaited<ReturnType<typeof client.submitJob>>['job']
    for (;;) {
      job = (await client.submitJob({ type: 'tick', schedule: { every: '10s' } })).job
      const { rows } = await sql<{ frac: number }>`
        select (extract(microseconds from next_fire_at)::bigint % 1000)::int as frac from pgsched.triggers where job_id = ${job.id}::uuid`.execute(t.db)
      if (rows[0]?.frac !== 0) break
    }
    const reply = job.nextRunAt?.toISOString()
    const viewed = (await client.viewJob(job.id)).nextRunAt?.toISOString()
    const listed = (await client.listSchedules({ jobId: job.id })).items[0]?.nextFireTimes.map((d) => new Date(d).toISOString())
    const dispatcher = new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000, aheadMs: 0 })
    await dispatcher.runOnce()
    const ran = await t.db.selectFrom('pgsched.executions').select('scheduled_for').where('job_id', '=', job.id).execute()
    expect(ran).toHaveLength(1)
    const first = ran[0]?.scheduled_for.toISOString()
    const after = (await client.viewJob(job.id)).nextRunAt?.toISOString()
    expect({ reply, viewed, listedFirst: listed?.[0], listedSecond: listed?.[1] }).toEqual({
      reply: first,
      viewed: first,
      listedFirst: first,
      listedSecond: after,
    })
  })
})
