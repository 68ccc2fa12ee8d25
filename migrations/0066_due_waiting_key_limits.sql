-- pgsched.due_waiting names the limits per concurrency key (migrations 0013, 0027, 0041) too. Work
-- held back only because its key is at the queue's key_concurrency_limit, or because its key's next
-- start slot (key_rate_limit) lies ahead, was shown as claimable (waiting_for null) while the claim
-- took none of it. Now, after the queue-wide reasons of migration 0063, the view names its keys:
-- how many of the key run against the limit per key, or when the key's next start is. Keys are
-- counted per tenant, as the claim counts them.
--
-- A new last column, held_by_key, counts the due executions of the row whose key holds them: some of
-- the work may wait for its key while the rest is claimable (other keys, or no key), and waiting_for
-- names the keys only when all of it waits.
--
-- Still cheap: besides what 0063 read (due, queues, workers), only pgsched.runs (what runs now) and
-- pgsched.queue_key_slots (keys started within a period), and those only for queues with a limit
-- per key, whose due rows are read a second time through due_claim_idx; never the execution history. The view is replaced in place (same columns, one added at
-- the end), so its grants and column comments stay.

create or replace view pgsched.due_waiting as
with by_type as (
  select n.queue, n.type, count(*) as due, min(n.run_at) as oldest_run_at, max(n.priority) as top_priority
    from pgsched.due n
   where n.run_at <= now()
   group by n.queue, n.type
),
key_limited as (
  select q.name as queue, q.key_concurrency_limit, q.key_rate_limit
    from pgsched.queues q
   where q.key_concurrency_limit is not null or q.key_rate_limit is not null
),
-- what of each key runs now, in the queues with a limit on it (the claim's count: any type, per tenant)
key_running as (
  select r.queue, r.tenant, r.concurrency_key, count(*) as running
    from pgsched.runs r
    join key_limited l on l.queue = r.queue and l.key_concurrency_limit is not null
   where r.concurrency_key is not null
   group by r.queue, r.tenant, r.concurrency_key
),
-- the keys whose due work of a queue and type waits for them: at the limit, or their next slot ahead
held_keys as (
  select n.queue, n.type, count(*) as due,
         row_number() over (partition by n.queue, n.type order by count(*) desc, n.tenant, n.concurrency_key) as nth,
         quote_literal(n.concurrency_key) || ' of tenant ' || quote_literal(n.tenant) || ' ('
           || case when kr.running >= l.key_concurrency_limit
                   then kr.running || ' running, limit ' || l.key_concurrency_limit
                   else 'rate limit per key: next start at ' || ks.next_start_at::text end
           || ')' as held
    -- the due work of the queues with a limit per key only (not a second pass over all of it)
    from key_limited l
    join pgsched.due n on n.queue = l.queue and n.run_at <= now()
    left join key_running kr on kr.queue = n.queue and kr.tenant = n.tenant and kr.concurrency_key = n.concurrency_key
    left join pgsched.queue_key_slots ks
      on l.key_rate_limit is not null and ks.queue = n.queue and ks.tenant = n.tenant and ks.concurrency_key = n.concurrency_key
   where n.concurrency_key is not null  -- work without a key is not limited per key
     and (kr.running >= l.key_concurrency_limit or ks.next_start_at > now())
   group by n.queue, n.type, n.tenant, n.concurrency_key, kr.running, l.key_concurrency_limit, ks.next_start_at
),
held as (
  select h.queue, h.type, sum(h.due) as due, count(*) as keys,
         string_agg(h.held, ', ' order by h.nth) filter (where h.nth <= 3) as first_keys
    from held_keys h
   group by h.queue, h.type
)
select n.queue, n.type, n.due, n.oldest_run_at, now() - n.oldest_run_at as oldest_lag, n.top_priority,
       case
         when q.paused then 'the queue is paused (since ' || coalesce(q.paused_at::text, 'unknown') || '): pgsched.resume_queue(' || quote_literal(n.queue) || ')'
         when not exists (select 1 from pgsched.workers w
                           where pgsched.worker_live(w.stopped_at, w.last_seen_at, w.lease_ms) and n.queue = any(w.queues))
           then 'no live worker serves the queue: start one with --queues ' || n.queue
         when not exists (select 1 from pgsched.workers w
                           where pgsched.worker_live(w.stopped_at, w.last_seen_at, w.lease_ms) and n.queue = any(w.queues) and n.type = any(w.types))
           then 'no live worker serving the queue has a handler for the type'
         when q.concurrency_limit is not null
              and (select count(*) from pgsched.runs r where r.queue = n.queue) >= q.concurrency_limit
           then 'the queue is at its concurrency limit (' || q.concurrency_limit || ' running)'
         when q.rate_limit is not null and q.next_start_at > now()
           then 'the queue''s rate limit: its next start is at ' || q.next_start_at::text
         when h.due = n.due and h.keys = 1
           then 'its concurrency key is at the queue''s limit per key: ' || h.first_keys
         when h.due = n.due
           then 'all ' || h.keys || ' of its concurrency keys are at the queue''s limits per key: ' || h.first_keys
                || case when h.keys > 3 then ', and ' || (h.keys - 3) || ' more' else '' end
       end as waiting_for,
       coalesce(h.due, 0)::bigint as held_by_key
  from by_type n
  left join pgsched.queues q on q.name = n.queue
  left join held h on h.queue = n.queue and h.type = n.type;

comment on view pgsched.due_waiting is 'Work due now (pgsched.due with run_at passed), by queue and job type, and what holds it: the first of a paused queue, no live worker serving the queue, no live worker there with a handler for the type, the queue at its concurrency limit, its rate limit, every execution''s concurrency key at the queue''s limit per key (running against key_concurrency_limit) or with its next start ahead (key_rate_limit). Null: claimable now, waiting only for a free worker slot (or its tenant''s turn in a fair-share queue). A live worker: pgsched.worker_live. Reads what is due and runs now, never the history.';
comment on column pgsched.due_waiting.waiting_for is 'What holds this work, in words, with what to do about it; for limits per concurrency key, up to three of its keys (with tenant) and how many of each run against the limit, or when its next start is. Null: nothing but a free worker slot (some of it may still wait for its key: held_by_key).';
comment on column pgsched.due_waiting.held_by_key is 'Of due, the executions whose concurrency key holds them: as many of the key (of the tenant) run as the queue''s key_concurrency_limit allows, or its next start slot (key_rate_limit) lies ahead. 0 without limits per key.';
