-- Wake-ups for work due later name each moment it comes due, not only the first, and the workers
-- for each.
--
-- A statement that inserts executions due at several later times (a dispatcher pass that creates
-- the executions of the next fire times ahead of them, a batch of jobs submitted with different
-- run_at) notified every worker of the earliest of those times only: the rest waited for a claim
-- that happened to come after them, or for the poll interval (a second by default). The notification
-- now also lists, in `laterMs`, the distinct delays of the later work in steps of 50 ms (each rounded
-- up, so no wake-up comes before its work is due), the earliest 100 (queue, type, step) groups, and
-- in `laterWorkers`, for each, the waiting workers meant to claim it: waiting workers of the work's
-- queue and type and priority, live ones first and then at random, as many as it takes for their
-- slots (workers.concurrency) to hold the step's executions; null when none waits (every worker of
-- the queue wakes then). So a step's work is claimed by one claim where one worker has room for it,
-- not by every worker. Work nobody is woken for is found by the next poll. A payload that would pass
-- PostgreSQL's 8000-byte limit leaves out the names, then the steps.
CREATE OR REPLACE FUNCTION pgsched.due_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  info record;
  named uuid[];
  later json;
  later_workers json;
  payload text;
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
    select json_agg(s.ms order by s.ms), json_agg(pick.workers order by s.ms)
      into later, later_workers
      from (select greatest(50, ceil(extract(epoch from (n.run_at - now())) * 1000 / 50) * 50)::bigint as ms,
                   n.queue, n.type, max(n.priority) as priority, count(*) as n
              from new_rows n
             where n.run_at > now()
             group by 1, 2, 3
             order by 1
             limit 100) s
      left join lateral (
            -- workers in turn until those before hold the step's executions in their slots
            select array_agg(c.worker_id order by c.before nulls first) as workers
              from (select x.worker_id,
                           sum(x.slots) over (order by x.live desc nulls last, x.r rows between unbounded preceding and 1 preceding) as before
                      from (select w.worker_id, coalesce(k.concurrency, 1) as slots, random() as r,
                                   (k.stopped_at is null and k.last_seen_at > now() - interval '15 seconds') as live
                              from pgsched.waiting_workers w
                              left join pgsched.workers k on k.id = w.worker_id
                             where s.queue = any(w.queues)
                               and (w.types is null or s.type = any(w.types))
                               and w.min_priority <= s.priority) x) c
             where coalesce(c.before, 0) < s.n) pick on true;
    payload := json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms),
                                 'laterMs', later, 'laterWorkers', later_workers)::text;
    if octet_length(payload) > 7900 then
      payload := json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms), 'laterMs', later)::text;
    end if;
    if octet_length(payload) > 7900 then
      payload := json_build_object('queues', info.later_queues, 'delayMs', greatest(1, info.later_ms))::text;
    end if;
    perform pg_notify('pgsched_executions', payload);
  end if;
  return null;
end
$function$;
