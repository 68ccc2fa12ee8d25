-- pgsched.submit_job takes what the REST and TypeScript submits take since migrations 0013 and 0018:
-- concurrency_key (jobs with one key in a queue with a key limit run at most that many at once) and
-- start_deadline_ms (not started that long after its time, an execution expires). Both are part of
-- the idempotency request hash. The old signature is dropped (a second one with more defaulted
-- arguments would make every call ambiguous).

drop function pgsched.submit_job(text, jsonb, text, integer, timestamptz, text, text, interval, integer, integer, text, text,
                                 integer, integer, text, text, timestamptz, timestamptz);

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
  end_at timestamptz default null,
  concurrency_key text default null,
  start_deadline_ms integer default null
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
    insert into pgsched.executions (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms, tenant,
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
$$;

comment on function pgsched.submit_job is 'Submits a job from SQL inside the caller''s transaction; returns its id. Arguments mirror the REST and TypeScript submit (snake_case). A cron expression is checked by pgsched.cron_problem (the client''s rules and messages); its first fire time is computed by the dispatcher. Refused with SQLSTATE 53400 when the tenant is over an admission quota (pgsched.tenants).';
