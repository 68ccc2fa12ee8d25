-- Traces: a job submitted while an OpenTelemetry SDK records a span keeps that span's W3C
-- traceparent, so each run (a span of the worker's) joins the submit's trace and links to it.
-- Null when nothing traced the submit (no SDK registered, or a submit through pgsched.submit_job).

alter table pgsched.jobs add column traceparent text;
-- NOT VALID: every existing row is null, so checking them would only scan a large table under its
-- ACCESS EXCLUSIVE lock; new and updated rows are checked all the same.
alter table pgsched.jobs add constraint jobs_traceparent_check check (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') not valid;
comment on column pgsched.jobs.traceparent is 'W3C traceparent (version 00) of the span that submitted the job; its runs are traced as its children (null: not traced).';
