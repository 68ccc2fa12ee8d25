/**
 * The one fragment that writes events (migration 0022): the CTE `captured`, spliced into every
 * statement that changes the state of an execution or a job (jobs.ts, claim.ts, lease.ts,
 * rescue.ts). It inserts one pgsched.events row per changed row, in the same statement (one insert
 * per batch, not per row), and only while someone listens: the check of pgsched.event_listeners
 * depends on no row, so the planner makes it a one-time filter and, with no live listener, the
 * insert reads nothing. Changes of pgsched's own jobs (type `pgsched.…`, webhook deliveries) are
 * never written. The fragment holds no parameter, so each statement's text stays the same.
 */
import { sql, type RawBuilder } from 'kysely'

/** Listeners alive now (a stream connected or within its retention, a webhook subscription). */
const live = sql`pgsched.event_listeners l where l.until > now()`

/**
 * The CTE `captured` (a data-modifying CTE: it runs whether or not the statement reads it).
 * `changes` is a select of (type, tenant, job_id, execution_id, queue, job_type, attempt), one row
 * per change, in the order the events should take within the statement.
 */
export function eventsCaptured(changes: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (${changes}) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from ${live})   -- one-time filter: nobody listens, nothing is read or written
         and c.job_type not like 'pgsched.%'   -- pgsched's own jobs (webhook deliveries) are nobody's events
         and (exists (select 1 from ${live} and l.tenant is null)   -- a stream of every tenant
              or c.tenant = any (array(select l.tenant from ${live})))
    )`
}
