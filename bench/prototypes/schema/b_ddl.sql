-- Candidate schema B, applied on top of migrations 0001-0023 (so jobs, triggers, queues, workers,
-- events stay as they are). Due work and leases move out of pgsched.executions into two small,
-- unpartitioned tables whose rows are inserted and deleted; executions keeps one row per
-- execution as history, without the partial indexes whose predicate columns change at every
-- state transition, so its one update (at completion) is HOT.

-- Due work: one narrow row per execution that may be claimed (pending, or a retry waiting for its
-- backoff). Inserted at submit / fire time / retry, deleted by the claim. No primary key: the claim
-- deletes the rows it locked by ctid; cancel finds a row through the claim index, from the
-- (queue, priority, run_at, execution_id) its job or history row records.
create table pgsched.due (
  execution_id uuid not null,
  job_id uuid not null,
  queue text not null,
  type text not null,
  priority smallint not null,
  run_at timestamptz not null,
  scheduled_for timestamptz not null,
  attempt integer not null default 0,
  tenant text not null,
  concurrency_key text,
  start_deadline timestamptz
) with (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000, vacuum_index_cleanup = on);
create index due_claim_idx on pgsched.due (queue, priority desc, run_at, execution_id);
-- fair share: tenants with due work in a queue (kept for parity with executions_tenant_idx)
create index due_tenant_idx on pgsched.due (queue, tenant, priority desc, run_at, execution_id);
create index due_start_deadline_idx on pgsched.due (start_deadline) where attempt = 0 and start_deadline is not null;

-- Leases: one row per running (or prefetched) execution, inserted by the claim, renewed in place
-- by the heartbeat (a HOT update: lease_expires_at is not indexed, and fillfactor leaves room),
-- deleted by complete / fail / release / the reaper. The fence is (execution_id, worker_id, attempt).
-- The reaper reads the whole table (it holds only what runs now: concurrency + prefetch per worker).
create table pgsched.runs (
  execution_id uuid not null,
  job_id uuid not null,
  worker_id uuid not null,
  attempt integer not null,
  lease_expires_at timestamptz not null,
  started_at timestamptz not null,
  queue text not null,
  type text not null,
  tenant text not null,
  priority smallint not null,
  concurrency_key text,
  scheduled_for timestamptz not null,
  run_at timestamptz not null,
  max_attempts integer not null,
  timeout_ms integer not null,
  constraint runs_pkey primary key (execution_id)
) with (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
create index runs_key_idx on pgsched.runs (queue, concurrency_key) where concurrency_key is not null;

-- History: no index whose key or predicate changes with the state.
drop index pgsched.executions_claim_idx, pgsched.executions_lease_idx, pgsched.executions_finished_idx,
           pgsched.executions_tenant_idx, pgsched.executions_running_key_idx, pgsched.executions_start_deadline_idx;
alter table pgsched.executions drop constraint executions_lease_check;   -- the lease is in runs
do $$
declare p regclass;
begin
  for p in select inhrelid::regclass from pg_inherits where inhparent = 'pgsched.executions'::regclass loop
    execute format('alter table %s set (fillfactor = 70)', p);
  end loop;
end $$;

-- A one-time job records its first execution's key, so cancel can find its due row via due_claim_idx.
alter table pgsched.jobs add column execution_id uuid, add column run_at timestamptz;

-- Wake-ups move from the executions insert to the due insert (same logic; every due row is pending).
drop trigger executions_notify_insert on pgsched.executions;
create function pgsched.due_notify() returns trigger
language plpgsql as $$
declare
  info record;
  named uuid[];
begin
  select array_agg(distinct queue) filter (where run_at <= now()) as due_queues,
         max(priority) filter (where run_at <= now()) as due_priority,
         array_agg(distinct queue) filter (where run_at > now()) as later_queues,
         floor(extract(epoch from (min(run_at) filter (where run_at > now()) - now())) * 1000)::bigint as later_ms
    into info
    from new_rows;
  if info.due_queues is not null then
    perform pg_advisory_xact_lock_shared(pgsched.wait_lock_key());
    select array_agg(distinct pick.worker_id)
      into named
      from (select n.queue, n.type, max(n.priority) as priority, count(*) as n
              from new_rows n
             where n.run_at <= now()
             group by n.queue, n.type) due
     cross join lateral (
            select w.worker_id
              from pgsched.waiting_workers w
              left join pgsched.workers k on k.id = w.worker_id
             where due.queue = any(w.queues)
               and (w.types is null or due.type = any(w.types))
               and w.min_priority <= due.priority
             order by (k.stopped_at is null and k.last_seen_at > now() - interval '15 seconds') desc nulls last,
                      w.min_priority, w.since
             limit due.n) pick;
    if named is not null then
      perform pg_notify('pgsched_executions',
                        json_build_object('queues', info.due_queues, 'delayMs', 0, 'priority', info.due_priority,
                                          'workers', case when cardinality(named) <= 64 then named end)::text);
    end if;
  end if;
  if info.later_queues is not null then
    perform pg_notify('pgsched_executions',
                      json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms))::text);
  end if;
  return null;
end
$$;
create trigger due_notify_insert after insert on pgsched.due
  referencing new table as new_rows for each statement execute function pgsched.due_notify();
