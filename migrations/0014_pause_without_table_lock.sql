-- pause_queue() no longer takes a SHARE lock on executions. That lock waited for every write
-- transaction on the table, and while it waited every new claim, heartbeat, completion and submit
-- queued behind it; it also cancelled a running autovacuum of the table, and held inside a longer
-- transaction it stopped the whole system until that committed. The pause is now just its row:
-- claims that start after it commits see it. Waiting for the claims already in flight (which
-- started before the pause was visible) is done after the commit, without blocking anyone, by
-- client.queues.pause() and the REST and CLI calls built on it (src/db/queries/queues.ts).

create or replace function pgsched.pause_queue(queue text) returns void
language plpgsql as $$
begin
  insert into pgsched.queues as q (name, paused, paused_at, updated_at)
  values (pause_queue.queue, true, now(), now())
  on conflict (name) do update set paused = true, paused_at = coalesce(q.paused_at, now()), updated_at = now();
end
$$;
comment on function pgsched.pause_queue(text) is 'Pauses a queue: claims that start after the calling transaction commits take nothing from it. Claims already in flight may still take rows; pgsched.claims_in_flight_since() counts them.';

-- Write transactions on executions (claims among them) that started before `since` and are still
-- open: after a pause commits, once this is 0 for a time taken after the commit, no claim that
-- missed the pause is left. Sessions of other roles are counted only with pg_read_all_stats.
create function pgsched.claims_in_flight_since(since timestamptz) returns integer
language sql stable as $$
  select count(distinct l.pid)::integer
    from pg_locks l
    join pg_stat_activity a on a.pid = l.pid
   where l.locktype = 'relation'
     and l.mode = 'RowExclusiveLock'
     and l.granted
     and l.relation in (select inhrelid from pg_inherits where inhparent = 'pgsched.executions'::regclass
                        union all select 'pgsched.executions'::regclass)
     and a.xact_start < since
     and l.pid <> pg_backend_pid()
$$;
comment on function pgsched.claims_in_flight_since(timestamptz) is 'Open write transactions on pgsched.executions (claims among them) that started before the given time.';
