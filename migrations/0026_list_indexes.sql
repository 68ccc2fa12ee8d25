-- Indexes for listing jobs with a long history (GET /v1/jobs, `scheduler bench --only list`).
--
-- A page of jobs is read newest first through jobs_tenant_list_idx, each job's status being
-- decided by its latest execution; that stops after a page of matches, so it is quick while
-- matches are dense and reads every job of the tenant when they are rare. These indexes let a
-- sparse filter find its matches directly (db/queries/job-candidates.ts):
--
-- * paused and cancelled jobs: a partial index holding only them.
-- * failed and cancelled executions, by job: a partial index holding only them. Nothing enters
--   it on the hot path (submit, claim, heartbeat, successful completion): only a run that fails
--   for good, misses its start deadline or is cancelled adds an entry.
-- * schedules stopped by an error: a partial index holding only them.
--
-- Each index is built in this migration's transaction, holding a lock that blocks writes to its
-- table meanwhile (CREATE INDEX CONCURRENTLY cannot run on a partitioned table in a
-- transaction). With 10,000,000 executions (9,000,000 jobs) on the benchmark machine each took
-- under 10 s. Indexes by type and by queue over every job were measured and left out: they made
-- every submit write two more index entries (batch submit about a fifth slower). Sizes and
-- figures: docs/performance.md, "Listing jobs with history in place".

create index jobs_tenant_inactive_idx on pgsched.jobs (tenant, state, id desc) where state in ('paused', 'cancelled');
create index executions_ended_badly_idx on pgsched.executions (state, job_id) include (id, attempt) where state in ('failed', 'cancelled');
create index triggers_error_idx on pgsched.triggers (job_id) where error is not null;
