-- An admitted claim (migration 0027) returns the queue's running executions only when it counted
-- them. While the bound it keeps (queues.running_bound) says the claim fits, it used to return the
-- bound plus the claim: an upper bound that grows by each admitted claim and that no completion lowers.
-- A worker took it for the count, and once it came within a claim of the limit (about every
-- (limit - running) / claim size claims, however little ran) claimed the queue under its settings
-- row lock: a transaction of several statements waiting for that lock behind the admitted claims in
-- flight. Now the bound path returns null and the worker keeps the last count; when the bound says a
-- claim may not fit, the function counts (and refuses a claim over the limit) as before.

CREATE OR REPLACE FUNCTION pgsched.queue_claim_admit(queue text, claimed integer, worker_id uuid, claimed_at timestamp with time zone, fair boolean, horizon_ms double precision, rate_spacing double precision)
 RETURNS TABLE(first_slot_ms double precision, spacing_ms double precision, running integer)
 LANGUAGE plpgsql
AS $function$
declare
  s pgsched.queues;
  others integer;
  at timestamptz;
  first_ms double precision;
  spacing double precision;
  counted boolean := false;
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
      from pgsched.runs r
     where r.queue = queue_claim_admit.queue
       and not (r.worker_id = queue_claim_admit.worker_id and r.started_at = queue_claim_admit.claimed_at);
    counted := true;
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
  -- the running executions only when counted: the bound overstates them (it grows by each claim and
  -- no completion lowers it), and a worker taking it for the count would claim under the lock
  return query select coalesce(first_ms, 0), spacing, case when counted then others + claimed end;
end
$function$;
