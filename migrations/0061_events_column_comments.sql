-- The view pgsched.events, which an operator reads to follow what happened to a job, had no comment on
-- any of its columns; each now says what it holds, as the columns of pgsched.event_batches it unnests do.

comment on column pgsched.events.id is 'The event''s id in the stream (GET /v1/events, webhook deliveries): <seq>-<index>; null until its batch is numbered.';
comment on column pgsched.events.seq is 'The number of the event''s batch in the stream (pgsched.event_batches.seq), given after commit; null until then.';
comment on column pgsched.events.index is 'The event''s place in its batch, from 0.';
comment on column pgsched.events.batch_id is 'The batch the event is in (pgsched.event_batches.id): one per statement that changed state.';
comment on column pgsched.events.at is 'When the transaction that made the change began (now()); the same for every event of a batch.';
comment on column pgsched.events.type is 'submitted | started | retrying (a failed attempt with attempts left, or an expired lease) | succeeded | failed | cancelled | expired (start deadline missed) | paused | resumed.';
comment on column pgsched.events.tenant is 'The tenant of the job.';
comment on column pgsched.events.job_id is 'The job that changed (pgsched.jobs.id).';
comment on column pgsched.events.execution_id is 'The execution that changed; null for a change of the job alone (a recurring job submitted, paused, resumed or cancelled with nothing running).';
comment on column pgsched.events.queue is 'The queue of the job.';
comment on column pgsched.events.job_type is 'The job''s type (handler name).';
comment on column pgsched.events.attempt is 'The execution''s attempt after the change (0: not started; null for a change of the job alone).';
comment on column pgsched.events.error is 'Why the attempt ended, for retrying, failed and expired events ({message, name, fatal?, timedOut?}, the message cut to 1,000 characters); null for the other events and for events recorded before migration 0052.';
