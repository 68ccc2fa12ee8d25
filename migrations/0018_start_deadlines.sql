-- Start deadlines: a job may say how late its work may start (seed: "run within 15 minutes of its
-- time"). Each execution gets start_deadline = its fire time + the job's start_deadline_ms. The claim
-- does not start a first attempt past its deadline, and the reaper ends such executions as failed
-- at attempt 0 with a StartDeadlineError: the job's status is then EXPIRED. Retries are not
-- expired: once an attempt started, the deadline was met.

alter table pgsched.jobs add column start_deadline_ms integer;
alter table pgsched.jobs add constraint jobs_start_deadline_ms_check check (start_deadline_ms between 1000 and 604800000);
comment on column pgsched.jobs.start_deadline_ms is 'Its executions must start within this many ms after their fire time, or they expire (null: no deadline).';

alter table pgsched.executions add column start_deadline timestamptz;
comment on column pgsched.executions.start_deadline is 'Not started by then (first attempt), the execution expires: failed at attempt 0 with a StartDeadlineError (job status EXPIRED).';

create index executions_start_deadline_idx on pgsched.executions (start_deadline)
  where state = 'pending' and attempt = 0 and start_deadline is not null;
