/**
 * The reaper's statement: running executions (pgsched.runs) whose lease expired
 * (their worker died, froze or lost the database) go back to pgsched.due with
 * backoff, or to failed when that was their last attempt; the lost attempt counts. An execution
 * whose handler had not begun (it waited in the worker's local queue: migration 0072) goes back due
 * now with its attempt not counted, at most UNSTARTED_REQUEUES_MAX times. Bounded by `limit` and
 * SKIP LOCKED, so every worker can run it without double work.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { DUE_COLUMNS, endedAttempts, executionErrorSql, fairKeyWaiting, historyUpsert } from './fragments.ts'
import { eventsCaptured } from './event-capture.ts'

/** The error a rescued attempt ends with; `e` = the expired execution, before the update. */
const leaseExpiredError = executionErrorSql({
  message: sql`'lease expired: worker ' || e.worker_id || ' stopped renewing it'`,
  name: sql`'LeaseExpiredError'`,
  attempt: sql`e.attempt`,
  workerId: sql`e.worker_id`,
})

/**
 * How many times an execution whose lease expired before it began is requeued without counting an
 * attempt; after that its lost leases count, begun or not. The database learns that a run began at
 * the heartbeat after it started, so a handler that kills its worker within a heartbeat of starting
 * would otherwise be requeued uncounted, and kill a worker, forever.
 */
export const UNSTARTED_REQUEUES_MAX = 3

export interface ExecutionRescueExpiredParams {
  limit: number
  now?: Date | null
}

export interface RescueOutcome {
  retried: number
  failed: number
  /** Requeued due now, the attempt not counted: their handler had not begun. */
  unstarted: number
  /** Earliest retry time among the retried, if any. */
  nextRunAt: Date | null
  /** The same counts by queue and type. */
  byQueueType: Array<{ queue: string; type: string; retried: number; failed: number; unstarted: number }>
}

/**
 * Rescues up to `limit` executions whose lease expired before `now` (the database clock when null):
 * back to pending with backoff, or failed on their last attempt; those that had not begun, due now
 * with the attempt not counted (the due insert of the retries wakes idle workers: its trigger,
 * due_notify). An unbegun execution keeps its start deadline (it has not started) and records no
 * event, as a worker's hand-back.
 */
export async function executionRescueExpired(db: Kysely<DB>, params: ExecutionRescueExpiredParams): Promise<RescueOutcome> {
  const { rows } = await sql<{ queue: string; type: string; retried: number; failed: number; unstarted: number; next_run_at: Date | null }>`${sql.raw(PREPARE)}
    with expired as (
      select ctid
        from pgsched.runs
       where lease_expires_at < coalesce(${params.now ?? null}::timestamptz, now())
       order by lease_expires_at
       limit ${params.limit}::int
         for update skip locked
    ),
    gone as (
      delete from pgsched.runs r where r.ctid = any(array(select ctid from expired)) returning r.*
    ),
    unstarted as (
      insert into pgsched.due (${DUE_COLUMNS})
      select execution_id, job_id, queue, type, priority, now(), scheduled_for, attempt - 1, max_attempts, timeout_ms,
             tenant, concurrency_key, start_deadline, created_at, ${fairKeyWaiting(sql`queue`)}, unstarted_requeues + 1
        from gone
       where not began and unstarted_requeues < ${UNSTARTED_REQUEUES_MAX}::int
      returning queue, type
    ),
    ended as (
      select * from gone where began or unstarted_requeues >= ${UNSTARTED_REQUEUES_MAX}::int
    ),
    ${endedAttempts(sql`false`, leaseExpiredError, sql`'lease expired'`, sql`e.output_uri`)},
    ${eventsCaptured(
      sql`select case state when 'pending' then 'retrying' else state end, tenant, job_id, id, queue, type, attempt,
                                 case when state <> 'cancelled' then error end from moved`,
      { errors: true },
    )}
    select queue, type,
           count(*) filter (where state = 'pending')::int as retried,
           count(*) filter (where state = 'failed')::int as failed,
           count(*) filter (where state is null)::int as unstarted,
           min(run_at) filter (where state = 'pending') as next_run_at
      from (select queue, type, state, run_at from moved
            union all select queue, type, null, null from unstarted) x
     group by queue, type
  `.execute(db)
  const outcome: RescueOutcome = { retried: 0, failed: 0, unstarted: 0, nextRunAt: null, byQueueType: [] }
  for (const r of rows) {
    outcome.retried += r.retried
    outcome.failed += r.failed
    outcome.unstarted += r.unstarted
    if (r.next_run_at !== null && (outcome.nextRunAt === null || r.next_run_at < outcome.nextRunAt)) outcome.nextRunAt = r.next_run_at
    outcome.byQueueType.push({ queue: r.queue, type: r.type, retried: r.retried, failed: r.failed, unstarted: r.unstarted })
  }
  return outcome
}

/**
 * Why an execution expired (migration 0018), as its error: names the deadline missed. The same
 * text for every execution of one deadline, so that the failures view groups them (the times are
 * the execution's scheduledFor and finishedAt).
 */
const startDeadlineError = executionErrorSql({
  message: sql`format('not started within its start deadline, %s ms after its time', j.start_deadline_ms)`,
  name: sql`'StartDeadlineError'`,
  fatal: sql`true`,
  attempt: sql`0`,
})

/**
 * Ends up to `limit` pending executions whose first attempt missed its start deadline before `now`
 * (the database clock when null): failed at attempt 0 with a StartDeadlineError, which makes the
 * job's status EXPIRED. Returns how many, by queue and type.
 */
export async function executionExpireLate(
  db: Kysely<DB>,
  params: { limit: number; now?: Date | null },
): Promise<Array<{ queue: string; type: string; n: number }>> {
  const { rows } = await sql<{ queue: string; type: string; n: number }>`${sql.raw(PREPARE)}
    with late as (
      select ctid
        from pgsched.due
       where attempt = 0 and start_deadline is not null
         and start_deadline < coalesce(${params.now ?? null}::timestamptz, now())
       order by start_deadline
       limit ${params.limit}::int
         for update skip locked
    ),
    gone as (
      delete from pgsched.due d where d.ctid = any(array(select ctid from late)) returning d.*
    ),
    expired as (
      ${historyUpsert(sql`select e.execution_id, e.job_id, e.queue, e.type, e.priority, e.scheduled_for, e.run_at, e.attempt, e.max_attempts, e.timeout_ms,
                                 null::timestamptz, e.concurrency_key, e.tenant, e.start_deadline, e.created_at, 'failed', now(), null::jsonb,
                                 ${startDeadlineError}, null::text, null::jsonb, null::uuid
                            from gone e join pgsched.jobs j on j.id = e.job_id`)}
    ),
    ${eventsCaptured(sql`select 'expired', tenant, job_id, id, queue, type, attempt, error from expired`, { errors: true })}
    select queue, type, count(*)::int as n from expired group by queue, type`.execute(db)
  return rows
}
