-- Events of failed attempts carry their error: a `retrying`, `failed` or `expired` event says why
-- the attempt ended (the error's name and message, and whether it was fatal or timed out), so that a
-- stream's reader or a webhook's receiver need not look the execution up to learn it.
--
-- A batch holds the errors as one more array, element i the error of its i-th event: null for the
-- whole batch when none of its events has one (a claim's, a completion's, a submit's), so the
-- common batches store nothing more. Each error is the attempt's error with its message cut to
-- 1,000 characters (the execution's error keeps it whole). Batches written before this migration
-- have none.

alter table pgsched.event_batches add column errors jsonb[];
alter table pgsched.event_batches add constraint event_batches_errors_check
  check (errors is null or cardinality(errors) = cardinality(types));
comment on column pgsched.event_batches.errors is 'Why each attempt ended, for retrying, failed and expired events ({message, name, fatal?, timedOut?}, the message cut to 1,000 characters; null for the other events); null when no event of the batch has one.';

do $$
begin
  if current_setting('server_version_num')::int >= 140000 then
    execute 'alter table pgsched.event_batches alter column errors set compression lz4';
  end if;
exception when feature_not_supported then
  raise notice 'pgsched: this server has no lz4, event errors stay compressed with pglz';
end
$$;

create or replace view pgsched.events as
select b.seq::text || '-' || (e.n - 1)::text as id,
       b.seq, (e.n - 1)::int as index, b.id as batch_id, b.at,
       e.type, e.tenant, e.job_id, e.execution_id, e.queue, e.job_type, e.attempt, e.error
  from pgsched.event_batches b
 cross join lateral unnest(b.types, b.tenants, b.job_ids, b.execution_ids, b.queues, b.job_types, b.attempts, b.errors)
       with ordinality as e (type, tenant, job_id, execution_id, queue, job_type, attempt, error, n);
comment on view pgsched.events is 'One row per event of pgsched.event_batches; id (<seq>-<index>, null until numbered) is the stream''s event id; error: why the attempt ended (retrying, failed and expired events).';
