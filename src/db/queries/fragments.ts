/**
 * SQL fragments shared by several statements, each written once: the retry
 * backoff, the column list of a claimed trigger, the first execution of a
 * submitted job, and the execution error built in SQL.
 * Each fragment names the table aliases or CTE it expects; the statements that
 * splice it in (lease.ts, rescue.ts, triggers.ts, jobs.ts) keep those names.
 * Fragments hold no parameters, so a statement's text stays the same from call
 * to call (one prepared plan).
 */
import { sql, type RawBuilder } from 'kysely'
import { EXECUTION_ERROR_FIELDS, type ExecutionError } from '../../core/execution-error.ts'
import { plainFormGuard } from './plain-forms.ts'

/**
 * run_at of a retry: now + random(0, min(backoff_max_ms, backoff_base_ms · 2^(attempt−1))) ms
 * (exponential backoff, full jitter). Expects `e` = pgsched.executions (its attempt already
 * counted) and `j` = its pgsched.jobs row.
 */
export const retryRunAt = sql<Date>`now() + floor(random() * least(j.backoff_max_ms::float8,
                                                             j.backoff_base_ms * power(2::float8, e.attempt - 1)))
                                        * interval '1 millisecond'`

/**
 * Instant `x` taken up to a whole millisecond: what a JavaScript Date holds of a time nothing may come
 * before (a start, the next fire time, the submit a first fire time is counted from), which cutting
 * the microseconds off would move up to 999 µs earlier.
 */
export const ceilMs = (x: RawBuilder<unknown>) => sql`date_trunc('milliseconds', ${x} + interval '999 microseconds')`

/**
 * The columns of a claimed trigger (ClaimedTriggerRow without `now`). Expects `t` = pgsched.triggers.
 * start_at, next_fire_at and submitted_at come up to the millisecond (ceilMs); next_fire_at and
 * queued_fire_at also come as text: exact (microseconds, '-infinity') for the guard of
 * triggerFireAndAdvance.
 */
export const claimedTriggerColumns = sql`t.job_id, t.kind, t.cron_expression, t.timezone, t.interval_ms::text as interval_ms,
           ${ceilMs(sql`t.start_at`)} as start_at, t.end_at,
           case when t.next_fire_at = '-infinity' then null else ${ceilMs(sql`t.next_fire_at`)} end as next_fire_at,
           t.next_fire_at::text as next_fire_at_key,
           t.queued_fire_at, t.queued_fire_at::text as queued_fire_at_key,
           t.misfire_policy, t.misfire_max_runs, t.overlap_policy,
           case when t.next_fire_at = '-infinity' then ${ceilMs(sql`t.created_at`)} end as submitted_at, t.resumed_at`

/**
 * Whether due execution `d` was created by the dispatcher ahead of its fire time
 * (SCHEDULER_DISPATCHER_AHEAD_MS) and waits for it: a first attempt, due at its fire time, created
 * before it (the pass's time; triggerFireAndAdvance), and the fire time is still to come.
 */
export const createdAhead = (d: RawBuilder<unknown>) =>
  sql<boolean>`(${d}.attempt = 0 and ${d}.run_at = ${d}.scheduled_for and ${d}.scheduled_for > ${d}.created_at and ${d}.scheduled_for > now())`

/**
 * Execution `e` (of the executions view) is not one created ahead of its fire time for the
 * recurring job whose trigger is `t` (null for a one-time job, whose future run counts).
 */
export const notAheadOfRecurring = (e: RawBuilder<unknown>, t: RawBuilder<unknown>) =>
  sql<boolean>`not (${t}.job_id is not null and ${e}.state = 'pending' and ${createdAhead(e)})`

/**
 * The earliest fire time of job `jobId` whose execution was created ahead of it (createdAhead).
 * Null when there is none. One probe of due_fire_time_key.
 */
export function aheadFireTime(jobId: RawBuilder<unknown>): RawBuilder<Date | null> {
  return sql<Date | null>`(select min(d.scheduled_for) from pgsched.due d where d.job_id = ${jobId} and ${createdAhead(sql`d`)})`
}

/**
 * The queues with fair share on, as one array (an InitPlan: read once per statement).
 */
const FAIR_QUEUES = sql`array(select s.name from pgsched.queues s where s.fair_share)`

/**
 * The fair_key of an execution of queue `queue` that a statement writes to pgsched.due without giving
 * it its turn (migration 0031): 'infinity' (waiting for pgsched.fair_keys_assign) in a fair queue,
 * null in any other.
 */
export const fairKeyWaiting = (queue: RawBuilder<unknown>) => sql`case when ${queue} = any(${FAIR_QUEUES}) then 'infinity'::float8 end`

/**
 * The insert of the first execution of submitted one-time jobs of `tenant`: each row of `source`
 * (a CTE's name, with its filter; columns id, execution_id, queue, type, priority, run_at,
 * max_attempts, timeout_ms, concurrency_key, start_deadline_ms) becomes a pgsched.due row due at
 * run_at, or now when run_at is null. In a fair queue (migration 0031) the executions due now take
 * their turns at once: per priority, from after the tenant's latest key there, or from the head of
 * the queue when that is later, 1 / the tenant's weight apart, in submit order; those due later wait
 * for their key ('infinity'). Rows of other queues go through the first branch, which does no more
 * than before. Used by both forms of jobInsertMany.
 */
export function executionsFromSubmitted(tenant: string, source: RawBuilder<unknown>): RawBuilder<unknown> {
  const t = sql`${tenant}::text`
  return sql`insert into pgsched.due (execution_id, job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms,
                           concurrency_key, tenant, start_deadline, fair_key)
      -- per fair queue and priority of the batch: the first key and the step (once per group)
      with fair_start as materialized (
        select q.queue, q.priority, w.step, pgsched.fair_first_key(q.queue, ${t}, q.priority, w.step) as first_key
          from (select distinct queue, priority from ${source} and queue = any(${FAIR_QUEUES})) q
         cross join (select 1.0::float8 / coalesce((select tw.weight from pgsched.tenants tw where tw.name = ${t}), 1) as step) w
      )
      select execution_id, id, queue, type, priority, coalesce(run_at, now()), coalesce(run_at, now()), max_attempts, timeout_ms,
             concurrency_key, ${t}, coalesce(run_at, now()) + start_deadline_ms * interval '1 millisecond', null::float8
        from ${source}
         and queue <> all(${FAIR_QUEUES})
      union all
      select x.execution_id, x.id, x.queue, x.type, x.priority, coalesce(x.run_at, now()), coalesce(x.run_at, now()), x.max_attempts, x.timeout_ms,
             x.concurrency_key, ${t}, coalesce(x.run_at, now()) + x.start_deadline_ms * interval '1 millisecond',
             case when x.run_at > now() then 'infinity'::float8
                  else g.first_key + (row_number() over (partition by x.queue, x.priority, coalesce(x.run_at > now(), false) order by x.execution_id) - 1) * g.step end
        from (select * from ${source} and queue = any(${FAIR_QUEUES})) x
        join fair_start g on g.queue = x.queue and g.priority = x.priority`
}

/**
 * The plain form of executionsFromSubmitted (plain-forms.ts): every row of `source` into pgsched.due
 * as in a queue without fair share. Its statement must also hold fairShareUnused over the same rows.
 */
export function executionsFromSubmittedPlain(tenant: string, source: RawBuilder<unknown>): RawBuilder<unknown> {
  const t = sql`${tenant}::text`
  return sql`insert into pgsched.due (execution_id, job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms,
                           concurrency_key, tenant, start_deadline, fair_key)
      select execution_id, id, queue, type, priority, coalesce(run_at, now()), coalesce(run_at, now()), max_attempts, timeout_ms,
             concurrency_key, ${t}, coalesce(run_at, now()) + start_deadline_ms * interval '1 millisecond', null::float8
        from ${source}`
}

/**
 * The guard of executionsFromSubmittedPlain, as the CTE `fair_unused`: fails the statement (SQLSTATE
 * PS001, detail `fair share`, hint: those queues as a JSON array) when a row of `source` is in a queue
 * with fair share.
 */
export function fairShareUnused(source: RawBuilder<unknown>): RawBuilder<unknown> {
  return plainFormGuard(
    'fair_unused',
    sql`exists (select 1 from ${source} and queue = any(${FAIR_QUEUES}))`,
    sql`pgsched.plain_form_refused('fair share', array(select distinct queue from ${source} and queue = any(${FAIR_QUEUES})))`,
  )
}

/**
 * The attempt log entry (migration 0017) of the attempt of `e` (alias: a pgsched.runs row that is
 * ending) as a one-element jsonb array: `outcome` and `error` are SQL expressions. The history
 * upsert (historyUpsert) appends it to the log the execution has.
 */
function attemptLogEntry(outcome: RawBuilder<unknown>, error: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`jsonb_build_array(jsonb_build_object(
               'attempt', e.attempt, 'startedAt', e.started_at, 'endedAt', now(), 'workerId', e.worker_id,
               'host', (select w.host from pgsched.workers w where w.id = e.worker_id), 'outcome', ${outcome}, 'error', ${error}))`
}

/**
 * The columns of pgsched.execution_history that historyUpsert writes, in order. A `from` for it
 * selects, per execution: the pgsched.runs / pgsched.due columns (execution_id as id, job_id,
 * queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, started_at,
 * concurrency_key, tenant, start_deadline, created_at) and then state, finished_at, result, error,
 * output_uri, attempt_log (the entry to append, or null), last_worker_id.
 */
const HISTORY_COLUMNS = sql`id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, started_at,
                            concurrency_key, tenant, start_deadline, created_at, state, finished_at, result, error, output_uri,
                            attempt_log, last_worker_id`

/** What historyUpsert and historyInsertFirst return. */
const HISTORY_RETURNING = sql`returning h.id, h.job_id, h.tenant, h.queue, h.type, h.attempt, h.state, h.run_at, h.error`

function historyInsert(from: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`insert into pgsched.execution_history as h (${HISTORY_COLUMNS})
      ${from}`
}

/**
 * Writes the history row of executions whose attempt ended (migration 0028): inserted, or, for an
 * execution that has one (it waited for a retry), updated in place, its attempt log extended.
 * `from` is a select of HISTORY_COLUMNS' values; returns id, job_id, tenant, queue, type, attempt,
 * state, run_at of each row written.
 */
export function historyUpsert(from: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`${historyInsert(from)}
      on conflict (id, job_id) do update
         set state = excluded.state, attempt = excluded.attempt, run_at = excluded.run_at, started_at = coalesce(excluded.started_at, h.started_at),
             finished_at = excluded.finished_at, result = excluded.result, error = excluded.error, output_uri = coalesce(excluded.output_uri, h.output_uri),
             attempt_log = case when excluded.attempt_log is null then h.attempt_log
                                else coalesce(h.attempt_log, '[]'::jsonb) || excluded.attempt_log end,
             last_worker_id = coalesce(excluded.last_worker_id, h.last_worker_id)
      ${HISTORY_RETURNING}`
}

/**
 * The history insert of historyUpsert without its conflict clause (as an insert, it returns the
 * same columns): for executions that cannot have a history row yet, those ending their first
 * attempt. An insert with a conflict clause first probes the primary key for each row and writes
 * each row tentatively, then confirms it (a second WAL record); a plain insert does neither.
 */
export function historyInsertFirst(from: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`${historyInsert(from)} ${HISTORY_RETURNING}`
}

/**
 * The columns of a pgsched.due insert (a retry or a hand-back of a `runs` row `e`), in the order
 * dueFromRuns selects them.
 */
export const DUE_COLUMNS = sql`execution_id, job_id, queue, type, priority, run_at, scheduled_for, attempt, max_attempts, timeout_ms,
                               tenant, concurrency_key, start_deadline, created_at, fair_key, unstarted_requeues`

/** now() as the worker writes `at` (Date#toISOString: UTC, milliseconds, "Z"), whatever the session's TimeZone. */
const NOW_ISO = sql`to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** SQL expressions for some fields of an ExecutionError; `at` defaults to now(). */
export type ExecutionErrorSql = { [K in keyof ExecutionError]?: RawBuilder<unknown> }

/**
 * An ExecutionError as a jsonb expression, keyed by the field names of core/execution-error.ts
 * (in their order) with `at` = now() unless given. Fields that are not given, or that evaluate
 * to null, are left out (as the TypeScript writer leaves out undefined ones).
 */
export function executionErrorSql(fields: ExecutionErrorSql): RawBuilder<unknown> {
  const values: ExecutionErrorSql = { at: NOW_ISO, ...fields }
  const pairs = EXECUTION_ERROR_FIELDS.flatMap((name) => {
    const value = values[name]
    return value === undefined ? [] : [sql`${sql.lit(name)}, ${value}`]
  })
  return sql`jsonb_strip_nulls(jsonb_build_object(${sql.join(pairs)}))`
}

/**
 * The CTEs `decided`, `requeued` and `moved` that end attempts (a failure, an expired lease): from
 * a CTE `ended` of the pgsched.runs rows deleted (read as `e`; each looks its job `j` up by key),
 * each goes back to pgsched.due with the retry backoff when attempts are left and `fatal` is false,
 * and its history row becomes pending (waiting for the retry: it keeps the error and the attempt
 * log) or failed; cancelled, with no retry, when its job was cancelled meanwhile. `moved` returns
 * what historyUpsert returns (state 'pending' for a retry).
 * The job is read in a lateral subquery, so `ended` is always the outer side and each of its rows
 * probes jobs_pkey, whatever the plan's estimates (as the lease statements probe runs: see `held`
 * in lease.ts); joined directly, the join condition could also serve as a join filter over a scan
 * of every job.
 */
export function endedAttempts(
  fatal: RawBuilder<unknown>,
  error: RawBuilder<unknown>,
  outcome: RawBuilder<unknown>,
  outputUri: RawBuilder<unknown>,
): RawBuilder<unknown> {
  return sql`decided as (
      select e.*, ${error} as ended_error, ${attemptLogEntry(outcome, error)} as log_entry,
             (${fatal} or e.attempt >= e.max_attempts or j.state = 'cancelled') as final,
             case when ${fatal} or e.attempt >= e.max_attempts or j.state = 'cancelled' then e.run_at else ${retryRunAt} end as next_run_at,
             ${outputUri} as ended_output_uri, j.state = 'cancelled' as job_cancelled
        from ended e
        cross join lateral (select j.state, j.backoff_base_ms, j.backoff_max_ms from pgsched.jobs j where j.id = e.job_id offset 0) j
    ),
    requeued as (
      insert into pgsched.due (${DUE_COLUMNS})
      select execution_id, job_id, queue, type, priority, next_run_at, scheduled_for, attempt, max_attempts, timeout_ms,
             tenant, concurrency_key, start_deadline, created_at, ${fairKeyWaiting(sql`queue`)}, unstarted_requeues
        from decided
       where not final
    ),
    moved as (
      ${historyUpsert(sql`select execution_id, job_id, queue, type, priority, scheduled_for, next_run_at, attempt, max_attempts, timeout_ms,
                                 started_at, concurrency_key, tenant, start_deadline, created_at,
                                 case when job_cancelled then 'cancelled' when final then 'failed' else 'pending' end,
                                 case when final then now() end, null::jsonb,
                                 ended_error, ended_output_uri, log_entry, worker_id
                            from decided`)}
    )`
}
