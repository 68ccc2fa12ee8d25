/**
 * The job operations of SQL (migration 0065): pgsched.cancel_job, retry_job, rerun_job and
 * delete_job do to a job what the client's cancelJob, retryJob, rerunJob and deleteJob do. Each
 * case builds two jobs in the same situation, acts on one through the client and on the other
 * through SQL, and holds the outcomes to each other: the refusal (its kind and message), the
 * job's status and executions afterwards, its schedule and idempotency key, and the events
 * written. pgsched.job_status reads what the client's status reads. pgsched.pause_queue and the
 * other queue setters (migration 0070) say so when the queue they change is unknown so far.
 */
import { sql, type RawBuilder } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient, type Client } from '../../src/client.ts'
import { eventListenerOpen } from '../../src/db/queries/events.ts'
import { executionFailMany } from '../../src/db/queries/lease.ts'
import { workerRegister } from '../../src/db/queries/workers.ts'
import { NotFoundError, SchedulerError } from '../../src/errors.ts'
import { Reaper } from '../../src/maintenance/reaper.ts'
import { TriggerScheduler } from '../../src/maintenance/trigger-scheduler.ts'
import { useTestDb } from '../db.ts'
import { FACTORY_WORKER_ID, insertExecution, insertExecutions, insertTrigger, setExecutionState, startExecutions } from '../factories.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const TENANT = 'acme'
const client = (): Client => createClient({ db: t.db, tenant: TENANT })

/** A situation: makes a job in it and returns its id (each call a new job). */
type Situation = () => Promise<string>

const submitted = async (input: Parameters<Client['submitJob']>[0] = { type: 'noop' }): Promise<string> => (await client().submitJob(input)).job.id

const SITUATIONS: Record<string, { status: string; make: Situation }> = {
  'a job due now': { status: 'SCHEDULED', make: () => submitted() },
  'a running job': {
    status: 'RUNNING',
    make: async () => {
      const id = await submitted()
      await startExecutions(t.db, { jobIds: [id] })
      return id
    },
  },
  'a failed job': {
    status: 'FAILED',
    make: async () => {
      const id = await submitted({ type: 'noop', maxAttempts: 1 })
      await startExecutions(t.db, { jobIds: [id] })
      await setExecutionState(t.db, { jobIds: [id], state: 'failed', error: { name: 'Error', message: 'boom' } })
      return id
    },
  },
  'an expired job': {
    status: 'EXPIRED',
    make: async () => {
      const id = await submitted()
      await setExecutionState(t.db, { jobIds: [id], state: 'failed', attempt: 0 })
      return id
    },
  },
  'a completed job with an idempotency key': {
    status: 'COMPLETED',
    make: async () => {
      const id = await submitted({ type: 'noop', idempotencyKey: `key-${Math.random()}` })
      await startExecutions(t.db, { jobIds: [id] })
      await setExecutionState(t.db, { jobIds: [id], state: 'succeeded', result: { ok: true } })
      return id
    },
  },
  'a cancelled job': {
    status: 'CANCELLED',
    make: async () => {
      const id = await submitted()
      await client().cancelJob(id)
      return id
    },
  },
  'a cancelled job whose run a worker still holds': {
    status: 'CANCELLED',
    make: async () => (await insertExecution(t.db, { state: 'running', job: { tenant: TENANT, state: 'cancelled' } })).jobId,
  },
  'a recurring job': { status: 'SCHEDULED', make: () => submitted({ type: 'noop', schedule: { every: '1h' } }) },
  'a recurring job with a run created ahead of its fire time': {
    status: 'SCHEDULED',
    make: async () => {
      const { jobId } = await insertTrigger(t.db, { job: { tenant: TENANT }, kind: 'interval', nextFireAt: new Date(Date.now() + 3_600_000) })
      await insertExecution(t.db, { jobId, runAt: new Date(Date.now() + 60_000) })
      return jobId
    },
  },
  'a paused recurring job': {
    status: 'PAUSED',
    make: async () => {
      const id = await submitted({ type: 'noop', schedule: { every: '1h' } })
      await client().pauseJob(id)
      return id
    },
  },
  'a recurring job whose schedule stopped on an error': {
    status: 'FAILED',
    make: async () => {
      // a time zone the dispatcher cannot evaluate stops the schedule with an error
      const { jobId } = await insertTrigger(t.db, { job: { tenant: TENANT }, timezone: 'Nowhere/Atlantis', nextFireAt: new Date(Date.now() - 1000) })
      await new TriggerScheduler({ db: t.db, log: t.log, intervalMs: 1000, batchSize: 500, misfireThresholdMs: 5000 }).runOnce()
      return jobId
    },
  },
}

/** A new job in the situation `name`. */
async function make(name: string): Promise<string> {
  const situation = SITUATIONS[name]
  if (!situation) throw new Error(`no situation ${name}`)
  return situation.make()
}

type Operation = 'cancel' | 'retry' | 'rerun' | 'delete'

/** Which operations each situation allows (the rest are refused). */
const ALLOWED: Record<string, Operation[]> = {
  'a job due now': ['cancel'],
  'a running job': ['cancel'],
  'a failed job': ['retry', 'rerun', 'delete'],
  'an expired job': ['retry', 'rerun', 'delete'],
  'a completed job with an idempotency key': ['rerun', 'delete'],
  // cancel: already cancelled, left as it is
  'a cancelled job': ['cancel', 'retry', 'rerun', 'delete'],
  'a cancelled job whose run a worker still holds': ['cancel'],
  'a recurring job': ['cancel'],
  'a recurring job with a run created ahead of its fire time': ['cancel'],
  'a paused recurring job': ['cancel'],
  'a recurring job whose schedule stopped on an error': ['retry', 'rerun', 'delete'],
}

/** An operation through the client: undefined when it acted, else the refusal. */
async function throughClient(op: Operation, id: string): Promise<{ code: string; message: string } | undefined> {
  const c = client()
  try {
    if (op === 'cancel') await c.cancelJob(id)
    else if (op === 'retry') await c.allTenants().retryJob(id)
    else if (op === 'rerun') await c.allTenants().rerunJob(id)
    else await c.allTenants().deleteJob(id)
    return undefined
  } catch (err: unknown) {
    if (!(err instanceof SchedulerError)) throw err
    return { code: err.code, message: err.message }
  }
}

/** The client's error codes of the SQLSTATEs the functions raise. */
const CODE_OF_SQLSTATE: Record<string, string> = { P0002: 'not_found', '55000': 'invalid_state' }

/** The function of each operation. */
const FUNCTION_OF: Record<Operation, RawBuilder<unknown>> = {
  cancel: sql`pgsched.cancel_job`,
  retry: sql`pgsched.retry_job`,
  rerun: sql`pgsched.rerun_job`,
  delete: sql`pgsched.delete_job`,
}

/** An operation through SQL: undefined when it acted, else the refusal. */
async function throughSql(op: Operation, id: string): Promise<{ code: string; message: string } | undefined> {
  try {
    await sql`select ${FUNCTION_OF[op]}(${id}::uuid)`.execute(t.db)
    return undefined
  } catch (err: unknown) {
    const code = (err as { code?: string }).code ?? ''
    if (!(code in CODE_OF_SQLSTATE)) throw err
    return { code: CODE_OF_SQLSTATE[code] as string, message: (err as Error).message }
  }
}

/** What an operation left of job `id`: nothing in it names the job or its executions, so twins compare equal. */
async function afterwards(id: string) {
  const job = await client()
    .viewJob(id)
    .catch((err: unknown) => {
      if (err instanceof NotFoundError) return undefined
      throw err
    })
  const { rows: executions } = await sql<{ state: string; attempt: number; error: string | null; due: boolean }>`
    select state, attempt, error->>'name' as error, run_at <= now() as due
      from pgsched.executions where job_id = ${id}::uuid order by scheduled_for`.execute(t.db)
  const { rows: rest } = await sql<{ trigger_firing: boolean | null; keys: number; held: number; waiting: number }>`
    select (select next_fire_at is not null from pgsched.triggers where job_id = ${id}::uuid) as trigger_firing,
           (select count(*)::int from pgsched.job_idempotency_keys where job_id = ${id}::uuid) as keys,
           (select count(*)::int from pgsched.runs where job_id = ${id}::uuid) as held,
           (select count(*)::int from pgsched.due where job_id = ${id}::uuid) as waiting`.execute(t.db)
  const { rows: events } = await sql<{ type: string; of_execution: boolean; attempt: number | null }>`
    select e.type, e.execution_id is not null as of_execution, e.attempt
      from pgsched.event_batches b,
           unnest(b.types, b.job_ids, b.execution_ids, b.attempts) with ordinality as e (type, job_id, execution_id, attempt, n)
     where e.job_id = ${id}::uuid
     order by b.id, e.n`.execute(t.db)
  return { status: job?.status ?? 'deleted', state: job?.state ?? null, executions, ...rest[0], events }
}

const twice = async (make: Situation): Promise<[string, string]> => [await make(), await make()]

describe('the job operations of SQL and of the client', () => {
  for (const [name, situation] of Object.entries(SITUATIONS)) {
    for (const op of ['cancel', 'retry', 'rerun', 'delete'] as const) {
      const allowed = (ALLOWED[name] as Operation[]).includes(op)
      it(`${op} of ${name}: ${allowed ? 'acts' : 'is refused'} alike, with the same rows and events`, async () => {
        const [viaClient, viaSql] = await twice(situation.make)
        expect(await client().viewJob(viaSql)).toMatchObject({ status: situation.status })
        await eventListenerOpen(t.db, { tenant: null, keepMs: 60_000 })
        const refusedClient = await throughClient(op, viaClient)
        const refusedSql = await throughSql(op, viaSql)
        expect(refusedSql === undefined).toBe(allowed)
        expect({ ...refusedSql, message: refusedSql?.message.replace(viaSql, '<job>') }).toEqual({
          ...refusedClient,
          message: refusedClient?.message.replace(viaClient, '<job>'),
        })
        expect(await afterwards(viaSql)).toEqual(await afterwards(viaClient))
      })
    }
  }

  it.each(['retry', 'rerun', 'delete'] as const)('%s of a cancelled job whose run has not ended yet says what it waits for', async (op) => {
    const done = { retry: 'retried', rerun: 'rerun', delete: 'deleted' }[op]
    const [viaClient, viaSql] = await twice(SITUATIONS['a cancelled job whose run a worker still holds']?.make as Situation)
    for (const [id, refused] of [
      [viaClient, await throughClient(op, viaClient)],
      [viaSql, await throughSql(op, viaSql)],
    ] as const) {
      expect(refused?.message).toBe(
        `job ${id} is CANCELLED, but an execution of it is still waiting or held by a worker; it can be ${done} once that has ended`,
      )
    }
  })

  it.each(['cancel', 'retry', 'rerun', 'delete'] as const)('%s of a job that does not exist: not found, SQLSTATE P0002', async (op) => {
    const id = '01900000-0000-7000-8000-000000000000'
    expect(await throughSql(op, id)).toEqual({ code: 'not_found', message: `job ${id} not found` })
    expect(await throughClient(op, id)).toEqual({ code: 'not_found', message: `job ${id} not found` })
  })

  it.each(['cancel', 'retry', 'rerun', 'delete'] as const)('%s of null is refused with SQLSTATE 22023, naming the argument', async (op) => {
    const err = await sql`select ${FUNCTION_OF[op]}(null)`.execute(t.db).catch((e: unknown) => e as { code: string; message: string })
    expect(err).toMatchObject({ code: '22023', message: `job_id must be the id of the job to ${op}, got null` })
  })
})

describe('pgsched.retry_job and pgsched.rerun_job', () => {
  it('return the new execution: pending, due now, attempts from 0', async () => {
    const id = await make('a failed job')
    const { rows } = await sql<{ execution_id: string }>`select pgsched.retry_job(${id}::uuid) as execution_id`.execute(t.db)
    const execution = await client().viewExecution(rows[0]?.execution_id ?? '')
    expect(execution).toMatchObject({ jobId: id, state: 'pending', attempt: 0 })
    const { rows: due } = await sql<{ due: boolean }>`select run_at <= now() as due from pgsched.executions where id = ${execution.id}::uuid`.execute(t.db)
    expect(due).toEqual([{ due: true }])
    expect(await client().viewJob(id)).toMatchObject({ status: 'SCHEDULED', lastExecution: { id: execution.id } })
  })

  it("join the caller's transaction: a rollback leaves the job as it was", async () => {
    const id = await make('a failed job')
    await expect(
      t.db.transaction().execute(async (trx) => {
        await sql`select pgsched.rerun_job(${id}::uuid)`.execute(trx)
        throw new Error('caller fails')
      }),
    ).rejects.toThrow('caller fails')
    expect(await client().viewJob(id)).toMatchObject({ status: 'FAILED' })
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where job_id = ${id}::uuid`.execute(t.db)
    expect(rows[0]?.n).toBe(1)
  })
})

describe('pgsched.cancel_job', () => {
  it("takes a running execution from its worker: the lease is gone and pgsched_cancel names it once the caller's transaction commits", async () => {
    const id = await make('a running job')
    const { rows: held } = await sql<{ execution_id: string }>`select execution_id from pgsched.runs where job_id = ${id}::uuid`.execute(t.db)
    const listener = new pg.Client({ connectionString: t.url })
    await listener.connect()
    const notified: string[] = []
    listener.on('notification', (n) => notified.push(n.payload ?? ''))
    await listener.query('listen pgsched_cancel')
    try {
      const { rows } = await sql<{ cancelled: boolean }>`select pgsched.cancel_job(${id}::uuid) as cancelled`.execute(t.db)
      expect(rows[0]?.cancelled).toBe(true)
      await waitFor(() => notified.length > 0, { what: 'the pgsched_cancel notification' })
      expect(JSON.parse(notified[0] as string)).toEqual([held[0]?.execution_id])
    } finally {
      await listener.end()
    }
    expect(await client().viewJob(id)).toMatchObject({
      status: 'CANCELLED',
      lastExecution: { state: 'cancelled', error: { name: 'CancelledError', message: 'cancelled' } },
    })
  })

  it("leaves no pending retry of the job when a worker's failed attempt commits while it waits (after the reaper's next pass), as the client's cancel", async () => {
    /** Cancels a running job (3 attempts) while its worker's failure, retried later, is written and not yet committed; what is left of its executions. */
    const raceWithFailure = async (cancel: (id: string) => Promise<unknown>) => {
      const id = await submitted({ type: 'noop', maxAttempts: 3 })
      await startExecutions(t.db, { jobIds: [id] })
      const { rows } = await sql<{ id: string; attempt: number }>`select execution_id as id, attempt from pgsched.runs where job_id = ${id}::uuid`.execute(t.db)
      const run = rows[0] as { id: string; attempt: number }
      let commit: () => void = () => undefined
      const committing = new Promise<void>((resolve) => (commit = resolve))
      let written = false
      const failing = t.db.transaction().execute(async (trx) => {
        const error = JSON.stringify({ name: 'Error', message: 'boom' })
        await executionFailMany(trx, { workerId: FACTORY_WORKER_ID, failures: [{ ...run, jobId: id, errorJson: error, fatal: false, outputUri: null }] })
        written = true
        await committing
      })
      await waitFor(() => written, { what: 'the failure written' })
      const cancelling = cancel(id)
      // the cancel waits for the run's row, which the failure's transaction holds
      await waitFor(
        async () =>
          (
            await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
              t.db,
            )
          ).rows[0]?.n,
        { what: 'the cancel waiting for the failure' },
      )
      commit()
      await failing
      await cancelling
      await new Reaper({ db: t.db, log: t.log, intervalMs: 1_000, batchSize: 100 }).runOnce()
      const { rows: left } = await sql<{ state: string; attempt: number }>`
        select state, attempt from pgsched.executions where job_id = ${id}::uuid order by scheduled_for`.execute(t.db)
      return { status: (await client().viewJob(id)).status, executions: left }
    }
    const viaClient = await raceWithFailure((id) => client().cancelJob(id))
    expect(viaClient).toEqual({ status: 'CANCELLED', executions: [{ state: 'cancelled', attempt: 1 }] })
    expect(await raceWithFailure((id) => sql`select pgsched.cancel_job(${id}::uuid)`.execute(t.db))).toEqual(viaClient)
    // the client's cancel in a caller's transaction, which has no sweep after its commit
    expect(await raceWithFailure((id) => t.db.transaction().execute((trx) => client().cancelJob(id, { trx })))).toEqual(viaClient)
  })

  it('returns false for a job already cancelled, and leaves it as it is', async () => {
    const id = await make('a cancelled job')
    const before = await client().viewJob(id)
    const { rows } = await sql<{ cancelled: boolean }>`select pgsched.cancel_job(${id}::uuid) as cancelled`.execute(t.db)
    expect(rows[0]?.cancelled).toBe(false)
    expect(await client().viewJob(id)).toEqual(before)
  })
})

describe('pgsched.delete_job', () => {
  it('frees the idempotency key: a submit with it makes a new job', async () => {
    const { job } = await client().submitJob({ type: 'noop', idempotencyKey: 'once' })
    await startExecutions(t.db, { jobIds: [job.id] })
    await setExecutionState(t.db, { jobIds: [job.id], state: 'succeeded' })
    await sql`select pgsched.delete_job(${job.id}::uuid)`.execute(t.db)
    const again = await client().submitJob({ type: 'noop', idempotencyKey: 'once' })
    expect(again).toMatchObject({ created: true })
    expect(again.job.id).not.toBe(job.id)
  })
})

describe('pgsched.job_status', () => {
  it('reads the status the client reads, in every situation', async () => {
    for (const [name, situation] of Object.entries(SITUATIONS)) {
      const id = await situation.make()
      const { rows } = await sql<{ status: string }>`select pgsched.job_status(${id}::uuid) as status`.execute(t.db)
      expect({ name, status: rows[0]?.status }).toEqual({ name, status: (await client().viewJob(id)).status })
    }
    const { rows } = await sql<{ status: string | null }>`select pgsched.job_status(${'01900000-0000-7000-8000-000000000000'}::uuid) as status`.execute(t.db)
    expect(rows[0]?.status).toBeNull()
  })
})

/** Runs `statement` on a connection of its own; returns the notices it raised. */
async function notices(statement: string, params: unknown[]): Promise<string[]> {
  const c = new pg.Client({ connectionString: t.url })
  await c.connect()
  const got: string[] = []
  c.on('notice', (n) => got.push(n.message ?? ''))
  try {
    await c.query(statement, params)
  } finally {
    await c.end()
  }
  return got
}

describe('pgsched.pause_queue', () => {
  it('pauses a queue nothing knows yet, with a notice naming it', async () => {
    expect(await notices('select pgsched.pause_queue($1)', ['misspelt'])).toEqual([
      "queue 'misspelt' has no settings, no pending or running work and no worker serving it: paused anyway (check the name if you meant an existing queue)",
    ])
    expect((await client().queues.view('misspelt')).paused).toBe(true)
  })

  it('pauses a queue nothing knows yet without reading every job of the other queues', async () => {
    // the finished jobs of other queues: most of what pgsched.jobs holds
    await insertExecutions(t.db, 2_000, { state: 'succeeded', job: { tenant: TENANT, queue: 'nightly' } })
    await sql`vacuum (analyze) pgsched.jobs`.execute(t.db)
    const jobsRead = await t.db.transaction().execute(async (trx) => {
      // the rows this transaction's sequential scans of the jobs' partitions returned so far
      const read = async () =>
        Number(
          (
            await sql<{ n: string }>`
              select coalesce(sum(pg_stat_get_xact_tuples_returned(i.inhrelid)), 0) as n
                from pg_inherits i where i.inhparent = 'pgsched.jobs'::regclass`.execute(trx)
          ).rows[0]?.n,
        )
      const before = await read()
      await sql`select pgsched.pause_queue('misspelt')`.execute(trx)
      return (await read()) - before
    })
    expect((await client().queues.view('misspelt')).paused).toBe(true)
    expect(jobsRead).toBeLessThan(100)
  })

  it('raises no notice for a queue with jobs, with settings, or served by a worker', async () => {
    await submitted({ type: 'noop', queue: 'with-jobs' })
    await sql`select pgsched.set_queue_concurrency_limit('with-settings', 3)`.execute(t.db)
    await workerRegister(t.db, { id: FACTORY_WORKER_ID, host: 'h', pid: 1, queues: ['served'], types: ['noop'], concurrency: 1, leaseMs: 30_000 })
    expect(await notices('select pgsched.pause_queue($1)', ['with-jobs'])).toEqual([])
    expect(await notices('select pgsched.pause_queue($1)', ['with-settings'])).toEqual([])
    expect(await notices('select pgsched.pause_queue($1)', ['served'])).toEqual([])
    // once paused, it has a setting: a second pause says nothing
    expect(await notices('select pgsched.pause_queue($1)', ['new-queue'])).toHaveLength(1)
    expect(await notices('select pgsched.pause_queue($1)', ['new-queue'])).toEqual([])
  })
})

describe('the queue setters of SQL', () => {
  /** Each setter, with the words its notice says it did anyway. */
  const SETTERS: Array<{ call: string; args: unknown[]; done: string }> = [
    { call: 'set_queue_concurrency_limit($1, $2)', args: [3], done: 'concurrency limit set' },
    { call: 'set_queue_rate_limit($1, $2, $3)', args: [10, 1000], done: 'rate limit set' },
    { call: 'set_queue_key_concurrency_limit($1, $2)', args: [1], done: 'key concurrency limit set' },
    { call: 'set_queue_key_rate_limit($1, $2, $3)', args: [5, 1000], done: 'key rate limit set' },
    { call: 'set_queue_fair_share($1, $2)', args: [true], done: 'fair share set' },
  ]

  for (const s of SETTERS) {
    const name = s.call.replace(/\(.*/, '')
    it(`pgsched.${name} sets a queue nothing knows yet with a notice naming it; none for a queue with settings, jobs or a worker`, async () => {
      expect(await notices(`select pgsched.${s.call}`, ['misspelt', ...s.args])).toEqual([
        `queue 'misspelt' has no settings, no pending or running work and no worker serving it: ${s.done} anyway (check the name if you meant an existing queue)`,
      ])
      expect((await client().queues.list()).map((q) => q.name)).toContain('misspelt')
      // once set, it has settings: a second call says nothing
      expect(await notices(`select pgsched.${s.call}`, ['misspelt', ...s.args])).toEqual([])
      await submitted({ type: 'noop', queue: 'with-jobs' })
      await workerRegister(t.db, { id: FACTORY_WORKER_ID, host: 'h', pid: 1, queues: ['served'], types: ['noop'], concurrency: 1, leaseMs: 30_000 })
      expect(await notices(`select pgsched.${s.call}`, ['with-jobs', ...s.args])).toEqual([])
      expect(await notices(`select pgsched.${s.call}`, ['served', ...s.args])).toEqual([])
    })
  }

  it('each names a queue nothing knows yet without reading every job of the other queues', async () => {
    // the finished jobs of other queues: most of what pgsched.jobs holds
    await insertExecutions(t.db, 2_000, { state: 'succeeded', job: { tenant: TENANT, queue: 'nightly' } })
    await sql`vacuum (analyze) pgsched.jobs`.execute(t.db)
    const c = new pg.Client({ connectionString: t.url })
    await c.connect()
    const said: string[] = []
    c.on('notice', (n) => said.push(n.message ?? ''))
    try {
      // the rows this transaction's sequential scans of the jobs' partitions returned so far
      const read = async () =>
        Number(
          (
            await c.query<{ n: string }>(`select coalesce(sum(pg_stat_get_xact_tuples_returned(i.inhrelid)), 0) as n
                                            from pg_inherits i where i.inhparent = 'pgsched.jobs'::regclass`)
          ).rows[0]?.n,
        )
      for (const s of SETTERS) {
        await c.query('begin')
        const before = await read()
        await c.query(`select pgsched.${s.call}`, ['misspelt', ...s.args])
        expect((await read()) - before, s.call).toBeLessThan(100)
        await c.query('rollback')
      }
      expect(said.map((m) => m.replace(/.*: (.*) anyway.*/, '$1'))).toEqual(SETTERS.map((x) => x.done))
    } finally {
      await c.end()
    }
  })
})
