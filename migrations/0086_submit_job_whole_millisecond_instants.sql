-- pgsched.submit_job keeps whole milliseconds, as the client and the API do: a fraction of a
-- millisecond of run_at or start_at goes up to the next millisecond, one of end_at down, and a run_at
-- or start_at that would go up past the last instant taken (9999-12-31T23:59:59.999Z) is refused with
-- 22023, as the client refuses it. The function stored them with their microseconds: the job view
-- showed them cut down to the millisecond (a start before its real time), and one in the last
-- millisecond of 9999 came up as a year-10000 next run that no listing showed. Rounded before the
-- request's hash is taken, so two requests that differ only below the millisecond are the same
-- request, as from the client. The rest of the function is as migration 0085 left it.

CREATE OR REPLACE FUNCTION pgsched.submit_job(type text, payload jsonb DEFAULT '{}'::jsonb, queue text DEFAULT 'default'::text, priority integer DEFAULT 0, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, cron text DEFAULT NULL::text, timezone text DEFAULT 'UTC'::text, every interval DEFAULT NULL::interval, max_attempts integer DEFAULT 5, timeout_ms integer DEFAULT 300000, idempotency_key text DEFAULT NULL::text, tenant text DEFAULT 'default'::text, backoff_base_ms integer DEFAULT 1000, backoff_max_ms integer DEFAULT NULL::integer, misfire_policy text DEFAULT 'fire_once'::text, overlap_policy text DEFAULT 'allow'::text, start_at timestamp with time zone DEFAULT NULL::timestamp with time zone, end_at timestamp with time zone DEFAULT NULL::timestamp with time zone, concurrency_key text DEFAULT NULL::text, start_deadline_ms integer DEFAULT NULL::integer)
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
  job_id uuid := pgsched.uuid_v7();
  admission record;
  kind text;
  interval_ms bigint;
  every_ms numeric;
  request_hash text;
  existing record;
  cron_message text;
begin
  -- no max given (or null): the client's and the API's default, at least the base. Before the
  -- request hash is computed, so a repeat of a submit that gave 3600000, or relied on the default
  -- when it was 3600000, hashes as it did then.
  submit_job.backoff_max_ms := coalesce(submit_job.backoff_max_ms, greatest(3600000, submit_job.backoff_base_ms));
  if submit_job.type is null or submit_job.type !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' then
    raise exception 'type must be 1-128 characters: letters, digits and _ . : / - (not first), got %', coalesce(quote_literal(submit_job.type), 'null')
      using errcode = '22023';
  end if;
  if submit_job.tenant is null or length(submit_job.tenant) > 128 or submit_job.tenant !~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]*$' then
    raise exception 'tenant must be 1-128 characters: letters, digits and _ . : @ - (not first), got %', coalesce(quote_literal(submit_job.tenant), 'null')
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
  if submit_job.idempotency_key is not null and length(submit_job.idempotency_key) not between 1 and 255 then
    raise exception 'idempotency_key must be 1-255 characters, got % characters', length(submit_job.idempotency_key) using errcode = '22023';
  end if;
  if submit_job.payload is not null and octet_length(submit_job.payload::text) > 1048576 then
    raise exception 'payload must be at most 1048576 bytes as JSON text, got %', octet_length(submit_job.payload::text) using errcode = '22023';
  end if;
  if submit_job.payload is not null
     and jsonb_path_exists(submit_job.payload, 'strict $.**{64} ? (@.type() == "array" || @.type() == "object")') then
    raise exception 'payload must nest at most 64 levels deep' using errcode = '22023';
  end if;
  if submit_job.cron is null and upper(coalesce(submit_job.timezone, 'UTC')) <> 'UTC' then
    raise exception 'timezone applies only to cron schedules, got % without cron', quote_literal(submit_job.timezone) using errcode = '22023';
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
  -- as the client refuses them: a policy of a one-time job would be ignored (its defaults pass)
  if submit_job.cron is null and submit_job.every is null and submit_job.misfire_policy <> 'fire_once' then
    raise exception 'misfire_policy applies only to recurring schedules (cron or every), got %', quote_literal(submit_job.misfire_policy)
      using errcode = '22023';
  end if;
  if submit_job.cron is null and submit_job.every is null and submit_job.overlap_policy <> 'allow' then
    raise exception 'overlap_policy applies only to recurring schedules (cron or every), got %', quote_literal(submit_job.overlap_policy)
      using errcode = '22023';
  end if;
  -- instants outside the years 0001 to 9999 (UTC): PostgreSQL writes them as text (BC, five-digit
  -- years) that no ISO-8601 reader takes back, so the API could not show the job
  if submit_job.run_at is not null and not pgsched.instant_in_range(submit_job.run_at) then
    raise exception 'run_at must be within the years 0001 to 9999 (UTC), got %', submit_job.run_at using errcode = '22023';
  end if;
  if submit_job.start_at is not null and not pgsched.instant_in_range(submit_job.start_at) then
    raise exception 'start_at must be within the years 0001 to 9999 (UTC), got %', submit_job.start_at using errcode = '22023';
  end if;
  if submit_job.end_at is not null and not pgsched.instant_in_range(submit_job.end_at) then
    raise exception 'end_at must be within the years 0001 to 9999 (UTC), got %', submit_job.end_at using errcode = '22023';
  end if;
  -- whole milliseconds, as the client keeps them: a start goes up to the next one, an end down
  if submit_job.run_at is not null then
    submit_job.run_at := date_trunc('milliseconds', submit_job.run_at + interval '999 microseconds');
    if not pgsched.instant_in_range(submit_job.run_at) then
      raise exception 'run_at rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)' using errcode = '22023';
    end if;
  end if;
  if submit_job.start_at is not null then
    submit_job.start_at := date_trunc('milliseconds', submit_job.start_at + interval '999 microseconds');
    if not pgsched.instant_in_range(submit_job.start_at) then
      raise exception 'start_at rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)' using errcode = '22023';
    end if;
  end if;
  if submit_job.end_at is not null then
    submit_job.end_at := date_trunc('milliseconds', submit_job.end_at);
  end if;
  if submit_job.start_at is not null and submit_job.end_at is not null and submit_job.end_at <= submit_job.start_at then
    raise exception 'end_at must be after start_at, got start_at % and end_at %', submit_job.start_at, submit_job.end_at using errcode = '22023';
  end if;
  -- named by the function rather than by a table constraint's "Failing row contains" text
  if submit_job.backoff_base_ms is null or submit_job.backoff_base_ms not between 0 and 86400000 then
    raise exception 'backoff_base_ms must be an integer from 0 to 86400000, got %', submit_job.backoff_base_ms using errcode = '22023';
  end if;
  if submit_job.backoff_max_ms is null or submit_job.backoff_max_ms not between submit_job.backoff_base_ms and 604800000 then
    raise exception 'backoff_max_ms must be an integer from backoff_base_ms (%) to 604800000, got %', submit_job.backoff_base_ms, submit_job.backoff_max_ms
      using errcode = '22023';
  end if;
  if submit_job.misfire_policy is null or submit_job.misfire_policy not in ('fire_once', 'skip', 'fire_all') then
    raise exception 'misfire_policy must be one of fire_once, skip, fire_all, got %', coalesce(quote_literal(submit_job.misfire_policy), 'null')
      using errcode = '22023';
  end if;
  if submit_job.overlap_policy is null or submit_job.overlap_policy not in ('allow', 'skip', 'queue') then
    raise exception 'overlap_policy must be one of allow, skip, queue, got %', coalesce(quote_literal(submit_job.overlap_policy), 'null')
      using errcode = '22023';
  end if;
  if not pgsched.time_zone_known(submit_job.timezone) then
    raise exception 'timezone % is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted',
      coalesce(quote_literal(submit_job.timezone), 'null') using errcode = '22023';
  end if;

  if submit_job.cron is not null then
    kind := 'cron';
    cron_message := pgsched.cron_problem(submit_job.cron);  -- the grammar of core/cron-syntax.ts, same messages
    if cron_message is not null then
      raise exception '%', cron_message using errcode = '22023';
    end if;
  elsif submit_job.every is not null then
    kind := 'interval';
    -- months and years have no fixed length (extract(epoch) would count 30 and 365.25 days)
    if extract(year from submit_job.every) <> 0 or extract(month from submit_job.every) <> 0 then
      raise exception 'every must be given in days, hours, minutes and seconds (no years or months), got %', submit_job.every using errcode = '22023';
    end if;
    every_ms := extract(epoch from submit_job.every) * 1000;  -- numeric: exact to the microsecond
    if every_ms not between 1000 and 31622400000 then
      raise exception 'every must be from 1 second to 366 days, got %', submit_job.every using errcode = '22023';
    end if;
    -- an interval holds microseconds; the schedule keeps milliseconds, which cut a fraction off
    if every_ms <> trunc(every_ms) then
      raise exception 'every must be a whole number of milliseconds (intervals are whole milliseconds), got %', submit_job.every
        using errcode = '22023';
    end if;
    interval_ms := every_ms;
  elsif submit_job.run_at is not null then
    kind := 'at';
  else
    kind := 'now';
  end if;

  if submit_job.idempotency_key is not null then
    -- the request as the same text whatever the session's TimeZone, DateStyle and IntervalStyle: the
    -- instants in UTC, the interval as its milliseconds (as the schedule keeps it)
    request_hash := 'sql3:' || encode(sha256(convert_to(jsonb_build_object(
      'type', submit_job.type, 'payload', submit_job.payload, 'queue', submit_job.queue, 'priority', submit_job.priority,
      'run_at', to_char(submit_job.run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), 'cron', submit_job.cron,
      'timezone', submit_job.timezone, 'every_ms', interval_ms,
      'max_attempts', submit_job.max_attempts, 'timeout_ms', submit_job.timeout_ms,
      'concurrency_key', submit_job.concurrency_key, 'start_deadline_ms', submit_job.start_deadline_ms,
      'backoff_base_ms', submit_job.backoff_base_ms, 'backoff_max_ms', submit_job.backoff_max_ms,
      'misfire_policy', submit_job.misfire_policy, 'overlap_policy', submit_job.overlap_policy,
      'start_at', to_char(submit_job.start_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
      'end_at', to_char(submit_job.end_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'))::text, 'UTF8')), 'hex');
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
      -- a key stored by migrations 0048 to 0058, by the hash of the request's text in that session's
      -- settings: the same request matches it in a session with the same settings
      if starts_with(existing.request_hash, 'sql2:') and existing.request_hash = 'sql2:' || encode(sha256(convert_to(jsonb_build_object(
           'type', submit_job.type, 'payload', submit_job.payload, 'queue', submit_job.queue, 'priority', submit_job.priority,
           'run_at', submit_job.run_at, 'cron', submit_job.cron, 'timezone', submit_job.timezone, 'every', submit_job.every::text,
           'max_attempts', submit_job.max_attempts, 'timeout_ms', submit_job.timeout_ms,
           'concurrency_key', submit_job.concurrency_key, 'start_deadline_ms', submit_job.start_deadline_ms,
           'backoff_base_ms', submit_job.backoff_base_ms, 'backoff_max_ms', submit_job.backoff_max_ms,
           'misfire_policy', submit_job.misfire_policy, 'overlap_policy', submit_job.overlap_policy,
           'start_at', submit_job.start_at, 'end_at', submit_job.end_at)::text, 'UTF8')), 'hex') then
        return existing.job_id;
      end if;
      -- a key stored before migration 0048, by the hash of the fields it covered then
      if starts_with(existing.request_hash, 'sql:') and existing.request_hash = 'sql:' || encode(sha256(convert_to(jsonb_build_object(
           'type', submit_job.type, 'payload', submit_job.payload, 'queue', submit_job.queue, 'priority', submit_job.priority,
           'run_at', submit_job.run_at, 'cron', submit_job.cron, 'timezone', submit_job.timezone, 'every', submit_job.every::text,
           'max_attempts', submit_job.max_attempts, 'timeout_ms', submit_job.timeout_ms,
           'concurrency_key', submit_job.concurrency_key, 'start_deadline_ms', submit_job.start_deadline_ms)::text, 'UTF8')), 'hex') then
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
                            timeout_ms, idempotency_key, concurrency_key, start_deadline_ms, created_by, created_at)
  values (job_id, submit_job.tenant, submit_job.type, submit_job.queue, submit_job.priority, coalesce(submit_job.payload, '{}'::jsonb),
          submit_job.max_attempts, submit_job.backoff_base_ms, submit_job.backoff_max_ms, submit_job.timeout_ms,
          submit_job.idempotency_key, submit_job.concurrency_key, submit_job.start_deadline_ms, 'sql:' || current_user,
          case when kind in ('cron', 'interval') then greatest(now(), statement_timestamp()) else now() end);

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
                                  misfire_policy, overlap_policy, created_at)
    values (job_id, kind, btrim(submit_job.cron, E' \t\n\v\f\r'), submit_job.timezone, interval_ms, submit_job.start_at, submit_job.end_at,
            case when kind = 'cron' then '-infinity'::timestamptz   -- the dispatcher computes the first cron fire time
                 -- none when the window ends before the first fire time: nothing to come
                 when greatest(coalesce(submit_job.start_at, now()), now(), statement_timestamp()) <= coalesce(submit_job.end_at, 'infinity')
                 then greatest(coalesce(submit_job.start_at, now()), now(), statement_timestamp()) end,
            submit_job.misfire_policy, submit_job.overlap_policy, greatest(now(), statement_timestamp()));
  end if;
  return job_id;
end
$function$;
