-- The execution error gained workerId (reaper, cancel of a running execution) and at (every
-- writer); describe every field it may hold, as core/execution-error.ts defines them.
comment on column pgsched.executions.error is 'Why the latest attempt failed: {message, name, fatal?, timedOut?, attempt, workerId?, at} (at: ISO 8601 UTC). Written by the worker, the reaper (LeaseExpiredError) and cancel (CancelledError).';
