-- Event batches compressed with lz4 instead of pglz, where the server has it (PostgreSQL 14 or later,
-- built with lz4, as the common packages are).
--
-- A batch holds the arrays of one statement's changes (up to a claim's or a completion's few hundred):
-- its text arrays repeat a few values and compress well, so each insert compressed them, and with
-- pglz that was half of what capturing cost the database: in a 100,000-job burn-down with a listener,
-- `perf` counted 150-180 samples in pglz_compress against 13 in lz4's (PostgreSQL's CPU with capture
-- on: about 2.3 µs more per job with pglz, 0.2 µs with lz4; docs/performance.md). The arrays of ids
-- do not compress and are stored out of line either way. Only batches written from now on change.
do $$
begin
  if current_setting('server_version_num')::int >= 140000 then
    execute 'alter table pgsched.event_batches
               alter column types set compression lz4, alter column tenants set compression lz4,
               alter column job_ids set compression lz4, alter column execution_ids set compression lz4,
               alter column queues set compression lz4, alter column job_types set compression lz4,
               alter column attempts set compression lz4';
  end if;
exception when feature_not_supported then
  -- a server built without lz4: the batches stay compressed with pglz
  raise notice 'pgsched: this server has no lz4, event batches stay compressed with pglz';
end
$$;
