-- Two corrections.
--
-- An event batch is stamped when it is written (clock_timestamp()), not when its transaction began
-- (now()): the webhook dispatcher hands a subscription the events stamped at or after it was enabled,
-- so an event written by a transaction that began before the subscription was made, and wrote after
-- it committed (a submit in the application's own transaction, pgsched.cancel_job in a psql session),
-- was never delivered. A statement captures an event only once it sees a listener, so its stamp now
-- comes after the subscription's.
--
-- pgsched.open_transactions() names the transactions open in this database only: fair share's
-- settling (pgsched.queues.fair_waiting_for) waited for every open transaction of the server,
-- including other databases', which cannot write this one's executions.
alter table pgsched.event_batches alter column at set default clock_timestamp();
comment on column pgsched.event_batches.at is 'When the batch was written (clock_timestamp(): after the statement saw its listeners, not when its transaction began).';

create or replace function pgsched.open_transactions() returns text[]
language sql volatile as $$
  select coalesce(array_agg(l.virtualxid), '{}')
    from pg_locks l
    join pg_stat_activity a on a.pid = l.pid
   where l.locktype = 'virtualxid' and l.granted and l.pid <> pg_backend_pid()
     and a.datname = current_database()
$$;
comment on function pgsched.open_transactions() is 'The virtual transaction ids of the transactions open now in this database, the caller''s aside.';
