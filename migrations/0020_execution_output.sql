-- The default output store: what handlers write to ctx.output, kept in the database in chunks, so
-- an API on any host can stream it (also while the handler still writes). A worker appends one row
-- per flush of a run's buffer (every ~250 ms or 64 KiB); the rows of one attempt, in seq order,
-- are its output. Not partitioned and without a foreign key: rows are only appended, read by
-- (execution_id, attempt) and deleted by the pruner together with their execution.

create table pgsched.execution_output (
  execution_id uuid not null,
  attempt integer not null,
  -- one sequence for every writer: an attempt handed back at shutdown and run again under the same
  -- number appends after the first run's chunks instead of colliding with them
  seq bigint generated always as identity,
  data bytea not null,
  created_at timestamptz not null default now(),
  constraint execution_output_pkey primary key (execution_id, attempt, seq)
);
comment on table pgsched.execution_output is 'Handler output (ctx.output) in chunks, one row per flush of a run''s buffer; an attempt''s output is its rows in seq order. Named by executions.output_uri = pgsched:output/<execution id>/<attempt>. Deleted with the execution by the pruner.';
comment on column pgsched.execution_output.seq is 'Order of the chunks; from one sequence shared by all executions, so only the order within an attempt means anything.';

comment on column pgsched.executions.output_uri is 'Where the output of the latest attempt that wrote any is stored: pgsched:output/<execution id>/<attempt> (rows of pgsched.execution_output), s3://<bucket>/<prefix><execution id>/<attempt>/ (part objects) or file://<path>. Set when the first chunk is stored, so it is known while the handler runs.';
