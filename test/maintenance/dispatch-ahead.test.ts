/**
 * The dispatcher creates the executions of recurring jobs with overlap policy allow ahead of their
 * fire times (aheadMs; SCHEDULER_DISPATCHER_AHEAD_MS), each due at its fire time: one pass serves
 * the fire times of a stretch instead of one pass per fire time. The policies skip and queue decide
 * at the fire time. A pause takes back what was created ahead; views count it as still to come.
 */
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import type { Clock } from '../../src/clock.ts'
import type { SubmitJobInput } from '../../src/core/job.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import { triggerClaimDue, triggerFireAndAdvance } from '../../src/db/queries/triggers.ts'
import { TriggerScheduler, type TriggerSchedulerOptions } from '../../src/maintenance/trigger-scheduler.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const pools: Database[] = []
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.db.destroy()))
})

const T0 = new Date('2030-01-01T00:00:00Z')
const plus = (d: Date, seconds: number) => new Date(d.getTime() + seconds * 1000)
const iso = (d: Date) => d.toISOString()

function pinned(start: Date): Clock & { set(d: Date): void } {
  let current = start
  return { now: () => current, set: (d) => (current = d) }
}

function scheduler(clock: Clock, options: Partial<TriggerSchedulerOptions> = {}): TriggerScheduler {
  return new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000, aheadMs: 3000, clock, ...options })
}

const client = () => createClient({ db: t.db, tenant: 'acme' })

async function submit(input: SubmitJobInput) {
  const c = createClient({ db: t.db, tenant: 'acme', clock: { now: () => plus(T0, -1) } })
  return (await c.submitJob({ startAt: iso(T0), ...input })).job
}

/** The job's executions: fire time and when each is due. */
async function executions(jobId: string): Promise<Array<{ scheduledFor: string; runAt: string }>> {
  const rows = await t.db.selectFrom('pgsched.executions').select(['scheduled_for', 'run_at']).where('job_id', '=', jobId).orderBy('scheduled_for').execute()
  return rows.map((r) => ({ scheduledFor: iso(r.scheduled_for), runAt: iso(r.run_at) }))
}

const fireTimes = async (jobId: string) => (await executions(jobId)).map((e) => e.scheduledFor)
const seconds = (...s: number[]) => s.map((x) => iso(plus(T0, x)))

describe("a pass's claim and writes, as the dispatcher reads them", () => {
  it('lists the next fire times it could not take, earliest first, each with whether its overlap policy is allow', async () => {
    const none = await t.db.transaction().execute((trx) => triggerClaimDue(trx, { limit: 10, now: T0, aheadMs: 0 }))
    expect(none).toMatchObject({ held: true, upcoming: [], triggers: [] })
    await submit({ type: 'r', schedule: { every: 'PT1S' }, startAt: iso(plus(T0, 9)) })
    await submit({ type: 'r', schedule: { every: 'PT1S' }, startAt: iso(plus(T0, 5)) })
    await submit({ type: 'r', schedule: { every: 'PT1S' }, startAt: iso(plus(T0, 7)), overlapPolicy: 'skip' })
    const claim = await t.db.transaction().execute((trx) => triggerClaimDue(trx, { limit: 10, now: T0, aheadMs: 0 }))
    expect(claim.triggers).toEqual([])
    expect(claim.upcoming.map((u) => [iso(u.at), u.allow])).toEqual([
      [iso(plus(T0, 5)), true],
      [iso(plus(T0, 7)), false],
      [iso(plus(T0, 9)), true],
    ])
  })

  it('names the triggers it advanced, and none when a guard does not hold', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    const advanced = await t.db.transaction().execute(async (trx) => {
      const trigger = (await triggerClaimDue(trx, { limit: 10, now: T0, aheadMs: 0 })).triggers[0]
      if (!trigger) throw new Error('no trigger claimed')
      const advance = { jobId: job.id, expectedQueuedFireAtKey: trigger.queuedFireAtKey, nextFireAt: plus(T0, 1), queuedFireAt: null, error: null }
      // a guard that does not hold (another next fire time): nothing advanced
      const stale = await triggerFireAndAdvance(trx, { fires: [], advances: [{ ...advance, expectedNextFireAtKey: '2029-01-01 00:00:00+00' }] })
      expect(stale).toEqual({ fired: 0, advanced: [] })
      return triggerFireAndAdvance(trx, {
        fires: [{ jobId: job.id, scheduledFor: T0 }],
        advances: [{ ...advance, expectedNextFireAtKey: trigger.nextFireAtKey }],
      })
    })
    expect(advanced).toEqual({ fired: 1, advanced: [job.id] })
    expect(await fireTimes(job.id)).toEqual(seconds(0))
  })
})

describe('dispatching ahead of the fire times', () => {
  it('creates the executions of an allow trigger up to aheadMs ahead, each due at its fire time, and passes again half of it before the next', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    const dispatcher = scheduler(pinned(T0))
    const outcome = await dispatcher.runOnce()
    expect(outcome).toMatchObject({ triggers: 1, fired: 4 })
    const created = await executions(job.id)
    expect(created.map((e) => e.scheduledFor)).toEqual(seconds(0, 1, 2, 3))
    for (const e of created) expect(e.runAt).toBe(e.scheduledFor)
    // next fire time T0+4 is claimed by the pass at T0+4 − aheadMs / 2 = T0+2.5
    expect(outcome.nextFireInMs).toBeLessThanOrEqual(2500)
    expect(outcome.nextFireInMs).toBeGreaterThan(2000)
    expect((await t.db.selectFrom('pgsched.triggers').select('next_fire_at').where('job_id', '=', job.id).executeTakeFirstOrThrow()).next_fire_at).toEqual(
      plus(T0, 4),
    )
  })

  it('handles a trigger of overlap policy skip or queue at its fire time only', async () => {
    const skip = await submit({ type: 'r', schedule: { every: 'PT1S' }, overlapPolicy: 'skip' })
    const queue = await submit({ type: 'r', schedule: { every: 'PT1S' }, overlapPolicy: 'queue' })
    const outcome = await scheduler(pinned(T0)).runOnce()
    expect(outcome).toMatchObject({ triggers: 2, fired: 2 })
    expect(await fireTimes(skip.id)).toEqual(seconds(0))
    expect(await fireTimes(queue.id)).toEqual(seconds(0))
    expect(outcome.nextFireInMs).toBeLessThanOrEqual(1000)
  })

  it('counts what it created ahead in the job’s next run and the schedule’s next fire times', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    await scheduler(pinned(T0)).runOnce()
    // the execution of T0 is due (the pass's time); those of T0+1 … T0+3 were created ahead
    expect((await client().viewJob(job.id)).nextRunAt).toEqual(plus(T0, 1))
    const { items } = await client().listSchedules()
    expect(items.find((s) => s.jobId === job.id)?.nextFireTimes.map(iso)).toEqual(seconds(1, 2, 3, 4, 5))
  })

  it('a job’s last run and status are those of its last run, not of an execution created ahead', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    await scheduler(pinned(T0)).runOnce()
    const view = await client().viewJob(job.id)
    expect(view.lastExecution?.scheduledFor).toEqual(T0)
    // T0's execution runs: the job is RUNNING though T0+1 … T0+3 wait
    await sql`with d as (delete from pgsched.due where job_id = ${job.id}::uuid and scheduled_for = ${T0}::timestamptz returning *)
              insert into pgsched.runs (execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
                                        tenant, concurrency_key, start_deadline, created_at, worker_id, lease_expires_at, started_at)
              select execution_id, job_id, queue, type, priority, scheduled_for, run_at, 1, max_attempts, timeout_ms,
                     tenant, concurrency_key, start_deadline, created_at, gen_random_uuid(), now() + interval '1 minute', now() from d`.execute(t.db)
    expect((await client().viewJob(job.id)).status).toBe('RUNNING')
    expect((await client().listJobs({ status: 'RUNNING' })).items.map((j) => j.id)).toEqual([job.id])
  })

  it('a cancel records the execution that was due as cancelled, and leaves no trace of those created ahead', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    await scheduler(pinned(T0)).runOnce()
    await client().cancelJob(job.id)
    const rows = await t.db.selectFrom('pgsched.executions').select(['scheduled_for', 'state']).where('job_id', '=', job.id).execute()
    expect(rows.map((r) => [iso(r.scheduled_for), r.state])).toEqual([[iso(T0), 'cancelled']])
  })

  it('a cancel of a one-time job due later records its execution as cancelled', async () => {
    const { job } = await client().submitJob({ type: 'x', schedule: { at: iso(plus(new Date(), 3600)) } })
    await client().cancelJob(job.id)
    const rows = await t.db.selectFrom('pgsched.executions').select('state').where('job_id', '=', job.id).execute()
    expect(rows.map((r) => r.state)).toEqual(['cancelled'])
  })

  it('a pause takes back what was created ahead; after a resume each fire time gets one execution', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    const clock = pinned(T0)
    const dispatcher = scheduler(clock)
    await dispatcher.runOnce()
    expect(await fireTimes(job.id)).toEqual(seconds(0, 1, 2, 3))
    await client().pauseJob(job.id)
    expect(await fireTimes(job.id)).toEqual(seconds(0))
    clock.set(plus(T0, 2))
    expect(await dispatcher.runOnce()).toMatchObject({ triggers: 0 })
    const resumed = await client().resumeJob(job.id)
    expect(resumed.nextRunAt).toEqual(plus(T0, 1)) // the schedule moved back to the first fire time taken back
    await dispatcher.runOnce()
    // T0+1 and T0+2 are on time (within the misfire threshold), T0+3 … T0+5 ahead
    expect(await fireTimes(job.id)).toEqual(seconds(0, 1, 2, 3, 4, 5))
  })

  it('a pause that waits for a pass holding the trigger takes back what that pass created', async () => {
    const job = await submit({ type: 'r', schedule: { every: 'PT1S' } })
    const other = createDb({ databaseUrl: t.url, poolSize: 1 })
    pools.push(other)
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    let inserted: () => void = () => undefined
    const didInsert = new Promise<void>((resolve) => (inserted = resolve))
    // A pass by hand: the trigger locked, the executions of T0+1 … T0+2 created ahead, not committed yet.
    const pass = other.db.transaction().execute(async (trx) => {
      const claim = await triggerClaimDue(trx, { limit: 10, now: T0, aheadMs: 3000 })
      const trigger = claim.triggers[0]
      if (!trigger) throw new Error('no trigger claimed')
      await triggerFireAndAdvance(trx, {
        fires: [1, 2].map((s) => ({ jobId: job.id, scheduledFor: plus(T0, s) })),
        advances: [
          {
            jobId: job.id,
            expectedNextFireAtKey: trigger.nextFireAtKey,
            expectedQueuedFireAtKey: trigger.queuedFireAtKey,
            nextFireAt: plus(T0, 3),
            queuedFireAt: null,
            error: null,
          },
        ],
        passAt: T0,
      })
      inserted()
      await released
    })
    await didInsert
    const pausing = client().pauseJob(job.id)
    // the pause waits for the trigger's lock
    await waitFor(
      async () => {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
                                                   where datname = current_database() and wait_event_type = 'Lock'`.execute(t.db)
        return (rows[0]?.n ?? 0) > 0
      },
      { what: 'the pause to wait for the lock of the trigger' },
    )
    release()
    await pass
    await pausing
    expect(await fireTimes(job.id)).toEqual([])
    expect((await client().resumeJob(job.id)).nextRunAt).toEqual(plus(T0, 1))
  })
})
