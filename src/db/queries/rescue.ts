/**
 * The reaper's statement: running executions whose lease expired (their
 * worker died, froze or lost the database) go back to pending with backoff, or
 * to failed when that was their last attempt; the lost attempt counts. Bounded
 * by `limit` and SKIP LOCKED, so every worker can run it without double work.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { attemptLogEntry, executionErrorSql, retryRunAt, wakeCte } from './fragments.ts'
import { eventsCaptured } from './event-capture.ts'

/** The error a rescued attempt ends with; `e` = the expired execution, before the update. */
const leaseExpiredError = executionErrorSql({
  message: sql`'lease expired: worker ' || e.worker_id || ' stopped renewing it'`,
  name: sql`'LeaseExpiredError'`,
  attempt: sql`e.attempt`,
  workerId: sql`e.worker_id`,
})

export interface ExecutionRescueExpiredParams {
  limit: number
  now?: Date | null
}

export interface RescueOutcome {
  retried: number
  failed: number
  /** Earliest retry time among the retried, if any. */
  nextRunAt: Date | null
}

/**
 * Rescues up to `limit` executions whose lease expired before `now` (the database clock when null):
 * back to pending with backoff, or failed on their last attempt; wakes idle workers for the retries.
 */
export async function executionRescueExpired(db: Kysely<DB>, params: ExecutionRescueExpiredParams): Promise<RescueOutcome> {
  const { rows } = await sql<{ retried: string; failed: string; next_run_at: Date | null }>`${sql.raw(PREPARE)}
    with expired as (
      select id, job_id
        from pgsched.executions
       where state = 'running'
         and lease_expires_at < coalesce(${params.now ?? null}::timestamptz, now())
       order by lease_expires_at
       limit ${params.limit}::int
         for update skip locked
    ),
    moved as (
      update pgsched.executions e
         set state = case when e.attempt >= e.max_attempts then 'failed' else 'pending' end,
             run_at = case when e.attempt >= e.max_attempts then e.run_at
                           else ${retryRunAt} end,
             finished_at = case when e.attempt >= e.max_attempts then now() end,
             error = ${leaseExpiredError},
             attempt_log = ${attemptLogEntry(sql`'lease expired'`, leaseExpiredError)},
             last_worker_id = e.worker_id,
             worker_id = null,
             lease_expires_at = null
        from expired x
        join pgsched.jobs j on j.id = x.job_id
       where e.id = x.id and e.job_id = x.job_id
      returning e.id, e.state, e.run_at, e.queue, e.job_id, e.tenant, e.type, e.attempt
    ),
    ${wakeCte},
    ${eventsCaptured(sql`select case when state = 'failed' then 'failed' else 'retrying' end, tenant, job_id, id, queue, type, attempt from moved`)}
    select count(*) filter (where state = 'pending')::text as retried,
           count(*) filter (where state = 'failed')::text as failed,
           min(run_at) filter (where state = 'pending') as next_run_at
      from moved, (select count(*) from wake) as w
  `.execute(db)
  const row = rows[0]
  return { retried: Number(row?.retried ?? 0), failed: Number(row?.failed ?? 0), nextRunAt: row?.next_run_at ?? null }
}

/** Why an execution expired (migration 0018), as its error: names the deadline missed. */
const startDeadlineError = executionErrorSql({
  message: sql`format('not started by its start deadline %s (%s ms after its time %s)', to_char(e.start_deadline at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                      j.start_deadline_ms, to_char(e.scheduled_for at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
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
      select id, job_id
        from pgsched.executions
       where state = 'pending' and attempt = 0 and start_deadline is not null
         and start_deadline < coalesce(${params.now ?? null}::timestamptz, now())
       order by start_deadline
       limit ${params.limit}::int
         for update skip locked
    ),
    expired as (
      update pgsched.executions e
         set state = 'failed', finished_at = now(), error = ${startDeadlineError}
        from late x
        join pgsched.jobs j on j.id = x.job_id
       where e.id = x.id and e.job_id = x.job_id
      returning e.id, e.job_id, e.tenant, e.queue, e.type, e.attempt
    ),
    ${eventsCaptured(sql`select 'expired', tenant, job_id, id, queue, type, attempt from expired`)}
    select queue, type, count(*)::int as n from expired group by queue, type`.execute(db)
  return rows
}
