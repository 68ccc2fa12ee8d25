-- pgsched.due_waiting: the work due now, by queue and job type, with what holds it when something
-- other than a free worker slot does. An operator's first question about work that does not start
-- ("why is this stuck?") had no answer in SQL: the API worked out "unserved" itself, and a paused
-- queue, a missing worker or handler, a concurrency limit or a rate limit each had to be looked up in
-- another table. The reasons are checked in that order and the first that holds is named; null means
-- the work can be claimed now and waits only for a worker with a free slot (or, in a fair-share
-- queue, for its tenant's turn).

create view pgsched.due_waiting as
with due_now as (
  select d.queue, d.type, count(*) as due, min(d.run_at) as oldest_run_at, max(d.priority) as top_priority
    from pgsched.due d
   where d.run_at <= now()
   group by d.queue, d.type
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
       end as waiting_for
  from due_now n
  left join pgsched.queues q on q.name = n.queue;

comment on view pgsched.due_waiting is 'Work due now (pgsched.due with run_at passed), by queue and job type, and what holds it: the first of a paused queue, no live worker serving the queue, no live worker there with a handler for the type, the queue at its concurrency limit, its rate limit. Null: claimable now, waiting only for a free worker slot (or its tenant''s turn in a fair-share queue). A live worker: pgsched.worker_live. Limits per concurrency key are not looked at.';
comment on column pgsched.due_waiting.queue is 'The queue of the due work.';
comment on column pgsched.due_waiting.type is 'The job type (handler name) of the due work.';
comment on column pgsched.due_waiting.due is 'Executions of this queue and type due now (pending, run_at passed).';
comment on column pgsched.due_waiting.oldest_run_at is 'The earliest time one of them was due.';
comment on column pgsched.due_waiting.oldest_lag is 'How long the oldest has been due: now() - oldest_run_at.';
comment on column pgsched.due_waiting.top_priority is 'The highest priority among them.';
comment on column pgsched.due_waiting.waiting_for is 'What holds this work, in words, with what to do about it; null: nothing but a free worker slot.';
