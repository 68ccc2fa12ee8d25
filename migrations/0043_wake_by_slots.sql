-- Wake-ups for work due now name waiting workers by their slots, as those for work due later do
-- (migration 0030): in turn until the slots of the workers named hold the new executions, instead
-- of one worker per execution. A submit of four jobs with two idle workers of many slots named both;
-- the first to claim took all four, and the other's claim found nothing: in the steady scenario of
-- `scheduler bench` (600 jobs a second over REST, about four per statement), a third of one worker's
-- claims came back empty (pgsched_worker_claims_total{result="empty"}), each a round trip and a
-- statement for nothing. A worker's slots are its concurrency (1 when its row is missing); the
-- order, and the rest of due_notify, are those of migration 0039.
--
-- A worker's concurrency is not its free slots: the listing does not follow each run's start and
-- end (that would be a write per run). A worker named alone with some slots busy may take less than
-- the new work. pgsched.wake_waiting_after passes the wake-up on: a worker that was listed idle and
-- whose claim filled its room calls it, and it names the other waiting workers for the due work that
-- is left in the same order, so the rest does not wait for a poll. Both name workers through
-- pgsched.waiting_workers_for.

-- The waiting workers to name for `n` new due executions of a queue, type and priority (but
-- `passed_by`): those serving the queue and type with min_priority at or below the priority, in turn
-- (live, then idle before holding work, then listed longest) until the slots of those before hold the
-- executions, so one worker with room for all of them is named alone. An SQL function of one select,
-- neither volatile nor strict, so PostgreSQL inlines it into the statements that call it.
CREATE FUNCTION pgsched.waiting_workers_for(work_queue text, work_type text, work_priority integer, work_n bigint, passed_by uuid)
 RETURNS TABLE (worker_id uuid)
 LANGUAGE sql
 STABLE
AS $function$
  select c.worker_id
    from (select x.worker_id,
                 sum(x.slots) over (order by x.live desc nulls last, x.min_priority, x.since
                                    rows between unbounded preceding and 1 preceding) as before
            from (select w.worker_id, w.min_priority, w.since, coalesce(k.concurrency, 1) as slots,
                         (k.stopped_at is null and k.last_seen_at > now() - interval '15 seconds') as live
                    from pgsched.waiting_workers w
                    left join pgsched.workers k on k.id = w.worker_id
                   where (passed_by is null or w.worker_id <> passed_by)
                     and work_queue = any(w.queues)
                     and (w.types is null or work_type = any(w.types))
                     and w.min_priority <= work_priority) x) c
   where coalesce(c.before, 0) < work_n
$function$;

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
     cross join lateral pgsched.waiting_workers_for(due.queue, due.type, due.priority, due.n, null) pick;
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

-- The wake-up passed on by `claimer`, a worker listed idle whose claim filled its room: the due work
-- left in its queues (of its types; null: any), counted up to 1,000 executions, names the other
-- waiting workers as due_notify does, in turn until their slots hold it.
CREATE OR REPLACE FUNCTION pgsched.wake_waiting_after(claimer uuid, claim_queues text[], claim_types text[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  info record;
  named uuid[];
begin
  select array_agg(distinct pick.worker_id) as named, array_agg(distinct left_over.queue) as queues, max(left_over.priority) as priority
    into info
    from (select d.queue, d.type, max(d.priority) as priority, count(*) as n
            from (select queue, type, priority
                    from pgsched.due
                   where queue = any(claim_queues)
                     and (claim_types is null or type = any(claim_types))
                     and run_at <= now()
                   limit 1000) d
           group by d.queue, d.type) left_over
   cross join lateral pgsched.waiting_workers_for(left_over.queue, left_over.type, left_over.priority, left_over.n, claimer) pick;
  named := info.named;
  if named is null then
    return 0;
  end if;
  perform pg_notify('pgsched_executions',
                    json_build_object('queues', info.queues, 'delayMs', 0, 'priority', info.priority,
                                      'workers', case when cardinality(named) <= 64 then named end)::text);
  return cardinality(named);
end
$function$;
