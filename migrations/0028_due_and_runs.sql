-- Due work and leases apart from the history (docs/schema-prototype.md, design B2).
--
-- Until now one row of pgsched.executions carried an execution from submit to its end: inserted
-- pending, updated at the claim, at every heartbeat and at the outcome. Each of those updates
-- changed a column that a partial index filters on (state) or holds (lease_expires_at,
-- finished_at), so none was HOT and each wrote new entries into several indexes.
--
-- Now an execution lives in one of three tables:
--   pgsched.due                what may be claimed (pending: not started yet, or waiting for a retry);
--                              inserted at submit, fire time, retry and hand-back, deleted by the claim
--   pgsched.runs               what a worker holds: the lease; inserted by the claim, renewed in place
--                              by the heartbeat (HOT: nothing indexed changes), deleted at the outcome
--   pgsched.execution_history  the former executions table: the execution once an attempt has ended
--                              (succeeded, failed, cancelled), written once on the success path
-- An execution waiting for a retry, or running again after one, also has a history row in state
-- 'pending' that keeps its error and attempt log; its live row is in due or runs.
--
-- pgsched.executions is now a view over the three, with the columns and states the table had, so
-- every query that read executions reads the same thing. Writes go to the tables.
--
-- Processes of the previous version must be stopped before this migration: their statements
-- write pgsched.executions, which is a view now, and would fail (their leases then expire and the
-- reaper of the new version retries their runs).

alter table pgsched.executions rename to execution_history;
comment on table pgsched.execution_history is 'Executions whose attempt ended: succeeded, failed, cancelled; or pending, when an attempt failed and the retry waits in pgsched.due or runs in pgsched.runs (this row keeps its error and attempt log). Inserted once per attempt ended (migration 0028). The view pgsched.executions shows every execution.';

create table pgsched.due (
  execution_id uuid not null default pgsched.uuid_v7(),
  job_id uuid not null,
  queue text not null,
  type text not null,
  priority smallint not null,
  run_at timestamptz not null,
  scheduled_for timestamptz not null,
  attempt integer not null default 0,
  max_attempts integer not null,
  timeout_ms integer not null,
  tenant text not null,
  concurrency_key text,
  start_deadline timestamptz,
  created_at timestamptz not null default now(),
  constraint due_pkey primary key (execution_id),
  constraint due_fire_time_key unique (job_id, scheduled_for),
  constraint due_attempt_check check (attempt >= 0 and attempt < max_attempts),
  constraint due_priority_check check (priority between -1000 and 1000)
) with (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000);
comment on table pgsched.due is 'Executions that may be claimed: not started yet, handed back, or waiting for a retry (attempt > 0: attempts already made). Claimed in (queue, priority desc, run_at, execution_id) order; the claim deletes the row and inserts its pgsched.runs row.';
comment on column pgsched.due.attempt is 'Attempts made so far (the claim makes attempt + 1).';
create index due_claim_idx on pgsched.due (queue, priority desc, run_at, execution_id);
create index due_tenant_idx on pgsched.due (queue, tenant, priority desc, run_at, execution_id);
create index due_start_deadline_idx on pgsched.due (start_deadline) where attempt = 0 and start_deadline is not null;

create table pgsched.runs (
  execution_id uuid not null,
  job_id uuid not null,
  worker_id uuid not null,
  attempt integer not null,
  lease_expires_at timestamptz not null,
  started_at timestamptz not null,
  queue text not null,
  type text not null,
  priority smallint not null,
  run_at timestamptz not null,
  scheduled_for timestamptz not null,
  max_attempts integer not null,
  timeout_ms integer not null,
  tenant text not null,
  concurrency_key text,
  start_deadline timestamptz,
  created_at timestamptz not null,
  output_uri text,
  constraint runs_pkey primary key (execution_id),
  constraint runs_attempt_check check (attempt >= 1 and attempt <= max_attempts)
) with (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000);
comment on column pgsched.runs.output_uri is 'Where the running attempt''s output is, once the worker has named it (read while it runs).';
comment on table pgsched.runs is 'Executions a worker holds (claimed: running or about to start). The fence of every write of the worker is (execution_id, worker_id, attempt); lease_expires_at is not indexed, so a heartbeat is a HOT update. Small (what runs now): the reaper and the running counts read it whole.';

-- Carried over: pending executions become due rows, running ones runs rows; the history keeps a
-- row only for those with an attempt already ended (their error and attempt log).
insert into pgsched.due (execution_id, job_id, queue, type, priority, run_at, scheduled_for, attempt, max_attempts, timeout_ms,
                         tenant, concurrency_key, start_deadline, created_at)
select id, job_id, queue, type, priority, run_at, scheduled_for, attempt, max_attempts, timeout_ms,
       coalesce(tenant, (select j.tenant from pgsched.jobs j where j.id = e.job_id)), concurrency_key, start_deadline, created_at
  from pgsched.execution_history e
 where state = 'pending';
insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                          scheduled_for, max_attempts, timeout_ms, tenant, concurrency_key, start_deadline, created_at, output_uri)
select id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
       scheduled_for, max_attempts, timeout_ms, coalesce(tenant, (select j.tenant from pgsched.jobs j where j.id = e.job_id)),
       concurrency_key, start_deadline, created_at, output_uri
  from pgsched.execution_history e
 where state = 'running';
delete from pgsched.execution_history
 where (state = 'pending' and attempt = 0) or (state = 'running' and attempt = 1);
update pgsched.execution_history
   set state = 'pending', attempt = attempt - 1, worker_id = null, lease_expires_at = null
 where state = 'running';

-- Their work moved to due and runs; what is left is indexed by columns that do not change.
drop index pgsched.executions_claim_idx, pgsched.executions_lease_idx, pgsched.executions_tenant_idx,
           pgsched.executions_running_key_idx, pgsched.executions_start_deadline_idx;

-- Wake-ups come from the due insert (executions_notify without its state filter: every due row is pending).
drop trigger executions_notify_insert on pgsched.execution_history;
drop function pgsched.executions_notify();
CREATE OR REPLACE FUNCTION pgsched.due_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;
create trigger due_notify_insert after insert on pgsched.due
  referencing new table as new_rows for each statement execute function pgsched.due_notify();

-- The history row of an execution waiting for (or running) a retry is read by one scalar subquery
-- per column, each only when a query uses that column and the execution has made an attempt (a
-- join would read the history for every query of pending or running executions).
create view pgsched.executions as
select d.execution_id as id, d.job_id, d.queue, d.type, d.priority, d.scheduled_for, d.run_at, 'pending'::text as state,
       d.attempt, d.max_attempts, d.timeout_ms, null::uuid as worker_id, null::timestamptz as lease_expires_at,
       (select h.started_at from pgsched.execution_history h where d.attempt > 0 and h.id = d.execution_id and h.job_id = d.job_id) as started_at,
       null::timestamptz as finished_at, null::jsonb as result,
       (select h.error from pgsched.execution_history h where d.attempt > 0 and h.id = d.execution_id and h.job_id = d.job_id) as error,
       (select h.output_uri from pgsched.execution_history h where d.attempt > 0 and h.id = d.execution_id and h.job_id = d.job_id) as output_uri,
       d.created_at, d.concurrency_key, d.tenant,
       (select h.attempt_log from pgsched.execution_history h where d.attempt > 0 and h.id = d.execution_id and h.job_id = d.job_id) as attempt_log,
       (select h.last_worker_id from pgsched.execution_history h where d.attempt > 0 and h.id = d.execution_id and h.job_id = d.job_id) as last_worker_id,
       d.start_deadline
  from pgsched.due d
union all
select r.execution_id, r.job_id, r.queue, r.type, r.priority, r.scheduled_for, r.run_at, 'running'::text,
       r.attempt, r.max_attempts, r.timeout_ms, r.worker_id, r.lease_expires_at, r.started_at, null::timestamptz, null::jsonb,
       (select h.error from pgsched.execution_history h where r.attempt > 1 and h.id = r.execution_id and h.job_id = r.job_id),
       coalesce(r.output_uri, (select h.output_uri from pgsched.execution_history h where r.attempt > 1 and h.id = r.execution_id and h.job_id = r.job_id)),
       r.created_at, r.concurrency_key, r.tenant,
       (select h.attempt_log from pgsched.execution_history h where r.attempt > 1 and h.id = r.execution_id and h.job_id = r.job_id),
       (select h.last_worker_id from pgsched.execution_history h where r.attempt > 1 and h.id = r.execution_id and h.job_id = r.job_id),
       r.start_deadline
  from pgsched.runs r
union all
select h.id, h.job_id, h.queue, h.type, h.priority, h.scheduled_for, h.run_at, h.state,
       h.attempt, h.max_attempts, h.timeout_ms, h.worker_id, h.lease_expires_at,
       h.started_at, h.finished_at, h.result, h.error, h.output_uri, h.created_at,
       h.concurrency_key, h.tenant, h.attempt_log, h.last_worker_id, h.start_deadline
  from pgsched.execution_history h
 where h.state in ('succeeded', 'failed', 'cancelled');
comment on view pgsched.executions is 'Every execution, as one table showed them before migration 0028: pending ones from pgsched.due, running ones from pgsched.runs, finished ones from pgsched.execution_history. Read-only: write the tables.';

CREATE OR REPLACE FUNCTION pgsched.admit_submits(tenant text, n integer, partial boolean)
 RETURNS TABLE(admitted integer, quota text, quota_value double precision, retry_after_ms integer, message text)
 LANGUAGE plpgsql
AS $function$
declare
  t pgsched.tenants;
  now_at timestamptz := clock_timestamp();
  need integer := case when partial then least(n, 1) else n end;  -- the fewest submits worth admitting
  pending integer := 0;
  pending_room integer := n;
  rate_room integer := n;
  tokens double precision;
  room integer;
begin
  select * into t from pgsched.tenants s
   where s.name = admit_submits.tenant and (s.max_pending is not null or s.max_submits_per_second is not null)
     for update;
  if not found then
    return query select n, null::text, null::float8, null::integer, null::text;
    return;
  end if;
  if t.max_pending is not null then
    -- pending executions of the tenant in every queue, counted up to the quota (a skip scan over the
    -- queues of due_tenant_idx)
    with recursive q(queue) as (
      (select e.queue from pgsched.due e order by e.queue limit 1)
      union all
      select (select e.queue from pgsched.due e where e.queue > q.queue order by e.queue limit 1)
        from q where q.queue is not null
    )
    select count(*)::integer into pending
      from (select 1 from q cross join lateral (
              select 1 from pgsched.due e
               where e.queue = q.queue and e.tenant = t.name
               limit t.max_pending) x
             limit t.max_pending) y;
    pending_room := greatest(0, t.max_pending - pending);
  end if;
  if t.max_submits_per_second is not null then
    tokens := least(greatest(t.max_submits_per_second, 1),
                    coalesce(t.submit_tokens, greatest(t.max_submits_per_second, 1))
                      + t.max_submits_per_second * greatest(0, extract(epoch from now_at - coalesce(t.submit_tokens_at, now_at))));
    -- all or none: a batch larger than the bucket is admitted once the bucket is full, and leaves it
    -- in debt; partial: as many as there are whole tokens
    rate_room := case when not partial and tokens >= least(n, greatest(t.max_submits_per_second, 1)) then n
                      else greatest(0, floor(tokens))::integer end;
  end if;
  room := least(n, pending_room, rate_room);
  if room < need then
    room := 0;
  elsif not partial then
    room := n;
  end if;
  if t.max_submits_per_second is not null then
    update pgsched.tenants s set submit_tokens = tokens - room, submit_tokens_at = now_at where s.name = t.name;
  end if;
  if room = n then
    return query select room, null::text, null::float8, null::integer, null::text;
  elsif pending_room < n and pending_room <= rate_room then
    return query select room, 'maxPending', t.max_pending::float8, 1000,
      format('tenant %s has %s pending executions and its quota maxPending is %s', quote_ident(t.name), pending, t.max_pending)
        || case when n > 1 then format('; %s submits were asked for together', n) else '' end;
  else
    return query select room, 'maxSubmitsPerSecond', t.max_submits_per_second,
      greatest(1, ceil(((case when partial then 1 else least(n, greatest(t.max_submits_per_second, 1)) end) - (tokens - room))
                       / t.max_submits_per_second * 1000))::integer,
      format('tenant %s may submit at most %s jobs per second (quota maxSubmitsPerSecond)', quote_ident(t.name), t.max_submits_per_second);
  end if;
end
$function$;

CREATE OR REPLACE FUNCTION pgsched.claims_in_flight_since(since timestamp with time zone)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  select count(distinct l.pid)::integer
    from pg_locks l
    join pg_stat_activity a on a.pid = l.pid
   where l.locktype = 'relation'
     and l.mode = 'RowExclusiveLock'
     and l.granted
     and l.relation = 'pgsched.runs'::regclass
     and a.xact_start < since
     and l.pid <> pg_backend_pid()
$function$;

CREATE OR REPLACE FUNCTION pgsched.queue_claim_admit(queue text, claimed integer, worker_id uuid, claimed_at timestamp with time zone, fair boolean, horizon_ms double precision, rate_spacing double precision)
 RETURNS TABLE(first_slot_ms double precision, spacing_ms double precision, running integer)
 LANGUAGE plpgsql
AS $function$
declare
  s pgsched.queues;
  others integer;
  at timestamptz;
  first_ms double precision;
  spacing double precision;
begin
  select * into s from pgsched.queues q where q.name = queue_claim_admit.queue for update;
  if not found then
    return query select 0::float8, null::float8, null::integer;
    return;
  end if;
  if s.paused or s.key_concurrency_limit is not null or s.key_rate_limit is not null or s.fair_share <> queue_claim_admit.fair then
    raise exception 'queue % changed its settings since the claim was planned', quote_literal(queue_claim_admit.queue)
      using errcode = 'PGS01';
  end if;
  if s.concurrency_limit is not null and s.running_bound is not null and s.running_bound + claimed <= s.concurrency_limit then
    others := s.running_bound;
  elsif s.concurrency_limit is not null then
    -- read after the lock: every claim admitted before is committed and counted (this claim's own
    -- rows, which this statement may or may not see, are left out and added as `claimed`)
    select count(*)::integer into others
      from pgsched.runs r
     where r.queue = queue_claim_admit.queue
       and not (r.worker_id = queue_claim_admit.worker_id and r.started_at = queue_claim_admit.claimed_at);
    if others + claimed > s.concurrency_limit then
      raise exception 'queue % would run % executions, over its concurrency limit %', quote_literal(queue_claim_admit.queue),
        others + claimed, s.concurrency_limit using errcode = 'PGS01';
    end if;
  end if;
  if s.rate_limit is not null then
    spacing := s.rate_period_ms::float8 / s.rate_limit * rate_spacing;
    at := clock_timestamp();
    first_ms := greatest(0, extract(epoch from coalesce(s.next_start_at, at) - at) * 1000);
    if first_ms + (claimed - 1) * spacing > horizon_ms then
      raise exception 'queue % has no start slots left within % ms for % executions', quote_literal(queue_claim_admit.queue),
        horizon_ms, claimed using errcode = 'PGS01';
    end if;
  end if;
  if s.concurrency_limit is not null or s.rate_limit is not null then
    update pgsched.queues q
       set next_start_at = case when s.rate_limit is null then q.next_start_at
                                else greatest(coalesce(q.next_start_at, at), at) + claimed * spacing * interval '1 millisecond' end,
           running_bound = others + claimed
     where q.name = queue_claim_admit.queue;
  end if;
  return query select coalesce(first_ms, 0), spacing, others + claimed;
end
$function$;

CREATE OR REPLACE FUNCTION pgsched.submit_job(type text, payload jsonb DEFAULT '{}'::jsonb, queue text DEFAULT 'default'::text, priority integer DEFAULT 0, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, cron text DEFAULT NULL::text, timezone text DEFAULT 'UTC'::text, every interval DEFAULT NULL::interval, max_attempts integer DEFAULT 5, timeout_ms integer DEFAULT 300000, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT 'default'::text, backoff_base_ms integer DEFAULT 1000, backoff_max_ms integer DEFAULT 3600000, misfire_policy text DEFAULT 'fire_once'::text, overlap_policy text DEFAULT 'allow'::text, start_at timestamp with time zone DEFAULT NULL::timestamp with time zone, end_at timestamp with time zone DEFAULT NULL::timestamp with time zone, concurrency_key text DEFAULT NULL::text, start_deadline_ms integer DEFAULT NULL::integer)
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
  job_id uuid := pgsched.uuid_v7();
  admission record;
  kind text;
  interval_ms bigint;
  request_hash text;
  existing record;
  cron_message text;
begin
  if submit_job.type is null or submit_job.type !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' then
    raise exception 'type must be 1-128 characters: letters, digits and _ . : / - (not first), got %', coalesce(quote_literal(submit_job.type), 'null')
      using errcode = '22023';
  end if;
  if starts_with(submit_job.type, 'pgsched.') then
    raise exception 'type must not start with pgsched. (reserved for pgsched''s own jobs), got %', quote_literal(submit_job.type)
      using errcode = '22023';
  end if;
  if submit_job.queue is null or submit_job.queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$' then
    raise exception 'queue must be 1-64 characters: letters, digits and _ . : / - (not first), got %', coalesce(quote_literal(submit_job.queue), 'null')
      using errcode = '22023';
  end if;
  if submit_job.priority is null or submit_job.priority not between -1000 and 1000 then
    raise exception 'priority must be an integer from -1000 to 1000, got %', submit_job.priority using errcode = '22023';
  end if;
  if submit_job.max_attempts is null or submit_job.max_attempts not between 1 and 1000 then
    raise exception 'max_attempts must be an integer from 1 to 1000, got %', submit_job.max_attempts using errcode = '22023';
  end if;
  if submit_job.timeout_ms is null or submit_job.timeout_ms not between 1 and 86400000 then
    raise exception 'timeout_ms must be an integer from 1 to 86400000, got %', submit_job.timeout_ms using errcode = '22023';
  end if;
  if submit_job.concurrency_key is not null and length(submit_job.concurrency_key) not between 1 and 255 then
    raise exception 'concurrency_key must be 1-255 characters, got % characters', length(submit_job.concurrency_key) using errcode = '22023';
  end if;
  if submit_job.start_deadline_ms is not null and submit_job.start_deadline_ms not between 1000 and 604800000 then
    raise exception 'start_deadline_ms must be an integer from 1000 to 604800000 (7 days), got %', submit_job.start_deadline_ms using errcode = '22023';
  end if;
  if num_nonnulls(submit_job.run_at, submit_job.cron, submit_job.every) > 1 then
    raise exception 'give at most one of run_at, cron and every' using errcode = '22023';
  end if;
  if (submit_job.start_at is not null or submit_job.end_at is not null) and submit_job.cron is null and submit_job.every is null then
    raise exception 'start_at and end_at apply only to recurring schedules (cron or every)' using errcode = '22023';
  end if;
  begin
    perform now() at time zone submit_job.timezone;
  exception when others then
    raise exception 'timezone % is not a known IANA time zone (such as Europe/Berlin)', quote_literal(submit_job.timezone)
      using errcode = '22023';
  end;

  if submit_job.cron is not null then
    kind := 'cron';
    cron_message := pgsched.cron_problem(submit_job.cron);  -- the grammar of core/cron-syntax.ts, same messages
    if cron_message is not null then
      raise exception '%', cron_message using errcode = '22023';
    end if;
  elsif submit_job.every is not null then
    kind := 'interval';
    interval_ms := floor(extract(epoch from submit_job.every) * 1000);
    if interval_ms not between 1000 and 31622400000 then
      raise exception 'every must be from 1 second to 366 days, got %', submit_job.every using errcode = '22023';
    end if;
  elsif submit_job.run_at is not null then
    kind := 'at';
  else
    kind := 'now';
  end if;

  if submit_job.idempotency_key is not null then
    request_hash := 'sql:' || encode(sha256(convert_to(jsonb_build_object(
      'type', submit_job.type, 'payload', submit_job.payload, 'queue', submit_job.queue, 'priority', submit_job.priority,
      'run_at', submit_job.run_at, 'cron', submit_job.cron, 'timezone', submit_job.timezone, 'every', submit_job.every::text,
      'max_attempts', submit_job.max_attempts, 'timeout_ms', submit_job.timeout_ms,
      'concurrency_key', submit_job.concurrency_key, 'start_deadline_ms', submit_job.start_deadline_ms)::text, 'UTF8')), 'hex');
    insert into pgsched.job_idempotency_keys (tenant, idempotency_key, job_id, request_hash)
    values (submit_job.tenant, submit_job.idempotency_key, job_id, request_hash)
    on conflict do nothing;
    if not found then
      select k.job_id, k.request_hash into existing
        from pgsched.job_idempotency_keys k
       where k.tenant = submit_job.tenant and k.idempotency_key = submit_job.idempotency_key;
      if existing.request_hash = request_hash then
        return existing.job_id;
      end if;
      raise exception 'idempotency key % was already used for a different job request', quote_literal(submit_job.idempotency_key)
        using errcode = '23505';
    end if;
  end if;

  -- the tenant's admission quotas (after the idempotency check: a repeated submit is not a new one)
  select * into admission from pgsched.admit_submits(submit_job.tenant, 1, false);
  if admission.admitted < 1 then
    raise exception '%', admission.message using errcode = '53400', hint = format('retry after %s ms', admission.retry_after_ms);
  end if;

  insert into pgsched.jobs (id, tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                            timeout_ms, idempotency_key, concurrency_key, start_deadline_ms, created_by)
  values (job_id, submit_job.tenant, submit_job.type, submit_job.queue, submit_job.priority, coalesce(submit_job.payload, '{}'::jsonb),
          submit_job.max_attempts, submit_job.backoff_base_ms, submit_job.backoff_max_ms, submit_job.timeout_ms,
          submit_job.idempotency_key, submit_job.concurrency_key, submit_job.start_deadline_ms, 'sql:' || current_user);

  if kind in ('now', 'at') then
    insert into pgsched.due (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms, tenant,
                                    concurrency_key, start_deadline)
    values (job_id, submit_job.queue, submit_job.type, submit_job.priority, coalesce(submit_job.run_at, now()),
            coalesce(submit_job.run_at, now()), submit_job.max_attempts, submit_job.timeout_ms, submit_job.tenant,
            submit_job.concurrency_key, coalesce(submit_job.run_at, now()) + submit_job.start_deadline_ms * interval '1 millisecond');
  else
    insert into pgsched.triggers (job_id, kind, cron_expression, timezone, interval_ms, start_at, end_at, next_fire_at,
                                  misfire_policy, overlap_policy)
    values (job_id, kind, btrim(submit_job.cron), submit_job.timezone, interval_ms, submit_job.start_at, submit_job.end_at,
            case when kind = 'cron' then '-infinity'::timestamptz   -- the dispatcher computes the first cron fire time
                 else greatest(coalesce(submit_job.start_at, now()), now()) end,
            submit_job.misfire_policy, submit_job.overlap_policy);
  end if;
  return job_id;
end
$function$;
