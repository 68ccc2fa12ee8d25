import { setTimeout as sleep } from 'node:timers/promises'
import { Kysely, PostgresDialect, sql } from 'kysely'
import type pg from 'pg'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import type { Clock } from '../../src/clock.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import type { SubmitJobInput } from '../../src/core/job.ts'
import { cronFireTimes } from '../../src/core/cron.ts'
import { ValidationError } from '../../src/errors.ts'
import { triggerClaimDue, triggerLook } from '../../src/db/queries/triggers.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { TriggerScheduler, type TriggerSchedulerOptions } from '../../src/maintenance/trigger-scheduler.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, insertTrigger, setExecutionState } from '../factories.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from '../worker/harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)

/** A clock the test moves by hand: it pins the time of every dispatcher pass. */
function manualClock(start: Date): Clock & { set(d: Date): void } {
  let current = start
  return {
    now: () => current,
    set: (d) => {
      current = d
    },
  }
}

const started: TriggerScheduler[] = []
const pools: Database[] = []
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()))
  await Promise.all(pools.splice(0).map((p) => p.db.destroy()))
})

function scheduler(options: Partial<TriggerSchedulerOptions> = {}): TriggerScheduler {
  return new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000, ...options })
}

/**
 * Another dispatcher mid-pass: a transaction on a connection of its own that holds the dispatch lock
 * until `release` is called.
 */
async function holdDispatchLock(): Promise<{ release: () => void }> {
  const other = createDb({ databaseUrl: t.url, poolSize: 1 })
  pools.push(other)
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => (release = resolve))
  await new Promise<void>((resolve) => {
    void other.db.transaction().execute(async (trx) => {
      expect((await triggerClaimDue(trx, { limit: 0 })).held).toBe(true)
      resolve()
      await released
    })
  })
  return { release }
}

/** Two live worker rows, seen now: ids in the order they were made (the older first). */
async function twoLiveWorkers(): Promise<[string, string]> {
  const [older, newer] = [uuidV7(), uuidV7()].sort() as [string, string]
  for (const id of [older, newer]) {
    await t.db
      .insertInto('pgsched.workers')
      .values({ id, host: 'test', pid: 1, queues: ['default'], types: [], concurrency: 1 })
      .execute()
  }
  return [older, newer]
}

/** Submits as tenant acme with the client's clock (first cron fire time) pinned at `now`. */
/**
 * A submit at `now` by the database's clock: the dispatchers here run on a pinned clock, which stands
 * for the database's, so the job is written as submitted then (its trigger's created_at, from which a
 * cron schedule's first fire time is reckoned).
 */
async function submit(input: SubmitJobInput, now: Date) {
  const client = createClient({ db: t.db, tenant: 'acme', clock: { now: () => now } })
  const { job } = await client.submitJob(input)
  await t.db.updateTable('pgsched.triggers').set({ created_at: now }).where('job_id', '=', job.id).execute()
  return job
}

const client = () => createClient({ db: t.db, tenant: 'acme' })

async function fireTimes(jobId: string): Promise<string[]> {
  const rows = await t.db.selectFrom('pgsched.executions').select('scheduled_for').where('job_id', '=', jobId).orderBy('scheduled_for').execute()
  return rows.map((r) => r.scheduled_for.toISOString())
}

async function triggerRow(jobId: string) {
  return t.db.selectFrom('pgsched.triggers').selectAll().where('job_id', '=', jobId).executeTakeFirstOrThrow()
}

const T0 = new Date('2030-01-01T00:00:00Z')
const plus = (d: Date, seconds: number) => new Date(d.getTime() + seconds * 1000)
const iso = (d: Date) => d.toISOString()

describe('TriggerScheduler', () => {
  it('creates exactly one execution per fire time with four non-exclusive schedulers dispatching concurrently', async () => {
    const clock = manualClock(T0)
    const specs: SubmitJobInput[] = []
    for (let i = 0; i < 40; i++) {
      const shape = i % 4
      specs.push({
        type: 'tick',
        payload: { i },
        schedule:
          shape === 0
            ? { cron: '* * * * * *' }
            : shape === 1
              ? { cron: '*/3 * * * * *', timezone: 'Europe/Berlin' }
              : shape === 2
                ? { every: 'PT2S' }
                : { cron: '*/7 * * * * *', timezone: 'America/New_York' },
        startAt: iso(T0),
        misfirePolicy: i % 3 === 0 ? 'skip' : 'fire_once',
      })
    }
    const jobs = []
    for (const spec of specs) jobs.push(await submit(spec, plus(T0, -1)))
    // Each scheduler has its own pool, so their transactions really interleave.
    const schedulers = Array.from({ length: 4 }, () => {
      const database = createDb({ databaseUrl: t.url, poolSize: 2 })
      pools.push(database)
      // Not exclusive: their transactions really interleave (exclusive ones take turns).
      return scheduler({ db: database.db, batchSize: 7, clock, exclusive: false })
    })
    const end = plus(T0, 90)
    // Steps of 0.25–3.75 s: several fire times per pass, none older than the threshold.
    for (let now = T0, step = 0; now <= end; now = new Date(now.getTime() + 250 + ((step++ * 7919) % 3500))) {
      clock.set(now)
      await Promise.all(schedulers.map((s) => s.runOnce()))
    }
    clock.set(end)
    await Promise.all(schedulers.map((s) => s.runOnce()))

    let total = 0
    for (const [i, job] of jobs.entries()) {
      const schedule = (specs[i] as SubmitJobInput).schedule as { cron?: string; timezone?: string; every?: string }
      const expected: string[] = []
      if (schedule.every) for (let s = 0; s <= 90; s += 2) expected.push(iso(plus(T0, s)))
      else {
        for (const f of cronFireTimes(schedule.cron as string, schedule.timezone ?? 'UTC', plus(T0, -1))) {
          if (f > end) break
          expected.push(iso(f))
        }
      }
      expect(await fireTimes(job.id), `job ${i} ${JSON.stringify(schedule)}`).toEqual(expected)
      total += expected.length
    }
    const { count } = await t.db
      .selectFrom('pgsched.executions')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .executeTakeFirstOrThrow()
    expect(Number(count)).toBe(total)
  })

  it('takes over from a dispatcher frozen mid-pass once the server ends its idle transaction', async () => {
    const clock = manualClock(T0)
    const job = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1))
    // The worker's maintenance pool sets idle_in_transaction_session_timeout (10 s); 300 ms here.
    const frozen = createDb({ databaseUrl: t.url, poolSize: 1, idleInTransactionTimeoutMs: 300 })
    pools.push(frozen)
    let thaw: () => void = () => undefined
    const thawed = new Promise<void>((resolve) => (thaw = resolve))
    let took: () => void = () => undefined
    const taken = new Promise<void>((resolve) => (took = resolve))
    // A pass that took the dispatch lock and then stopped (SIGSTOP, a vanished host).
    const pass = frozen.db.transaction().execute(async (trx) => {
      expect((await triggerClaimDue(trx, { limit: 0 })).held).toBe(true)
      took()
      await thawed
      await sql`select 1`.execute(trx)
    })
    await taken
    const dispatcher = scheduler({ clock })
    expect(await dispatcher.runOnce()).toMatchObject({ standby: true })
    await waitFor(async () => (await dispatcher.runOnce()).standby !== true, { timeoutMs: 10_000, what: 'the frozen session ended' })
    expect(await fireTimes(job.id)).toEqual([iso(T0)])
    thaw()
    await expect(pass).rejects.toThrow() // its session is gone: the pass rolls back
  })

  it('knows after each pass how long until the next fire time: of the triggers it advanced and of those not due yet', async () => {
    const clock = manualClock(T0)
    await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1)) // due at T0, then T0+10
    await submit({ type: 'r', schedule: { every: 'PT3S' }, startAt: iso(plus(T0, 4)) }, plus(T0, -1)) // first at T0+4
    const dispatcher = scheduler({ clock })
    // Counted from the pass's (pinned) time, less the time the pass itself took.
    const nextIn = async (ms: number) => {
      const started = performance.now()
      const outcome = await dispatcher.runOnce()
      expect(outcome).toMatchObject({ triggers: 1, fired: 1 })
      expect(outcome.nextFireInMs).toBeLessThanOrEqual(ms)
      expect(outcome.nextFireInMs).toBeGreaterThanOrEqual(ms - (performance.now() - started))
    }
    await nextIn(4000)
    clock.set(plus(T0, 4))
    await nextIn(3000) // T0+7, before T0+10
    clock.set(plus(T0, 7.5))
    await nextIn(2500) // T0+10
  })

  it('stands by while another dispatcher holds the dispatch lock, and takes over once it is released', async () => {
    const clock = manualClock(T0)
    const job = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1))
    const { release } = await holdDispatchLock()
    // A standby claim reads and locks no trigger: another session can still lock the row.
    await t.db.transaction().execute(async (trx) => {
      expect(await triggerClaimDue(trx, { limit: 10, now: T0 })).toMatchObject({ held: false, triggers: [] })
      const third = createDb({ databaseUrl: t.url, poolSize: 1 })
      pools.push(third)
      await expect(sql`select job_id from pgsched.triggers for update nowait`.execute(third.db)).resolves.toBeDefined()
    })
    const dispatcher = scheduler({ clock })
    expect(await dispatcher.runOnce()).toMatchObject({ triggers: 0, fired: 0, standby: true })
    expect(await fireTimes(job.id)).toEqual([])
    release()
    await waitFor(async () => (await dispatcher.runOnce()).standby !== true, { timeoutMs: 5000, what: 'the dispatch lock released' })
    expect(await fireTimes(job.id)).toEqual([iso(T0)])
  })

  describe('after the dispatcher was down for 60 s', () => {
    // Every 10 s; the last pass ran at T0; the next runs at T0+67 s: 10…60 are missed
    // (older than T0+62 with the 5 s threshold), and nothing is on time yet.
    it.each([
      ['fire_once', { misfirePolicy: 'fire_once' }, [60]],
      ['skip', { misfirePolicy: 'skip' }, []],
      ['fire_all', { misfirePolicy: 'fire_all' }, [10, 20, 30, 40, 50, 60]],
      ['fire_all capped at 4', { misfirePolicy: 'fire_all', misfireMaxRuns: 4 }, [30, 40, 50, 60]],
    ] as const)('%s', async (_name, policy, expected) => {
      for (const schedule of [{ cron: '*/10 * * * * *' }, { every: 'PT10S' }]) {
        await sql`truncate pgsched.jobs, pgsched.triggers, pgsched.execution_history, pgsched.due, pgsched.runs`.execute(t.db)
        const clock = manualClock(T0)
        const job = await submit({ type: 'report', schedule, startAt: iso(T0), ...policy }, plus(T0, -1))
        const dispatcher = scheduler({ clock })
        expect(await dispatcher.runOnce()).toMatchObject({ fired: 1, misfired: 0 })
        clock.set(plus(T0, 67))
        expect(await dispatcher.runOnce()).toMatchObject({ fired: expected.length, misfired: 1 })
        expect(await fireTimes(job.id)).toEqual([iso(T0), ...expected.map((s) => iso(plus(T0, s)))])
        // Back on schedule.
        expect((await triggerRow(job.id)).next_fire_at).toEqual(plus(T0, 70))
        clock.set(plus(T0, 70))
        expect(await dispatcher.runOnce()).toMatchObject({ fired: 1, misfired: 0 })
        expect((await client().viewJob(job.id)).nextRunAt).toEqual(plus(T0, 80))
      }
    })

    it('still runs fire times late by less than the threshold, whatever the policy', async () => {
      const clock = manualClock(T0)
      const job = await submit({ type: 'report', schedule: { cron: '*/10 * * * * *' }, misfirePolicy: 'skip' }, plus(T0, -1))
      const dispatcher = scheduler({ clock })
      await dispatcher.runOnce()
      clock.set(plus(T0, 63)) // 60 is 3 s late: on time; 10…50 are missed and skipped
      await dispatcher.runOnce()
      expect(await fireTimes(job.id)).toEqual([iso(T0), iso(plus(T0, 60))])
    })
  })

  describe('on daylight-saving days, a daily 02:30 job', () => {
    it.each([
      ['America/New_York', 'spring forward', '2030-03-10', '2030-03-10T03:30:00-04:00'],
      ['America/New_York', 'fall back', '2030-11-03', '2030-11-03T02:30:00-05:00'],
      ['Europe/Berlin', 'spring forward', '2030-03-31', '2030-03-31T03:30:00+02:00'],
      ['Europe/Berlin', 'fall back', '2030-10-27', '2030-10-27T02:30:00+02:00'],
    ])('in %s on the %s day (%s) runs once, at %s', async (timezone, _what, day, expectedRun) => {
      for (const passEverySeconds of [0, 420]) {
        await sql`truncate pgsched.jobs, pgsched.triggers, pgsched.execution_history, pgsched.due, pgsched.runs`.execute(t.db)
        const dayStart = Date.parse(`${day}T00:00:00Z`)
        const from = new Date(dayStart - 2 * 86_400_000)
        const until = new Date(dayStart + 2 * 86_400_000)
        const clock = manualClock(from)
        const job = await submit({ type: 'nightly', schedule: { cron: '30 2 * * *', timezone } }, from)
        const dispatcher = scheduler({ clock })
        if (passEverySeconds === 0) {
          // A pass exactly at each fire time, after the first pass (at the submit) has computed the first.
          await dispatcher.runOnce()
          for (;;) {
            const next = (await triggerRow(job.id)).next_fire_at as Date
            if (next > until) break
            clock.set(next)
            await dispatcher.runOnce()
          }
        } else {
          // A pass every 7 minutes: most runs are late, so they go through the misfire policy.
          for (let now = from.getTime(); now <= until.getTime(); now += passEverySeconds * 1000) {
            clock.set(new Date(now))
            await dispatcher.runOnce()
          }
        }
        const runs = (await fireTimes(job.id)).map((f) => new Date(f))
        const localDay = (d: Date) => d.toLocaleDateString('sv-SE', { timeZone: timezone })
        const dstDay = runs.filter((r) => localDay(r) === day)
        expect(dstDay.map(iso), `pass every ${passEverySeconds}s`).toEqual([iso(new Date(expectedRun))])
        // One run on each day around it too, at 02:30 local.
        const days = runs.map(localDay)
        expect(new Set(days).size).toBe(days.length)
        expect(runs.filter((r) => localDay(r) !== day).map((r) => r.toLocaleTimeString('sv-SE', { timeZone: timezone }))).toEqual(
          Array(runs.length - 1).fill('02:30:00'),
        )
        expect(runs.length).toBeGreaterThanOrEqual(3)
      }
    })
  })

  describe('overlap', () => {
    it('skip: a fire time while a run is pending or running gets no execution', async () => {
      const clock = manualClock(T0)
      const job = await submit({ type: 'slow', schedule: { cron: '*/10 * * * * *' }, overlapPolicy: 'skip' }, plus(T0, -1))
      const dispatcher = scheduler({ clock })
      await dispatcher.runOnce()
      for (const s of [10, 20]) {
        clock.set(plus(T0, s))
        expect(await dispatcher.runOnce()).toMatchObject({ fired: 0, dropped: 1 })
      }
      await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded' })
      clock.set(plus(T0, 30))
      expect(await dispatcher.runOnce()).toMatchObject({ fired: 1, dropped: 0 })
      expect(await fireTimes(job.id)).toEqual([iso(T0), iso(plus(T0, 30))])
    })

    it('queue: keeps one fire time waiting and runs it once the previous run has finished', async () => {
      const clock = manualClock(T0)
      const job = await submit({ type: 'slow', schedule: { cron: '*/10 * * * * *' }, overlapPolicy: 'queue' }, plus(T0, -1))
      const dispatcher = scheduler({ clock })
      await dispatcher.runOnce()
      // T0's execution waits for a worker: it is the next run, and holds back the fire times after it
      expect((await client().viewJob(job.id)).nextRunAt).toEqual(T0)
      clock.set(plus(T0, 10))
      expect(await dispatcher.runOnce()).toMatchObject({ fired: 0, dropped: 0 })
      expect((await triggerRow(job.id)).queued_fire_at).toEqual(plus(T0, 10))
      // the job's next run: the execution that waits for a worker (due at T0), then, once one runs it,
      // the fire time waiting in the slot, though past: it runs once that run ends
      expect((await client().viewJob(job.id)).nextRunAt).toEqual(T0)
      await sql`update pgsched.due set run_at = now() where job_id = ${job.id}`.execute(t.db) // due by the database's clock
      const claimed = await executionClaimBatch(t.db, { workerId: uuidV7(Date.now()), queues: ['default'], types: ['slow'], limit: 1, leaseMs: 60_000 })
      expect(claimed).toHaveLength(1)
      expect((await client().viewJob(job.id)).nextRunAt).toEqual(plus(T0, 10))
      clock.set(plus(T0, 20))
      expect(await dispatcher.runOnce()).toMatchObject({ fired: 0, dropped: 1 }) // the slot is taken
      await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded' })
      clock.set(plus(T0, 21)) // nothing due: the pass only releases the slot
      expect(await dispatcher.runOnce()).toMatchObject({ fired: 1 })
      expect(await fireTimes(job.id)).toEqual([iso(T0), iso(plus(T0, 10))])
      expect((await triggerRow(job.id)).queued_fire_at).toBeNull()
      clock.set(plus(T0, 30))
      await dispatcher.runOnce()
      expect((await triggerRow(job.id)).queued_fire_at).toEqual(plus(T0, 30))
    })

    it('skip with a handler slower than the interval: never two runs of the job at once', async () => {
      let running = 0
      let maxRunning = 0
      const releases: Array<() => void> = []
      await startWorker(
        [
          defineHandler('slow', async (ctx) => {
            running++
            maxRunning = Math.max(maxRunning, running)
            try {
              // held until the test lets it finish (or the worker stops at the end of the test)
              await new Promise<void>((resolve) => {
                releases.push(resolve)
                ctx.signal.addEventListener('abort', () => resolve(), { once: true })
              })
            } finally {
              running--
            }
            return ctx.scheduledFor
          }),
        ],
        { concurrency: 5 },
      )
      const { job } = await client().submitJob({ type: 'slow', schedule: { cron: '* * * * * *' }, overlapPolicy: 'skip' })
      const dispatcher = scheduler({ intervalMs: 200 })
      started.push(dispatcher)
      dispatcher.start()
      try {
        for (let run = 1; run <= 2; run++) {
          await waitFor(() => releases.length >= run, { what: `run ${run} to start` })
          const held = await t.db
            .selectFrom('pgsched.executions')
            .select('scheduled_for')
            .where('job_id', '=', job.id)
            .where('state', '=', 'running')
            .executeTakeFirstOrThrow()
          // while the run is held, the dispatcher passes two more fire times by ...
          await waitFor(async () => ((await triggerRow(job.id)).next_fire_at?.getTime() ?? 0) > held.scheduled_for.getTime() + 2000, {
            what: 'two fire times to pass during the run',
          })
          // ... and creates no execution for them
          expect(await fireTimes(job.id)).toHaveLength(run)
          releases[run - 1]?.()
        }
        await waitFor(async () => (await fireTimes(job.id)).length >= 3, { what: 'a run after the second one finished' })
      } finally {
        for (const release of releases) release()
      }
      await dispatcher.stop()
      await client().pauseJob(job.id)
      expect(maxRunning).toBe(1)
      const rows = await t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', job.id).orderBy('scheduled_for').execute()
      for (let i = 1; i < rows.length; i++) {
        const previous = rows[i - 1]
        const current = rows[i]
        if (previous?.finished_at && current?.started_at) expect(current.started_at >= previous.finished_at).toBe(true)
      }
    })
  })

  describe('pause and resume', () => {
    it.each([
      ['fire_once', 1],
      ['skip', 0],
      ['fire_all', 5],
    ] as const)('keep the schedule and apply the misfire policy (%s) to what was missed while paused', async (misfirePolicy, catchUp) => {
      const clock = manualClock(T0)
      const job = await submit({ type: 'minutely', schedule: { cron: '* * * * *' }, misfirePolicy }, plus(T0, -1))
      const dispatcher = scheduler({ clock })
      await dispatcher.runOnce()
      expect((await client().pauseJob(job.id)).status).toBe('PAUSED')
      clock.set(plus(T0, 300))
      expect(await dispatcher.runOnce()).toMatchObject({ triggers: 0 })
      expect((await client().viewJob(job.id)).nextRunAt).toBeNull()
      const resumed = await client().resumeJob(job.id)
      expect(resumed.nextRunAt).toEqual(plus(T0, 60)) // the schedule is kept: the first fire time not yet handled
      clock.set(plus(T0, 330))
      await dispatcher.runOnce()
      const runs = await fireTimes(job.id)
      expect(runs).toHaveLength(1 + catchUp)
      if (catchUp > 0) expect(runs[runs.length - 1]).toBe(iso(plus(T0, 300)))
      expect((await client().viewJob(job.id)).nextRunAt).toEqual(plus(T0, 360))
    })

    // The fire times of a pause's last seconds are within the misfire threshold (5 s here) of the pass
    // after the resume, and still passed while paused: missed ones, as the older ones are. The clock is
    // pinned in the past, so the resume, dated by the database, comes after every pass of the test.
    it.each([
      ['skip', 20, 0],
      ['fire_once', 4, 1],
      ['fire_once', 20, 1],
    ] as const)('count the fire times of the last seconds of a pause as missed too (%s, paused %i s)', async (misfirePolicy, pauseSeconds, catchUp) => {
      const start = new Date(Math.floor((Date.now() - 3_600_000) / 1000) * 1000)
      const clock = manualClock(start)
      const job = await submit({ type: 'every-second', schedule: { cron: '* * * * * *' }, misfirePolicy }, start)
      const dispatcher = scheduler({ clock })
      for (let ms = 500; ms <= 10_500; ms += 1000) {
        clock.set(new Date(start.getTime() + ms))
        await dispatcher.runOnce()
      }
      expect(await fireTimes(job.id)).toHaveLength(11) // 0 … 10 s, each on time
      await client().pauseJob(job.id)
      for (let ms = 11_500; ms <= 10_500 + pauseSeconds * 1000; ms += 1000) {
        clock.set(new Date(start.getTime() + ms))
        await dispatcher.runOnce()
      }
      await client().resumeJob(job.id)
      clock.set(new Date(start.getTime() + 10_600 + pauseSeconds * 1000))
      await dispatcher.runOnce()
      const whilePaused = (await fireTimes(job.id)).slice(11)
      expect(whilePaused).toHaveLength(catchUp)
      // fire_once: the latest of them
      if (catchUp > 0) expect(whilePaused[0]).toBe(iso(new Date(start.getTime() + (10 + pauseSeconds) * 1000)))
    })
  })

  it('stops a schedule at its endAt', async () => {
    const clock = manualClock(T0)
    const job = await submit({ type: 'r', schedule: { every: 'PT10S' }, startAt: iso(T0), endAt: iso(plus(T0, 25)) }, T0)
    const dispatcher = scheduler({ clock })
    for (const s of [0, 10, 20, 30, 40]) {
      clock.set(plus(T0, s))
      await dispatcher.runOnce()
    }
    expect(await fireTimes(job.id)).toEqual([iso(T0), iso(plus(T0, 10)), iso(plus(T0, 20))])
    expect((await triggerRow(job.id)).next_fire_at).toBeNull()
    // no fire time left: the next run is the last fire time's, still waiting for a worker
    expect(await client().viewJob(job.id)).toMatchObject({ status: 'SCHEDULED', nextRunAt: plus(T0, 20) })
    await sql`delete from pgsched.due where job_id = ${job.id}::uuid`.execute(t.db)
    expect((await client().viewJob(job.id)).nextRunAt).toBeNull()
  })

  it('computes the first fire time of a job submitted from SQL without firing it, then fires on schedule', async () => {
    const { rows } = await sql<{ id: string }>`
      select pgsched.submit_job('r', cron => '*/10 * * * * *', timezone => 'Europe/Berlin', tenant => 'acme',
                                start_at => ${plus(T0, 15)}::timestamptz) as id`.execute(t.db)
    const jobId = (rows[0] as { id: string }).id
    // not computed yet ('-infinity'), but shown as the first pass will reckon it
    expect((await client().viewJob(jobId)).nextRunAt).toEqual(plus(T0, 20))
    const clock = manualClock(plus(T0, 5))
    const dispatcher = scheduler({ clock })
    expect(await dispatcher.runOnce()).toMatchObject({ triggers: 1, fired: 0 })
    expect((await client().viewJob(jobId)).nextRunAt).toEqual(plus(T0, 20)) // first fire time at or after start_at
    clock.set(plus(T0, 20))
    expect(await dispatcher.runOnce()).toMatchObject({ triggers: 1, fired: 1 })
    expect(await fireTimes(jobId)).toEqual([iso(plus(T0, 20))])
  })

  it('shows a job submitted from SQL whose window ends before its first fire time as SCHEDULED with no next run until the first pass, then COMPLETED', async () => {
    const { rows } = await sql<{ id: string }>`
      select pgsched.submit_job('r', cron => '0 9 * * *', tenant => 'acme', start_at => ${plus(T0, 15)}::timestamptz,
                                end_at => ${plus(T0, 60)}::timestamptz) as id`.execute(t.db)
    const id = (rows[0] as { id: string }).id
    // the status filters (in SQL) and the view agree while the first fire time is not computed yet
    expect(await client().viewJob(id)).toMatchObject({ status: 'SCHEDULED', nextRunAt: null })
    expect((await client().listJobs({ status: 'SCHEDULED' })).items.map((j) => j.id)).toContain(id)
    await scheduler({ clock: manualClock(T0) }).runOnce()
    expect(await client().viewJob(id)).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
    expect((await client().listJobs({ status: 'COMPLETED' })).items.map((j) => j.id)).toContain(id)
    // a submit through the client knows at once: nothing to come
    const rest = await client().submitJob({ type: 'r', schedule: { cron: '0 9 * * *' }, startAt: plus(T0, 15), endAt: plus(T0, 60) })
    expect(rest.job).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
  })

  it("reckons a cron job's first fire time by the database's clock, however slow or fast the submitting host's clock is", async () => {
    for (const skewMs of [-60_000, 45_000]) {
      const skewed = createClient({ db: t.db, tenant: 'acme', clock: { now: () => new Date(Date.now() + skewMs) } })
      const { job } = await skewed.submitJob({ type: 'r', schedule: { cron: '*/10 * * * * *' } })
      const created = (await triggerRow(job.id)).created_at as Date
      // the first fire time at or after the submit, by the database's clock: none before the job
      // existed (a slow host's clock), none skipped (a fast one's)
      const first = new Date(Math.ceil(created.getTime() / 10_000) * 10_000)
      expect(job.nextRunAt, `skew ${skewMs} ms: the submit's answer`).toEqual(first)
      expect((await client().viewJob(job.id)).nextRunAt, `skew ${skewMs} ms: the job's view`).toEqual(first)
      const [listed] = (await client().listSchedules({ limit: 100 })).items.filter((x) => x.jobId === job.id)
      expect(listed?.nextFireTimes[0], `skew ${skewMs} ms: the schedules listing`).toEqual(first)
      await scheduler({ clock: manualClock(first) }).runOnce()
      expect(await fireTimes(job.id), `skew ${skewMs} ms: what ran`).toEqual([iso(first)])
    }
  })

  it("reckons the first fire time from the submit itself, not from the start of the caller's transaction around it", async () => {
    const { job, began, submitted } = await t.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ began: Date }>`select now() as began, pg_sleep(1.2)`.execute(trx)
      const { job } = await client().submitJob({ type: 'r', schedule: { cron: '* * * * * *' }, misfirePolicy: 'fire_all' }, { trx })
      const { rows: at } = await sql<{ submitted: Date }>`select statement_timestamp() as submitted`.execute(trx)
      return { job, began: (rows[0] as { began: Date }).began, submitted: (at[0] as { submitted: Date }).submitted }
    })
    const first = job.nextRunAt as Date
    expect(first.getTime()).toBeGreaterThanOrEqual(began.getTime() + 1_200)
    expect(job.createdAt).toEqual((await client().viewJob(job.id)).createdAt)
    expect(first.getTime()).toBeLessThanOrEqual(submitted.getTime() + 1_000)
    expect((await triggerRow(job.id)).created_at).toEqual(expect.any(Date))
    expect(((await triggerRow(job.id)).created_at as Date).getTime()).toBeGreaterThanOrEqual(began.getTime() + 1_200)
    // a pass at that fire time runs it alone: none of the fire times while the transaction was open
    await scheduler({ clock: manualClock(first) }).runOnce()
    expect(await fireTimes(job.id)).toEqual([iso(first)])
  })

  it('answers a one-time job submitted in a long transaction as its view reads it, dated by the transaction as its execution is', async () => {
    const { job } = await t.db.transaction().execute(async (trx) => {
      await sql`select pg_sleep(0.5)`.execute(trx)
      return client().submitJob({ type: 'r', idempotencyKey: 'once-in-a-transaction' }, { trx })
    })
    const view = await client().viewJob(job.id)
    expect(job.createdAt).toEqual(view.createdAt)
    expect(job.lastExecution?.runAt).toEqual(view.lastExecution?.runAt)
    expect(job.nextRunAt).toEqual(view.nextRunAt)
  })

  it("answers a cron submit as its view reads it when the host's clock saw a fire time within the window and the database's sees none", async () => {
    const behind = createClient({ db: t.db, tenant: 'acme', clock: { now: () => new Date(Date.now() - 600_000) } })
    const { job } = await behind.submitJob({ type: 'r', schedule: { cron: '* * * * *' }, endAt: new Date(Date.now() - 300_000) })
    const view = await client().viewJob(job.id)
    expect({ status: job.status, nextRunAt: job.nextRunAt }).toEqual({ status: view.status, nextRunAt: view.nextRunAt })
    expect(view).toMatchObject({ status: 'SCHEDULED', nextRunAt: null }) // until the first pass finds none to come
    await scheduler({ clock: manualClock(new Date(Date.now())) }).runOnce()
    expect(await client().viewJob(job.id)).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
  })

  it('dates a job submitted from SQL inside a procedure that commits by its own transaction, not by the CALL', async () => {
    const { rows } = await sql<{ began: Date }>`select now() as began`.execute(t.db)
    await sql`do $$ begin
                perform pg_sleep(1.2);
                commit;
                perform pgsched.submit_job('r', cron => '* * * * * *', misfire_policy => 'fire_all', tenant => 'acme',
                                           idempotency_key => 'in-a-procedure');
              end $$`.execute(t.db)
    const { rows: ids } = await sql<{ id: string }>`select id from pgsched.jobs where idempotency_key = 'in-a-procedure'`.execute(t.db)
    const id = (ids[0] as { id: string }).id
    const created = (await triggerRow(id)).created_at as Date
    expect(created.getTime()).toBeGreaterThanOrEqual((rows[0] as { began: Date }).began.getTime() + 1_200)
    const first = new Date(Math.ceil(created.getTime() / 1_000) * 1_000)
    await scheduler({ clock: manualClock(first) }).runOnce()
    expect(await fireTimes(id)).toEqual([iso(first)])
  })

  it('dates a job submitted from SQL by its statement, not by the start of the transaction around it', async () => {
    const { id, began } = await t.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ began: Date }>`select now() as began, pg_sleep(1.2)`.execute(trx)
      const { rows: ids } = await sql<{ id: string }>`
        select pgsched.submit_job('r', cron => '* * * * * *', misfire_policy => 'fire_all', tenant => 'acme') as id`.execute(trx)
      return { id: (ids[0] as { id: string }).id, began: (rows[0] as { began: Date }).began }
    })
    const created = (await triggerRow(id)).created_at as Date
    expect(created.getTime()).toBeGreaterThanOrEqual(began.getTime() + 1_200)
    const first = new Date(Math.ceil(created.getTime() / 1_000) * 1_000)
    await scheduler({ clock: manualClock(first) }).runOnce()
    expect(await fireTimes(id)).toEqual([iso(first)])
  })

  it("leaves a cron schedule just submitted to the working dispatcher's look, and a standby's counts it as late work after two intervals", async () => {
    const { job } = await client().submitJob({ type: 'r', schedule: { cron: '0 9 * * *' } })
    const look = (uncomputedLateMs?: number) => triggerLook(t.db, { queued: false, uncomputedLateMs })
    expect((await look()).work).toBe(true) // the working dispatcher's: it computes the first fire time now
    expect((await look(2_000)).work).toBe(false) // a standby's: not late yet
    await t.db.updateTable('pgsched.triggers').set({ created_at: sql`now() - interval '3 seconds'` }).where('job_id', '=', job.id).execute()
    expect((await look(2_000)).work).toBe(true)
  })

  it('fires what a job submitted from SQL missed before the first pass as its misfire policy says, from its submit on', async () => {
    const { rows } = await sql<{ id: string }>`
      select pgsched.submit_job('r', cron => '*/10 * * * * *', misfire_policy => 'fire_all', tenant => 'acme') as id`.execute(t.db)
    const jobId = (rows[0] as { id: string }).id
    const created = (await triggerRow(jobId)).created_at as Date
    // the first pass 35 s after the submit (no worker ran meanwhile): each fire time since the submit runs
    const now = new Date(created.getTime() + 35_000)
    await scheduler({ clock: manualClock(now) }).runOnce()
    const expected: string[] = []
    for (let at = Math.ceil(created.getTime() / 10_000) * 10_000; at <= now.getTime(); at += 10_000) expected.push(iso(new Date(at)))
    expect(expected.length).toBeGreaterThanOrEqual(3)
    expect(await fireTimes(jobId)).toEqual(expected)
  })

  it('stops a trigger whose schedule cannot be evaluated instead of failing every pass', async () => {
    const clock = manualClock(T0)
    const bad = await insertTrigger(t.db, { job: { type: 'r' }, cronExpression: '*/10 * * * * *', timezone: 'Mars/Olympus', nextFireAt: T0 })
    const good = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1))
    const dispatcher = scheduler({ clock })
    expect(await dispatcher.runOnce()).toMatchObject({ triggers: 2, fired: 1 })
    expect((await triggerRow(bad.jobId)).next_fire_at).toBeNull()
    expect(await fireTimes(good.id)).toEqual([iso(T0)])
  })

  it('logs and stops a trigger whose fire times cannot be computed, and shows why on the job; the pass returns and other triggers fire', async () => {
    // Stored without validation (by an older release, or written into the table by hand): minute 60.
    const at = new Date('2025-04-05T13:00:00Z')
    const clock = manualClock(at)
    const lines: string[] = []
    const log = pino({ level: 'error' }, { write: (line: string) => lines.push(line) })
    const stuck = await insertTrigger(t.db, { job: { type: 'r' }, cronExpression: '60 * * * *', timezone: 'Pacific/Chatham', nextFireAt: at })
    const good = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(at, -1))
    expect(await scheduler({ clock, log }).runOnce()).toMatchObject({ triggers: 2 })
    expect((await triggerRow(stuck.jobId)).next_fire_at).toBeNull()
    expect(await fireTimes(good.id)).toEqual([iso(at)])
    const logged = lines.map((l) => JSON.parse(l) as { msg: string; jobId: string; err: { message: string } })
    expect(logged).toContainEqual(expect.objectContaining({ msg: 'trigger schedule cannot be evaluated; trigger stopped', jobId: stuck.jobId }))
    // The job shows why its schedule stopped (it used to end with next_fire_at null and nothing else).
    const view = await client().viewJob(stuck.jobId)
    expect(view.nextRunAt).toBeNull()
    expect(view.schedule?.error).toMatch(/^cron "60 \* \* \* \*" in time zone "Pacific\/Chatham" is invalid: .*60/)
    expect((await client().viewJob(good.id)).schedule?.error).toBeNull()
  })

  it('catches up across the Chatham April change after two hours down: every quarter hour once, both occurrences of the repeated ones', async () => {
    // The catch-up across this change used to run for more than 70 s, blocking the worker.
    const down = new Date('2025-04-05T13:00:00Z') // 02:00 CHADT; at 14:00Z clocks go back from 03:45 to 02:45
    const clock = manualClock(new Date('2025-04-05T15:00:00Z'))
    const trigger = await insertTrigger(t.db, {
      job: { type: 'r' },
      cronExpression: '*/15 * * * *',
      timezone: 'Pacific/Chatham',
      nextFireAt: down,
      misfirePolicy: 'fire_all',
    })
    expect(await scheduler({ clock }).runOnce()).toMatchObject({ triggers: 1, fired: 9 })
    const expected = Array.from({ length: 9 }, (_, i) => iso(new Date(down.getTime() + i * 15 * 60_000)))
    expect(await fireTimes(trigger.jobId)).toEqual(expected)
    expect(await triggerRow(trigger.jobId)).toMatchObject({
      next_fire_at: new Date('2025-04-05T15:15:00Z'),
      last_fire_at: new Date('2025-04-05T15:00:00Z'), // the latest fire time that got an execution
    })
  })

  it("records each trigger's own latest fire time when one pass fires several triggers several times", async () => {
    const down = new Date('2025-04-05T13:00:00Z')
    const clock = manualClock(new Date('2025-04-05T13:00:50Z'))
    const every10 = await insertTrigger(t.db, { job: { type: 'r' }, cronExpression: '*/10 * * * * *', nextFireAt: down, misfirePolicy: 'fire_all' })
    const every20 = await insertTrigger(t.db, { job: { type: 'r' }, cronExpression: '*/20 * * * * *', nextFireAt: down, misfirePolicy: 'fire_all' })
    // a third whose one fire time already has its execution: the pass creates nothing for it and
    // leaves its last fire time as it was
    const taken = await insertTrigger(t.db, { job: { type: 'r' }, cronExpression: '0 * * * * *', nextFireAt: down, misfirePolicy: 'fire_all' })
    await insertExecution(t.db, { jobId: taken.jobId, runAt: down, scheduledFor: down })
    const before = new Date('2025-04-05T12:59:00Z')
    await sql`update pgsched.triggers set last_fire_at = ${before} where job_id = ${taken.jobId}::uuid`.execute(t.db)
    expect(await scheduler({ clock }).runOnce()).toMatchObject({ triggers: 3, fired: 9 })
    expect(await triggerRow(every10.jobId)).toMatchObject({ last_fire_at: new Date('2025-04-05T13:00:50Z') })
    expect(await triggerRow(every20.jobId)).toMatchObject({ last_fire_at: new Date('2025-04-05T13:00:40Z') })
    expect(await triggerRow(taken.jobId)).toMatchObject({ next_fire_at: new Date('2025-04-05T13:01:00Z'), last_fire_at: before })
  })

  it('keeps the schedule of a job paused while its trigger was not moving, and runs nothing for it', async () => {
    const clock = manualClock(T0)
    const job = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1))
    // The job row paused, the trigger row not (as between the two writes of a pause by another session).
    await sql`update pgsched.jobs set state = 'paused' where id = ${job.id}::uuid`.execute(t.db)
    expect(await scheduler({ clock }).runOnce()).toMatchObject({ triggers: 1, fired: 0 })
    expect(await fireTimes(job.id)).toEqual([])
    expect(await triggerRow(job.id)).toMatchObject({ next_fire_at: plus(T0, 10), last_fire_at: null })
  })

  it('creates no execution for a cancelled job', async () => {
    const clock = manualClock(T0)
    const job = await submit({ type: 'r', schedule: { cron: '*/10 * * * * *' } }, plus(T0, -1))
    await client().cancelJob(job.id)
    expect(await scheduler({ clock }).runOnce()).toMatchObject({ triggers: 0, fired: 0 })
    expect(await fireTimes(job.id)).toEqual([])
  })

  it('fires on time when running its loop: it sleeps until the earliest next fire time', async () => {
    const { job } = await client().submitJob({ type: 'tick', schedule: { cron: '* * * * * *' } })
    const dispatcher = scheduler({ intervalMs: 5000 }) // the loop must not wait for the interval
    started.push(dispatcher)
    dispatcher.start()
    await waitFor(async () => (await fireTimes(job.id)).length >= 4, { timeoutMs: 15_000, what: 'four runs' })
    await dispatcher.stop()
    const rows = await t.db
      .selectFrom('pgsched.executions')
      .select(['scheduled_for', 'created_at'])
      .where('job_id', '=', job.id)
      .orderBy('scheduled_for')
      .execute()
    const seconds = rows.map((r) => r.scheduled_for.getTime() / 1000)
    expect(seconds).toEqual(seconds.map((_, i) => (seconds[0] as number) + i))
    // Each fire time after the first got a pass of its own (created_at is the pass's transaction time),
    // never before it was due: the loop woke for the fire time instead of waiting out its 5 s interval,
    // which would have created several in one pass.
    const later = rows.slice(1)
    for (const r of later) expect(r.created_at.getTime()).toBeGreaterThanOrEqual(r.scheduled_for.getTime())
    expect(new Set(later.map((r) => r.created_at.getTime())).size).toBe(later.length)
  })

  it('idles on one statement per interval, without a transaction, and passes once a look finds a due trigger', async () => {
    // The same pool, with every statement Kysely sends recorded (begin and commit included).
    const sent: string[] = []
    const counted = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: t.pool }),
      log: (e) => {
        if (e.level === 'query') sent.push(e.query.sql)
      },
    })
    const dispatcher = scheduler({ db: counted, intervalMs: 100 })
    started.push(dispatcher)
    dispatcher.start()
    await waitFor(() => sent.some((q) => q.includes('with pass as materialized')) && sent.length >= 12, { what: 'a pass and several ticks' })
    const afterFirst = sent.slice(sent.findIndex((q) => /^commit/i.test(q.trim())) + 1)
    expect(afterFirst.length).toBeGreaterThanOrEqual(5)
    for (const q of afterFirst) expect(q).toContain('as work') // only looks: no begin, no claim, no commit
    // A trigger due now: a look finds it and the pass that follows fires it.
    const { jobId } = await insertTrigger(t.db, { kind: 'interval', intervalMs: 60_000, nextFireAt: new Date(Date.now() - 1_000) })
    await waitFor(async () => (await fireTimes(jobId)).length === 1, { what: 'the due trigger to fire' })
    expect(sent.some((q) => /^begin/i.test(q.trim()))).toBe(true)
  })

  it('standing by, passes only for fire times the working dispatcher is late with, and takes over once it stops', async () => {
    // Every second, handled 2 s ahead: the working dispatcher (`working`, passes run by hand here)
    // creates each fire time at least 1 s early; the standby steps in for one not created 0.5 s before it.
    const { job } = await client().submitJob({ type: 'tick', schedule: { every: 1000 } })
    const working = scheduler({ aheadMs: 2000 })
    await working.runOnce()
    const standbyPasses: string[] = []
    const counted = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: t.pool }),
      log: (e) => {
        if (e.level === 'query' && e.query.sql.includes('with created as')) standbyPasses.push(e.query.sql)
      },
    })
    const standby = scheduler({ db: counted, aheadMs: 2000, intervalMs: 100 })
    started.push(standby)
    // Its first pass meets the dispatch lock held (another dispatcher mid-pass): it stands by from then on.
    const { release } = await holdDispatchLock()
    const sentBefore = standbyPasses.length
    standby.start()
    await sleep(300)
    release()
    // The working dispatcher keeps up (a pass every 300 ms); the standby looks every 100 ms, and the
    // lock is free between those passes, but it finds nothing late and passes not once.
    for (let i = 0; i < 6; i++) {
      await working.runOnce()
      await sleep(300)
    }
    expect(standbyPasses.length).toBe(sentBefore)
    // The working dispatcher stops: the standby creates the next fire times, still before they are due.
    const horizon = Math.max(...(await fireTimes(job.id)).map((x) => Date.parse(x)))
    await waitFor(async () => (await fireTimes(job.id)).some((x) => Date.parse(x) > horizon + 2000), { timeoutMs: 10_000, what: 'the standby to take over' })
    expect(standbyPasses.length).toBeGreaterThan(sentBefore)
    const taken = await t.db
      .selectFrom('pgsched.executions')
      .select(['scheduled_for', 'created_at'])
      .where('job_id', '=', job.id)
      .where('scheduled_for', '>', new Date(horizon))
      .execute()
    for (const r of taken) expect(r.created_at.getTime()).toBeLessThan(r.scheduled_for.getTime())
  })

  it('taking over from a dispatcher that stopped while its worker still looks live, runs every fire time of a skip schedule, none dropped', {
    timeout: 30_000,
  }, async () => {
    const [older, newer] = await twoLiveWorkers()
    // the job's runs end at once, each well before the next fire time
    await startWorker([defineHandler('tick', () => 'done')])
    const { job } = await client().submitJob({ type: 'tick', schedule: { every: 1000 }, overlapPolicy: 'skip' })
    // the product's defaults: an interval as long as the schedule's, executions of allow schedules 1 s ahead
    const working = scheduler({ workerId: older, aheadMs: 1000 })
    const standby = scheduler({ workerId: newer, aheadMs: 1000 })
    started.push(working, standby)
    working.start()
    standby.start()
    await waitFor(async () => (await fireTimes(job.id)).length >= 2, { timeoutMs: 10_000, what: 'two fire times run' })
    await working.stop()
    const stoppedAt = Date.now()
    await waitFor(async () => (await fireTimes(job.id)).some((x) => Date.parse(x) > stoppedAt + 6_000), {
      timeoutMs: 15_000,
      what: 'six seconds of fire times after the stop',
    })
    // From its first late pass on, every fire time has its execution: one a second, no gap (each late
    // pass found two due, and the skip schedule ran only the first). That first pass, a standby's look
    // an interval after its last, may itself find two due and drop one (seen under load), so the
    // fire times are read from two seconds after the stop.
    const after = (await fireTimes(job.id)).map((x) => Date.parse(x)).filter((x) => x > stoppedAt + 2_000)
    expect(after.length).toBeGreaterThanOrEqual(4)
    expect(after.slice(1).map((x, i) => x - (after[i] as number))).toEqual(Array(after.length - 1).fill(1000))
  })

  it("of several workers' dispatchers, the oldest live worker's passes and the others stand by; a standby passes once it is late", async () => {
    // Two worker rows, seen now: the older id's dispatcher works, the other's stands by from its first pass.
    const [older, newer] = await twoLiveWorkers()
    const { job } = await client().submitJob({ type: 'tick', schedule: { every: 1000 } })
    const passes = { older: 0, newer: 0 }
    const counting = (who: keyof typeof passes) =>
      new Kysely<DB>({
        dialect: new PostgresDialect({ pool: t.pool }),
        log: (e) => {
          if (e.level === 'query' && e.query.sql.includes('with created as')) passes[who]++
        },
      })
    const working = scheduler({ db: counting('older'), workerId: older, aheadMs: 2000, intervalMs: 100 })
    const standby = scheduler({ db: counting('newer'), workerId: newer, aheadMs: 2000, intervalMs: 100 })
    started.push(working, standby)
    standby.start()
    working.start()
    await waitFor(async () => passes.older >= 3, { timeoutMs: 10_000, what: 'three passes of the older worker' })
    expect(passes.newer).toBe(0)
    // The working dispatcher stops (its worker still looks live): the standby creates the next fire
    // times once they are late by its measure, still before they are due.
    await working.stop()
    const horizon = Math.max(...(await fireTimes(job.id)).map((x) => Date.parse(x)))
    await waitFor(async () => (await fireTimes(job.id)).some((x) => Date.parse(x) > horizon + 2000), { timeoutMs: 10_000, what: 'the standby to take over' })
    expect(passes.newer).toBeGreaterThan(0)
    const taken = await t.db
      .selectFrom('pgsched.executions')
      .select(['scheduled_for', 'created_at'])
      .where('job_id', '=', job.id)
      .where('scheduled_for', '>', new Date(horizon))
      .execute()
    for (const r of taken) expect(r.created_at.getTime()).toBeLessThan(r.scheduled_for.getTime())
    // Once the older worker has stopped, the newer one is the oldest live worker: after at most one more
    // pass for late work, its passes are planned ones, made aheadMs / 2 before the earliest fire time,
    // not a quarter.
    await t.db.updateTable('pgsched.workers').set({ stopped_at: new Date() }).where('id', '=', older).execute()
    const since = new Date()
    const passesSince = async () => {
      const rows = await t.db
        .selectFrom('pgsched.executions')
        .select(['scheduled_for', 'created_at'])
        .where('job_id', '=', job.id)
        .where('created_at', '>', since)
        .execute()
      const lead = new Map<number, number>() // per pass (its created_at): the earliest fire time's lead
      for (const r of rows) {
        const at = r.created_at.getTime()
        lead.set(at, Math.min(lead.get(at) ?? Number.POSITIVE_INFINITY, r.scheduled_for.getTime() - at))
      }
      return [...lead].sort((a, b) => a[0] - b[0]).map(([, ms]) => ms)
    }
    await waitFor(async () => (await passesSince()).length >= 4, { timeoutMs: 15_000, what: 'four more passes' })
    for (const ms of (await passesSince()).slice(1)) expect(ms).toBeGreaterThan(700)
  })

  it("after the working dispatcher's worker stops cleanly, a standby's next look resumes planned passes, before any fire time is late", async () => {
    const [older, newer] = await twoLiveWorkers()
    const { job } = await client().submitJob({ type: 'tick', schedule: { every: 1000 } })
    const working = scheduler({ workerId: older, aheadMs: 2000, intervalMs: 100 })
    const standby = scheduler({ workerId: newer, aheadMs: 2000, intervalMs: 100 })
    started.push(working, standby)
    standby.start()
    working.start()
    await waitFor(async () => (await fireTimes(job.id)).length >= 3, { timeoutMs: 10_000, what: 'the working dispatcher to pass' })
    // A clean stop: the dispatcher ends, then the worker is marked stopped (as a worker's shutdown does).
    await working.stop()
    await t.db.updateTable('pgsched.workers').set({ stopped_at: new Date() }).where('id', '=', older).execute()
    const stoppedAt = Date.now()
    const horizon = Math.max(...(await fireTimes(job.id)).map((x) => Date.parse(x)))
    await waitFor(async () => (await fireTimes(job.id)).some((x) => Date.parse(x) > horizon), { timeoutMs: 10_000, what: 'the standby to pass' })
    const first = await t.db
      .selectFrom('pgsched.executions')
      .select(['scheduled_for', 'created_at'])
      .where('job_id', '=', job.id)
      .where('scheduled_for', '>', new Date(horizon))
      .orderBy('scheduled_for')
      .executeTakeFirstOrThrow()
    // Its first look after the stop found its worker the oldest live one, so it created that fire time
    // at its planned pass (half of the 2 s ahead before it, within about a second of the stop), not once
    // the fire time was late (a quarter of the ahead, 500 ms, before it).
    expect(first.created_at.getTime() - stoppedAt).toBeLessThan(2000)
    expect(first.scheduled_for.getTime() - first.created_at.getTime()).toBeGreaterThan(700)
  })

  it('counts its sleep from the database clock at the claim, not from before a transaction that began late', async () => {
    // A pool whose `begin` reaches the database 300 ms after it is asked for (as on a loaded machine):
    // the pass's now() is that much later than when the loop started it.
    const slowBegin = {
      connect: async () => {
        const client = await t.pool.connect()
        const { query, release } = client
        Object.assign(client, {
          query: (...args: unknown[]) =>
            typeof args[0] === 'string' && /^begin/i.test(args[0].trim())
              ? sleep(300).then(() => (query as (...a: unknown[]) => Promise<unknown>).apply(client, args))
              : (query as (...a: unknown[]) => Promise<unknown>).apply(client, args),
          // back to the pool as it was
          release: (err?: Error | boolean) => {
            Object.assign(client, { query, release })
            return release.call(client, err)
          },
        })
        return client
      },
      end: async () => undefined,
    }
    const slow = new Kysely<DB>({ dialect: new PostgresDialect({ pool: slowBegin as unknown as pg.Pool }) })
    const { jobId } = await insertTrigger(t.db, { kind: 'interval', intervalMs: 60_000, nextFireAt: new Date(Date.now() + 5_000) })
    const outcome = await scheduler({ db: slow }).runOnce()
    const { rows } = await sql<{ ms: number }>`
      select (extract(epoch from next_fire_at - clock_timestamp()) * 1000)::float8 as ms from pgsched.triggers where job_id = ${jobId}`.execute(t.db)
    const untilDue = rows[0]?.ms ?? Number.NaN
    // never counted as sooner than it is (the loop would wake before the fire time), at most the
    // time of this one look later
    expect(outcome.nextFireInMs).toBeGreaterThanOrEqual(untilDue - 2)
    expect(outcome.nextFireInMs).toBeLessThanOrEqual(untilDue + 100)
  })

  it('fire times within the window after the earliest share its pass; none is dispatched early', async () => {
    // Two schedules 200 ms apart, every second: with a 400 ms window each second's two fire times are
    // dispatched together; with none each gets a pass of its own.
    /** For each second's pair of fire times (the first schedule's and the second's, 200 ms later): whether one pass created both. */
    const sharedPasses = async (windowMs: number): Promise<boolean[]> => {
      const start = Date.now() + 500
      const jobs = [
        (await client().submitJob({ type: 'tick', schedule: { every: 'PT1S' }, startAt: new Date(start) })).job.id,
        (await client().submitJob({ type: 'tick', schedule: { every: 'PT1S' }, startAt: new Date(start + 200) })).job.id,
      ]
      const dispatcher = scheduler({ intervalMs: 5000, windowMs })
      started.push(dispatcher)
      dispatcher.start()
      const rows = async () =>
        t.db.selectFrom('pgsched.executions').select(['job_id', 'scheduled_for', 'created_at']).where('job_id', 'in', jobs).orderBy('scheduled_for').execute()
      type Row = Awaited<ReturnType<typeof rows>>[number]
      // The pairs of every second (both fire times present) due after the loop's first pass: that pass
      // runs when the loop starts, not at a fire time, and may fall between a pair's two (on a loaded
      // machine, later than the first second).
      const pairs = (all: Row[]) => {
        const firstPassAt = Math.min(...all.map((r) => r.created_at.getTime()))
        const second = new Map(all.filter((r) => r.job_id === jobs[1]).map((r) => [r.scheduled_for.getTime(), r.created_at.getTime()]))
        return all
          .filter((r) => r.job_id === jobs[0] && r.scheduled_for.getTime() > firstPassAt && second.has(r.scheduled_for.getTime() + 200))
          .map((r) => second.get(r.scheduled_for.getTime() + 200) === r.created_at.getTime())
      }
      await waitFor(async () => pairs(await rows()).length >= 3, { timeoutMs: 15_000, what: 'three pairs after the first pass' })
      await dispatcher.stop()
      const all = await rows()
      await sql`delete from pgsched.triggers`.execute(t.db)
      for (const r of all) expect(r.created_at.getTime()).toBeGreaterThanOrEqual(r.scheduled_for.getTime())
      return pairs(all)
    }
    // A pass that starts late (a loaded machine) may take several seconds' fire times at once; a
    // pair is still never split.
    const windowed = await sharedPasses(400)
    expect(windowed.length).toBeGreaterThanOrEqual(2)
    expect(windowed.every(Boolean)).toBe(true)
    // Without a window the pairs get passes of their own (not every one: a pass that starts 200 ms
    // late takes both).
    const alone = await sharedPasses(0)
    expect(alone.length).toBeGreaterThanOrEqual(2)
    expect(alone.some((shared) => !shared)).toBe(true)
  })

  it('rejects an invalid cron expression or time zone at submit, naming it', async () => {
    await expect(client().submitJob({ type: 'x', schedule: { cron: '61 * * * *' } })).rejects.toMatchObject({
      name: 'ValidationError',
      message: expect.stringContaining('cron expression "61 * * * *": value 61 in the minute field is out of range (0-59)'),
      details: [{ path: 'schedule.cron', message: expect.stringContaining('"61 * * * *"') }],
    })
    await expect(client().submitJob({ type: 'x', schedule: { cron: '0 9 * * *', timezone: 'Mars/Olympus' } })).rejects.toThrow(ValidationError)
    await expect(client().submitJob({ type: 'x', schedule: { cron: '0 9 * * *', timezone: 'Mars/Olympus' } })).rejects.toThrow(
      'schedule.timezone "Mars/Olympus" is not a known IANA time zone',
    )
    const { count } = await t.db
      .selectFrom('pgsched.jobs')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .executeTakeFirstOrThrow()
    expect(Number(count)).toBe(0)
  })
})
