-- A retry or rerun of a job is a submit to its tenant's admission quotas (maxPending,
-- maxSubmitsPerSecond), as the client's retryJob, rerunJob and bulk retries now are: they added a
-- pending execution past the quota, so a tenant held at maxPending 0 (closed until an operator opens
-- it) could still add work by retrying its jobs. Refused with SQLSTATE 53400 and a retry-after hint,
-- as pgsched.submit_job refuses a submit.

create or replace function pgsched.job_run_again(job_id uuid) returns uuid
language plpgsql as $$
#variable_conflict use_column
declare
  added record;
  admission record;
begin
  -- a new execution is a submit to the tenant's admission quotas, as pgsched.submit_job's
  select * into admission
    from pgsched.admit_submits((select j.tenant from pgsched.jobs j where j.id = job_run_again.job_id), 1, false);
  if admission.admitted < 1 then
    raise exception '%', admission.message using errcode = '53400', hint = format('retry after %s ms', admission.retry_after_ms);
  end if;
  update pgsched.jobs set state = 'active', updated_at = now()
   where id = job_run_again.job_id and state = 'cancelled';
  -- a stopped schedule stays stopped: a fire time it had queued behind a run is dropped, or the
  -- dispatcher would run it once the job is active again
  update pgsched.triggers set queued_fire_at = null
   where triggers.job_id = job_run_again.job_id and next_fire_at is null and queued_fire_at is not null;
  insert into pgsched.due (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms,
                           concurrency_key, tenant, start_deadline, fair_key)
  select j.id, j.queue, j.type, j.priority,
         -- the latest run by its time, even when an earlier run was due later (a cancelled future run)
         greatest(now(), (select max(x.scheduled_for) from pgsched.executions x where x.job_id = j.id) + interval '1 microsecond'),
         now(), j.max_attempts, j.timeout_ms, j.concurrency_key, j.tenant, now() + j.start_deadline_ms * interval '1 millisecond',
         case when exists (select 1 from pgsched.queues s where s.name = j.queue and s.fair_share)
              then 'infinity'::float8 end   -- a fair queue's execution waits for its turn key (migration 0031)
    from pgsched.jobs j
   where j.id = job_run_again.job_id
  returning due.execution_id, due.job_id, due.tenant, due.queue, due.type into added;
  -- the insert trigger on due wakes the workers that wait for the queue (migration 0011)
  perform pgsched.events_capture(array['submitted'], array[added.tenant], array[added.job_id], array[added.execution_id],
                                 array[added.queue], array[added.type], array[0]);
  return added.execution_id;
end
$$;
