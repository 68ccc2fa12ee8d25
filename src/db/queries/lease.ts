/**
 * Lease statements for running executions, each one statement per batch and
 * each fenced by (worker id, attempt, state = running) and each finding its rows
 * by key, input row by input row: a worker that lost its
 * lease (reaped, cancelled, taken over) gets no row back and must stop.
 *   heartbeat  renews leases, refreshes workers.last_seen_at
 *   complete   running → succeeded
 *   fail       running → pending (retry with backoff) | failed (fatal or out of attempts)
 *   release    running → pending now, attempt not counted (graceful shutdown)
 * While someone listens, complete and fail record their events (succeeded, retrying, failed) in
 * the same statement (event-capture.ts); release records none (the hand-back is not an attempt).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { keyArray } from './array-literal.ts'
import { attemptLogEntry, retryRunAt, wakeCte } from './fragments.ts'
import { eventsCaptured } from './event-capture.ts'

/** An execution as the worker holding it knows it. */
export interface LeaseRef {
  id: string
  jobId: string
  attempt: number
}

const ids = (refs: readonly LeaseRef[]) => keyArray(refs.map((r) => r.id))
const jobIds = (refs: readonly LeaseRef[]) => keyArray(refs.map((r) => r.jobId))
const attempts = (refs: readonly LeaseRef[]) => keyArray(refs.map((r) => r.attempt))

/**
 * The fence "running and leased to this worker", written as one CASE so the
 * planner cannot match it to the partial lease index (`where state = 'running'`).
 * Each statement below joins its input arrays (unnest) to executions by key; had
 * the planner seen `state = 'running'`, it could (statistics permitting: e.g.
 * just after an ANALYZE that found nothing running) scan the lease index for the
 * outer side of a nested loop and rescan the whole input per row, quadratic in
 * the batch (82 ms instead of 8 ms for 500 completions on one partition). Opaque,
 * it leaves one plan: each input row probes the primary key of its own partition.
 */
const leasedTo = (workerId: string) => sql`(case when e.state = 'running' then e.worker_id end) = ${workerId}::uuid`

/** The leases as three arrays for unnest: ids, job ids, attempts (the first three columns of `d`). */
const leaseArrays = (refs: readonly LeaseRef[]) => sql`${ids(refs)}::uuid[], ${jobIds(refs)}::uuid[], ${attempts(refs)}::int[]`

/** The fence of every statement here: `e` is the input row `d`'s execution, at its attempt, leased to `workerId`. */
const fencedBy = (workerId: string) => sql`e.id = d.id and e.job_id = d.job_id
       and e.attempt = d.attempt
       and ${leasedTo(workerId)}`

export interface ExecutionHeartbeatManyParams {
  workerId: string
  leases: readonly LeaseRef[]
  leaseMs: number
}

/** The heartbeat statement, unexecuted. */
export function executionHeartbeatManyQuery(params: ExecutionHeartbeatManyParams) {
  return sql<{ id: string }>`${sql.raw(PREPARE)}
    with seen as (
      update pgsched.workers set last_seen_at = now() where id = ${params.workerId}::uuid
    )
    update pgsched.executions e
       set lease_expires_at = now() + ${params.leaseMs}::int * interval '1 millisecond'
      from unnest(${leaseArrays(params.leases)}) as d(id, job_id, attempt)
     where ${fencedBy(params.workerId)}
    returning e.id
  `
}

/** Renews the leases still held; returns the ids renewed (the others are lost). */
export function executionHeartbeatMany(db: Kysely<DB>, params: ExecutionHeartbeatManyParams): Promise<Set<string>> {
  return idsReturned(db, executionHeartbeatManyQuery(params))
}

export interface Completion extends LeaseRef {
  /** JSON text of the handler's result. */
  resultJson: string
  outputUri: string | null
}

export interface ExecutionCompleteManyParams {
  workerId: string
  completions: readonly Completion[]
}

/** The complete statement, unexecuted. */
export function executionCompleteManyQuery(params: ExecutionCompleteManyParams) {
  const c = params.completions
  return sql<{ id: string }>`${sql.raw(PREPARE)}
    with done as (
    update pgsched.executions e
       set state = 'succeeded',
           finished_at = now(),
           result = d.result::jsonb,
           output_uri = d.output_uri,
           error = null,
           last_worker_id = e.worker_id,
           worker_id = null,
           lease_expires_at = null
      from unnest(${leaseArrays(c)}, ${c.map((x) => x.resultJson)}::text[], ${c.map((x) => x.outputUri)}::text[])
           as d(id, job_id, attempt, result, output_uri)
     where ${fencedBy(params.workerId)}
    returning e.id, e.job_id, e.tenant, e.queue, e.type, e.attempt
    ),
    ${eventsCaptured(sql`select 'succeeded', tenant, job_id, id, queue, type, attempt from done`)}
    select id from done
  `
}

/** Marks executions succeeded; returns the ids accepted (others had lost their lease). */
export function executionCompleteMany(db: Kysely<DB>, params: ExecutionCompleteManyParams): Promise<Set<string>> {
  return idsReturned(db, executionCompleteManyQuery(params))
}

/** Runs a lease statement; the ids it returns are the executions whose lease it found held. */
async function idsReturned(db: Kysely<DB>, query: RawBuilder<{ id: string }>): Promise<Set<string>> {
  const { rows } = await query.execute(db)
  return new Set(rows.map((r) => r.id))
}

export interface Failure extends LeaseRef {
  /** JSON text: {message, name, …}. */
  errorJson: string
  /** No retry, whatever attempts remain. */
  fatal: boolean
  outputUri: string | null
}

export interface ExecutionFailManyParams {
  workerId: string
  failures: readonly Failure[]
}

export interface FailOutcome {
  id: string
  state: 'pending' | 'failed'
  runAt: Date
  /** Milliseconds from now (database clock) until a retry is due. */
  retryInMs: number
}

/** The fail statement, unexecuted. */
export function executionFailManyQuery(params: ExecutionFailManyParams) {
  const f = params.failures
  return sql<FailOutcome>`${sql.raw(PREPARE)}
    with moved as (
      update pgsched.executions e
         set state = case when d.fatal or e.attempt >= e.max_attempts then 'failed' else 'pending' end,
             run_at = case when d.fatal or e.attempt >= e.max_attempts then e.run_at
                           else ${retryRunAt} end,
             finished_at = case when d.fatal or e.attempt >= e.max_attempts then now() end,
             error = d.error::jsonb,
             output_uri = d.output_uri,
             attempt_log = ${attemptLogEntry(sql`'failed'`, sql`d.error::jsonb`)},
             last_worker_id = e.worker_id,
             worker_id = null,
             lease_expires_at = null
        from unnest(${leaseArrays(f)}, ${f.map((x) => x.errorJson)}::text[], ${f.map((x) => x.fatal)}::bool[],
                    ${f.map((x) => x.outputUri)}::text[])
             as d(id, job_id, attempt, error, fatal, output_uri)
        join pgsched.jobs j on j.id = d.job_id
       where ${fencedBy(params.workerId)}
      returning e.id, e.state, e.run_at, e.queue, e.job_id, e.tenant, e.type, e.attempt
    ),
    ${wakeCte},
    ${eventsCaptured(sql`select case when state = 'failed' then 'failed' else 'retrying' end, tenant, job_id, id, queue, type, attempt from moved`)}
    select id, state, run_at as "runAt",
           greatest(0, floor(extract(epoch from run_at - now()) * 1000))::float8 as "retryInMs"
      from moved, (select count(*) from wake) as w
  `
}

/**
 * Records failed attempts. A retriable failure with attempts left goes back to
 * pending with run_at = now + random(0, min(max, base · 2^(attempt−1))) ms
 * (exponential backoff, full jitter); otherwise the execution is failed.
 */
export async function executionFailMany(db: Kysely<DB>, params: ExecutionFailManyParams): Promise<FailOutcome[]> {
  const { rows } = await executionFailManyQuery(params).execute(db)
  return rows
}

export interface ExecutionReleaseManyParams {
  workerId: string
  leases: readonly LeaseRef[]
}

/** The release statement, unexecuted. */
export function executionReleaseManyQuery(params: ExecutionReleaseManyParams) {
  const l = params.leases
  return sql<{ n: string }>`${sql.raw(PREPARE)}
    with moved as (
      update pgsched.executions e
         set state = 'pending', run_at = now(), attempt = e.attempt - 1, worker_id = null, lease_expires_at = null,
             start_deadline = null   -- it started: its start deadline was met
        from unnest(${leaseArrays(l)}) as d(id, job_id, attempt)
       where ${fencedBy(params.workerId)}
      returning e.state, e.run_at, e.queue   -- all pending and due now: the wake-up says delayMs 0
    ),
    ${wakeCte}
    select count(*)::text as n from moved, (select count(*) from wake) as w
  `
}

/** Hands executions back (pending, due now, attempt not counted) and wakes other workers. */
export async function executionReleaseMany(db: Kysely<DB>, params: ExecutionReleaseManyParams): Promise<number> {
  const { rows } = await executionReleaseManyQuery(params).execute(db)
  return Number(rows[0]?.n ?? 0)
}
