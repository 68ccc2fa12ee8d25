-- Wake-ups only for workers that want them. A NOTIFY makes every committing
-- transaction that sends one take a database-wide lock until its commit is
-- flushed, which serialises concurrent submits. Workers that have work need no
-- wake-up (they claim again as soon as they have room), so a submit of work
-- that is due now notifies only when a worker serving one of its queues is
-- listed here with min_priority at or below the work's priority: a worker that
-- found its queues empty (min_priority -1000: any work), or one holding
-- prefetched work that higher-priority work should overtake (its best buffered
-- priority + 1). Work due later is always announced: every worker keeps a
-- timer for the earliest due time it heard of.
--
-- The handshake cannot lose a wake-up for an idle worker: the insert trigger
-- takes the advisory lock below in shared mode before it looks at this table
-- (and holds it until its transaction ends); a worker signs up as idle only
-- while holding the same lock exclusively (pg_try_advisory_xact_lock: it never
-- waits, it retries), then claims once more before it sleeps. So a submit
-- either sees the sign-up and notifies, or committed before the sign-up and is
-- found by that claim.
create unlogged table pgsched.waiting_workers (
  worker_id uuid not null,
  queues text[] not null,
  min_priority integer not null,
  since timestamptz not null default now(),
  constraint waiting_workers_pkey primary key (worker_id)
);
comment on table pgsched.waiting_workers is 'Workers that want a NOTIFY for new due work: submits of work due now notify only when a worker here serves one of its queues at or above min_priority. Unlogged: after a crash it is empty, and workers sign up again.';
comment on column pgsched.waiting_workers.min_priority is '-1000: idle, any work; otherwise the best priority the worker holds claimed but not started, plus one.';

-- Lock key of the handshake: the bytes of 'pgsched' + 'w'.
create function pgsched.wait_lock_key() returns bigint
language sql immutable parallel safe as $$ select 8100468271315838071::bigint $$;

create or replace function pgsched.executions_notify() returns trigger
language plpgsql as $$
declare
  info record;
begin
  select array_agg(distinct queue) filter (where run_at <= now()) as due_queues,
         max(priority) filter (where run_at <= now()) as due_priority,
         array_agg(distinct queue) filter (where run_at > now()) as later_queues,
         floor(extract(epoch from (min(run_at) filter (where run_at > now()) - now())) * 1000)::bigint as later_ms
    into info
    from new_rows
   where state = 'pending';
  if info.due_queues is not null then
    perform pg_advisory_xact_lock_shared(pgsched.wait_lock_key());
    if exists (select 1 from pgsched.waiting_workers w
                where w.queues && info.due_queues and w.min_priority <= info.due_priority) then
      perform pg_notify('pgsched_executions',
                        json_build_object('queues', info.due_queues, 'delayMs', 0, 'priority', info.due_priority)::text);
    end if;
  end if;
  if info.later_queues is not null then
    perform pg_notify('pgsched_executions',
                      json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms))::text);
  end if;
  return null;
end
$$;
