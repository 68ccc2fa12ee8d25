-- A claim of a queue whose concurrency limit or rate limit cannot bind for it takes its rows as the
-- ordinary claim does (SKIP LOCKED, in parallel with every other claim), and the same statement then
-- calls pgsched.queue_claim_admit(), which takes the queue's settings row lock only for the rest of
-- that statement and checks the claim against the limits as they stand then:
-- - with a concurrency limit: the executions of the queue running now (a snapshot taken once the
--   lock is held, so it sees every claim admitted before) plus this claim's must not exceed it;
-- - with a rate limit: the claim's starts get the next slots (as in migration 0015), and the last
--   one must lie within the claim horizon;
-- - the queue must not have been paused, given a per-key limit (of concurrency or rate), or turned
--   fair or not fair since the claim was planned.
-- The count of running executions is skipped while queues.running_bound says the claim fits: an upper
-- bound of them, which each admitted claim raises by what it took, a claim under the lock clears, and
-- a change of the limit clears (so a count is made about once per (limit - running) / claim size claims).
-- Otherwise it raises SQLSTATE PGS01 and the whole claim is undone: the worker then claims the queue
-- under its row lock (migration 0012), which takes at most what the limits leave. Claims admitted one
-- after another each see those admitted before, so running executions never exceed the limit.
-- The lock is held for the end of one statement instead of a transaction of several round trips.
--
-- Rate limits per concurrency key: at most key_rate_limit starts of one key per key_rate_period_ms,
-- across every worker, as the queue's rate limit does for the whole queue (migration 0015: every
-- claim of an execution counts as a start, a retry's and a rerun's too; evenly spaced slots
-- key_rate_period_ms / key_rate_limit × 1.07 apart, no burst). Each key's next free slot is a row of
-- queue_key_slots, written only while it lies in the future of a claim: a key not started for a while
-- has no row (its next slot is now), so the table holds about the keys started within one period.
-- Executions without a key are not limited per key. A queue with a key rate limit is claimed under its
-- settings row lock: the claim looks at the first due executions in priority order and takes, per
-- key, only as many as that key has slots within the claim horizon.

alter table pgsched.queues add column key_rate_limit integer;
alter table pgsched.queues add column key_rate_period_ms integer;
alter table pgsched.queues add constraint queues_key_rate_limit_check check (
  (key_rate_limit is null) = (key_rate_period_ms is null)
  and key_rate_limit between 1 and 1000000
  and key_rate_period_ms between 1 and 86400000);
comment on column pgsched.queues.key_rate_limit is 'Most starts of one concurrency key (claims of its executions, reruns included) per key_rate_period_ms across every worker; null: no rate limit per key.';
comment on column pgsched.queues.key_rate_period_ms is 'The period of key_rate_limit, in milliseconds.';

create table pgsched.queue_key_slots (
  queue text not null,
  concurrency_key text not null,
  next_start_at timestamptz not null,
  constraint queue_key_slots_pkey primary key (queue, concurrency_key)
);
create index queue_key_slots_next_idx on pgsched.queue_key_slots (queue, next_start_at);
comment on table pgsched.queue_key_slots is 'The next free start slot of each concurrency key of a queue with key_rate_limit, while it lies ahead (slots are key_rate_period_ms / key_rate_limit × 1.07 apart); rows in the past are removed by the claims of the queue.';

-- Sets or clears (nulls) a queue's rate limit per concurrency key; wakes the workers.
create function pgsched.set_queue_key_rate_limit(queue text, key_rate_limit integer, key_rate_period_ms integer) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, key_rate_limit, key_rate_period_ms, updated_at)
  values (set_queue_key_rate_limit.queue, set_queue_key_rate_limit.key_rate_limit, set_queue_key_rate_limit.key_rate_period_ms, now())
  on conflict (name) do update set key_rate_limit = excluded.key_rate_limit, key_rate_period_ms = excluded.key_rate_period_ms, updated_at = now();
  if set_queue_key_rate_limit.key_rate_limit is null then
    delete from pgsched.queue_key_slots s where s.queue = set_queue_key_rate_limit.queue;
  end if;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_key_rate_limit.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_key_rate_limit(text, integer, integer) is 'Sets the most starts of one concurrency key of a queue per period (ms) across all workers (nulls: no rate limit per key).';

alter table pgsched.queues add column running_bound integer;
comment on column pgsched.queues.running_bound is 'At least the executions of the queue running now, as kept by its admitted claims (pgsched.queue_claim_admit); null: unknown, counted at the next one.';

create function pgsched.queues_clear_running_bound() returns trigger
language plpgsql as $$
begin
  new.running_bound := null;
  return new;
end
$$;
-- however the limit changes (the functions or a direct update): claims made without it are not in the bound
create trigger queues_clear_running_bound before update on pgsched.queues
  for each row when (old.concurrency_limit is distinct from new.concurrency_limit)
  execute function pgsched.queues_clear_running_bound();

create function pgsched.queue_claim_admit(
  queue text,
  claimed integer,
  worker_id uuid,
  claimed_at timestamptz,
  fair boolean,
  horizon_ms double precision,
  rate_spacing double precision
) returns table (first_slot_ms double precision, spacing_ms double precision, running integer)
language plpgsql volatile as $$
declare
  s pgsched.queues;
  others integer;
  at timestamptz;
  first_ms double precision;
  spacing double precision;
begin
  select * into s from pgsched.queues q where q.name = queue_claim_admit.queue for update;
  if not found then
    return query select 0::float8, null::float8, null::integer;
    return;
  end if;
  if s.paused or s.key_concurrency_limit is not null or s.key_rate_limit is not null or s.fair_share <> queue_claim_admit.fair then
    raise exception 'queue % changed its settings since the claim was planned', quote_literal(queue_claim_admit.queue)
      using errcode = 'PGS01';
  end if;
  if s.concurrency_limit is not null and s.running_bound is not null and s.running_bound + claimed <= s.concurrency_limit then
    others := s.running_bound;
  elsif s.concurrency_limit is not null then
    -- read after the lock: every claim admitted before is committed and counted (this claim's own
    -- rows, which this statement may or may not see, are left out and added as `claimed`)
    select count(*)::integer into others
      from pgsched.executions r
     where r.state = 'running' and r.queue = queue_claim_admit.queue
       and not (r.worker_id = queue_claim_admit.worker_id and r.started_at = queue_claim_admit.claimed_at);
    if others + claimed > s.concurrency_limit then
      raise exception 'queue % would run % executions, over its concurrency limit %', quote_literal(queue_claim_admit.queue),
        others + claimed, s.concurrency_limit using errcode = 'PGS01';
    end if;
  end if;
  if s.rate_limit is not null then
    spacing := s.rate_period_ms::float8 / s.rate_limit * rate_spacing;
    at := clock_timestamp();
    first_ms := greatest(0, extract(epoch from coalesce(s.next_start_at, at) - at) * 1000);
    if first_ms + (claimed - 1) * spacing > horizon_ms then
      raise exception 'queue % has no start slots left within % ms for % executions', quote_literal(queue_claim_admit.queue),
        horizon_ms, claimed using errcode = 'PGS01';
    end if;
  end if;
  if s.concurrency_limit is not null or s.rate_limit is not null then
    update pgsched.queues q
       set next_start_at = case when s.rate_limit is null then q.next_start_at
                                else greatest(coalesce(q.next_start_at, at), at) + claimed * spacing * interval '1 millisecond' end,
           running_bound = others + claimed
     where q.name = queue_claim_admit.queue;
  end if;
  return query select coalesce(first_ms, 0), spacing, others + claimed;
end
$$;
comment on function pgsched.queue_claim_admit(text, integer, uuid, timestamptz, boolean, double precision, double precision) is
  'Checks a claim of a limited queue against its limits under the settings row lock, and takes its rate-limit start slots; raises SQLSTATE PGS01 when the claim must be undone.';
