-- The single-column checks of pgsched.jobs become the checks of domains, with the same names and
-- expressions. PostgreSQL builds a table's CHECK constraints anew for every statement and for every
-- partition the statement writes (parsing and planning each expression): a submit of a dozen jobs,
-- whose rows spread over the four partitions, built the twelve checks four times, about a quarter of
-- the statement's time (docs/performance.md, "What a statement of a dozen rows pays"). A domain's
-- checks are planned once per session (PostgreSQL's type cache) and compiled once per statement,
-- whatever the partitions. The values accepted are exactly the same, and a violation still names the
-- check (`value for domain pgsched.job_priority violates check constraint "jobs_priority_check"`).
-- Three checks stay on the table: the one over two columns (jobs_backoff_check), and those of the
-- two indexed columns, tenant and state, whose change of type would rebuild the table's indexes.
--
-- Each column is first given its domain without a check: a change of type that needs no rewrite of
-- the table nor of its indexes (the domain's base type is the column's). The checks are then added
-- NOT VALID: every existing row passed the table's checks they replace, and validating would read
-- the whole table; they hold for every value written from now on. An operator who wants
-- pg_constraint to show them validated can run, at any time, ALTER DOMAIN pgsched.job_type
-- VALIDATE CONSTRAINT jobs_type_check (and so on).

create domain pgsched.job_type as text;
create domain pgsched.job_queue as text;
create domain pgsched.job_priority as smallint;
create domain pgsched.job_max_attempts as integer;
create domain pgsched.job_timeout_ms as integer;
create domain pgsched.job_idempotency_key as text;
create domain pgsched.job_concurrency_key as text;
create domain pgsched.job_start_deadline_ms as integer;
create domain pgsched.job_traceparent as text;

alter table pgsched.jobs
  drop constraint jobs_type_check,
  drop constraint jobs_queue_check,
  drop constraint jobs_priority_check,
  drop constraint jobs_max_attempts_check,
  drop constraint jobs_timeout_ms_check,
  drop constraint jobs_idempotency_key_check,
  drop constraint jobs_concurrency_key_check,
  drop constraint jobs_start_deadline_ms_check,
  drop constraint jobs_traceparent_check,
  alter column type type pgsched.job_type,
  alter column queue type pgsched.job_queue,
  alter column priority type pgsched.job_priority,
  alter column max_attempts type pgsched.job_max_attempts,
  alter column timeout_ms type pgsched.job_timeout_ms,
  alter column idempotency_key type pgsched.job_idempotency_key,
  alter column concurrency_key type pgsched.job_concurrency_key,
  alter column start_deadline_ms type pgsched.job_start_deadline_ms,
  alter column traceparent type pgsched.job_traceparent;

alter domain pgsched.job_type add constraint jobs_type_check check (value ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' and length(value) <= 128) not valid;
alter domain pgsched.job_queue add constraint jobs_queue_check check (value ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' and length(value) <= 64) not valid;
alter domain pgsched.job_priority add constraint jobs_priority_check check (value >= -1000 and value <= 1000) not valid;
alter domain pgsched.job_max_attempts add constraint jobs_max_attempts_check check (value >= 1 and value <= 1000) not valid;
alter domain pgsched.job_timeout_ms add constraint jobs_timeout_ms_check check (value >= 1 and value <= 86400000) not valid;
alter domain pgsched.job_idempotency_key add constraint jobs_idempotency_key_check check (length(value) >= 1 and length(value) <= 255) not valid;
alter domain pgsched.job_concurrency_key add constraint jobs_concurrency_key_check check (length(value) >= 1 and length(value) <= 255) not valid;
alter domain pgsched.job_start_deadline_ms add constraint jobs_start_deadline_ms_check check (value >= 1000 and value <= 604800000) not valid;
alter domain pgsched.job_traceparent add constraint jobs_traceparent_check check (
  value ~ '^00-[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$' and length(value) = 55 and substr(value, 36, 1) = '-' and substr(value, 53, 1) = '-'
) not valid;
