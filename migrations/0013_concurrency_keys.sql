-- Concurrency keys: a job may carry a key (a customer id, an account, a device), and a queue may
-- limit how many executions of one key run at once across every worker (1: never two of one
-- customer's jobs at the same time). Executions copy the key from their job, as they copy the
-- queue, so the claim reads one table.
--
-- The partial index holds only running executions that have a key: jobs without a key add no entry
-- to it. A queue with a per-key limit is claimed as a limited queue (migration 0012): under its
-- settings row's lock, the claim looks at the first due executions in priority order and takes,
-- per key, no more than the limit minus what of that key runs now.

alter table pgsched.jobs add column concurrency_key text;
alter table pgsched.jobs add constraint jobs_concurrency_key_check check (length(concurrency_key) between 1 and 255);
comment on column pgsched.jobs.concurrency_key is 'Jobs with the same key in a queue with key_concurrency_limit run at most that many at once (null: no key).';

alter table pgsched.executions add column concurrency_key text;
comment on column pgsched.executions.concurrency_key is 'Copied from the job, so the claim reads one table.';

create index executions_running_key_idx on pgsched.executions (queue, concurrency_key)
  where state = 'running' and concurrency_key is not null;

alter table pgsched.queues add column key_concurrency_limit integer;
alter table pgsched.queues add constraint queues_key_concurrency_limit_check check (key_concurrency_limit between 1 and 100000);
comment on column pgsched.queues.key_concurrency_limit is 'Most executions of one concurrency key running at once in this queue, across every worker (null: no limit per key).';

-- Sets or clears (null) a queue's limit per concurrency key; a raised limit wakes the workers.
create function pgsched.set_queue_key_concurrency_limit(queue text, key_concurrency_limit integer) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, key_concurrency_limit, updated_at)
  values (set_queue_key_concurrency_limit.queue, set_queue_key_concurrency_limit.key_concurrency_limit, now())
  on conflict (name) do update set key_concurrency_limit = excluded.key_concurrency_limit, updated_at = now();
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_key_concurrency_limit.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_key_concurrency_limit(text, integer) is 'Sets the most executions of one concurrency key running at once in a queue (null: no limit per key).';
