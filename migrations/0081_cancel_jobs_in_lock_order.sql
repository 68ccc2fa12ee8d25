-- Cancels of many jobs in one statement lock every job's runs in one order, the workers' own.
--
-- A worker's outcome write (complete, fail, hand-back) locks the rows of pgsched.runs it ends in
-- execution_id order, across jobs. pgsched.cancel_job_unless_ended locks one job's runs, in that
-- order within the job; called for many jobs in one statement (as the README showed:
-- `select pgsched.cancel_job_unless_ended(id) from pgsched.jobs where …`), it locked the runs job by
-- job, in the scan's order, and so against a worker's write in the reverse order: a deadlock, which
-- PostgreSQL ended by aborting one of the two (the whole cancel statement, or the worker's write). The
-- client's and the API's bulk cancel lock every job's trigger, then the jobs, then all their runs, each
-- in order, before changing anything; and so does, now:
--
-- 1. pgsched.cancel_jobs(job_ids uuid[]): cancel_job_unless_ended for each job of the array (each
--    once, in id order), after locking them as the client does; returns each job's id, outcome and
--    status as cancel_job_unless_ended does. A null array is refused (22023); an empty one returns
--    nothing.
-- 2. pgsched.webhook_deliveries_cancel (a subscription disabled or deleted: its deliveries still to
--    come are cancelled), which called cancel_job_unless_ended job by job: it now calls cancel_jobs.

create function pgsched.cancel_jobs(job_ids uuid[])
returns table (job_id uuid, outcome text, status text)
language plpgsql as $$
#variable_conflict use_column
begin
  if job_ids is null then
    raise exception 'pgsched.cancel_jobs: job_ids must be an array of job ids, not null' using errcode = '22023';
  end if;
  -- as the client's bulk cancel (src/db/queries/job-operations.ts lockJobs): the triggers, then the
  -- jobs, in id order, then their runs in execution order, as a worker's outcome write takes them
  perform 1 from (select t.job_id from pgsched.triggers t where t.job_id = any(cancel_jobs.job_ids) order by t.job_id for update) t;
  perform 1 from (select j.id from pgsched.jobs j where j.id = any(cancel_jobs.job_ids) order by j.id for update) j;
  perform 1 from (select r.execution_id from pgsched.runs r where r.job_id = any(cancel_jobs.job_ids) order by r.execution_id for update) r;
  return query
    select u.id, c.outcome, c.status
      from (select distinct x.id from unnest(cancel_jobs.job_ids) as x(id) where x.id is not null order by x.id) u
      cross join lateral pgsched.cancel_job_unless_ended(u.id) c;
end
$$;

comment on function pgsched.cancel_jobs(uuid[]) is
  'Cancels each job of the array as pgsched.cancel_job_unless_ended does, after locking them all in the order workers lock their runs (migration 0081): for cancels of many jobs in one statement. Returns job_id, outcome (cancelled, already cancelled, finished, not found) and status (before).';

create or replace function pgsched.webhook_deliveries_cancel(tenant text, queue text, subscription_id uuid, except_job_id uuid, max integer)
returns integer
language plpgsql as $$
declare
  ids uuid[];
begin
  -- the arguments, not the subscription's row: the statement that disables it calls this, and its
  -- change is not what this reads
  select coalesce(array_agg(k.id), '{}') into ids
    from (select j.id
            from (select d.job_id from pgsched.due d
                   where d.tenant = webhook_deliveries_cancel.tenant and d.queue = webhook_deliveries_cancel.queue
                     and d.type = 'pgsched.webhook'   -- as due_webhook_idx's predicate
                  union
                  select r.job_id from pgsched.runs r
                   where r.tenant = webhook_deliveries_cancel.tenant and r.queue = webhook_deliveries_cancel.queue
                     and r.type = 'pgsched.webhook') w
            join pgsched.jobs j on j.id = w.job_id
           where j.state = 'active' and j.payload ->> 'subscriptionId' = webhook_deliveries_cancel.subscription_id::text
             and j.id is distinct from webhook_deliveries_cancel.except_job_id
           order by j.id
           limit webhook_deliveries_cancel.max) k;
  -- one that finished or was deleted meanwhile is passed over (no subtransaction per job)
  return (select count(*)::int from pgsched.cancel_jobs(ids) c where c.outcome = 'cancelled');
end
$$;

comment on function pgsched.webhook_deliveries_cancel(text, text, uuid, uuid, integer) is 'Cancels up to `max` delivery jobs (type pgsched.webhook, of `tenant` in `queue`) of a subscription with work left, but `except_job_id` (pgsched.cancel_jobs, with their events); returns how many. Called when the subscription is disabled (migrations 0070, 0081).';
