/**
 * Lease statements for running executions (pgsched.runs rows), each one statement per batch and
 * each fenced by (execution, worker id, attempt), finding its rows by key, input row by input row:
 * a worker that lost its lease (reaped, cancelled, taken over) gets no row back and must stop.
 *   heartbeat  renews leases (a HOT update of runs), refreshes workers.last_seen_at
 *   complete   runs → history, succeeded
 *   fail       runs → due (retry with backoff; history pending) | history, failed (fatal or out of attempts)
 *   release    runs → due now, attempt not counted (graceful shutdown)
 * While someone listens, complete and fail record their events (succeeded, retrying, failed) in
 * the same statement (event-capture.ts); release records none (the hand-back is not an attempt).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { keyArray } from './array-literal.ts'
import { DUE_COLUMNS, endedAttempts, fairKeyWaiting, historyInsertFirst, historyUpsert } from './fragments.ts'
import { eventsCaptured, eventsUnheard } from './event-capture.ts'
import { withPlainForm, type PlainForm } from './plain-forms.ts'

/** An execution as the worker holding it knows it. */
export interface LeaseRef {
  id: string
  jobId: string
  attempt: number
}

const ids = (refs: readonly LeaseRef[]) => keyArray(refs.map((r) => r.id))
const attempts = (refs: readonly LeaseRef[]) => keyArray(refs.map((r) => r.attempt))

/**
 * The leases as two arrays for unnest: ids and attempts (the first two columns of `d`). The job id is
 * not sent: the fence is the execution, its attempt and the worker, and the statements read the job
 * id from the runs row.
 */
const leaseArrays = (refs: readonly LeaseRef[]) => sql`${ids(refs)}::uuid[], ${attempts(refs)}::int[]`

/**
 * The input rows (`unnest` of `arrays` as `columns`) that hold their lease, each with the ctid of
 * its pgsched.runs row (`rid`): the fence of every statement here (the run at its attempt, leased to
 * `workerId`; a lease that was reaped, cancelled or taken over has no such row). Each input row
 * probes runs_pkey in a lateral subquery, so the input is always the outer side: joined directly,
 * a generic plan made while runs looked small scanned runs as the outer side and the whole input for
 * each of its rows (100,000 leases held: one batch of completions ran for seconds). The statement
 * then changes runs by ctid, rechecking the worker.
 */
const held = (workerId: string, arrays: RawBuilder<unknown>, columns: RawBuilder<unknown>) => sql`(
      select d.*, x.ctid as rid
        from unnest(${arrays}) as d(${columns})
        cross join lateral (select ctid from pgsched.runs x
                             where x.execution_id = d.id and x.attempt = d.attempt and x.worker_id = ${workerId}::uuid offset 0) x
    )`

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
    update pgsched.runs r
       set lease_expires_at = now() + ${params.leaseMs}::int * interval '1 millisecond'
      from ${held(params.workerId, leaseArrays(params.leases), sql`id, attempt`)} d
     where r.ctid = d.rid and r.worker_id = ${params.workerId}::uuid
    returning r.execution_id as id
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
  /**
   * Write every history row as an upsert (default: only when some completion is not of a first
   * attempt; see executionCompleteMany).
   */
  upsert?: boolean
  /** The statement's form (plain-forms.ts); default the full form. */
  form?: PlainForm
}

/** The complete statement, unexecuted. */
export function executionCompleteManyQuery(params: ExecutionCompleteManyParams) {
  const c = params.completions
  // An execution gets a history row when an attempt of it ends, so one ending its first attempt has
  // none: a batch of first attempts inserts its rows without the conflict clause (cheaper per row).
  const write = params.upsert === true || c.some((x) => x.attempt !== 1) ? historyUpsert : historyInsertFirst
  return sql<{ id: string }>`${sql.raw(PREPARE)}
    with ended as (
      delete from pgsched.runs r
       using ${held(params.workerId, sql`${leaseArrays(c)}, ${c.map((x) => x.resultJson)}::text[], ${c.map((x) => x.outputUri)}::text[]`, sql`id, attempt, result, output_uri`)} d
       where r.ctid = d.rid and r.worker_id = ${params.workerId}::uuid
      returning r.*, d.result, d.output_uri as given_output_uri
    ),
    done as (
      ${write(sql`select execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, started_at,
                                 concurrency_key, tenant, start_deadline, created_at, 'succeeded', now(), result::jsonb, null::jsonb,
                                 coalesce(given_output_uri, output_uri),
                                 null::jsonb, worker_id
                            from ended`)}
    ),
    ${params.form?.events === true ? eventsUnheard() : eventsCaptured(sql`select 'succeeded', tenant, job_id, id, queue, type, attempt from done`)}
    select id from done
  `
}

/**
 * Marks executions succeeded; returns the ids accepted (others had lost their lease). Should a first
 * attempt's execution have a history row after all (a violation of the history's primary key by the
 * plain insert, which then wrote nothing), the batch is written again with upserts.
 */
export async function executionCompleteMany(db: Kysely<DB>, params: ExecutionCompleteManyParams): Promise<Set<string>> {
  try {
    // in the plain form (without event capture) while nobody listens (plain-forms.ts)
    return await withPlainForm(db, [], (form) => idsReturned(db, executionCompleteManyQuery({ ...params, form })))
  } catch (err: unknown) {
    // only the history's primary key (a partition's: executions_p000_pkey, …); another unique key
    // would fail the upsert the same way
    const e = err as { code?: unknown; constraint?: unknown }
    if (params.upsert === true || e.code !== '23505' || typeof e.constraint !== 'string' || !e.constraint.endsWith('_pkey')) throw err
    return idsReturned(db, executionCompleteManyQuery({ ...params, upsert: true }))
  }
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
  state: 'pending' | 'failed' | 'cancelled'
  runAt: Date
  /** Milliseconds from now (database clock) until a retry is due. */
  retryInMs: number
}

/** The fail statement, unexecuted. */
export function executionFailManyQuery(params: ExecutionFailManyParams) {
  const f = params.failures
  return sql<FailOutcome>`${sql.raw(PREPARE)}
    with ended as (
      delete from pgsched.runs r
       using ${held(
         params.workerId,
         sql`${leaseArrays(f)}, ${f.map((x) => x.errorJson)}::text[], ${f.map((x) => x.fatal)}::bool[], ${f.map((x) => x.outputUri)}::text[]`,
         sql`id, attempt, error, fatal, output_uri`,
       )} d
       where r.ctid = d.rid and r.worker_id = ${params.workerId}::uuid
      returning r.*, d.error::jsonb as error, d.fatal, d.output_uri as given_output_uri
    ),
    ${endedAttempts(sql`e.fatal`, sql`e.error`, sql`'failed'`, sql`coalesce(e.given_output_uri, e.output_uri)`)},
    ${eventsCaptured(sql`select case state when 'pending' then 'retrying' else state end, tenant, job_id, id, queue, type, attempt from moved`)}
    select id, state, run_at as "runAt",
           greatest(0, floor(extract(epoch from run_at - now()) * 1000))::float8 as "retryInMs"
      from moved
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
    with ended as (
      delete from pgsched.runs r
       using ${held(params.workerId, leaseArrays(l), sql`id, attempt`)} d
       where r.ctid = d.rid and r.worker_id = ${params.workerId}::uuid
      returning r.*
    ),
    moved as (
      insert into pgsched.due (${DUE_COLUMNS})
      select execution_id, job_id, queue, type, priority, now(), scheduled_for, attempt - 1, max_attempts, timeout_ms,
             tenant, concurrency_key,
             null,   -- it started: its start deadline was met
             created_at, ${fairKeyWaiting(sql`queue`)}
        from ended
      returning 1   -- the due insert's trigger (due_notify) wakes idle workers for them
    )
    select count(*)::text as n from moved
  `
}

/** Hands executions back (pending, due now, attempt not counted); the due insert wakes idle workers. */
export async function executionReleaseMany(db: Kysely<DB>, params: ExecutionReleaseManyParams): Promise<number> {
  const { rows } = await executionReleaseManyQuery(params).execute(db)
  return Number(rows[0]?.n ?? 0)
}
