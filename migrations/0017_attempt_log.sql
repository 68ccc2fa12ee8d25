-- Every attempt on record. An execution keeps, besides its latest attempt's columns (started_at,
-- error, …), a log of the attempts that ended without success: each failure and each lease the
-- reaper found expired appends {attempt, startedAt, endedAt, workerId, host, outcome, error}. A
-- success writes no log entry (the hot path stays as it is): the execution's own columns describe
-- it, with last_worker_id naming the worker that ran it. The log goes with its execution when that
-- is pruned. At most max_attempts entries (a hand-back at shutdown is not an attempt and adds none).

alter table pgsched.executions add column attempt_log jsonb;
comment on column pgsched.executions.attempt_log is 'The attempts that ended without success, oldest first: [{attempt, startedAt, endedAt, workerId, host, outcome (failed | lease expired), error}]; null before the first.';

alter table pgsched.executions add column last_worker_id uuid;
comment on column pgsched.executions.last_worker_id is 'The worker that ran the latest attempt (worker_id is cleared when the attempt ends); its host is in pgsched.workers.';
