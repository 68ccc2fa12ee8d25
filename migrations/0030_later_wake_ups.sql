-- Wake-ups for work due later name each moment it comes due, not only the first, and one worker
-- for each.
--
-- A statement that inserts executions due at several later times (a dispatcher pass that creates
-- the executions of the next fire times ahead of them, a batch of jobs submitted with different
-- run_at) notified every worker of the earliest of those times only: the rest waited for a claim
-- that happened to come after them, or for the poll interval (a second by default). The notification
-- now also lists, in `laterMs`, the distinct delays of the later work in steps of 50 ms (each rounded
-- up, so no wake-up comes before its work is due), the earliest 100, and in `laterWorkers` the one
-- worker each is for: a waiting worker of the work's queue and type, live ones first, chosen at
-- random (null: no worker waits, every worker of the queue wakes). One claim per step then takes
-- the step's work, where every worker woke and claimed before. A named worker that is busy at that
-- moment claims once a slot frees; the others' poll interval bounds the rest.
CREATE OR REPLACE FUNCTION pgsched.due_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  info record;
  named uuid[];
  later bigint[];
  later_workers uuid[];
begin
  select array_agg(distinct queue) filter (where run_at <= now()) as due_queues,
         max(priority) filter (where run_at <= now()) as due_priority,
         array_agg(distinct queue) filter (where run_at > now()) as later_queues,
         floor(extract(epoch from (min(run_at) filter (where run_at > now()) - now())) * 1000)::bigint as later_ms
    into info
    from new_rows;
  if info.due_queues is not null then
    perform pg_advisory_xact_lock_shared(pgsched.wait_lock_key());
    select array_agg(distinct pick.worker_id)
      into named
      from (select n.queue, n.type, max(n.priority) as priority, count(*) as n
              from new_rows n
             where n.run_at <= now()
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
    select array_agg(s.ms order by s.ms), array_agg(pick.worker_id order by s.ms)
      into later, later_workers
      from (select distinct greatest(50, ceil(extract(epoch from (n.run_at - now())) * 1000 / 50) * 50)::bigint as ms, n.queue, n.type
              from new_rows n
             where n.run_at > now()
             order by 1
             limit 100) s
      left join lateral (
            select w.worker_id
              from pgsched.waiting_workers w
              left join pgsched.workers k on k.id = w.worker_id
             where s.queue = any(w.queues)
               and (w.types is null or s.type = any(w.types))
             order by (k.stopped_at is null and k.last_seen_at > now() - interval '15 seconds') desc nulls last, random()
             limit 1) pick on true;
    perform pg_notify('pgsched_executions',
                      json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms),
                                        'laterMs', later, 'laterWorkers', later_workers)::text);
  end if;
  return null;
end
$function$;
