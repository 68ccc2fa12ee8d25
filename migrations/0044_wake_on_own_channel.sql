-- Wake-ups on each named worker's own channel. A submit that names waiting workers (migrations 0011
-- and 0043) notified pgsched_executions, which every worker hears: each notification woke every
-- worker's process, and all but the named ones read it only to ignore it (about 160 µs of CPU each
-- for a worker with nothing to do). A worker now gives, at its sign-up, a channel it LISTENs on
-- (waiting_workers.channel), and a worker named for due work is notified there. A worker listed
-- without a channel (one of an earlier version, during a rolling upgrade) is named on
-- pgsched_executions as before, and work for more than 64 workers still wakes every worker there.
-- pgsched.wake_named sends them, for due_notify and for pgsched.wake_waiting_after; the rest of both
-- is as in migration 0043.
alter table pgsched.waiting_workers add column channel text;
comment on column pgsched.waiting_workers.channel is 'The channel the worker LISTENs on for wake-ups meant for it alone (migration 0044); null: it hears them on pgsched_executions, named in the payload.';

-- Wakes the workers `named` for due work of `queues` (`priority`: the highest of it): each of those
-- with a channel (`channels`) on it, those without (`unheard`) on pgsched_executions, named in the
-- payload; more than 64 wake every worker on pgsched_executions.
CREATE FUNCTION pgsched.wake_named(named uuid[], channels text[], unheard uuid[], queues text[], priority integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  if named is null then
    return;
  end if;
  if cardinality(named) > 64 then
    perform pg_notify('pgsched_executions', json_build_object('queues', queues, 'delayMs', 0, 'priority', priority, 'workers', null)::text);
    return;
  end if;
  if channels is not null then
    perform pg_notify(c, json_build_object('queues', queues, 'delayMs', 0, 'priority', priority)::text) from unnest(channels) c;
  end if;
  if unheard is not null then
    perform pg_notify('pgsched_executions', json_build_object('queues', queues, 'delayMs', 0, 'priority', priority, 'workers', unheard)::text);
  end if;
end
$function$;

-- The waiting workers (and their channels) to name for `n` new due executions of a queue, type and priority (but
-- `passed_by`): those serving the queue and type with min_priority at or below the priority, in turn
-- (live, then idle before holding work, then listed longest) until the slots of those before hold the
-- executions, so one worker with room for all of them is named alone. An SQL function of one select,
-- neither volatile nor strict, so PostgreSQL inlines it into the statements that call it.
-- (migration 0043, now returning the channel too)
DROP FUNCTION IF EXISTS pgsched.waiting_workers_for(text, text, integer, bigint, uuid);
CREATE FUNCTION pgsched.waiting_workers_for(work_queue text, work_type text, work_priority integer, work_n bigint, passed_by uuid)
 RETURNS TABLE (worker_id uuid, channel text)
 LANGUAGE sql
 STABLE
AS $function$
  select c.worker_id, c.channel
    from (select x.worker_id, x.channel,
                 sum(x.slots) over (order by x.live desc nulls last, x.min_priority, x.since
                                    rows between unbounded preceding and 1 preceding) as before
            from (select w.worker_id, w.channel, w.min_priority, w.since, coalesce(k.concurrency, 1) as slots,
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
  wake record;
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
    select array_agg(distinct pick.worker_id) as named,
           array_agg(distinct pick.channel) filter (where pick.channel is not null) as channels,
           array_agg(distinct pick.worker_id) filter (where pick.channel is null) as unheard
      into wake
      from (select n.queue, n.type, max(n.priority) as priority, count(*) as n
              from new_rows n
             where n.run_at <= now()
             group by n.queue, n.type) due
     cross join lateral pgsched.waiting_workers_for(due.queue, due.type, due.priority, due.n, null) pick;
    perform pgsched.wake_named(wake.named, wake.channels, wake.unheard, info.due_queues, info.due_priority);
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
begin
  select array_agg(distinct pick.worker_id) as named,
         array_agg(distinct pick.channel) filter (where pick.channel is not null) as channels,
         array_agg(distinct pick.worker_id) filter (where pick.channel is null) as unheard,
         array_agg(distinct left_over.queue) as queues, max(left_over.priority) as priority
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
  perform pgsched.wake_named(info.named, info.channels, info.unheard, info.queues, info.priority);
  return coalesce(cardinality(info.named), 0);
end
$function$;
