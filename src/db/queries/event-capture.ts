/**
 * The one fragment that writes events (migrations 0022, 0024): the CTE `captured`, spliced into
 * every statement that changes the state of an execution or a job (jobs.ts, claim.ts, lease.ts,
 * rescue.ts). It inserts one pgsched.event_batches row holding all the statement's changes (arrays
 * of columns, in the order of `changes`), in the same statement, and only while someone listens:
 * the check of pgsched.event_listeners depends on no row, so the planner makes it a one-time filter
 * and, with no live listener, the insert reads nothing. A statement none of whose changes is
 * captured writes no row. Changes of pgsched's own jobs (type `pgsched.…`, webhook deliveries) are
 * never written. The fragment holds no parameter, so each statement's text stays the same.
 * The claim, the completion and the common submit also have a plain form (plain-forms.ts) with
 * eventsUnheard in its place, which they run while nobody listens.
 */
import { sql, type RawBuilder } from 'kysely'
import { plainFormGuard } from './plain-forms.ts'
import { EVENT_ERROR_MESSAGE_MAX } from '../../core/events.ts'

/** Listeners alive now (a stream connected or within its retention, a webhook subscription). */
const live = sql`pgsched.event_listeners l where l.until > now()`

/**
 * The CTE `captured` (a data-modifying CTE: it runs whether or not the statement reads it).
 * `changes` is a select of (type, tenant, job_id, execution_id, queue, job_type, attempt), one row
 * per change, in the order the events should take within the statement; with `errors`, an eighth
 * column `error`, the execution's error (jsonb, or null) as it was written, of which the event keeps
 * its name, message (cut to EVENT_ERROR_MESSAGE_MAX characters), fatal and timedOut (migration 0052).
 * A batch none of whose events has an error stores no array of them.
 */
export function eventsCaptured(changes: RawBuilder<unknown>, options: { errors?: boolean } = {}): RawBuilder<unknown> {
  const errors = options.errors === true
  return sql`captured as (
      insert into pgsched.event_batches (types, tenants, job_ids, execution_ids, queues, job_types, attempts${errors ? sql`, errors` : sql``})
      select array_agg(c.type), array_agg(c.tenant), array_agg(c.job_id), array_agg(c.execution_id),
             array_agg(c.queue), array_agg(c.job_type), array_agg(c.attempt)${
               errors
                 ? sql`,
             case when count(c.error) > 0 then array_agg(${eventError(sql`c.error`)}) end`
                 : sql``
             }   -- in the order of changes: one row per statement
        from (${changes}) as c (type, tenant, job_id, execution_id, queue, job_type, attempt${errors ? sql`, error` : sql``})
       where exists (select 1 from ${live})   -- one-time filter: nobody listens, nothing is read or written
         and c.job_type not like 'pgsched.%'   -- pgsched's own jobs (webhook deliveries) are nobody's events
         and (exists (select 1 from ${live} and l.tenant is null)   -- a stream of every tenant
              or c.tenant = any (array(select l.tenant from ${live})))
      having count(*) > 0   -- no row for a statement that captured nothing
    )`
}

/** An event's error (core/events.ts, EventError) from an execution's error `e` (jsonb); null for none. */
function eventError(e: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`case when ${e} is not null then jsonb_strip_nulls(jsonb_build_object(
               'message', left(coalesce(${e} ->> 'message', ''), ${sql.lit(EVENT_ERROR_MESSAGE_MAX)}), 'name', coalesce(${e} ->> 'name', 'Error'),
               'fatal', case when (${e} -> 'fatal') = 'true' then true end,
               'timedOut', case when (${e} -> 'timedOut') = 'true' then true end)) end`
}

/**
 * The plain form's stand-in for `captured` (migration 0042): the same CTE name, and no capture. It
 * fails the statement (SQLSTATE PS001, detail `events`) when anyone listens, a condition read in the
 * same statement as the capture reads it, so a statement with it commits only where `captured`
 * would have written nothing. It costs PostgreSQL a subplan, not seven aggregates; see plain-forms.ts.
 */
export function eventsUnheard(): RawBuilder<unknown> {
  return plainFormGuard('captured', sql`exists (select 1 from ${live})`, sql`pgsched.plain_form_refused('events')`)
}
