-- Overlap policy "queue": a fire time that arrives while the job's previous
-- run is still pending or running waits in the trigger's one-place queue slot
-- and gets its execution when the job is idle again. A column rather than a
-- held execution row, so executions only ever hold runs that may start.

alter table pgsched.triggers add column queued_fire_at timestamptz;
comment on column pgsched.triggers.queued_fire_at is 'overlap_policy = queue: the one fire time waiting for the previous run to finish; the dispatcher creates its execution once the job has no pending or running execution.';

-- Serves the dispatcher's search for queue slots it can release.
create index triggers_queued_idx on pgsched.triggers (queued_fire_at) where queued_fire_at is not null and not paused;
