-- One validation for cron expressions: pgsched.cron_problem is the grammar of
-- src/core/cron-syntax.ts (the client's and the API's check, run before cron-parser), rule for
-- rule and message for message; test/db/cron-validation.test.ts compares the two on a corpus and
-- a seeded fuzz. pgsched.submit_job now refuses every expression the client refuses, instead of
-- storing it for the dispatcher to stop. Only ASCII is case-folded or taken as whitespace, as in
-- TypeScript, so the answers never depend on the database's locale.

create function pgsched.cron_problem(expression text) returns text
language plpgsql immutable strict parallel safe as $$
declare
  ws constant text := ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13);
  lower_ascii constant text := 'abcdefghijklmnopqrstuvwxyz';
  upper_ascii constant text := 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  -- second, minute, hour, day-of-month, month, day-of-week; five fields use 2-6
  field_names constant text[] := array['second', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
  field_mins constant int[] := array[0, 0, 0, 1, 1, 0];
  field_maxs constant int[] := array[59, 59, 23, 31, 12, 7];
  field_values constant text[] := array['0-59', '0-59', '0-23', '1-31', '1-12 or JAN-DEC', '0-7 or SUN-SAT'];
  month_names constant text[] := array['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
  day_names constant text[] := array['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
  month_days constant int[] := array[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];  -- February has its 29th in leap years
  trimmed text;
  fields text[];
  field_count int;
  at text;
  field text;
  spec int;
  fname text;
  items text[];
  item text;
  u text;
  rest text;
  m text[];
  tokens text[];
  token text;
  vals int[];
  v int;
  lo int;
  hi int;
  step int;
  has_last boolean := false;
  dom_vals int[] := '{}';
  month_vals int[] := '{}';
  dow_vals int[] := '{}';
  dow_last int[] := '{}';    -- weekdays n of the nL items
  nth int := 0;              -- k of n#k
  both_days boolean;
  month_length int;
  weekday int;
  dom_match boolean;
  dow_match boolean;
begin
  trimmed := btrim(expression, ws);
  if length(trimmed) > 1024 then  -- cron-parser refuses longer expressions
    return 'cron expression is ' || length(trimmed) || ' characters long; at most 1024 are accepted';
  end if;
  if left(trimmed, 1) = '@' then
    if translate(trimmed, upper_ascii, lower_ascii) in ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') then
      return null;
    end if;
    return 'cron alias "' || trimmed || '" is not supported; use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or five fields';
  end if;
  fields := case when trimmed = '' then '{}'::text[] else regexp_split_to_array(trimmed, '[ \t\n\r\f\v]+') end;
  field_count := coalesce(array_length(fields, 1), 0);
  if field_count not in (5, 6) then
    return 'cron expression "' || expression || '" must have 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got ' || field_count;
  end if;
  at := 'cron expression "' || expression || '": ';

  for i in 1 .. field_count loop
    field := fields[i];
    spec := i + 6 - field_count;
    fname := field_names[spec];
    if field ~* '(^|[,/-])H(?![a-z])' then
      return at || '"H" in the ' || fname || ' field is not supported (it picks a random value); name the value';
    end if;
    token := substring(field from '[^0-9A-Za-z*?,/#-]');
    if token is not null then
      return at || 'character "' || token || '" in the ' || fname || ' field is not allowed';
    end if;
    items := string_to_array(field, ',');
    foreach item in array items loop
      u := translate(item, lower_ascii, upper_ascii);
      if item = '' then
        return at || 'the ' || fname || ' field has an empty list item';
      end if;
      if spec = 4 and u = 'L' then
        has_last := true;
        continue;
      end if;
      if spec = 6 and u ~ '^([0-7]|SUN|MON|TUE|WED|THU|FRI|SAT)L$' then
        -- nL: the last such weekday of the month
        token := left(u, length(u) - 1);
        dow_last := dow_last || (coalesce(array_position(day_names, token) - 1, case when token ~ '^[0-7]$' then token::int end) % 7);
        continue;
      end if;
      if strpos(u, '#') > 0 then
        if spec <> 6 then
          return at || '"#" in the ' || fname || ' field is not supported (only the day-of-week field takes n#k)';
        end if;
        m := regexp_match(item, '^([0-9]+|[A-Za-z]+)#([0-9]+)$');
        if m is null then
          return at || '"' || item || '" in the day-of-week field is not n#k (a day 0-7 or SUN-SAT, then #, then 1-5)';
        end if;
        tokens := array[m[1]];
      elsif true then
        rest := case spec when 5 then regexp_replace(u, 'JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC', '', 'g')
                          when 6 then regexp_replace(u, 'SUN|MON|TUE|WED|THU|FRI|SAT', '', 'g')
                          else u end;
        if strpos(rest, 'W') > 0 then
          return at || '"W" in the ' || fname || ' field is not supported (nearest weekday)';
        end if;
        if strpos(rest, 'L') > 0 then
          if spec = 4 then
            return at || '"' || item || '" in the day-of-month field: L (the last day of the month) takes no number, range or step';
          elsif spec = 6 then
            return at || '"' || item || '" in the day-of-week field: L takes one day before it and nothing else (5L or FRIL: the last Friday of the month)';
          end if;
          return at || '"L" in the ' || fname || ' field is not supported (only day-of-month L and day-of-week nL)';
        end if;
        m := regexp_match(item, '^(?:([*?])|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:/([0-9]+))?$');
        if m is null then
          return at || '"' || item || '" in the ' || fname || ' field is not a value, a range a-b or a step /n';
        end if;
        tokens := array_remove(array[m[2], m[3]], null);
      end if;

      -- the values as written: digits in range, or a name of the field (case-insensitive)
      vals := '{}';
      foreach token in array tokens loop
        if token ~ '^[0-9]+$' then
          v := case when length(ltrim(token, '0')) > 4 then 99999 else coalesce(nullif(ltrim(token, '0'), ''), '0')::int end;
          if v < field_mins[spec] or v > field_maxs[spec] then
            return at || 'value ' || token || ' in the ' || fname || ' field is out of range (' || field_mins[spec] || '-' || field_maxs[spec] || ')';
          end if;
        else
          v := array_position(case spec when 5 then month_names when 6 then day_names else '{}'::text[] end,
                              translate(token, lower_ascii, upper_ascii)) - 1 + field_mins[spec];
          if v is null then
            return at || '"' || token || '" in the ' || fname || ' field is not a value (' || field_values[spec] || ')';
          end if;
        end if;
        vals := vals || v;
      end loop;

      if strpos(u, '#') > 0 then
        v := case when length(ltrim(m[2], '0')) > 4 then 99999 else coalesce(nullif(ltrim(m[2], '0'), ''), '0')::int end;
        if v < 1 or v > 5 then
          return at || '"' || item || '" in the day-of-week field: k in n#k must be 1-5';
        end if;
        if array_length(items, 1) > 1 then
          return at || '"' || item || '" in the day-of-week field: n#k must be the field''s only item';
        end if;
        nth := v;
        dow_vals := dow_vals || (vals[1] % 7);
        continue;
      end if;

      lo := field_mins[spec];
      hi := field_maxs[spec];
      if m[1] is null then
        lo := vals[1];
        hi := case when m[3] is not null then vals[2] when m[4] is null then vals[1] else field_maxs[spec] end;
        if lo > hi then
          return at || 'range ' || m[2] || '-' || m[3] || ' in the ' || fname || ' field starts after it ends';
        end if;
      end if;
      step := 1;
      if m[4] is not null then
        step := case when length(ltrim(m[4], '0')) > 4 then 99999 else coalesce(nullif(ltrim(m[4], '0'), ''), '0')::int end;
        if step = 0 then
          return at || 'step ' || m[4] || ' in the ' || fname || ' field must be at least 1';
        end if;
        if step > field_maxs[spec] then
          return at || 'step ' || m[4] || ' in the ' || fname || ' field is larger than its largest value (' || field_maxs[spec] || ')';
        end if;
      end if;
      for x in lo .. hi by step loop
        if spec = 4 then
          dom_vals := dom_vals || x;
        elsif spec = 5 then
          month_vals := month_vals || x;
        elsif spec = 6 then
          dow_vals := dow_vals || (x % 7);
        end if;
      end loop;
    end loop;
  end loop;

  -- Never fires: no day of any year matches the day fields (Vixie cron: both must match when either
  -- field starts with * or ?, otherwise either may). Whether a day matches depends only on its
  -- month, the month's length, the weekday of the month's first day and the day itself, and every
  -- combination of those recurs (February with 28 and with 29 days), so trying each is exact.
  both_days := fields[field_count - 2] ~ '^[*?]' or fields[field_count] ~ '^[*?]';
  foreach v in array month_vals loop
    foreach month_length in array case when v = 2 then array[28, 29] else array[month_days[v]] end loop
      for first_weekday in 0 .. 6 loop
        for day in 1 .. month_length loop
          weekday := (first_weekday + day - 1) % 7;
          dom_match := day = any(dom_vals) or (has_last and day = month_length);
          dow_match := case when nth > 0 then weekday = any(dow_vals) and (day + 6) / 7 = nth
                            else weekday = any(dow_vals) or (weekday = any(dow_last) and day + 7 > month_length) end;
          if (both_days and dom_match and dow_match) or (not both_days and (dom_match or dow_match)) then
            return null;
          end if;
        end loop;
      end loop;
    end loop;
  end loop;
  return 'cron expression "' || expression || '" never fires: no day matches its day-of-month, month and day-of-week fields together';
end
$$;

comment on function pgsched.cron_problem(text) is 'Why a cron expression is refused (a message naming the field and the problem), or null when it is valid (null for null). The grammar of src/core/cron-syntax.ts, with the same messages; pgsched.submit_job raises it with errcode 22023.';

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

  insert into pgsched.jobs (id, tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                            timeout_ms, idempotency_key, created_by)
  values (job_id, submit_job.tenant, submit_job.type, submit_job.queue, submit_job.priority, coalesce(submit_job.payload, '{}'::jsonb),
          submit_job.max_attempts, submit_job.backoff_base_ms, submit_job.backoff_max_ms, submit_job.timeout_ms,
          submit_job.idempotency_key, 'sql:' || current_user);

  if kind in ('now', 'at') then
    insert into pgsched.executions (job_id, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms)
    values (job_id, submit_job.queue, submit_job.type, submit_job.priority, coalesce(submit_job.run_at, now()),
            coalesce(submit_job.run_at, now()), submit_job.max_attempts, submit_job.timeout_ms);
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

comment on function pgsched.submit_job is 'Submits a job from SQL inside the caller''s transaction; returns its id. Arguments mirror the REST and TypeScript submit (snake_case). A cron expression is checked by pgsched.cron_problem (the client''s rules and messages); its first fire time is computed by the dispatcher.';
