-- Comments on the columns operators read most: the executions view (0 of 24 had one), pgsched.due and
-- pgsched.runs (their columns mean what the history's same-named ones mean, and say so now) and the
-- webhook delivery log, so that `\d+` explains them as it does the other tables.

comment on column pgsched.due.queue is 'Copied from the job so the claim query reads one table.';
comment on column pgsched.due.scheduled_for is 'The fire time this run belongs to; unique per job, so a fire time can never produce two executions.';
comment on column pgsched.due.run_at is 'Earliest time it may be claimed (scheduled_for, or later for a retry''s backoff).';
comment on column pgsched.due.concurrency_key is 'Copied from the job, so the claim reads one table.';
comment on column pgsched.due.tenant is 'Copied from the job (fair share and pending quotas read it here); null on executions that had finished before migration 0016.';
comment on column pgsched.due.start_deadline is 'Not started by then (first attempt), the execution expires: failed at attempt 0 with a StartDeadlineError (job status EXPIRED).';
comment on column pgsched.executions.queue is 'Copied from the job so the claim query reads one table.';
comment on column pgsched.executions.scheduled_for is 'The fire time this run belongs to; unique per job, so a fire time can never produce two executions.';
comment on column pgsched.executions.run_at is 'Earliest time it may be claimed (scheduled_for, or later for a retry''s backoff).';
comment on column pgsched.executions.attempt is 'Attempts started so far; with worker_id it fences heartbeats and completions.';
comment on column pgsched.executions.worker_id is 'Worker holding the lease (pgsched.workers.id) while running.';
comment on column pgsched.executions.lease_expires_at is 'The lease: renewed by the worker''s heartbeat; once passed, the reaper returns the execution to pending.';
comment on column pgsched.executions.result is 'JSON returned by the handler (bounded size).';
comment on column pgsched.executions.error is 'Why the latest attempt failed: {message, name, fatal?, timedOut?, attempt, workerId?, at} (at: ISO 8601 UTC). Written by the worker, the reaper (LeaseExpiredError) and cancel (CancelledError).';
comment on column pgsched.executions.output_uri is 'Where the output of the latest attempt that wrote any is stored: pgsched:output/<execution id>/<attempt> (rows of pgsched.execution_output), s3://<bucket>/<prefix><execution id>/<attempt>/ (part objects) or file://<path>. Set when the first chunk is stored, so it is known while the handler runs.';
comment on column pgsched.executions.concurrency_key is 'Copied from the job, so the claim reads one table.';
comment on column pgsched.executions.tenant is 'Copied from the job (fair share and pending quotas read it here); null on executions that had finished before migration 0016.';
comment on column pgsched.executions.attempt_log is 'The attempts that ended without success, oldest first: [{attempt, startedAt, endedAt, workerId, host, outcome (failed | lease expired), error}]; null before the first.';
comment on column pgsched.executions.last_worker_id is 'The worker that ran the latest attempt (worker_id is cleared when the attempt ends); its host is in pgsched.workers.';
comment on column pgsched.executions.start_deadline is 'Not started by then (first attempt), the execution expires: failed at attempt 0 with a StartDeadlineError (job status EXPIRED).';
comment on column pgsched.runs.queue is 'Copied from the job so the claim query reads one table.';
comment on column pgsched.runs.scheduled_for is 'The fire time this run belongs to; unique per job, so a fire time can never produce two executions.';
comment on column pgsched.runs.run_at is 'When it was due (scheduled_for, or later for a retry''s backoff): started_at minus run_at is the schedule lag.';
comment on column pgsched.runs.attempt is 'Attempts started so far; with worker_id it fences heartbeats and completions.';
comment on column pgsched.runs.worker_id is 'Worker holding the lease (pgsched.workers.id) while running.';
comment on column pgsched.runs.lease_expires_at is 'The lease: renewed by the worker''s heartbeat; once passed, the reaper returns the execution to pending.';
comment on column pgsched.runs.concurrency_key is 'Copied from the job, so the claim reads one table.';
comment on column pgsched.runs.tenant is 'Copied from the job (fair share and pending quotas read it here); null on executions that had finished before migration 0016.';
comment on column pgsched.runs.start_deadline is 'Not started by then (first attempt), the execution expires: failed at attempt 0 with a StartDeadlineError (job status EXPIRED).';

comment on column pgsched.executions.id is 'The execution id (UUID v7): one per fire time of a job, kept through its attempts.';
comment on column pgsched.executions.state is 'pending (a row of pgsched.due: due at run_at), running (pgsched.runs: claimed, held under a lease), or succeeded, failed or cancelled (pgsched.execution_history).';
comment on column pgsched.executions.started_at is 'When the latest attempt was claimed (a claimed execution waiting in the worker''s prefetch buffer counts as started); null before the first.';
comment on column pgsched.executions.finished_at is 'When the execution ended (succeeded, failed or cancelled); null while pending or running.';
comment on column pgsched.runs.started_at is 'When this attempt was claimed (it may wait in the worker''s prefetch buffer before its handler takes a slot).';
comment on column pgsched.webhook_deliveries.subscription_id is 'The subscription (pgsched.webhook_subscriptions.id) the event was delivered for.';
comment on column pgsched.webhook_deliveries.id is 'The delivery attempt''s id.';
comment on column pgsched.webhook_deliveries.job_id is 'The delivery job (a pgsched.webhook job, one per event and subscription), sent as the Pgsched-Delivery-Id header.';
comment on column pgsched.webhook_deliveries.event_type is 'The event''s type (submitted, started, succeeded, ...).';
comment on column pgsched.webhook_deliveries.event_id is 'The event''s id, as GET /v1/events numbers it (<batch>-<index>).';
comment on column pgsched.webhook_deliveries.attempt is 'The delivery job''s attempt: 1 for the first POST, then one per retry.';
comment on column pgsched.webhook_deliveries.at is 'When the POST was answered or failed.';
comment on column pgsched.webhook_deliveries.status_code is 'The receiver''s HTTP status; null when no answer came (error says why).';
comment on column pgsched.webhook_deliveries.ok is 'Whether the receiver answered 2xx (the delivery is done).';
comment on column pgsched.webhook_deliveries.error is 'Why the delivery failed: no answer (refused address, connection, timeout) or the status it answered.';
comment on column pgsched.webhook_deliveries.duration_ms is 'From sending the request until the answer or the error.';
comment on column pgsched.executions.job_id is 'The job (pgsched.jobs.id) this execution runs.';
comment on column pgsched.executions.type is 'The job''s type: the handler a worker runs it with (copied from the job).';
comment on column pgsched.executions.priority is 'Higher is claimed first (copied from the job, -1000 to 1000).';
comment on column pgsched.executions.max_attempts is 'Attempts allowed before the execution fails for good (copied from the job).';
comment on column pgsched.executions.timeout_ms is 'How long one attempt may run before it is aborted and counts as failed (copied from the job).';
comment on column pgsched.executions.created_at is 'When the execution was created (the submit, or the dispatcher for a recurring job''s fire time).';
