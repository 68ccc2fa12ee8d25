-- How many of a worker's executions are running, not only how many it holds.
--
-- A worker claims ahead of its free slots (prefetch): what it holds (its rows of pgsched.runs) is
-- what runs now plus what waits in its local queue for a slot, and nothing in the database told the
-- two apart. Each heartbeat now records, with last_seen_at, how many of its executions had their
-- handler running; a worker that stops records 0. Rows of workers of an earlier version stay null
-- (not reported).

alter table pgsched.workers add column running integer;
alter table pgsched.workers add constraint workers_running_check check (running >= 0);
comment on column pgsched.workers.running is 'Executions whose handler was running at the worker''s last heartbeat (last_seen_at); the rest of what it holds in pgsched.runs waits in its local queue for a free slot. 0 once stopped; null for a worker that never reported it.';
