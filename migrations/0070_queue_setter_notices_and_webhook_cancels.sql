-- Queue setters name a queue nothing knows yet, and a disabled webhook subscription's deliveries end
-- cancelled rather than failed.
--
-- 1. A notice from every queue setter.
-- pgsched.pause_queue raises a notice when it creates the settings of a queue with no pending or
-- running work and no worker serving it (migration 0065): a misspelt name. The other setters
-- (set_queue_concurrency_limit, set_queue_rate_limit, set_queue_key_concurrency_limit,
-- set_queue_key_rate_limit, set_queue_fair_share) created the row of a misspelt queue silently. Each
-- now asks pgsched.queue_unknown_notice, as pause_queue does, when its statement inserted the row:
-- index probes and small tables only (due_claim_idx, runs, workers), never the jobs or the history
-- (no index by queue there). The rest of each function is as it was (migrations 0015, 0055, 0065).
--
-- 2. The deliveries of a disabled subscription.
-- A subscription disabled (its attempts failing for long enough, migration 0068, or by an update)
-- left its deliveries already queued to fail each once, unsent, at their next attempt: one job in the
-- tenant's failures (/v1/failures) per event of the outage. pgsched.webhook_deliveries_cancel cancels
-- them instead (pgsched.cancel_job: a running one's worker aborts it), and the statements that
-- disable a subscription call it. Bounded: up to `max` jobs per call, found through due_webhook_idx
-- (the due deliveries of a tenant and queue; an index entry per delivery, none for other jobs) and
-- pgsched.runs; what a call leaves (more than `max`, or submitted by a dispatcher that read the
-- subscription before it was disabled) fails unsent at its next attempt, which calls it again.

create function pgsched.queue_unknown_notice(queue text, done text) returns void
language plpgsql as $$
begin
  -- Each question is an index probe or a small table (due_claim_idx, runs, workers); whether the
  -- queue ever had a job is not asked: the jobs and the history have no index by queue.
  if not exists (select 1 from pgsched.due d where d.queue = queue_unknown_notice.queue)
     and not exists (select 1 from pgsched.runs r where r.queue = queue_unknown_notice.queue)
     and not exists (select 1 from pgsched.workers w where queue_unknown_notice.queue = any (w.queues)) then
    raise notice 'queue % has no settings, no pending or running work and no worker serving it: % anyway (check the name if you meant an existing queue)',
      quote_literal(queue_unknown_notice.queue), queue_unknown_notice.done;
  end if;
end
$$;
comment on function pgsched.queue_unknown_notice(text, text) is 'Used by pgsched.pause_queue and the set_queue_* functions once they created a queue''s settings: a notice naming the queue (and what was `done` to it anyway) when it has no pending or running work and no worker serving it, a misspelt name perhaps. Reads index probes and small tables only.';

create or replace function pgsched.pause_queue(queue text) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, paused, paused_at, updated_at)
  values (pause_queue.queue, true, now(), now())
  on conflict (name) do update set paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now()
  returning (xmax = 0) into created;   -- xmax is 0 for a row this statement inserted
  if created then
    perform pgsched.queue_unknown_notice(pause_queue.queue, 'paused');
  end if;
end
$$;

create or replace function pgsched.set_queue_concurrency_limit(queue text, concurrency_limit integer) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, concurrency_limit, updated_at)
  values (set_queue_concurrency_limit.queue, set_queue_concurrency_limit.concurrency_limit, now())
  on conflict (name) do update set concurrency_limit = excluded.concurrency_limit, updated_at = now()
  returning (xmax = 0) into created;   -- xmax is 0 for a row this statement inserted
  if created then
    perform pgsched.queue_unknown_notice(set_queue_concurrency_limit.queue, 'concurrency limit set');
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_concurrency_limit.queue), 'delayMs', 0)::text);
end
$$;

create or replace function pgsched.set_queue_rate_limit(queue text, rate_limit integer, rate_period_ms integer) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, rate_limit, rate_period_ms, updated_at)
  values (set_queue_rate_limit.queue, set_queue_rate_limit.rate_limit, set_queue_rate_limit.rate_period_ms, now())
  on conflict (name) do update set rate_limit = excluded.rate_limit, rate_period_ms = excluded.rate_period_ms, updated_at = now()
  returning (xmax = 0) into created;
  if created then
    perform pgsched.queue_unknown_notice(set_queue_rate_limit.queue, 'rate limit set');
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_rate_limit.queue), 'delayMs', 0)::text);
end
$$;

create or replace function pgsched.set_queue_key_concurrency_limit(queue text, key_concurrency_limit integer) returns void
language plpgsql as $$
declare
  created boolean;
begin
  insert into pgsched.queues as q (name, key_concurrency_limit, updated_at)
  values (set_queue_key_concurrency_limit.queue, set_queue_key_concurrency_limit.key_concurrency_limit, now())
  on conflict (name) do update set key_concurrency_limit = excluded.key_concurrency_limit, updated_at = now()
  returning (xmax = 0) into created;
  if created then
    perform pgsched.queue_unknown_notice(set_queue_key_concurrency_limit.queue, 'key concurrency limit set');
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_key_concurrency_limit.queue), 'delayMs', 0)::text);
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
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_key_rate_limit.queue), 'delayMs', 0)::text);
end
$$;

create or replace function pgsched.set_queue_fair_share(queue text, fair_share boolean) returns void
language plpgsql as $$
declare
  created boolean;
begin
  begin
    insert into pgsched.queues as q (name, fair_share, updated_at, fair_changed_at)
    values (set_queue_fair_share.queue, set_queue_fair_share.fair_share, now(), now())
    on conflict (name) do update set fair_share = excluded.fair_share, updated_at = now(), fair_changed_at = now(),
                                     fair_waiting_for = null, fair_settled_at = null
    returning (xmax = 0) into created;
  exception when not_null_violation then
    -- after the settings trigger has checked the queue's name: the only nullable argument left
    raise exception 'fair_share must be true or false, got null' using errcode = '22023';
  end;
  if created then
    perform pgsched.queue_unknown_notice(set_queue_fair_share.queue, 'fair share set');
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_fair_share.queue), 'delayMs', 0)::text);
end
$$;

comment on function pgsched.set_queue_concurrency_limit(text, integer) is 'Sets the most executions of a queue running at once across all workers (null: no limit). A queue unknown so far gets the setting too, with a notice naming it.';
comment on function pgsched.set_queue_rate_limit(text, integer, integer) is 'Sets the most starts of a queue per period (ms) across all workers (nulls: no rate limit). A queue unknown so far gets the setting too, with a notice naming it.';
comment on function pgsched.set_queue_key_concurrency_limit(text, integer) is 'Sets the most executions of one concurrency key running at once in a queue (null: no limit per key). A queue unknown so far gets the setting too, with a notice naming it.';
comment on function pgsched.set_queue_key_rate_limit(text, integer, integer) is 'Sets the most starts of one concurrency key of a queue per period (ms) across all workers (nulls: no rate limit per key). A queue unknown so far gets the setting too, with a notice naming it.';
comment on function pgsched.set_queue_fair_share(text, boolean) is 'Turns fair share between tenants on or off for a queue. Its due executions are marked for the new setting (pgsched.fair_share_mark) by the reaper at its next pass and again once the transactions open then have ended, or at once by the TypeScript, REST and CLI setters. A queue unknown so far gets the setting too, with a notice naming it.';

create index due_webhook_idx on pgsched.due (tenant, queue) where type = 'pgsched.webhook';
comment on index pgsched.due_webhook_idx is 'The due webhook deliveries of a tenant in a queue (type pgsched.webhook), read by pgsched.webhook_deliveries_cancel (migration 0070).';

create function pgsched.webhook_deliveries_cancel(tenant text, queue text, subscription_id uuid, except_job_id uuid, max integer)
returns integer
language plpgsql as $$
declare
  job uuid;
  n integer := 0;
begin
  -- the arguments, not the subscription's row: the statement that disables it calls this, and its
  -- change is not what this reads
  for job in
    select j.id
      from (select d.job_id from pgsched.due d
             where d.tenant = webhook_deliveries_cancel.tenant and d.queue = webhook_deliveries_cancel.queue
               and d.type = 'pgsched.webhook'   -- as due_webhook_idx's predicate
            union
            select r.job_id from pgsched.runs r
             where r.tenant = webhook_deliveries_cancel.tenant and r.queue = webhook_deliveries_cancel.queue
               and r.type = 'pgsched.webhook') w
      join pgsched.jobs j on j.id = w.job_id
     where j.state = 'active' and j.payload ->> 'subscriptionId' = webhook_deliveries_cancel.subscription_id::text
       and j.id is distinct from webhook_deliveries_cancel.except_job_id
     order by j.id
     limit webhook_deliveries_cancel.max
  loop
    begin
      if pgsched.cancel_job(job) then
        n := n + 1;
      end if;
    exception when sqlstate '55000' or sqlstate 'P0002' then
      null;   -- finished or deleted meanwhile: nothing left to cancel
    end;
  end loop;
  return n;
end
$$;
comment on function pgsched.webhook_deliveries_cancel(text, text, uuid, uuid, integer) is 'Cancels up to `max` delivery jobs (type pgsched.webhook, of `tenant` in `queue`) of a subscription with work left, but `except_job_id` (pgsched.cancel_job each, with its events); returns how many. Called when the subscription is disabled (migration 0070).';
