-- A raised rate limit applies to the next claim. The setters kept the start slots taken under the
-- old limit (pgsched.queues.next_start_at, pgsched.queue_key_slots.next_start_at): raised from 1 a
-- minute to 100 a second, a queue started nothing more until its old next slot, up to a minute (a day,
-- with a daily limit) later. Now a slot further away than one spacing of the new limit (its period /
-- limit, 7 % wider, as the claims space them: src/db/queries/claim-limited.ts RATE_SPACING) is moved
-- to that; a lowered limit keeps its slot and spaces the ones after it.

create or replace function pgsched.set_queue_rate_limit(queue text, rate_limit integer, rate_period_ms integer) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, rate_limit, rate_period_ms, updated_at)
  values (set_queue_rate_limit.queue, set_queue_rate_limit.rate_limit, set_queue_rate_limit.rate_period_ms, now())
  on conflict (name) do update set rate_limit = excluded.rate_limit, rate_period_ms = excluded.rate_period_ms, updated_at = now(),
    -- the next start slot, spaced by the limit in force when it was taken: no later than one
    -- spacing of the new limit from now (a raised limit applies to the next claim; a lowered one
    -- leaves it, and spaces the slots after it)
    next_start_at = case when q.next_start_at is null or excluded.rate_limit is null then q.next_start_at
                         else least(q.next_start_at,
                                    now() + excluded.rate_period_ms::float8 / excluded.rate_limit * 1.07 * interval '1 millisecond') end
  returning (xmax = 0) into created;
  if created then
    perform pgsched.queue_unknown_notice(set_queue_rate_limit.queue, 'rate limit set');
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_rate_limit.queue), 'delayMs', 0)::text);
end
$$;

create or replace function pgsched.set_queue_key_rate_limit(queue text, key_rate_limit integer, key_rate_period_ms integer) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, key_rate_limit, key_rate_period_ms, updated_at)
  values (set_queue_key_rate_limit.queue, set_queue_key_rate_limit.key_rate_limit, set_queue_key_rate_limit.key_rate_period_ms, now())
  on conflict (name) do update set key_rate_limit = excluded.key_rate_limit, key_rate_period_ms = excluded.key_rate_period_ms, updated_at = now()
  returning (xmax = 0) into created;
  if created then
    perform pgsched.queue_unknown_notice(set_queue_key_rate_limit.queue, 'key rate limit set');
  end if;
  if set_queue_key_rate_limit.key_rate_limit is null then
    delete from pgsched.queue_key_slots s where s.queue = set_queue_key_rate_limit.queue;
  else
    -- each key's next start slot no later than one spacing of the new limit from now (as above)
    update pgsched.queue_key_slots s
       set next_start_at = now() + set_queue_key_rate_limit.key_rate_period_ms::float8 / set_queue_key_rate_limit.key_rate_limit
                                   * 1.07 * interval '1 millisecond'
     where s.queue = set_queue_key_rate_limit.queue
       and s.next_start_at > now() + set_queue_key_rate_limit.key_rate_period_ms::float8 / set_queue_key_rate_limit.key_rate_limit
                                     * 1.07 * interval '1 millisecond';
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_key_rate_limit.queue), 'delayMs', 0)::text);
end
$$;
