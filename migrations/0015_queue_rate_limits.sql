-- Rate limits per queue: at most rate_limit starts per rate_period_ms, across every worker. Every
-- claim of an execution counts as a start (a retry, and a rerun after a crash, included).
--
-- Starts get evenly spaced slots (a leaky bucket: a "generic cell rate algorithm"): a rate-limited
-- queue is claimed as a limited queue (migration 0012), under its settings row's lock; the claim
-- takes as many executions as there are slots from next_start_at up to a short horizon, each slot
-- rate_period_ms / rate_limit × 1.07 after the previous one, and moves next_start_at past the last
-- one. The worker starts each handler at its slot. The 7 % margin keeps any window of
-- rate_period_ms seen downstream within the limit when starts arrive tens of milliseconds early or
-- late (timers, the network, a busy worker); the rate reached is 93 % of the limit. There is no burst: a queue idle
-- for a while starts at the steady pace, not with a backlog of saved-up starts.

alter table pgsched.queues add column rate_limit integer;
alter table pgsched.queues add column rate_period_ms integer;
alter table pgsched.queues add column next_start_at timestamptz;
alter table pgsched.queues add constraint queues_rate_limit_check check (
  (rate_limit is null) = (rate_period_ms is null)
  and rate_limit between 1 and 1000000
  and rate_period_ms between 1 and 86400000);
comment on column pgsched.queues.rate_limit is 'Most starts (claims of an execution, reruns included) per rate_period_ms across every worker; null: no rate limit.';
comment on column pgsched.queues.rate_period_ms is 'The period of rate_limit, in milliseconds.';
comment on column pgsched.queues.next_start_at is 'The next free start slot of a rate-limited queue (slots are rate_period_ms / rate_limit × 1.07 apart).';

-- Sets or clears (nulls) a queue's rate limit; wakes the workers.
create function pgsched.set_queue_rate_limit(queue text, rate_limit integer, rate_period_ms integer) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, rate_limit, rate_period_ms, updated_at)
  values (set_queue_rate_limit.queue, set_queue_rate_limit.rate_limit, set_queue_rate_limit.rate_period_ms, now())
  on conflict (name) do update set rate_limit = excluded.rate_limit, rate_period_ms = excluded.rate_period_ms, updated_at = now();
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_rate_limit.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_rate_limit(text, integer, integer) is 'Sets the most starts of a queue per period (ms) across all workers (nulls: no rate limit).';
