-- Wake-ups for the workers meant to claim, not for every waiting worker. Every
-- worker LISTENs on the same channel, so a notification woke every waiting
-- worker and each of them claimed: at a trickle (one job per submit) all but
-- one of those claims found nothing. The notification now names, for each
-- (queue, type) among the new due executions, as many waiting workers as it
-- has new executions: workers that serve both and whose min_priority is at or
-- below the work's priority; first those seen in the last 15 s (a worker's
-- heartbeat refreshes workers.last_seen_at every 5 s by default, so a worker
-- that died is passed over once it misses three), then idle ones before those
-- holding work, then the one listed longest. Workers ignore a notification
-- that names others. With more than 64 workers to name, it names none and
-- wakes all.
--
-- A named worker that cannot claim (it died less than 15 s ago) leaves the work
-- to the next poll of any worker, as a notification lost with a dropped
-- connection does.

alter table pgsched.waiting_workers add column types text[];
comment on column pgsched.waiting_workers.types is 'Job types the worker claims (null: any); a submit names a waiting worker that serves the new work''s queue and type.';

create or replace function pgsched.executions_notify() returns trigger
language plpgsql as $$
declare
  info record;
  named uuid[];
begin
  select array_agg(distinct queue) filter (where run_at <= now()) as due_queues,
         max(priority) filter (where run_at <= now()) as due_priority,
         array_agg(distinct queue) filter (where run_at > now()) as later_queues,
         floor(extract(epoch from (min(run_at) filter (where run_at > now()) - now())) * 1000)::bigint as later_ms
    into info
    from new_rows
   where state = 'pending';
  if info.due_queues is not null then
    perform pg_advisory_xact_lock_shared(pgsched.wait_lock_key());
    select array_agg(distinct pick.worker_id)
      into named
      from (select n.queue, n.type, max(n.priority) as priority, count(*) as n
              from new_rows n
             where n.state = 'pending' and n.run_at <= now()
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
$$;
