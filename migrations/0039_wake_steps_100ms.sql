-- Wake-ups for work due later come in steps of 100 ms instead of 50 (migration 0030's due_notify,
-- otherwise the same).
--
-- A statement that inserts executions due later (a dispatcher pass creating the next fire times
-- ahead of them, a batch of jobs with a run_at) lists each moment its work comes due, rounded up to
-- a step, and each step's workers claim once at it. With 1,000 recurring jobs firing every 1 to 10 s
-- (256 fire times a second), every 50 ms step woke a worker for a claim, its run and the completion
-- that followed: 11.8 % of one core for the two workers and PostgreSQL together. With 100 ms steps
-- a step serves twice the fire times for the same statements: 9.2 % (`scheduler bench --only
-- recurring`, docs/performance.md). Work due later is now claimed up to about 100 ms after its time
-- instead of 50; work due at once is announced at once, as before.
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
      from (select greatest(100, ceil(extract(epoch from (n.run_at - now())) * 1000 / 100) * 100)::bigint as ms,
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
