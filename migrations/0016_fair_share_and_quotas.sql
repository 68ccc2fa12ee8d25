-- Fair share between tenants within a queue, and admission quotas per tenant.
--
-- Executions carry their job's tenant (copied as queue and concurrency_key are, so the claim reads
-- one table). Executions finished before this migration keep a null tenant: only pending and
-- running ones are filled in here, as only they are ever claimed or counted again.
--
-- Fair share (queues.fair_share): a fair queue is claimed as a limited queue (migration 0012),
-- under its settings row's lock. The claim finds the tenants with pending executions in the queue
-- (a skip scan of executions_tenant_idx, one probe per tenant), takes each tenant's first due
-- executions in priority order, and orders them by
--   priority (strict: a higher priority is always taken first, whatever its tenant), then
--   (the tenant's executions running in the queue + the execution's turn within its tenant at that
--   priority) / the tenant's weight: the least busy tenant goes next, round-robin between tenants
--   equally busy, a tenant of weight 2 getting twice the share; then run_at.
-- So a tenant with a backlog delays another tenant's due execution of the same priority by at most
-- one claim batch.
--
-- Admission quotas (tenants.max_pending, tenants.max_submits_per_second): pgsched.admit_submits()
-- decides, under the tenant's row lock, how many of n submits the tenant may make now; the API,
-- the TypeScript client and pgsched.submit_job() call it before they write anything.

alter table pgsched.executions add column tenant text;
comment on column pgsched.executions.tenant is 'Copied from the job (fair share and pending quotas read it here); null on executions that had finished before migration 0016.';

update pgsched.executions e
   set tenant = j.tenant
  from pgsched.jobs j
 where j.id = e.job_id
   and e.state in ('pending', 'running');

-- every execution that can still be claimed has its tenant (a fair claim finds executions by it)
alter table pgsched.executions add constraint executions_tenant_check
  check (tenant is not null or state in ('succeeded', 'failed', 'cancelled'));

create index executions_tenant_idx on pgsched.executions (queue, tenant, priority desc, run_at, id) where state = 'pending';

alter table pgsched.queues add column fair_share boolean not null default false;
comment on column pgsched.queues.fair_share is 'Claims take turns between the tenants with due work at each priority (weighted by tenants.weight) instead of taking the oldest due work first.';

-- Turns fair share on or off for a queue; wakes the workers.
create function pgsched.set_queue_fair_share(queue text, fair_share boolean) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, fair_share, updated_at)
  values (set_queue_fair_share.queue, set_queue_fair_share.fair_share, now())
  on conflict (name) do update set fair_share = excluded.fair_share, updated_at = now();
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_fair_share.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_fair_share(text, boolean) is 'Turns fair share between tenants on or off for a queue.';

create table pgsched.tenants (
  name text not null,
  weight double precision not null default 1,
  max_pending integer,
  max_submits_per_second double precision,
  submit_tokens double precision,
  submit_tokens_at timestamptz,
  updated_at timestamptz not null default now(),
  constraint tenants_pkey primary key (name),
  constraint tenants_name_check check (length(name) between 1 and 128),
  constraint tenants_weight_check check (weight between 0.001 and 1000),
  constraint tenants_max_pending_check check (max_pending between 0 and 1000000000),
  constraint tenants_max_submits_per_second_check check (max_submits_per_second between 0.001 and 1000000)
);
comment on table pgsched.tenants is 'Settings of tenants that have any: a weight for fair share, and admission quotas. A tenant without a row has weight 1 and no quota. Rows may be written directly; changes apply to the next submit and the next claim.';
comment on column pgsched.tenants.weight is 'Turns per round in fair-share queues (a tenant of weight 2 gets twice the starts of a tenant of weight 1 while both have due work of the same priority).';
comment on column pgsched.tenants.max_pending is 'Most executions of the tenant in state pending (due or scheduled later, every queue); a submit beyond it is refused (HTTP 429). Null: no quota.';
comment on column pgsched.tenants.max_submits_per_second is 'Most jobs submitted per second, a token bucket holding one second of submits; a batch larger than that is admitted when the bucket is full and leaves it in debt. Null: no quota.';
comment on column pgsched.tenants.submit_tokens is 'The token bucket of max_submits_per_second: tokens left at submit_tokens_at (may be negative after a large batch).';

-- How many of n submits of a tenant are admitted now (partial: as many as fit; otherwise all or
-- none), and when not all are: the quota that refused the others, its value, a message naming
-- both, and how long to wait. Takes the tenant's row lock, so the admissions of one tenant take turns until their
-- transactions end: the pending count read here includes every submit admitted before.
create function pgsched.admit_submits(tenant text, n integer, partial boolean)
returns table (admitted integer, quota text, quota_value double precision, retry_after_ms integer, message text)
language plpgsql volatile as $$
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
    -- queues of executions_tenant_idx)
    with recursive q(queue) as (
      (select e.queue from pgsched.executions e where e.state = 'pending' order by e.queue limit 1)
      union all
      select (select e.queue from pgsched.executions e where e.state = 'pending' and e.queue > q.queue order by e.queue limit 1)
        from q where q.queue is not null
    )
    select count(*)::integer into pending
      from (select 1 from q cross join lateral (
              select 1 from pgsched.executions e
               where e.state = 'pending' and e.queue = q.queue and e.tenant = t.name
               limit t.max_pending) x
             limit t.max_pending) y;
    pending_room := greatest(0, t.max_pending - pending);
  end if;
  if t.max_submits_per_second is not null then
    tokens := least(t.max_submits_per_second,
                    coalesce(t.submit_tokens, t.max_submits_per_second)
                      + t.max_submits_per_second * greatest(0, extract(epoch from now_at - coalesce(t.submit_tokens_at, now_at))));
    -- all or none: a batch larger than the bucket is admitted once the bucket is full, and leaves it
    -- in debt; partial: as many as there are whole tokens
    rate_room := case when not partial and tokens >= least(n, t.max_submits_per_second) then n
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
      greatest(1, ceil(((case when partial then 1 else least(n, t.max_submits_per_second) end) - (tokens - room))
                       / t.max_submits_per_second * 1000))::integer,
      format('tenant %s may submit at most %s jobs per second (quota maxSubmitsPerSecond)', quote_ident(t.name), t.max_submits_per_second);
  end if;
end
$$;
comment on function pgsched.admit_submits(text, integer, boolean) is 'Admission quotas: how many of n submits a tenant may make now (partial: as many as fit; else all or none); when not all, which quota refused the others, its value, a message and the milliseconds to wait.';

create or replace function pgsched.submit_job(
  type text,
  payload jsonb default '{}'::jsonb,
  queue text default 'default',
  priority integer default 0,
  run_at timestamptz default null,
  cron text default null,
  timezone text default 'UTC',
  every interval default null,
  max_attempts integer default 5,
  timeout_ms integer default 300000,
  idempotency_key text default null,
  tenant text default 'default',
  backoff_base_ms integer default 1000,
  backoff_max_ms integer default 3600000,
  misfire_policy text default 'fire_once',
  overlap_policy text default 'allow',
  start_at timestamptz default null,
  end_at timestamptz default null
) returns uuid
language plpgsql volatile as $$
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
      'max_attempts', submit_job.max_attempts, 'timeout_ms', submit_job.timeout_ms)::text, 'UTF8')), 'hex');
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
                            timeout_ms, idempotency_key, created_by)
  values (job_id, submit_job.tenant, submit_job.type, submit_job.queue, submit_job.priority, coalesce(submit_job.payload, '{}'::jsonb),
          submit_job.max_attempts, submit_job.backoff_base_ms, submit_job.backoff_max_ms, submit_job.timeout_ms,
          submit_job.idempotency_key, 'sql:' || current_user);

  if kind in ('now', 'at') then
    insert into pgsched.executions (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms, tenant)
    values (job_id, submit_job.queue, submit_job.type, submit_job.priority, coalesce(submit_job.run_at, now()),
            coalesce(submit_job.run_at, now()), submit_job.max_attempts, submit_job.timeout_ms, submit_job.tenant);
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
$$;

comment on function pgsched.submit_job is 'Submits a job from SQL inside the caller''s transaction; returns its id. Arguments mirror the REST and TypeScript submit (snake_case). A cron expression is checked by pgsched.cron_problem (the client''s rules and messages); its first fire time is computed by the dispatcher. Refused with SQLSTATE 53400 when the tenant is over an admission quota (pgsched.tenants).';
