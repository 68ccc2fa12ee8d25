-- Webhooks: a tenant's deliveries no longer count toward its quota maxPending, and a tenant
-- subscribes a URL at most once per queue.
--
-- 1. The quota.
-- The delivery jobs (type pgsched.webhook) are the tenant's and are submitted whatever its quota. A
-- receiver that keeps failing has each event retried for up to 27 minutes, so their pending
-- executions could fill the quota, and the tenant's own submits were refused (429) until the
-- deliveries ended. pgsched.admit_submits now counts the pending executions of the tenant's own jobs
-- only; the deliveries stay its jobs everywhere else (lists, figures, failures). A refusal says so, as
-- the tenant's pending figure counts the deliveries too.
--
-- The count stays an index-only read of up to maxPending entries per submit: due_tenant_idx, which
-- only this count read, is replaced by due_quota_idx, partial on the type, so the deliveries are
-- not in it and their type is never fetched from the heap. Measured with EXPLAIN (ANALYZE, BUFFERS)
-- on 50,000 pending executions (800 of the tenant's own, 20,000 of its deliveries, the rest other
-- tenants'), maxPending 1,000: the type filtered over due_tenant_idx took 2,164 buffers (a bitmap
-- heap scan); due_tenant_idx with the type as an included column, 252; due_quota_idx, 53 (and
-- 216 kB against due_tenant_idx's 3,576 kB: two columns, deduplicated). A delivery's insert writes
-- one index entry fewer, other executions' as many as before. The rest of the function is as
-- migration 0054 left it.

drop index pgsched.due_tenant_idx;
create index due_quota_idx on pgsched.due (queue, tenant) where type <> 'pgsched.webhook';
comment on index pgsched.due_quota_idx is 'The pending executions that count toward their tenant''s quota maxPending (all but webhook deliveries), read by pgsched.admit_submits.';
comment on column pgsched.tenants.max_pending is 'Most executions of the tenant''s own jobs in state pending (due or scheduled later, every queue; its webhook deliveries, type pgsched.webhook, left out); a submit beyond it is refused (HTTP 429). Null: no quota.';
comment on column pgsched.webhook_subscriptions.queue is 'The queue of the delivery jobs (type pgsched.webhook), jobs of the tenant that do not count toward its max_pending (migration 0064).';

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

-- 2. One subscription per tenant, URL and queue.
--
-- A tenant could subscribe the same URL twice (a retried creation, a script run again), and every
-- event both wanted was then delivered twice, signed with two secrets. A subscription is now
-- refused (409, naming the existing one) when one of its tenant's already sends to its URL in its
-- queue, whatever the event types (those of the existing one are changed by an update instead);
-- an update moving a subscription onto such a URL is refused the same way. URLs are compared as
-- stored, character for character. The rule is checked by the statements that write (they name the
-- existing subscription) and held by webhook_subscriptions_target_key against concurrent ones.
--
-- Subscriptions that already repeat one another are kept as they are, still delivering, rather than
-- merged: merging would drop secrets their receivers may verify with and fail the deliveries of the
-- dropped ones still to come, and which events the tenant wanted twice is not ours to guess. The
-- first of each (by creation) is held by the index; each later one gets duplicate_of, which leaves
-- it out of the index, until its URL changes. A creation or move onto the URL of one of them is
-- still refused by the statements' check. The index compares md5(url) (a URL of up to 2,048
-- characters may exceed a btree entry's 2,704 bytes), and so does the grouping here, so that the
-- index is built whatever the rows.

alter table pgsched.webhook_subscriptions add column duplicate_of uuid;
comment on column pgsched.webhook_subscriptions.duplicate_of is 'Set by migration 0064 on a subscription that repeated an earlier one of its tenant (same URL and queue; that one''s id), kept as it was; null for every other, and once its URL changes. Left out of webhook_subscriptions_target_key.';

update pgsched.webhook_subscriptions s
   set duplicate_of = g.first_id
  from (select id, first_value(id) over (partition by tenant, queue, md5(url) order by created_at, id) as first_id
          from pgsched.webhook_subscriptions) g
 where g.id = s.id and g.first_id <> s.id;

create unique index webhook_subscriptions_target_key on pgsched.webhook_subscriptions (tenant, queue, md5(url)) where duplicate_of is null;
comment on index pgsched.webhook_subscriptions_target_key is 'A tenant subscribes a URL once per queue (migration 0064); subscriptions kept from before it that repeat another (duplicate_of) are left out.';
