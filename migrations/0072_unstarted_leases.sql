-- An execution whose worker died before its handler started is requeued without counting an attempt.
--
-- A worker claims ahead of its free slots (prefetch): some of the executions it holds wait in its
-- local queue and have not started. When such a worker was killed, the reaper counted a lost attempt
-- for every execution it held, started or not, so a job with attempts: 1 could end failed
-- (LeaseExpiredError) without ever having run.
--
-- Now the database knows which leases have started: the claim marks the executions the worker will
-- start at once (as many as it has free slots) as begun, the others not, and each heartbeat marks
-- begun those whose handler has started since. The reaper requeues an expired lease that had not
-- begun due now, its attempt not counted, at most 3 times per execution (unstarted_requeues): a
-- handler that kills its worker within a heartbeat of starting is otherwise requeued uncounted every
-- time; past the cap its lost attempts count as before. Rows written before this migration, and by
-- workers of an earlier version, are begun (the default), so they are reaped as before.

alter table pgsched.runs add column began boolean not null default true;
alter table pgsched.runs add column unstarted_requeues smallint not null default 0;
alter table pgsched.due add column unstarted_requeues smallint not null default 0;

comment on column pgsched.runs.began is 'Whether the execution''s handler has started as far as the database knows: set by the claim for the executions the worker starts at once, and by the heartbeat for those that waited in its local queue. An expired lease that had not begun is requeued without counting an attempt (see unstarted_requeues).';
comment on column pgsched.runs.unstarted_requeues is 'Times the execution was requeued, its attempt not counted, after its lease expired before it began (at most 3; carried from pgsched.due).';
comment on column pgsched.due.unstarted_requeues is 'Times the execution was requeued, its attempt not counted, after its lease expired before its handler began (at most 3; then a lost lease counts an attempt whether it began or not).';
