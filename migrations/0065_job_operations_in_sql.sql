-- An operator in psql can steer a job, not only read it: pgsched.cancel_job, pgsched.retry_job,
-- pgsched.rerun_job and pgsched.delete_job do what the REST API, the TypeScript client and the CLI
-- do to one job (src/job-operations.ts, src/db/queries/job-operations.ts and jobs.ts), in the
-- caller's transaction and for a job of any tenant: the same statuses each applies to, the same
-- refusals (with a SQLSTATE: P0002 when there is no such job, 55000 when the job's status does not
-- allow it, 22023 for a null id) and the same writes and events. pgsched.job_status gives a job's
-- status as the API shows it, from which those refusals are decided and named.
-- test/db/job-operations-sql.test.ts runs each case through these functions and through the client
-- and holds the outcomes (rows, events and messages) to each other.
-- And pgsched.pause_queue raises a notice when the queue it pauses has no settings, no work, no
-- worker and no job yet: pausing a queue before its first job is allowed, but a misspelt name
-- paused silently. The rest of pause_queue is as migration 0014 left it.

-- The status of a job (core/job-status.ts jobStatus; the SQL of the status filter, job-filter.ts
-- statusCondition): its latest execution is the latest that is not created ahead of a fire time
-- still to come (fragments.ts createdAhead), and a schedule fires while it has a next or queued fire
-- time or such an execution. Null when there is no such job.
create function pgsched.job_status(job_id uuid) returns text
language sql stable as $$
  select case
           when j.state = 'cancelled' then 'CANCELLED'
           when j.state = 'paused' then 'PAUSED'
           when e.state = 'running' then 'RUNNING'
           when e.state = 'pending' then 'SCHEDULED'
           when t.job_id is not null and t.error is not null then 'FAILED'   -- a schedule stopped by an error
           when t.job_id is not null
                and (t.next_fire_at is not null or t.queued_fire_at is not null
                     or exists (select 1 from pgsched.due d
                                 where d.job_id = j.id
                                   and d.attempt = 0 and d.run_at = d.scheduled_for and d.scheduled_for > d.created_at
                                   and d.scheduled_for > now()))
             then 'SCHEDULED'
           when e.id is null or e.state = 'succeeded' then 'COMPLETED'
           when e.state = 'failed' and e.attempt = 0 then 'EXPIRED'   -- it missed its start deadline
           when e.state = 'failed' then 'FAILED'
           else 'CANCELLED'
         end
    from pgsched.jobs j
    left join pgsched.triggers t on t.job_id = j.id
    left join lateral (select le.id, le.state, le.attempt
                         from pgsched.executions le
                        where le.job_id = j.id
                          -- not an execution of a recurring job created ahead of its fire time
                          and not (t.job_id is not null and le.state = 'pending'
                                   and le.attempt = 0 and le.run_at = le.scheduled_for and le.scheduled_for > le.created_at
                                   and le.scheduled_for > now())
                        order by le.scheduled_for desc
                        limit 1) e on true
   where j.id = job_status.job_id
$$;
comment on function pgsched.job_status(uuid) is 'The status of a job as the API shows it (SCHEDULED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED or EXPIRED); null when there is no such job.';

-- The first step of every job operation here: refuses a null id, locks the job's trigger and then the
-- job (the order of the client's operations, so that one beside them waits instead of deadlocking),
-- raises P0002 when there is no such job, and returns the job's status read after the locks. With
-- both held, a dispatcher, a retry or another operation cannot change the job before the caller's
-- transaction ends; only a worker can, by ending a run, which an operation that needs no run in
-- flight checks for itself.
create function pgsched.job_lock_for(job_id uuid, operation text) returns text
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
  return pgsched.job_status(job_lock_for.job_id);
end
$$;
comment on function pgsched.job_lock_for(uuid, text) is 'Used by pgsched.cancel_job, retry_job, rerun_job and delete_job: locks a job''s trigger, then the job, and returns its status; refuses a null id (22023) and a job that does not exist (P0002).';

-- Whether a retry, rerun or delete applies to a job locked with job_lock_for, of status `status`
-- (job-operations.ts ACTION_STATUSES and actionAppliesSql); raises 55000 naming its status if not.
create function pgsched.job_finished_check(job_id uuid, status text, operation text) returns void
language plpgsql as $$
declare
  allowed text[] := case job_finished_check.operation
                      when 'retry' then array['FAILED', 'EXPIRED', 'CANCELLED']
                      else array['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'] end;
begin
  -- a finished job: besides its status, no execution of it is waiting or held by a worker
  if job_finished_check.status = any (allowed)
     and not exists (select 1 from pgsched.due x where x.job_id = job_finished_check.job_id)
     and not exists (select 1 from pgsched.runs x where x.job_id = job_finished_check.job_id) then
    return;
  end if;
  if job_finished_check.status = any (allowed) then
    -- its status allows it, but an execution of it is still due or held (a cancelled job whose last run has not ended yet)
    raise exception 'job % is %, but an execution of it is still waiting or held by a worker; it can be % once that has ended',
      job_finished_check.job_id, job_finished_check.status,
      case job_finished_check.operation when 'retry' then 'retried' when 'rerun' then 'rerun' else 'deleted' end
      using errcode = '55000';
  end if;
  raise exception 'job % is %; only % jobs can be %', job_finished_check.job_id, job_finished_check.status,
    case job_finished_check.operation when 'retry' then 'FAILED, EXPIRED or CANCELLED'
                                      else 'finished (COMPLETED, FAILED, EXPIRED or CANCELLED)' end,
    case job_finished_check.operation when 'retry' then 'retried' when 'rerun' then 'rerun' else 'deleted' end
    using errcode = '55000';
end
$$;
comment on function pgsched.job_finished_check(uuid, text, text) is 'Used by pgsched.retry_job, rerun_job and delete_job: refuses (55000, naming the status) a job the operation does not apply to.';

-- A retry or rerun of a job checked by job_finished_check (job-operations.ts jobRunAgainMany): a new
-- pending execution due now, attempts counted from 0, after (by its time) every earlier one, which
-- stays as history; a cancelled job becomes active again (a recurring one's schedule stays stopped:
-- this is one run). A `submitted` event while someone listens. Returns the new execution's id.
create function pgsched.job_run_again(job_id uuid) returns uuid
language plpgsql as $$
#variable_conflict use_column
declare
  added record;
begin
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
comment on function pgsched.job_run_again(uuid) is 'Used by pgsched.retry_job and rerun_job: a new execution of the job due now, attempts from 0; returns its id.';

-- The events of one change of state, in order (event-capture.ts eventsCaptured): one
-- pgsched.event_batches row, written only while someone listens, without pgsched's own jobs and
-- without the changes of tenants nobody listens to; none when nothing is left.
create function pgsched.events_capture(types text[], tenants text[], job_ids uuid[], execution_ids uuid[], queues text[],
                                       job_types text[], attempts integer[]) returns void
language sql as $$
  insert into pgsched.event_batches (types, tenants, job_ids, execution_ids, queues, job_types, attempts)
  select array_agg(c.type order by c.n), array_agg(c.tenant order by c.n), array_agg(c.job_id order by c.n),
         array_agg(c.execution_id order by c.n), array_agg(c.queue order by c.n), array_agg(c.job_type order by c.n),
         array_agg(c.attempt order by c.n)
    from unnest(events_capture.types, events_capture.tenants, events_capture.job_ids, events_capture.execution_ids,
                events_capture.queues, events_capture.job_types, events_capture.attempts)
           with ordinality as c (type, tenant, job_id, execution_id, queue, job_type, attempt, n)
   where exists (select 1 from pgsched.event_listeners l where l.until > now())   -- nobody listens: nothing is written
     and c.job_type not like 'pgsched.%'   -- pgsched's own jobs (webhook deliveries) are nobody's events
     and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)   -- a stream of every tenant
          or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
  having count(*) > 0   -- no row when nothing is left
$$;
comment on function pgsched.events_capture(text[], text[], uuid[], uuid[], text[], text[], integer[]) is 'Used by the job operations of SQL: writes their events (one batch, in order) while someone listens, as the client''s statements do.';

create function pgsched.retry_job(job_id uuid) returns uuid
language plpgsql as $$
begin
  perform pgsched.job_finished_check(retry_job.job_id, pgsched.job_lock_for(retry_job.job_id, 'retry'), 'retry');
  return pgsched.job_run_again(retry_job.job_id);
end
$$;
comment on function pgsched.retry_job(uuid) is 'Runs a FAILED, EXPIRED or CANCELLED job again now, in the caller''s transaction: a new execution, attempts from 0; earlier executions stay as history. Returns the new execution''s id. Refused with SQLSTATE 55000 for a job of another status (or with a run still in flight), P0002 when there is no such job. As the client''s retryJob.';

create function pgsched.rerun_job(job_id uuid) returns uuid
language plpgsql as $$
begin
  perform pgsched.job_finished_check(rerun_job.job_id, pgsched.job_lock_for(rerun_job.job_id, 'rerun'), 'rerun');
  return pgsched.job_run_again(rerun_job.job_id);
end
$$;
comment on function pgsched.rerun_job(uuid) is 'Runs a finished job (COMPLETED, FAILED, EXPIRED or CANCELLED) once more now, in the caller''s transaction; earlier executions stay as history. Returns the new execution''s id. Refused with SQLSTATE 55000 for a job not finished, P0002 when there is no such job. As the client''s rerunJob.';

-- Deletes a finished job with its executions, output chunks, trigger and idempotency key (the key
-- may then be used again), as job-operations.ts jobDeleteMany. No event: nothing of the job is left.
create function pgsched.delete_job(job_id uuid) returns void
language plpgsql as $$
#variable_conflict use_column
begin
  perform pgsched.job_finished_check(delete_job.job_id, pgsched.job_lock_for(delete_job.job_id, 'delete'), 'delete');
  with doomed_executions as (
    delete from pgsched.execution_history x where x.job_id = delete_job.job_id returning x.id
  )
  delete from pgsched.execution_output o where o.execution_id in (select id from doomed_executions);
  delete from pgsched.triggers t where t.job_id = delete_job.job_id;
  delete from pgsched.job_idempotency_keys k
   using pgsched.jobs j
   where j.id = delete_job.job_id and j.idempotency_key is not null
     and k.tenant = j.tenant and k.idempotency_key = j.idempotency_key and k.job_id = j.id;
  delete from pgsched.jobs j where j.id = delete_job.job_id;
end
$$;
comment on function pgsched.delete_job(uuid) is 'Deletes a finished job (COMPLETED, FAILED, EXPIRED or CANCELLED) with its executions, output, schedule and idempotency key, in the caller''s transaction. Refused with SQLSTATE 55000 for a job not finished, P0002 when there is no such job. As the client''s deleteJob.';

-- What cancelling a job (already set cancelled) does to its executions, as jobs.ts cancelEffects:
-- its pending and running executions leave pgsched.due and pgsched.runs and are cancelled in the
-- history (an execution created ahead of a fire time still to come is dropped without a trace), a
-- `cancelled` event per execution cancelled while someone listens, and one for the job alone when
-- none was and `first`, and a notification on pgsched_cancel naming the running ones (sent when the
-- caller's transaction commits). Run by pgsched.cancel_job twice: the second run is its sweep.
create function pgsched.job_cancel_effects(job_id uuid, first boolean) returns void
language plpgsql as $$
#variable_conflict use_column
declare
  statements integer;
begin
  with job as (
    select j.id, j.tenant, j.queue, j.type from pgsched.jobs j where j.id = job_cancel_effects.job_id and j.state = 'cancelled'
  ),
  running as (
    select r.execution_id as id from pgsched.runs r
     where r.job_id in (select id from job)
  ),
  dropped as (
    delete from pgsched.due d where d.job_id in (select id from job)
    returning execution_id, d.job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
              null::timestamptz as started_at, concurrency_key, tenant, start_deadline, created_at, null::uuid as worker_id,
              null::text as output_uri,
              -- created ahead of a fire time still to come (fragments.ts createdAhead), of a recurring job
              (d.attempt = 0 and d.run_at = d.scheduled_for and d.scheduled_for > d.created_at and d.scheduled_for > now())
              and exists (select 1 from pgsched.triggers t where t.job_id = d.job_id) as ahead
  ),
  stopped as (
    delete from pgsched.runs r where r.job_id in (select id from job)
    returning execution_id, r.job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms,
              started_at, concurrency_key, tenant, start_deadline, created_at, worker_id, output_uri, false as ahead
  ),
  cancelled as (
    insert into pgsched.execution_history as h (id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts,
                                                timeout_ms, started_at, concurrency_key, tenant, start_deadline, created_at, state,
                                                finished_at, result, error, output_uri, attempt_log, last_worker_id)
    select x.execution_id, x.job_id, x.queue, x.type, x.priority, x.scheduled_for, x.run_at, x.attempt, x.max_attempts, x.timeout_ms,
           x.started_at, x.concurrency_key, x.tenant, x.start_deadline, x.created_at, 'cancelled', now(), null::jsonb,
           jsonb_strip_nulls(jsonb_build_object('message', 'cancelled', 'name', 'CancelledError', 'attempt', x.attempt,
                                                'workerId', x.worker_id,
                                                'at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))),
           x.output_uri, null::jsonb, x.worker_id
      -- an execution created ahead of a fire time still to come leaves no trace: that fire time is
      -- not the job's, now it is cancelled
      from (select * from dropped union all select * from stopped) x
     where not x.ahead
    on conflict (id, job_id) do update
       set state = excluded.state, attempt = excluded.attempt, run_at = excluded.run_at,
           started_at = coalesce(excluded.started_at, h.started_at), finished_at = excluded.finished_at, result = excluded.result,
           error = excluded.error, output_uri = coalesce(excluded.output_uri, h.output_uri),
           attempt_log = case when excluded.attempt_log is null then h.attempt_log
                              else coalesce(h.attempt_log, '[]'::jsonb) || excluded.attempt_log end,
           last_worker_id = coalesce(excluded.last_worker_id, h.last_worker_id)
    returning h.id, h.job_id, h.tenant, h.queue, h.type, h.attempt
  ),
  -- the executions' events, then the job's own when it had none
  changes as (
    select 1 as o, 'cancelled' as type, tenant, c.job_id, id as execution_id, queue, c.type as job_type, attempt from cancelled c
     union all
    select 2, 'cancelled', tenant, id, null::uuid, queue, job.type, null::int from job
     where job_cancel_effects.first and id not in (select c.job_id from cancelled c)
  ),
  captured as (
    select pgsched.events_capture(array_agg(ch.type order by ch.o, ch.execution_id), array_agg(ch.tenant order by ch.o, ch.execution_id),
                                  array_agg(ch.job_id order by ch.o, ch.execution_id), array_agg(ch.execution_id order by ch.o, ch.execution_id),
                                  array_agg(ch.queue order by ch.o, ch.execution_id), array_agg(ch.job_type order by ch.o, ch.execution_id),
                                  array_agg(ch.attempt order by ch.o, ch.execution_id))
      from changes ch
  ),
  notified as (
    select pg_notify('pgsched_cancel', json_agg(id)::text) from running having count(*) > 0
  )
  -- read both: a plain select in WITH runs only when the statement reads it
  select count(*) from captured, (select count(*) from notified) n into statements;
end
$$;
comment on function pgsched.job_cancel_effects(uuid, boolean) is 'Used by pgsched.cancel_job: cancels the pending and running executions of a job already set cancelled, with their events (and the job''s own when `first` and none was) and the pgsched_cancel notification.';

-- Cancels a job, as the client's cancelJob (jobs.ts jobCancel with jobCancelEffects): the job and its
-- schedule stop; its pending and running executions become cancelled (a running one's worker loses
-- its lease, and a notification on pgsched_cancel, sent when the caller's transaction commits, makes
-- it abort the handler at once); an execution created ahead of a fire time still to come is dropped
-- without a trace. `cancelled` events while someone listens. A job already cancelled is left as it
-- is (false); a finished one is refused. It sweeps as the client does (see below), but cannot once the
-- caller's transaction commits, as the client does for what claims in flight at that moment took: the
-- reaper's next pass cancels those (jobCancelLeftovers).
create function pgsched.cancel_job(job_id uuid) returns boolean
language plpgsql as $$
#variable_conflict use_column
declare
  status text := pgsched.job_lock_for(cancel_job.job_id, 'cancel');
  one_time_ended boolean;
begin
  if exists (select 1 from pgsched.jobs j where j.id = cancel_job.job_id and j.state = 'cancelled') then
    return false;
  end if;
  -- finished: a one-time job's execution ended, or a recurring job has nothing to come (its schedule
  -- ended or stopped, its last run ended)
  select not exists (select 1 from pgsched.triggers t where t.job_id = cancel_job.job_id)
         and coalesce((select x.state from pgsched.executions x where x.job_id = cancel_job.job_id
                        order by x.scheduled_for desc limit 1) in ('succeeded', 'failed', 'cancelled'), false)
    into one_time_ended;
  if status in ('COMPLETED', 'FAILED', 'EXPIRED') or one_time_ended then
    raise exception 'job % has already finished (%); nothing to cancel', cancel_job.job_id, status using errcode = '55000';
  end if;
  update pgsched.jobs set state = 'cancelled', updated_at = now() where id = cancel_job.job_id;
  update pgsched.triggers set next_fire_at = null, updated_at = now() where triggers.job_id = cancel_job.job_id;
  perform pgsched.job_cancel_effects(cancel_job.job_id, true);
  -- The sweep, as the client's after its commit (jobCancelSweep): a statement of its own, so its
  -- snapshot is taken after what the first waited for has committed. A worker's outcome write in
  -- flight holds the run's row; the first statement waits for it and then finds the lease gone, but
  -- cannot see the retry that write put in pgsched.due. This one cancels it.
  perform pgsched.job_cancel_effects(cancel_job.job_id, false);
  return true;
end
$$;
comment on function pgsched.cancel_job(uuid) is 'Cancels a job in the caller''s transaction: its schedule stops, its pending and running executions become cancelled (a running one''s worker aborts its handler once the transaction commits). Returns true, or false when the job was already cancelled. Refused with SQLSTATE 55000 for a finished job, P0002 when there is no such job. As the client''s cancelJob.';

create or replace function pgsched.pause_queue(queue text) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, paused, paused_at, updated_at)
  values (pause_queue.queue, true, now(), now())
  on conflict (name) do update set paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now()
  returning (xmax = 0) into created;   -- xmax is 0 for a row this statement inserted
  -- A queue no setting named before: say so when it has no work now and no worker serves it. Each
  -- question is an index probe or a small table (due_claim_idx, runs, workers); whether it ever had
  -- a job is not asked: the jobs and the history have no index by queue, and reading them would make
  -- every pause of a new queue (REST and CLI call this too) as slow as the tables are large.
  if created
     and not exists (select 1 from pgsched.due d where d.queue = pause_queue.queue)
     and not exists (select 1 from pgsched.runs r where r.queue = pause_queue.queue)
     and not exists (select 1 from pgsched.workers w where pause_queue.queue = any (w.queues)) then
    raise notice 'queue % has no settings, no pending or running work and no worker serving it: paused anyway (check the name if you meant an existing queue)',
      quote_literal(pause_queue.queue);
  end if;
end
$$;
comment on function pgsched.pause_queue(text) is 'Pauses a queue: claims that start after the calling transaction commits take nothing from it. Claims already in flight may still take rows; pgsched.claims_in_flight_since() counts them. A queue unknown so far is paused too, with a notice naming it.';
