-- A batch of submits admitted all or none (submitJobs; a bulk retry or rerun: POST /v1/jobs/bulk,
-- `scheduler jobs bulk`) larger than its tenant's quota maxPending can never be admitted, however many
-- of the tenant's executions end: it was refused as if the tenant had too many pending executions,
-- with Retry-After: 1, so a client that honoured it retried every second for ever. It is now refused
-- saying the batch is larger than the quota and how many to send at a time, with a retry after 60 s
-- (the quota may be raised meanwhile), as for a quota of 0. The rest of pgsched.admit_submits is as
-- migration 0064 left it.

CREATE OR REPLACE FUNCTION pgsched.admit_submits(tenant text, n integer, partial boolean)
 RETURNS TABLE(admitted integer, quota text, quota_value double precision, retry_after_ms integer, message text)
 LANGUAGE plpgsql
AS $function$
declare
  t pgsched.tenants;
  now_at timestamptz := clock_timestamp();
  need integer := case when partial then least(n, 1) else n end;  -- the fewest submits worth admitting
  pending integer := 0;
  pending_room integer := n;
  rate_room integer := n;
  tokens double precision;
  room integer;
begin
  select * into t from pgsched.tenants s
   where s.name = admit_submits.tenant and (s.max_pending is not null or s.max_submits_per_second is not null)
     for update;
  if not found then
    return query select n, null::text, null::float8, null::integer, null::text;
    return;
  end if;
  if t.max_pending is not null then
    -- pending executions of the tenant's own jobs in every queue, counted up to the quota: a skip
    -- scan over the queues, each counted from due_quota_idx alone (its predicate leaves out the
    -- webhook deliveries, so their type is never read)
    with recursive q(queue) as (
      (select e.queue from pgsched.due e order by e.queue limit 1)
      union all
      select (select e.queue from pgsched.due e where e.queue > q.queue order by e.queue limit 1)
        from q where q.queue is not null
    )
    select count(*)::integer into pending
      from (select 1 from q cross join lateral (
              select 1 from pgsched.due e
               where e.queue = q.queue and e.tenant = t.name
                 and e.type <> 'pgsched.webhook'  -- as due_quota_idx's predicate, word for word
               limit t.max_pending) x
             limit t.max_pending) y;
    pending_room := greatest(0, t.max_pending - pending);
  end if;
  if t.max_submits_per_second is not null then
    tokens := least(greatest(t.max_submits_per_second, 1),
                    coalesce(t.submit_tokens, greatest(t.max_submits_per_second, 1))
                      + t.max_submits_per_second * greatest(0, extract(epoch from now_at - coalesce(t.submit_tokens_at, now_at))));
    -- all or none: a batch larger than the bucket is admitted once the bucket is full, and leaves it
    -- in debt; partial: as many as there are whole tokens
    rate_room := case when not partial and tokens >= least(n, greatest(t.max_submits_per_second, 1)) then n
                      else greatest(0, floor(tokens))::integer end;
  end if;
  room := least(n, pending_room, rate_room);
  if room < need then
    room := 0;
  elsif not partial then
    room := n;
  end if;
  if t.max_submits_per_second is not null then
    update pgsched.tenants s set submit_tokens = tokens - room, submit_tokens_at = now_at where s.name = t.name;
  end if;
  if room = n then
    return query select room, null::text, null::float8, null::integer, null::text;
  elsif t.max_pending = 0 then
    -- a quota of 0: the tenant takes no new job until an operator changes it; retrying is no use soon
    return query select room, 'maxPending', 0::float8, 60000,
      format('tenant %s accepts no new jobs: its quota maxPending is 0', quote_ident(t.name));
  elsif not partial and n > t.max_pending then
    -- all or none, and more than the quota itself: refused however many of the tenant's executions
    -- end, until the quota is raised; retrying soon is no use
    return query select room, 'maxPending', t.max_pending::float8, 60000,
      format('tenant %s has the quota maxPending %s, and %s submits asked for together are more than it: they are never admitted at once; send at most %s at a time',
             quote_ident(t.name), t.max_pending, n, t.max_pending);
  elsif pending_room < n and pending_room <= rate_room then
    return query select room, 'maxPending', t.max_pending::float8, 1000,
      format('tenant %s has %s pending executions of its own jobs (webhook deliveries not counted) and its quota maxPending is %s', quote_ident(t.name),
             -- counted up to the quota: at the quota there may be more (the quota lowered below them)
             case when pending >= t.max_pending then format('%s or more', pending) else pending::text end, t.max_pending)
        || case when n > 1 then format('; %s submits were asked for together', n) else '' end;
  else
    return query select room, 'maxSubmitsPerSecond', t.max_submits_per_second,
      greatest(1, ceil(((case when partial then 1 else least(n, greatest(t.max_submits_per_second, 1)) end) - (tokens - room))
                       / t.max_submits_per_second * 1000))::integer,
      format('tenant %s may submit at most %s jobs per second (quota maxSubmitsPerSecond)', quote_ident(t.name), t.max_submits_per_second);
  end if;
end
$function$;
