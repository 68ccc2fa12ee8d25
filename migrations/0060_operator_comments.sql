-- Comments an operator reads in `\d+` that said something wrong, or nothing where a question starts:
--
-- - jobs.state named statuses the product does not have (NOT_STARTED, STARTED); the status the API,
--   the client and the CLI show is one of SCHEDULED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED
--   and EXPIRED.
-- - executions.last_worker_id said "the worker that ran the latest attempt", but while a retry runs
--   it is the previous attempt's worker (the running one's is worker_id); error, likewise, is the
--   previous attempt's while a retry waits or runs.
-- - due.tenant and runs.tenant said the column may be null (it never is in these two tables).
-- - The columns of pgsched.workers that tell whether a worker is alive (last_seen_at, stopped_at) and
--   where it runs (host, pid) had no comment.

comment on column pgsched.jobs.state is 'active | paused (a recurring job that does not dispatch) | cancelled. The status the API, the client and the CLI show (SCHEDULED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED, EXPIRED) is derived from this, the trigger and the latest execution.';

comment on column pgsched.executions.last_worker_id is 'The worker (pgsched.workers.id, where its host is) that ran the latest attempt that ended; worker_id is cleared when an attempt ends. While a retry runs, worker_id is the running attempt''s worker and this column the previous attempt''s (null during the first attempt): coalesce(worker_id, last_worker_id) is the latest attempt''s worker in every state.';
comment on column pgsched.execution_history.last_worker_id is 'The worker (pgsched.workers.id, where its host is) that ran the latest attempt that ended; worker_id is cleared when an attempt ends. On a pending row (a retry waiting, or running with its lease in pgsched.runs) it is the previous attempt''s worker.';

comment on column pgsched.executions.error is 'Why the latest attempt that ended without success ended: {message, name, fatal?, timedOut?, attempt, workerId?, at} (at: ISO 8601 UTC). While a retry waits or runs it is the previous attempt''s (its attempt field says which); null once an attempt succeeded. Written by the worker, the reaper (LeaseExpiredError, StartDeadlineError) and cancel (CancelledError).';
comment on column pgsched.execution_history.error is 'Why the latest attempt that ended without success ended: {message, name, fatal?, timedOut?, attempt, workerId?, at} (at: ISO 8601 UTC). On a pending row (a retry waiting or running) it is the previous attempt''s; null once an attempt succeeded. Written by the worker, the reaper (LeaseExpiredError, StartDeadlineError) and cancel (CancelledError).';

comment on column pgsched.due.tenant is 'Copied from the job (fair share and pending quotas read it here).';
comment on column pgsched.runs.tenant is 'Copied from the job (fair share and pending quotas read it here).';

comment on column pgsched.workers.id is 'The worker process (UUID v7, new at every start): runs.worker_id, executions.worker_id and last_worker_id, and workerId in attempt_log and error name it.';
comment on column pgsched.workers.host is 'The host name of the machine the worker process runs on.';
comment on column pgsched.workers.pid is 'The worker''s process id on host.';
comment on column pgsched.workers.queues is 'Queues this worker claims from; it claims nothing else.';
comment on column pgsched.workers.concurrency is 'Handlers it runs at once (SCHEDULER_WORKER_CONCURRENCY).';
comment on column pgsched.workers.started_at is 'When the process registered, at its start.';
comment on column pgsched.workers.last_seen_at is 'Its latest heartbeat (every SCHEDULER_HEARTBEAT_MS, whether it holds leases or not). Not seen within lease_ms, a worker is not live (pgsched.worker_live) even though stopped_at is null: a killed process cannot mark itself stopped. Rows not seen for a day or the pruner''s retention, whichever is longer, and holding no lease are deleted.';
comment on column pgsched.workers.stopped_at is 'When it stopped after a graceful shutdown (SIGTERM, SIGINT); null while it runs, and also for a process that was killed or lost its host (see last_seen_at).';
