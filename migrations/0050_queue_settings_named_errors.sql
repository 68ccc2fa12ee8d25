-- The queue functions of SQL (pgsched.pause_queue, pgsched.set_queue_concurrency_limit, …) name the
-- argument they refuse and the values it takes, as pgsched.submit_job does, instead of a table
-- constraint's error that dumps the row ("Failing row contains …") or a not-null violation. A trigger
-- on the settings' columns checks every write of them, whichever function or statement makes it; the
-- claims' own updates of a queue's row (its running bound, its next start) set none of them and do
-- not fire it. The table constraints stay.

create function pgsched.queue_settings_check() returns trigger
language plpgsql as $$
begin
  if new.name is null or length(new.name) > 64 or new.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' then
    raise exception 'queue must be 1-64 characters: letters, digits and _ . : / - (not first), got %', coalesce(quote_literal(new.name), 'null')
      using errcode = '22023';
  end if;
  if new.concurrency_limit is not null and new.concurrency_limit not between 1 and 100000 then
    raise exception 'concurrency_limit must be an integer from 1 to 100000, or null for no limit, got %', new.concurrency_limit using errcode = '22023';
  end if;
  if new.key_concurrency_limit is not null and new.key_concurrency_limit not between 1 and 100000 then
    raise exception 'key_concurrency_limit must be an integer from 1 to 100000, or null for no limit, got %', new.key_concurrency_limit
      using errcode = '22023';
  end if;
  if new.rate_limit is not null and new.rate_limit not between 1 and 1000000 then
    raise exception 'rate_limit must be an integer from 1 to 1000000, or null for no rate limit, got %', new.rate_limit using errcode = '22023';
  end if;
  if new.rate_period_ms is not null and new.rate_period_ms not between 1 and 86400000 then
    raise exception 'rate_period_ms must be an integer from 1 to 86400000, got %', new.rate_period_ms using errcode = '22023';
  end if;
  if (new.rate_limit is null) <> (new.rate_period_ms is null) then
    raise exception 'rate_limit and rate_period_ms are given together (both null: no rate limit), got % and %',
      coalesce(new.rate_limit::text, 'null'), coalesce(new.rate_period_ms::text, 'null') using errcode = '22023';
  end if;
  if new.key_rate_limit is not null and new.key_rate_limit not between 1 and 1000000 then
    raise exception 'key_rate_limit must be an integer from 1 to 1000000, or null for no rate limit per key, got %', new.key_rate_limit
      using errcode = '22023';
  end if;
  if new.key_rate_period_ms is not null and new.key_rate_period_ms not between 1 and 86400000 then
    raise exception 'key_rate_period_ms must be an integer from 1 to 86400000, got %', new.key_rate_period_ms using errcode = '22023';
  end if;
  if (new.key_rate_limit is null) <> (new.key_rate_period_ms is null) then
    raise exception 'key_rate_limit and key_rate_period_ms are given together (both null: no rate limit per key), got % and %',
      coalesce(new.key_rate_limit::text, 'null'), coalesce(new.key_rate_period_ms::text, 'null') using errcode = '22023';
  end if;
  return new;
end
$$;
comment on function pgsched.queue_settings_check() is 'Refuses a queue setting out of range with a message naming it (trigger queues_settings_check).';

create trigger queues_settings_check
  before insert or update of name, concurrency_limit, key_concurrency_limit, rate_limit, rate_period_ms, key_rate_limit, key_rate_period_ms
  on pgsched.queues
  for each row execute function pgsched.queue_settings_check();
