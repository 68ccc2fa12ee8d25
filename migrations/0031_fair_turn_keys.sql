-- Fair share by turn keys: each execution of a fair queue carries its place in the fair order, so a
-- fair claim reads the due work in that order from one index, as the ordinary claim does, instead
-- of ranking the first due executions of every tenant in every claim (migration 0016).
--
-- The order (start-time fair queuing): within a priority, each tenant's due executions take turns.
-- An execution's key (due.fair_key) is its tenant's previous key at that queue and priority plus
-- 1 / the tenant's weight; a tenant with nothing due there starts at the head of the queue
-- (pgsched.fair_head: where the claims are at that priority), so work submitted behind another
-- tenant's backlog of any size is next to that backlog's head, not behind it. Claims take priority
-- desc, fair_key, run_at.
--
-- fair_key is null outside fair queues; 'infinity' marks an execution of a fair queue that waits
-- for its key: one that comes due later than it was written (a future run_at, a retry after a
-- backoff, a recurring fire time), one handed back or retried, one written before the queue became
-- fair. pgsched.fair_keys_assign gives the due ones their keys, per tenant up to a bounded number of
-- turns keyed ahead, in turn:
-- a worker calls it before it claims from a fair queue when its last claim there took nothing or said
-- that some were waiting, and after a claim that came back short. The submits of the TypeScript
-- client and the REST API key their executions that are due at once as they write them.
alter table pgsched.due add column fair_key double precision;
comment on column pgsched.due.fair_key is 'Fair queues: the execution''s place in the fair order at its queue and priority (claims take priority desc, fair_key, run_at); ''infinity'' until a key is given (pgsched.fair_keys_assign); null outside fair queues.';

-- The fair claim, and the head of each priority.
create index due_fair_idx on pgsched.due (queue, priority desc, fair_key, run_at, execution_id) where fair_key < 'infinity';
-- A tenant's latest key at a priority.
create index due_fair_tenant_idx on pgsched.due (queue, tenant, priority, fair_key) where fair_key < 'infinity';
-- Executions waiting for their key: by tenant (the assignment takes turns between tenants), and by
-- time (whether any is due: each fair claim tells the worker).
create index due_fair_waiting_idx on pgsched.due (queue, tenant, priority desc, run_at) where fair_key = 'infinity';
create index due_fair_waiting_at_idx on pgsched.due (queue, run_at) where fair_key = 'infinity';

update pgsched.due d set fair_key = 'infinity' where d.queue in (select s.name from pgsched.queues s where s.fair_share);

-- Where the claims of a fair queue are, per priority: the highest key claimed, moved by the claims
-- themselves at most every 200 ms (a claim that finds it moved less than 200 ms ago leaves it). The head of the queue is the later of that and the lowest key pending: the
-- lowest pending alone could lag far behind, since executions nobody claims (of a type no worker
-- runs, or past their start deadline) keep their key, and a tenant new to the queue would start
-- there, ahead of every backlog.
create table pgsched.fair_clocks (
  queue text not null,
  priority smallint not null,
  fair_key double precision not null,
  updated_at timestamptz not null default now(),
  constraint fair_clocks_pkey primary key (queue, priority)
);
comment on table pgsched.fair_clocks is 'Fair queues: the highest turn key claimed at each priority, moved by claims at most every 200 ms (migration 0031).';

create function pgsched.fair_head(queue text, priority integer) returns double precision
language sql stable as $$
  select greatest(
    (select c.fair_key from pgsched.fair_clocks c where c.queue = fair_head.queue and c.priority = fair_head.priority),
    (select k.fair_key from pgsched.due k
      where k.queue = fair_head.queue and k.priority = fair_head.priority and k.fair_key < 'infinity'
      order by k.fair_key limit 1))
$$;
comment on function pgsched.fair_head(text, integer) is 'Where the claims of a fair queue are at a priority: the highest key claimed (fair_clocks), or the lowest key pending when later; null when neither exists. A tenant with nothing pending there takes its next turn from it.';

-- The first turn of a tenant's executions written now at a queue and priority: after its latest
-- pending turn there, and not before the head; 0 in a queue with no turn yet. `step` is 1 / its weight.
create function pgsched.fair_first_key(queue text, tenant text, priority integer, step double precision) returns double precision
language sql stable as $$
  select coalesce(greatest(
    (select k.fair_key from pgsched.due k
      where k.queue = fair_first_key.queue and k.tenant = fair_first_key.tenant and k.priority = fair_first_key.priority
        and k.fair_key < 'infinity'
      order by k.fair_key desc limit 1) + fair_first_key.step,
    pgsched.fair_head(fair_first_key.queue, fair_first_key.priority)), 0)
$$;
comment on function pgsched.fair_first_key(text, text, integer, double precision) is 'Fair queues: the turn a tenant''s next execution at a queue and priority takes (its latest pending turn there plus step = 1 / its weight, or the head when that is later). Used by the submits and pgsched.fair_keys_assign.';

create function pgsched.fair_keys_assign(queue text, per_tenant integer) returns integer
language plpgsql as $$
declare
  n integer;
begin
  -- one assignment per queue at a time (two would read the same latest keys and give a tenant's
  -- executions the same turns twice); a worker that finds one under way leaves it the work
  if not pg_try_advisory_xact_lock(hashtext('pgsched.fair_keys_assign'), hashtext(fair_keys_assign.queue)) then
    return 0;
  end if;
  with recursive tenants(tenant) as (
    (select w.tenant from pgsched.due w
      where w.queue = fair_keys_assign.queue and w.fair_key = 'infinity' order by w.tenant limit 1)
    union all
    select (select w.tenant from pgsched.due w
             where w.queue = fair_keys_assign.queue and w.fair_key = 'infinity' and w.tenant > t.tenant order by w.tenant limit 1)
      from tenants t where t.tenant is not null
  ),
  -- each tenant's room, at the priority of its first due execution waiting: per_tenant less its turns
  -- from the head (where the claims are) to its latest key there, so a tenant whose backlog waits
  -- is topped up as the claims take its turns, not keyed ever further ahead; and at least
  -- per_tenant / 100 a call, so that a tenant submitting more than its share, whose latest turn runs
  -- far ahead, still has its waiting executions placed (behind that backlog) as they come due
  top as (
    select t.tenant,
           (select w.priority from pgsched.due w
             where w.queue = fair_keys_assign.queue and w.fair_key = 'infinity' and w.tenant = t.tenant and w.run_at <= now()
             order by w.priority desc limit 1) as priority,
           coalesce((select tw.weight from pgsched.tenants tw where tw.name = t.tenant), 1)::float8 as weight
      from tenants t
     where t.tenant is not null
  ),
  room as (
    select p.tenant,
           least(per_tenant, greatest(ceil(per_tenant / 100.0), per_tenant - coalesce(1 + ceil(
             ((select k.fair_key from pgsched.due k
                where k.queue = fair_keys_assign.queue and k.tenant = p.tenant and k.priority = p.priority and k.fair_key < 'infinity'
                order by k.fair_key desc limit 1)
              - pgsched.fair_head(fair_keys_assign.queue, p.priority)) * p.weight), 0)))::int as n
      from top p
     where p.priority is not null
  ),
  -- each tenant's executions that are due and wait for a key, highest priority and then oldest
  -- first, as many as its room
  picked as (
    select c.* from room r cross join lateral (
      select w.execution_id, w.tenant, w.priority, w.run_at from pgsched.due w
       where w.queue = fair_keys_assign.queue and w.fair_key = 'infinity' and w.tenant = r.tenant and w.run_at <= now()
       order by w.priority desc, w.run_at limit r.n
         for update skip locked) c
     where r.n > 0
  ),
  -- per tenant and priority: the first key (after the tenant's latest, and not before the head)
  -- and the step between its turns (materialized: computed once per group, not once per row)
  start as materialized (
    select g.tenant, g.priority, g.step, pgsched.fair_first_key(fair_keys_assign.queue, g.tenant, g.priority, g.step) as first_key
      from (select p.tenant, p.priority, 1.0::float8 / coalesce(min(tw.weight), 1) as step
              from (select distinct tenant, priority from picked) p
              left join pgsched.tenants tw on tw.name = p.tenant
             group by p.tenant, p.priority) g
  ),
  keyed as (
    select p.execution_id, s.first_key + (row_number() over (partition by p.tenant, p.priority order by p.run_at, p.execution_id) - 1) * s.step as fair_key
      from picked p
      join start s on s.tenant = p.tenant and s.priority = p.priority
  )
  update pgsched.due d set fair_key = k.fair_key
    from keyed k
   where d.execution_id = k.execution_id;
  get diagnostics n = row_count;
  return n;
end
$$;
comment on function pgsched.fair_keys_assign(text, integer) is 'Gives the due executions of a fair queue that wait for their place in the fair order (fair_key = ''infinity'') their keys: per tenant, up to per_tenant turns keyed ahead, highest priority and then oldest first. Returns how many. Workers call it before a claim of a fair queue when their last claim there took nothing or found some waiting.';

-- Marks a queue's due executions for its setting: waiting for a key in a fair queue, none otherwise.
create function pgsched.fair_share_mark(queue text) returns integer
language plpgsql as $$
declare
  n integer;
begin
  -- one mark of a queue at a time, each reading after the one before committed: an update that read
  -- the executions before another mark changed them would wait for it, then lock every one it passes
  -- over (rechecking each), until it commits: the claims would skip them all that while
  perform pg_advisory_xact_lock(hashtext('pgsched.fair_share_mark'), hashtext(fair_share_mark.queue));
  if exists (select 1 from pgsched.queues s where s.name = fair_share_mark.queue and s.fair_share) then
    update pgsched.due d set fair_key = 'infinity' where d.queue = fair_share_mark.queue and d.fair_key is null;
  else
    update pgsched.due d set fair_key = null where d.queue = fair_share_mark.queue and d.fair_key is not null;
  end if;
  get diagnostics n = row_count;
  return n;
end
$$;
comment on function pgsched.fair_share_mark(text) is 'Marks the due executions of a queue for its fair share setting (waiting for a key when on, none when off); returns how many changed. The setters and the reaper call it after a change.';

-- A change of fair share does not mark the queue's due executions itself (marking takes their row
-- locks, which claims take before the settings row lock: the two would deadlock). It is marked
-- afterwards, in transactions of their own: by the TypeScript, REST and CLI setters at once, and by
-- the reaper when it first sees the change and again once every transaction that was open then has
-- ended: any of them may have written executions for the setting before, whatever its isolation level
-- or role (fair_waiting_for; src/db/queries/queues.ts fairShareSettle).
alter table pgsched.queues add column fair_changed_at timestamptz,
                           add column fair_waiting_for text[],
                           add column fair_settled_at timestamptz;
comment on column pgsched.queues.fair_changed_at is 'When fair share was last turned on or off (pgsched.set_queue_fair_share).';
comment on column pgsched.queues.fair_waiting_for is 'The transactions (virtual ids) open when a reaper first saw that change; the queue is marked again once they have all ended.';
comment on column pgsched.queues.fair_settled_at is 'When the due executions of the queue were marked after that change, once those transactions had ended.';

create or replace function pgsched.set_queue_fair_share(queue text, fair_share boolean) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, fair_share, updated_at, fair_changed_at)
  values (set_queue_fair_share.queue, set_queue_fair_share.fair_share, now(), now())
  on conflict (name) do update set fair_share = excluded.fair_share, updated_at = now(), fair_changed_at = now(),
                                   fair_waiting_for = null, fair_settled_at = null;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_fair_share.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_fair_share(text, boolean) is 'Turns fair share between tenants on or off for a queue. Its due executions are marked for the new setting (pgsched.fair_share_mark) by the reaper at its next pass and again once the transactions open then have ended, or at once by the TypeScript, REST and CLI setters.';

-- The virtual ids of the transactions open now, other than the caller's.
create function pgsched.open_transactions() returns text[]
language sql volatile as $$
  select coalesce(array_agg(l.virtualxid), '{}') from pg_locks l
   where l.locktype = 'virtualxid' and l.granted and l.pid <> pg_backend_pid()
$$;
comment on function pgsched.open_transactions() is 'The virtual transaction ids of the transactions open now, the caller''s aside.';

-- Whether any of these transactions is still open.
create function pgsched.any_open(transactions text[]) returns boolean
language sql volatile as $$
  select exists (select 1 from pg_locks l where l.locktype = 'virtualxid' and l.virtualxid = any(transactions))
$$;
comment on function pgsched.any_open(text[]) is 'Whether any of these transactions (virtual ids, pgsched.open_transactions) is still open.';


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
                                    concurrency_key, start_deadline, fair_key)
    values (job_id, submit_job.queue, submit_job.type, submit_job.priority, coalesce(submit_job.run_at, now()),
            coalesce(submit_job.run_at, now()), submit_job.max_attempts, submit_job.timeout_ms, submit_job.tenant,
            submit_job.concurrency_key, coalesce(submit_job.run_at, now()) + submit_job.start_deadline_ms * interval '1 millisecond',
            case when exists (select 1 from pgsched.queues s where s.name = submit_job.queue and s.fair_share)
                 then 'infinity'::float8 end);   -- a fair queue's execution waits for its turn key (migration 0031)
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

comment on column pgsched.queues.fair_share is 'Claims take turns between the tenants with due work at each priority (weighted by tenants.weight) instead of taking the oldest due work first: they read the due work by due.fair_key.';
