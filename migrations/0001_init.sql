-- pgsched schema: jobs, their schedules (triggers), their runs (executions),
-- live worker processes and API keys. Large tables are hash-partitioned so one
-- job's rows stay together; the partition count is read from the session
-- setting `pgsched.partition_count` (set by `scheduler migrate --partitions`)
-- the first time this runs, and recorded in pgsched.settings.

create schema if not exists pgsched;
comment on schema pgsched is 'pgsched: a distributed job scheduler whose only stateful part is PostgreSQL.';

create table pgsched.settings (
  name text not null,
  value text not null,
  constraint settings_pkey primary key (name)
);
comment on table pgsched.settings is 'Facts fixed when the schema was created, e.g. partition_count; later migrations read them.';

insert into pgsched.settings (name, value)
values ('partition_count', coalesce(nullif(current_setting('pgsched.partition_count', true), ''), '16'));

do $$
declare
  n integer := (select value::integer from pgsched.settings where name = 'partition_count');
begin
  if n < 1 or n > 256 then
    raise exception 'pgsched.partition_count must be between 1 and 256, got %', n;
  end if;
end
$$;

-- UUIDv7: 48-bit Unix milliseconds followed by random bits, so ids sort by
-- creation time and b-tree inserts stay at the right edge.
create function pgsched.uuid_v7() returns uuid
language sql volatile parallel safe as $$
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
              from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;
comment on function pgsched.uuid_v7() is 'A time-ordered UUID (version 7) from the database clock.';

create table pgsched.jobs (
  id uuid not null default pgsched.uuid_v7(),
  tenant text not null,
  type text not null,
  queue text not null default 'default',
  priority smallint not null default 0,
  payload jsonb not null default '{}'::jsonb,
  max_attempts integer not null default 5,
  backoff_base_ms integer not null default 1000,
  backoff_max_ms integer not null default 3600000,
  timeout_ms integer not null default 300000,
  idempotency_key text,
  state text not null default 'active',
  created_by text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint jobs_pkey primary key (id),
  constraint jobs_tenant_check check (length(tenant) between 1 and 128),
  constraint jobs_type_check check (type ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'),
  constraint jobs_queue_check check (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$'),
  constraint jobs_priority_check check (priority between -1000 and 1000),
  constraint jobs_max_attempts_check check (max_attempts between 1 and 1000),
  constraint jobs_backoff_check check (backoff_base_ms between 0 and 86400000 and backoff_max_ms between backoff_base_ms and 604800000),
  constraint jobs_timeout_ms_check check (timeout_ms between 1 and 86400000),
  constraint jobs_idempotency_key_check check (length(idempotency_key) between 1 and 255),
  constraint jobs_state_check check (state in ('active', 'paused', 'cancelled'))
) partition by hash (id);
comment on table pgsched.jobs is 'One row per submitted job: what to run (type, payload), where (queue), how urgently (priority) and how to retry. Runs are in pgsched.executions; schedules of recurring jobs in pgsched.triggers.';
comment on column pgsched.jobs.id is 'UUIDv7: sorts by creation time; listing newest-first is a descending index scan.';
comment on column pgsched.jobs.tenant is 'Owner of the job (from the API key). Tenants never see each other''s jobs.';
comment on column pgsched.jobs.type is 'Handler name; only workers with a handler for this type claim its executions.';
comment on column pgsched.jobs.priority is 'Higher runs first among due executions of a queue (-1000..1000).';
comment on column pgsched.jobs.max_attempts is 'Attempts per execution before it is marked failed (1 = no retry).';
comment on column pgsched.jobs.backoff_base_ms is 'Retry delay is random(0, min(backoff_max_ms, backoff_base_ms * 2^(attempt-1))) (exponential backoff, full jitter).';
comment on column pgsched.jobs.timeout_ms is 'A run taking longer is aborted and counted as a retriable failure.';
comment on column pgsched.jobs.state is 'active | paused (recurring job not dispatching) | cancelled. The user-facing status (NOT_STARTED, STARTED, COMPLETED, FAILED, CANCELLED, PAUSED) is derived from this and the latest execution.';
comment on column pgsched.jobs.created_by is 'Who submitted it: an API key id, or the name given by the TypeScript or SQL caller.';

create index jobs_tenant_list_idx on pgsched.jobs (tenant, id desc);

create table pgsched.job_idempotency_keys (
  tenant text not null,
  idempotency_key text not null,
  job_id uuid not null,
  request_hash text not null,
  created_at timestamptz not null default now(),
  constraint job_idempotency_keys_pkey primary key (tenant, idempotency_key)
) partition by hash (tenant, idempotency_key);
comment on table pgsched.job_idempotency_keys is 'Idempotency keys per tenant. A separate table because a unique constraint on the partitioned jobs table must contain its partition key (id).';
comment on column pgsched.job_idempotency_keys.request_hash is 'SHA-256 of the normalised submit request: same key and same hash returns the same job; same key, other hash is a conflict.';

create table pgsched.triggers (
  job_id uuid not null,
  kind text not null,
  cron_expression text,
  timezone text not null default 'UTC',
  interval_ms bigint,
  start_at timestamptz,
  end_at timestamptz,
  next_fire_at timestamptz,
  last_fire_at timestamptz,
  misfire_policy text not null default 'fire_once',
  misfire_max_runs integer not null default 100,
  overlap_policy text not null default 'allow',
  paused boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint triggers_pkey primary key (job_id),
  constraint triggers_kind_check check (kind in ('once', 'cron', 'interval')),
  constraint triggers_shape_check check (
    (kind = 'cron' and cron_expression is not null and interval_ms is null)
    or (kind = 'interval' and interval_ms is not null and cron_expression is null)
    or (kind = 'once' and cron_expression is null and interval_ms is null)),
  constraint triggers_interval_ms_check check (interval_ms between 1000 and 31622400000),
  constraint triggers_window_check check (end_at is null or start_at is null or end_at > start_at),
  constraint triggers_misfire_policy_check check (misfire_policy in ('fire_once', 'skip', 'fire_all')),
  constraint triggers_misfire_max_runs_check check (misfire_max_runs between 1 and 10000),
  constraint triggers_overlap_policy_check check (overlap_policy in ('allow', 'skip', 'queue'))
) partition by hash (job_id);
comment on table pgsched.triggers is 'Schedule of a recurring job. The dispatcher claims rows whose next_fire_at has passed, creates the execution for that fire time and advances next_fire_at, in one transaction.';
comment on column pgsched.triggers.cron_expression is 'Five fields, or six with seconds first; evaluated in timezone.';
comment on column pgsched.triggers.timezone is 'IANA time zone the cron expression is evaluated in.';
comment on column pgsched.triggers.next_fire_at is 'Next fire time; null once the schedule is exhausted (end_at passed); -infinity means "not computed yet" (job submitted from SQL): the dispatcher computes it without firing.';
comment on column pgsched.triggers.misfire_policy is 'After fire times were missed (nothing dispatching): fire_once = one catch-up run; skip = none; fire_all = every missed time up to misfire_max_runs.';
comment on column pgsched.triggers.overlap_policy is 'When the previous run is still going at a fire time: allow = run anyway; skip = drop this fire time; queue = keep at most one waiting.';

create index triggers_due_idx on pgsched.triggers (next_fire_at) where not paused and next_fire_at is not null;

create table pgsched.executions (
  id uuid not null default pgsched.uuid_v7(),
  job_id uuid not null,
  queue text not null,
  type text not null,
  priority smallint not null,
  scheduled_for timestamptz not null,
  run_at timestamptz not null,
  state text not null default 'pending',
  attempt integer not null default 0,
  max_attempts integer not null,
  timeout_ms integer not null,
  worker_id uuid,
  lease_expires_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz,
  result jsonb,
  error jsonb,
  output_uri text,
  created_at timestamptz not null default now(),
  constraint executions_pkey primary key (id, job_id),
  constraint executions_fire_time_key unique (job_id, scheduled_for),
  constraint executions_state_check check (state in ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  constraint executions_attempt_check check (attempt between 0 and max_attempts),
  constraint executions_priority_check check (priority between -1000 and 1000),
  constraint executions_lease_check check (
    (state = 'running') = (worker_id is not null and lease_expires_at is not null)),
  constraint executions_finished_check check (
    (state in ('succeeded', 'failed', 'cancelled')) = (finished_at is not null))
) partition by hash (job_id);
comment on table pgsched.executions is 'One row per run of a job (per fire time for recurring jobs). States: pending -> running (leased) -> succeeded | failed | cancelled; a retriable failure or an expired lease returns it to pending with run_at pushed back.';
comment on column pgsched.executions.scheduled_for is 'The fire time this run belongs to; unique per job, so a fire time can never produce two executions.';
comment on column pgsched.executions.run_at is 'Earliest time it may be claimed (scheduled_for, or later for a retry''s backoff).';
comment on column pgsched.executions.attempt is 'Attempts started so far; with worker_id it fences heartbeats and completions.';
comment on column pgsched.executions.worker_id is 'Worker holding the lease (pgsched.workers.id) while running.';
comment on column pgsched.executions.lease_expires_at is 'The lease: renewed by the worker''s heartbeat; once passed, the reaper returns the execution to pending.';
comment on column pgsched.executions.result is 'JSON returned by the handler (bounded size).';
comment on column pgsched.executions.error is 'Last error: {message, name, fatal, attempt, at}.';
comment on column pgsched.executions.output_uri is 'Where the run''s output stream was stored (file:// URI).';
comment on column pgsched.executions.queue is 'Copied from the job so the claim query reads one table.';

-- Serves the claim query: due pending rows of a queue in priority order.
create index executions_claim_idx on pgsched.executions (queue, priority desc, run_at, id) where state = 'pending';
-- Serves the reaper: running rows by lease expiry.
create index executions_lease_idx on pgsched.executions (lease_expires_at) where state = 'running';
-- Serves the pruner: terminal rows by age.
create index executions_finished_idx on pgsched.executions (finished_at) where finished_at is not null;

do $$
declare
  n integer := (select value::integer from pgsched.settings where name = 'partition_count');
  t text;
begin
  foreach t in array array['jobs', 'job_idempotency_keys', 'triggers', 'executions'] loop
    for i in 0 .. n - 1 loop
      execute format('create table pgsched.%I partition of pgsched.%I for values with (modulus %s, remainder %s)',
                     t || '_p' || lpad(i::text, 3, '0'), t, n, i);
    end loop;
  end loop;
end
$$;

-- Wake idle workers: one notification per inserting statement, naming the
-- queues that got work and the delay (ms) until the earliest of it is due.
create function pgsched.executions_notify() returns trigger
language plpgsql as $$
declare
  info record;
begin
  select array_agg(distinct queue) as queues,
         greatest(0, floor(extract(epoch from (min(run_at) - now())) * 1000))::bigint as delay_ms
    into info
    from new_rows
   where state = 'pending';
  if info.queues is not null then
    perform pg_notify('pgsched_executions', json_build_object('queues', info.queues, 'delayMs', info.delay_ms)::text);
  end if;
  return null;
end
$$;

create trigger executions_notify_insert
  after insert on pgsched.executions
  referencing new table as new_rows
  for each statement execute function pgsched.executions_notify();

create table pgsched.workers (
  id uuid not null,
  host text not null,
  pid integer not null,
  queues text[] not null,
  types text[] not null,
  concurrency integer not null,
  started_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  stopped_at timestamptz,
  constraint workers_pkey primary key (id),
  constraint workers_concurrency_check check (concurrency between 1 and 10000)
);
comment on table pgsched.workers is 'Worker processes: registered at start, last_seen_at refreshed by every heartbeat, stopped_at set on clean shutdown.';
comment on column pgsched.workers.types is 'Job types this worker has handlers for; it claims nothing else.';

create table pgsched.api_keys (
  id uuid not null default pgsched.uuid_v7(),
  tenant text not null,
  name text,
  key_prefix text not null,
  key_hash bytea not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  constraint api_keys_pkey primary key (id),
  constraint api_keys_key_hash_key unique (key_hash),
  constraint api_keys_tenant_check check (length(tenant) between 1 and 128),
  constraint api_keys_key_hash_check check (length(key_hash) = 32)
);
comment on table pgsched.api_keys is 'API keys. Only the SHA-256 of a key is stored; the key itself is shown once, when created.';
comment on column pgsched.api_keys.key_prefix is 'The first characters of the key, to recognise it in listings; not enough to use it.';
