-- Queue settings: pause and a global concurrency limit per queue, set at run time by operators
-- (REST, CLI, TypeScript, or these rows and functions in SQL). A queue without a row is active and
-- unlimited, which is every queue until someone sets something.
--
-- How the claim reads them (src/db/queries/claim.ts, src/worker/queue-claims.ts):
-- - the ordinary claim skips every queue that is paused or has a limit (one probe of this table
--   per claim statement);
-- - a limited queue is claimed in a transaction of its own that first locks its row here, so the
--   claims of one limited queue take turns, and then counts its running executions with a fresh
--   snapshot: running + claimed never exceeds the limit, whatever the number of workers and hosts.
--   Executions of a crashed worker stay running (and counted) until the reaper requeues them.
-- - pause_queue() also takes a SHARE lock on executions before it commits, which waits for every
--   claim statement in flight: once it returns, no execution of the queue is claimed.

create table pgsched.queues (
  name text not null,
  paused boolean not null default false,
  concurrency_limit integer,
  paused_at timestamptz,
  updated_at timestamptz not null default now(),
  constraint queues_pkey primary key (name),
  constraint queues_name_check check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$'),
  constraint queues_concurrency_limit_check check (concurrency_limit between 1 and 100000)
);
comment on table pgsched.queues is 'Settings of queues that have any: paused, and the most executions of the queue running at once across all workers. A queue without a row is active and unlimited.';
comment on column pgsched.queues.paused is 'Workers claim nothing from a paused queue; running executions finish and submits are still accepted. Use pgsched.pause_queue() rather than an update, so that claims in flight are waited for.';
comment on column pgsched.queues.concurrency_limit is 'Most executions of the queue in state running at once, across every worker (null: no limit). Prefetched (claimed, not yet started) executions count.';

alter table pgsched.api_keys add column operator boolean not null default false;
comment on column pgsched.api_keys.operator is 'An operator key may change queue settings and sees every queue''s figures; other keys act for their tenant only.';

-- Pauses a queue: once this returns (its transaction committed), no claim takes an execution of
-- the queue until it is resumed. Executions claimed before keep running.
create function pgsched.pause_queue(queue text) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, paused, paused_at, updated_at)
  values (pause_queue.queue, true, now(), now())
  on conflict (name) do update set paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now();
  -- Waits for the claim statements in flight (they hold ROW EXCLUSIVE on executions): those that
  -- started before the pause was visible end before it commits.
  lock table pgsched.executions in share mode;
end
$$;
comment on function pgsched.pause_queue(text) is 'Pauses a queue; when the calling transaction commits, no execution of it is claimed any more.';

-- Resumes a queue and wakes the workers that serve it.
create function pgsched.resume_queue(queue text) returns void
language plpgsql as $$
begin
  update pgsched.queues set paused = false, paused_at = null, updated_at = now() where name = resume_queue.queue;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(resume_queue.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.resume_queue(text) is 'Resumes a paused queue and wakes the workers that serve it.';

-- Sets or clears (null) a queue's concurrency limit; a raised limit wakes the workers.
create function pgsched.set_queue_concurrency_limit(queue text, concurrency_limit integer) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, concurrency_limit, updated_at)
  values (set_queue_concurrency_limit.queue, set_queue_concurrency_limit.concurrency_limit, now())
  on conflict (name) do update set concurrency_limit = excluded.concurrency_limit, updated_at = now();
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_concurrency_limit.queue), 'delayMs', 0)::text);
end
$$;
comment on function pgsched.set_queue_concurrency_limit(text, integer) is 'Sets the most executions of a queue running at once across all workers (null: no limit).';
