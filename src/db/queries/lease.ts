/**
 * Lease statements for running executions (pgsched.runs rows), each one statement per batch and
 * each fenced by (execution, worker id, attempt), finding its rows by one scan of the primary key
 * (see fence): a worker that lost its lease (reaped, cancelled, taken over) gets no row back and
 * must stop.
 *   heartbeat  renews leases (a HOT update of runs) whose rows no other transaction holds, marks begun those whose handler
 *              started, refreshes workers.last_seen_at and running
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

/**
 * The leases as one jsonb object text keyed by execution id, `{"<id>":[attempt, …]}`, each array
 * holding the lease's attempt and then the JSON texts `rest` gives for it (a completion's result, a
 * failure's error). Those texts are valid JSON by construction (JSON.stringify, or a sandbox's result
 * checked with JSON.parse when it arrived), so each stays one element of its array. Put together by
 * concatenation; PostgreSQL parses it once per statement.
 */
export function leaseMap<T extends LeaseRef>(refs: readonly T[], rest?: (r: T) => string): string {
  let text = '{'
  for (let i = 0; i < refs.length; i++) {
    const r = refs[i] as T
    text += `${i === 0 ? '' : ','}"${r.id}":[${r.attempt}${rest === undefined ? '' : `,${rest(r)}`}]`
  }
  return `${text}}`
}

/** A text (or null) as JSON text. */
const jsonText = (value: string | null) => (value === null ? 'null' : JSON.stringify(value))

/** The entry of the statement's map for the runs row `r` (jsonb: [attempt, …]). */
const given = sql`((select m from input) -> r.execution_id::text)`

/**
 * The fence of every statement here, as the condition on a pgsched.runs row `r`: its execution is
 * one of `refs`, leased to `workerId` at the attempt its entry of the map (the statement's CTE
 * `input`, column m: leaseMap) names. A lease that was reaped, cancelled or taken over has no such
 * row. The rows are found by one scan of runs_pkey for all the ids (`= any`): a join of the input to
 * runs would find each row by its key and then again by its ctid (a TID rescan per row, and with it a
 * system call for the relation's size per row).
 */
const fence = (workerId: string, refs: readonly LeaseRef[]) =>
  sql`r.execution_id = any(${ids(refs)}::uuid[]) and r.worker_id = ${workerId}::uuid
         and r.attempt = (${given} ->> 0)::int`

export interface ExecutionHeartbeatManyParams {
  workerId: string
  leases: readonly LeaseRef[]
  leaseMs: number
  /** How many of the leases have their handler running now (recorded as pgsched.workers.running). */
  running: number
  /**
   * The leases (execution ids) whose handler has started: marked begun (pgsched.runs.began, migration
   * 0072), so that the reaper counts the attempt should this worker die. Default none.
   */
  started?: ReadonlySet<string>
}

/**
 * The heartbeat statement, unexecuted. It never waits for a lock: it renews the leases whose rows it
 * can lock at once (SKIP LOCKED) and passes over those another transaction holds, which is almost
 * always this worker's own outcome write or hand-back in flight. So it runs beside them (the worker
 * does not hold it back while an outcome is written) and cannot deadlock with them, and an outcome
 * write that waits (on a lock another session holds) does not hold up the renewal of the other leases.
 * A lease passed over keeps the time it was last renewed to; the reaper passes over a locked row too.
 * Returns each lease found, renewed or not (one found neither way is gone: reaped, cancelled, taken over).
 * The listing reads the statement's snapshot, so a lease taken away while the statement ran (its row
 * deleted by a transaction that had not committed at its start) is found gone by the next heartbeat.
 */
export function executionHeartbeatManyQuery(params: ExecutionHeartbeatManyParams) {
  return sql<{ id: string; renewed: boolean }>`${sql.raw(PREPARE)}
    with input as (
      select ${leaseMap(params.leases, (r) => (params.started?.has(r.id) === true ? 'true' : 'false'))}::jsonb as m
    ),
    seen as (
      update pgsched.workers set last_seen_at = now(), running = ${params.running}::int where id = ${params.workerId}::uuid
    ),
    renewed as (
      update pgsched.runs u
         set lease_expires_at = now() + ${params.leaseMs}::int * interval '1 millisecond',
             began = u.began or coalesce(((select m from input) -> u.execution_id::text ->> 1)::boolean, false)
       where u.ctid = any(array(select r.ctid from pgsched.runs r where ${fence(params.workerId, params.leases)} for no key update of r skip locked))
      returning u.execution_id
    )
    select execution_id as id, true as renewed from renewed
    union all
    -- every lease still there as the statement found it, the rows passed over included
    select r.execution_id, false from pgsched.runs r where ${fence(params.workerId, params.leases)}
  `
}

/** What a heartbeat found: the leases it renewed, and every lease still held (renewed or passed over while another transaction held its row). */
export interface HeartbeatAnswer {
  renewed: Set<string>
  held: Set<string>
}

/** Renews the leases still held whose rows are not locked by another transaction (see executionHeartbeatManyQuery). */
export async function executionHeartbeatMany(db: Kysely<DB>, params: ExecutionHeartbeatManyParams): Promise<HeartbeatAnswer> {
  const { rows } = await executionHeartbeatManyQuery(params).execute(db)
  const answer: HeartbeatAnswer = { renewed: new Set(), held: new Set() }
  for (const r of rows) (r.renewed ? answer.renewed : answer.held).add(r.id)
  return answer
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
    with input as (
      select ${leaseMap(c, (x) => `${x.resultJson},${jsonText(x.outputUri)}`)}::jsonb as m
    ),
    ended as (
      delete from pgsched.runs r
       where ${fence(params.workerId, c)}
      returning r.*, ${given} as given
    ),
    done as (
      ${write(sql`select execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, started_at,
                                 concurrency_key, tenant, start_deadline, created_at, 'succeeded', now(), given -> 1, null::jsonb,
                                 coalesce(given ->> 2, output_uri),
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
    with input as (
      select ${leaseMap(f, (x) => `${x.errorJson},${x.fatal},${jsonText(x.outputUri)}`)}::jsonb as m
    ),
    ended as (
      delete from pgsched.runs r
       where ${fence(params.workerId, f)}
      returning r.*, ${given} -> 1 as error, (${given} -> 2)::boolean as fatal, ${given} ->> 3 as given_output_uri
    ),
    ${endedAttempts(sql`e.fatal`, sql`e.error`, sql`'failed'`, sql`coalesce(e.given_output_uri, e.output_uri)`)},
    ${eventsCaptured(
      sql`select case state when 'pending' then 'retrying' else state end, tenant, job_id, id, queue, type, attempt,
                                 case when state <> 'cancelled' then error end from moved`,
      { errors: true },
    )}
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
  /**
   * Whether their handlers had started: a started execution met its start deadline and goes back
   * without one; one claimed ahead and never started keeps it (and expires if it passes while due).
   */
  started: boolean
}

/** The release statement, unexecuted. */
export function executionReleaseManyQuery(params: ExecutionReleaseManyParams) {
  const l = params.leases
  return sql<{ ids: string[] }>`${sql.raw(PREPARE)}
    with input as (
      select ${leaseMap(l)}::jsonb as m
    ),
    ended as (
      delete from pgsched.runs r
       where ${fence(params.workerId, l)}
      returning r.*
    ),
    moved as (
      insert into pgsched.due (${DUE_COLUMNS})
      select execution_id, job_id, queue, type, priority, now(), scheduled_for, attempt - 1, max_attempts, timeout_ms,
             tenant, concurrency_key,
             case when ${params.started}::boolean then null else start_deadline end,
             created_at, ${fairKeyWaiting(sql`queue`)}, unstarted_requeues
        from ended
      returning execution_id   -- the due insert's trigger (due_notify) wakes idle workers for them
    )
    select coalesce(array_agg(execution_id::text), '{}') as ids from moved
  `
}

export interface ExecutionReleaseUnheldParams {
  workerId: string
  /** The executions the worker holds: every other lease of its goes back. */
  held: readonly string[]
}

/**
 * Hands back, uncounted and with their start deadlines, the leases the database gives `workerId` but
 * the worker does not hold: those of a claim that committed while its answer was lost (the
 * connection cut in between). Only between claims, with none in flight: a claim's rows are the
 * worker's before its answer arrives.
 */
export function executionReleaseUnheldQuery(params: ExecutionReleaseUnheldParams) {
  return sql<{ n: string }>`${sql.raw(PREPARE)}
    with ended as (
      delete from pgsched.runs r
       where r.worker_id = ${params.workerId}::uuid
         and r.execution_id <> all(${[...params.held]}::uuid[])
      returning r.*
    ),
    moved as (
      insert into pgsched.due (${DUE_COLUMNS})
      select execution_id, job_id, queue, type, priority, now(), scheduled_for, attempt - 1, max_attempts, timeout_ms,
             tenant, concurrency_key, start_deadline, created_at, ${fairKeyWaiting(sql`queue`)}, unstarted_requeues
        from ended
      returning 1
    )
    select count(*)::text as n from moved
  `
}

/** See executionReleaseUnheldQuery: how many leases went back. */
export async function executionReleaseUnheld(db: Kysely<DB>, params: ExecutionReleaseUnheldParams): Promise<number> {
  const { rows } = await executionReleaseUnheldQuery(params).execute(db)
  return Number(rows[0]?.n ?? 0)
}

/**
 * Hands executions back (pending, due now, attempt not counted); the due insert wakes idle workers.
 * Returns the ids of those handed back: the leases the fence still found.
 */
export async function executionReleaseMany(db: Kysely<DB>, params: ExecutionReleaseManyParams): Promise<string[]> {
  const { rows } = await executionReleaseManyQuery(params).execute(db)
  return rows[0]?.ids ?? []
}

/**
 * Of `ids`, the executions pgsched.runs still leases to `workerId`. A cancel deletes a run before its
 * notification on `pgsched_cancel` is delivered (pg_notify takes effect at commit), so a notification
 * naming a run still leased was sent by no cancel: any role that can connect may send one.
 */
export async function executionsLeasedTo(db: Kysely<DB>, params: { workerId: string; ids: readonly string[] }): Promise<Set<string>> {
  if (params.ids.length === 0) return new Set()
  const { rows } = await sql<{ id: string }>`${sql.raw(PREPARE)}
    select execution_id as id from pgsched.runs
     where execution_id = any(${[...params.ids]}::uuid[]) and worker_id = ${params.workerId}::uuid`.execute(db)
  return new Set(rows.map((r) => r.id))
}
