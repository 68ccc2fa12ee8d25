-- A cancel, retry, rerun or delete of a job reads its status under locks of its trigger and the job
-- (pgsched.job_lock_for, pgsched.cancel_job_unless_ended); a worker's outcome write takes neither, so a
-- run could end between the status read and the change: a job whose only run had just succeeded was
-- marked cancelled (and could then be retried, running its work again). Both now also lock the job's
-- runs (pgsched.runs, in execution order, as the worker's lease statements take them) before they read
-- the status: an outcome write in flight holds its run's row, so they wait for it and then read the
-- status it left, and no run of the job ends until their transaction does. The client's operations
-- (src/db/queries/jobs.ts jobCancel, job-operations.ts lockJobs) lock the same, in the same order.

create or replace function pgsched.job_lock_for(job_id uuid, operation text) returns text
language plpgsql as $$
begin
  if job_lock_for.job_id is null then
    raise exception 'job_id must be the id of the job to %, got null', job_lock_for.operation using errcode = '22023';
  end if;
  perform 1 from pgsched.triggers t where t.job_id = job_lock_for.job_id for update;
  perform 1 from pgsched.jobs j where j.id = job_lock_for.job_id for update;
  if not found then
    raise exception 'job % not found', job_lock_for.job_id using errcode = 'P0002';
  end if;
  -- and its runs: a worker's outcome write in flight holds its run's row, so the status returned
  -- (read after it) counts the run it ended, and no run of the job ends before the caller's
  -- transaction does
  perform 1 from (select r.execution_id from pgsched.runs r where r.job_id = job_lock_for.job_id
                   order by r.execution_id for update) r;
  return pgsched.job_status(job_lock_for.job_id);
end
$$;
comment on function pgsched.job_lock_for(uuid, text) is 'Used by pgsched.cancel_job, retry_job, rerun_job and delete_job: locks a job''s trigger, then the job, then its runs (pgsched.runs, so that a run ending now is counted), and returns its status; refuses a null id (22023) and a job that does not exist (P0002).';

create or replace function pgsched.cancel_job_unless_ended(job_id uuid, out outcome text, out status text)
language plpgsql as $$
#variable_conflict use_column
declare
  one_time_ended boolean;
begin
  -- locked as pgsched.job_lock_for locks: its trigger, then the job, then its runs
  perform 1 from pgsched.triggers t where t.job_id = cancel_job_unless_ended.job_id for update;
  perform 1 from pgsched.jobs j where j.id = cancel_job_unless_ended.job_id for update;
  if not found then
    outcome := 'not found';
    return;
  end if;
  -- and its runs: a worker's outcome write in flight holds its run's row, so the status read next
  -- sees the run it ended, and no run of the job ends before this transaction does
  perform 1 from (select r.execution_id from pgsched.runs r where r.job_id = cancel_job_unless_ended.job_id
                   order by r.execution_id for update) r;
  status := pgsched.job_status(cancel_job_unless_ended.job_id);
  if exists (select 1 from pgsched.jobs j where j.id = cancel_job_unless_ended.job_id and j.state = 'cancelled') then
    outcome := 'already cancelled';
    return;
  end if;
  -- finished: a one-time job's execution ended, or a recurring job has nothing to come (its schedule
  -- ended or stopped, its last run ended)
  select not exists (select 1 from pgsched.triggers t where t.job_id = cancel_job_unless_ended.job_id)
         and coalesce((select x.state from pgsched.executions x where x.job_id = cancel_job_unless_ended.job_id
                        order by x.scheduled_for desc limit 1) in ('succeeded', 'failed', 'cancelled'), false)
    into one_time_ended;
  if status in ('COMPLETED', 'FAILED', 'EXPIRED') or one_time_ended then
    outcome := 'finished';
    return;
  end if;
  update pgsched.jobs set state = 'cancelled', updated_at = now() where id = cancel_job_unless_ended.job_id;
  update pgsched.triggers set next_fire_at = null, updated_at = now() where triggers.job_id = cancel_job_unless_ended.job_id;
  perform pgsched.job_cancel_effects(cancel_job_unless_ended.job_id, true);
  -- The sweep, as the client's after its commit (jobCancelSweep): a statement of its own, so its
  -- snapshot is taken after what the first waited for has committed. A worker's outcome write in
  -- flight holds the run's row; the first statement waits for it and then finds the lease gone, but
  -- cannot see the retry that write put in pgsched.due. This one cancels it.
  perform pgsched.job_cancel_effects(cancel_job_unless_ended.job_id, false);
  outcome := 'cancelled';
end
$$;
