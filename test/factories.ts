/**
 * Test factories: rows put straight into each state with valid defaults, so a
 * test names only what it is about (River's testfactory). Every row a test
 * needs and the product's own statements cannot make (an expired lease, a run
 * finished a week ago, a trigger with a broken time zone) is written here and
 * nowhere else; the defaults satisfy every check constraint of the schema
 * (running ⇔ worker and lease, terminal ⇔ finished_at, attempt ≤ max_attempts).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB, ExecutionState, MisfirePolicy, OverlapPolicy, TriggerKind } from '../src/db/schema.ts'
import { fairKeyWaiting } from '../src/db/queries/fragments.ts'

/** The worker id running executions get when a test does not name one. */
export const FACTORY_WORKER_ID = '00000000-0000-7000-8000-0000000000fa'

/** `ms` milliseconds before now (this machine's clock, which is also the test database's). */
export const msAgo = (ms: number): Date => new Date(Date.now() - ms)

export interface JobOverrides {
  id?: string
  tenant?: string
  type?: string
  queue?: string
  priority?: number
  payload?: unknown
  maxAttempts?: number
  backoffBaseMs?: number
  backoffMaxMs?: number
  timeoutMs?: number
  idempotencyKey?: string | null
  state?: 'active' | 'paused' | 'cancelled'
  createdAt?: Date
}

/** A job row as the factories wrote it: what its executions copy. */
export interface InsertedJob {
  id: string
  tenant: string
  type: string
  queue: string
  priority: number
  maxAttempts: number
  timeoutMs: number
}

function jobValues(o: JobOverrides) {
  return {
    ...(o.id === undefined ? {} : { id: o.id }),
    tenant: o.tenant ?? 'acme',
    type: o.type ?? 'noop',
    queue: o.queue ?? 'default',
    priority: o.priority ?? 0,
    payload: JSON.stringify(o.payload ?? {}),
    max_attempts: o.maxAttempts ?? 5,
    backoff_base_ms: o.backoffBaseMs ?? 1000,
    backoff_max_ms: o.backoffMaxMs ?? Math.max(3_600_000, o.backoffBaseMs ?? 0),
    timeout_ms: o.timeoutMs ?? 300_000,
    idempotency_key: o.idempotencyKey ?? null,
    state: o.state ?? 'active',
    created_by: 'test',
    ...(o.createdAt === undefined ? {} : { created_at: o.createdAt }),
  }
}

const toInsertedJob = (r: {
  id: string
  tenant: string
  type: string
  queue: string
  priority: number
  max_attempts: number
  timeout_ms: number
}): InsertedJob => ({
  id: r.id,
  tenant: r.tenant,
  type: r.type,
  queue: r.queue,
  priority: r.priority,
  maxAttempts: r.max_attempts,
  timeoutMs: r.timeout_ms,
})

const JOB_COLUMNS = ['id', 'tenant', 'type', 'queue', 'priority', 'max_attempts', 'timeout_ms'] as const

/** Inserts one job (tenant acme, type noop, queue default, active) with neither execution nor trigger. */
export async function insertJob(db: Kysely<DB>, overrides: JobOverrides = {}): Promise<InsertedJob> {
  const row = await db.insertInto('pgsched.jobs').values(jobValues(overrides)).returning(JOB_COLUMNS).executeTakeFirstOrThrow()
  return toInsertedJob(row)
}

export interface ExecutionOverrides {
  /** The execution's job; absent: a job is inserted with `job`. */
  jobId?: string
  /** Overrides of the job inserted when `jobId` is absent. */
  job?: JobOverrides
  /** Default the job's (executions copy it at creation). */
  priority?: number
  /** Default pending. */
  state?: ExecutionState
  /** Default 0 when pending, else 1. */
  attempt?: number
  /** Running only: default FACTORY_WORKER_ID. */
  workerId?: string
  /** Running only: default 30 seconds from now. */
  leaseExpiresAt?: Date
  /** Default now. */
  runAt?: Date
  /** Default `runAt`. */
  scheduledFor?: Date
  /** Default now once an attempt started. */
  startedAt?: Date | null
  /** Terminal states only: default now. */
  finishedAt?: Date
  result?: unknown
  error?: unknown
}

/** Ids of an inserted execution. */
export interface InsertedExecution {
  id: string
  jobId: string
}

function executionValues(job: InsertedJob, o: ExecutionOverrides, now: Date) {
  const state = o.state ?? 'pending'
  const running = state === 'running'
  const terminal = state === 'succeeded' || state === 'failed' || state === 'cancelled'
  const attempt = o.attempt ?? (state === 'pending' ? 0 : 1)
  const runAt = o.runAt ?? now
  return {
    job_id: job.id,
    tenant: job.tenant,
    queue: job.queue,
    type: job.type,
    priority: o.priority ?? job.priority,
    max_attempts: job.maxAttempts,
    timeout_ms: job.timeoutMs,
    scheduled_for: o.scheduledFor ?? runAt,
    run_at: runAt,
    state,
    attempt,
    worker_id: running ? (o.workerId ?? FACTORY_WORKER_ID) : null,
    lease_expires_at: running ? (o.leaseExpiresAt ?? new Date(now.getTime() + 30_000)) : null,
    started_at: o.startedAt !== undefined ? o.startedAt : attempt > 0 ? now : null,
    finished_at: terminal ? (o.finishedAt ?? now) : null,
    result: o.result === undefined ? null : JSON.stringify(o.result),
    error: o.error === undefined ? null : JSON.stringify(o.error),
  }
}

/**
 * Inserts one execution in `state` (default pending, due now), with the worker and lease a
 * running one needs and the finish time a terminal one needs; inserts its job unless `jobId`
 * is given. Queue, type, priority, max_attempts and timeout come from the job.
 */
export async function insertExecution(db: Kysely<DB>, overrides: ExecutionOverrides = {}): Promise<InsertedExecution> {
  const [execution] = await insertExecutions(db, 1, overrides)
  return execution as InsertedExecution
}

/**
 * Inserts `count` executions alike (see insertExecution), each with a job of its own, in one
 * statement (generate_series), so tens of thousands of rows of history cost well under a second.
 * With `jobId`, only one: a job has one execution per fire time.
 */
export async function insertExecutions(db: Kysely<DB>, count: number, overrides: ExecutionOverrides = {}): Promise<InsertedExecution[]> {
  let jobs: RawBuilder<unknown>
  let e: ReturnType<typeof executionValues>
  if (overrides.jobId !== undefined) {
    if (count !== 1) throw new Error('insertExecutions: one execution per call for a given jobId (give each its scheduledFor)')
    const job = await db.selectFrom('pgsched.jobs').select(JOB_COLUMNS).where('id', '=', overrides.jobId).executeTakeFirstOrThrow()
    e = executionValues(toInsertedJob(job), overrides, new Date())
    jobs = sql`select id, tenant, queue, type, priority, max_attempts, timeout_ms from pgsched.jobs where id = ${overrides.jobId}::uuid`
  } else {
    const j = jobValues(overrides.job ?? {})
    e = executionValues(
      { id: '', tenant: j.tenant, type: j.type, queue: j.queue, priority: j.priority, maxAttempts: j.max_attempts, timeoutMs: j.timeout_ms },
      overrides,
      new Date(),
    )
    jobs = sql`
      insert into pgsched.jobs (tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                                timeout_ms, idempotency_key, state, created_by, created_at)
      select ${j.tenant}::text, ${j.type}::text, ${j.queue}::text, ${j.priority}::int, ${j.payload}::jsonb, ${j.max_attempts}::int,
             ${j.backoff_base_ms}::int, ${j.backoff_max_ms}::int, ${j.timeout_ms}::int, ${j.idempotency_key}::text, ${j.state}::text,
             ${j.created_by}::text, coalesce(${overrides.job?.createdAt ?? null}::timestamptz, now())
        from generate_series(1, ${count}::int)
      returning id, tenant, queue, type, priority, max_attempts, timeout_ms`
  }
  const priority = overrides.priority ?? null
  // Each state in its table (migration 0028): pending in due, running in runs, ended in the history;
  // a pending or running one with attempts already ended also has a pending history row (its error).
  const live = sql`select pgsched.uuid_v7() as id, id as job_id, tenant, queue, type, coalesce(${priority}::int, priority) as priority,
                          max_attempts, timeout_ms from job`
  const { rows } = await sql<{ id: string; job_id: string }>`
    with job as (${jobs}),
    x as materialized (${live}),
    pending as (
      insert into pgsched.due (execution_id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at, attempt, fair_key)
      select id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, ${e.scheduled_for}::timestamptz, ${e.run_at}::timestamptz,
             ${e.attempt}::int, ${fairKeyWaiting(sql`queue`)}
        from x where ${e.state}::text = 'pending'
    ),
    running as (
      insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                                scheduled_for, max_attempts, timeout_ms, tenant, created_at)
      select id, job_id, ${e.worker_id}::uuid, ${e.attempt}::int, ${e.lease_expires_at}::timestamptz, coalesce(${e.started_at}::timestamptz, now()),
             queue, type, priority, ${e.run_at}::timestamptz, ${e.scheduled_for}::timestamptz, max_attempts, timeout_ms, tenant, now()
        from x where ${e.state}::text = 'running'
    ),
    history as (
      insert into pgsched.execution_history (id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at, state,
                                             attempt, started_at, finished_at, result, error)
      select id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, ${e.scheduled_for}::timestamptz, ${e.run_at}::timestamptz,
             case when ${e.state}::text in ('pending', 'running') then 'pending' else ${e.state}::text end,
             case when ${e.state}::text = 'running' then ${e.attempt}::int - 1 else ${e.attempt}::int end,
             ${e.started_at}::timestamptz, ${e.finished_at}::timestamptz, ${e.result}::jsonb, ${e.error}::jsonb
        from x
       where ${e.state}::text not in ('pending', 'running')
          or (${e.state}::text = 'pending' and ${e.attempt}::int > 0)
          or (${e.state}::text = 'running' and ${e.attempt}::int > 1)
    )
    select id, job_id from x`.execute(db)
  return rows.map((r) => ({ id: r.id, jobId: r.job_id }))
}

export interface TriggerOverrides {
  /** The trigger's job; absent: a job is inserted with `job`. */
  jobId?: string
  job?: JobOverrides
  /** Default cron (every ten seconds). */
  kind?: TriggerKind
  cronExpression?: string
  intervalMs?: number
  /** Not checked by the database: a bad one is how a test gets a schedule that cannot be evaluated. */
  timezone?: string
  /** Default now (due). */
  nextFireAt?: Date | null
  misfirePolicy?: MisfirePolicy
  misfireMaxRuns?: number
  overlapPolicy?: OverlapPolicy
  paused?: boolean
}

/** Inserts a trigger (default: cron every ten seconds in UTC, due now) and, unless `jobId` is given, its job. */
export async function insertTrigger(db: Kysely<DB>, overrides: TriggerOverrides = {}): Promise<{ jobId: string }> {
  const jobId = overrides.jobId ?? (await insertJob(db, overrides.job)).id
  const kind = overrides.kind ?? 'cron'
  await db
    .insertInto('pgsched.triggers')
    .values({
      job_id: jobId,
      kind,
      cron_expression: kind === 'cron' ? (overrides.cronExpression ?? '*/10 * * * * *') : null,
      interval_ms: kind === 'interval' ? (overrides.intervalMs ?? 10_000) : null,
      timezone: overrides.timezone ?? 'UTC',
      next_fire_at: overrides.nextFireAt === undefined ? new Date() : overrides.nextFireAt,
      misfire_policy: overrides.misfirePolicy ?? 'fire_once',
      misfire_max_runs: overrides.misfireMaxRuns ?? 100,
      overlap_policy: overrides.overlapPolicy ?? 'allow',
      paused: overrides.paused ?? false,
    })
    .execute()
  return { jobId }
}

export interface SetExecutionStateParams {
  /** The executions to move: every one of these jobs'. */
  jobIds: readonly string[]
  /** Terminal states only, for now. */
  state: 'succeeded' | 'failed' | 'cancelled'
  /** Default now. */
  finishedAt?: Date
  /** Default: as it was (attempts made so far; a running one's current attempt). */
  attempt?: number
  /** Default: as it was. */
  startedAt?: Date
  result?: unknown
  error?: unknown
  outputUri?: string
}

/**
 * Finishes executions the product created (a dispatcher's, a submit's) as a handler or a
 * cancel would have, without running one: the one place tests move rows they did not insert.
 * Returns how many it moved.
 */
export async function setExecutionState(db: Kysely<DB>, params: SetExecutionStateParams): Promise<number> {
  const finishedAt = params.finishedAt ?? new Date()
  const { rows } = await sql<{ n: number }>`
    with live as (
      delete from pgsched.due where job_id = any(${[...params.jobIds]}::uuid[])
      returning execution_id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at, attempt,
                null::timestamptz as started_at, null::uuid as worker_id
    ),
    held as (
      delete from pgsched.runs where job_id = any(${[...params.jobIds]}::uuid[])
      returning execution_id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at, attempt,
                started_at, worker_id
    ),
    moved as (
      insert into pgsched.execution_history as h (id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at,
                                                  state, attempt, started_at, finished_at, last_worker_id)
      select execution_id, job_id, tenant, queue, type, priority, max_attempts, timeout_ms, scheduled_for, run_at,
             ${params.state}::text, coalesce(${params.attempt ?? null}::int, attempt), coalesce(${params.startedAt ?? null}::timestamptz, started_at),
             ${finishedAt}::timestamptz, worker_id
        from (select * from live union all select * from held) x
      on conflict (id, job_id) do update set state = excluded.state, attempt = excluded.attempt, finished_at = excluded.finished_at,
                                             started_at = coalesce(excluded.started_at, h.started_at)
      returning 1
    ),
    ended as (
      update pgsched.execution_history
         set state = ${params.state}::text, finished_at = ${finishedAt}::timestamptz,
             attempt = coalesce(${params.attempt ?? null}::int, attempt), started_at = coalesce(${params.startedAt ?? null}::timestamptz, started_at)
       where job_id = any(${[...params.jobIds]}::uuid[]) and state <> 'pending'
         and id not in (select execution_id from live union all select execution_id from held)
      returning 1
    )
    select ((select count(*) from moved) + (select count(*) from ended))::int as n`.execute(db)
  // the outcome's details, on the rows just ended
  if (params.result !== undefined || params.error !== undefined || params.outputUri !== undefined) {
    await sql`
      update pgsched.execution_history
         set result = coalesce(${params.result === undefined ? null : JSON.stringify(params.result)}::jsonb, result),
             error = coalesce(${params.error === undefined ? null : JSON.stringify(params.error)}::jsonb, error),
             output_uri = coalesce(${params.outputUri ?? null}::text, output_uri)
       where job_id = any(${[...params.jobIds]}::uuid[]) and state = ${params.state}::text`.execute(db)
  }
  return rows[0]?.n ?? 0
}

export interface TakeOverExecutionParams {
  /** The job whose (single) execution another worker takes. */
  jobId: string
  /** The new owner. */
  workerId: string
  /** Default one hour. */
  leaseMs?: number
}

/**
 * Gives a running execution to another worker with the next attempt, as the reaper and that
 * worker's claim would after the lease expired: the previous owner's lease is gone.
 * Returns how many executions moved.
 */
export async function takeOverExecution(db: Kysely<DB>, params: TakeOverExecutionParams): Promise<number> {
  const result = await db
    .updateTable('pgsched.runs')
    .set((eb) => ({
      attempt: eb('attempt', '+', 1),
      worker_id: params.workerId,
      lease_expires_at: new Date(Date.now() + (params.leaseMs ?? 3_600_000)),
    }))
    .where('job_id', '=', params.jobId)
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

export interface StartExecutionsParams {
  /** The pending executions to start: these jobs'; or `queue`'s. */
  jobIds?: readonly string[]
  queue?: string
  /** Default FACTORY_WORKER_ID. */
  workerId?: string
  /** Default one minute. */
  leaseMs?: number
}

/**
 * Starts pending executions as a claim would (moves them from pgsched.due to pgsched.runs, the
 * attempt counted, leased to `workerId`), without a handler. Returns how many started.
 */
export async function startExecutions(db: Kysely<DB>, params: StartExecutionsParams): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    with taken as (
      delete from pgsched.due
       where (${params.jobIds === undefined}::boolean or job_id = any(${[...(params.jobIds ?? [])]}::uuid[]))
         and (${params.queue ?? null}::text is null or queue = ${params.queue ?? null}::text)
      returning *
    ),
    started as (
      insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                                scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at)
      select execution_id, job_id, ${params.workerId ?? FACTORY_WORKER_ID}::uuid, attempt + 1,
             now() + ${params.leaseMs ?? 60_000}::int * interval '1 millisecond', now(), queue, type, priority, run_at,
             scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at
        from taken
      returning 1
    )
    select count(*)::int as n from started`.execute(db)
  return rows[0]?.n ?? 0
}
