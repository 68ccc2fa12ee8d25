-- The wake-up notification also names the highest priority among the new
-- pending executions, so a worker holding claimed work of lower priority
-- fetches the new work before starting more of its own.
create or replace function pgsched.executions_notify() returns trigger
language plpgsql as $$
declare
  info record;
begin
  select array_agg(distinct queue) as queues,
         greatest(0, floor(extract(epoch from (min(run_at) - now())) * 1000))::bigint as delay_ms,
         max(priority) as priority
    into info
    from new_rows
   where state = 'pending';
  if info.queues is not null then
    perform pg_notify('pgsched_executions',
                      json_build_object('queues', info.queues, 'delayMs', info.delay_ms, 'priority', info.priority)::text);
  end if;
  return null;
end
$$;
