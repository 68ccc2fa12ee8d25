-- Two SQL functions took a null they cannot mean anything by:
-- - pgsched.set_queue_fair_share(queue, null) failed on the column's NOT NULL constraint, with the
--   row dumped; it now names the argument, as the other queue functions do since migration 0050 (a
--   bad queue name is still named first, by the settings trigger);
-- - pgsched.claims_in_flight_since(null) answered 0, which reads as "no claim of before the pause is
--   still running" to a script that polls it after pause_queue with an unset variable; it now refuses
--   the null. It becomes a PL/pgSQL function for that check; its query is as migration 0028 left it.
-- Both refusals use SQLSTATE 22023, as migration 0050's do.

CREATE OR REPLACE FUNCTION pgsched.set_queue_fair_share(queue text, fair_share boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  begin
    insert into pgsched.queues as q (name, fair_share, updated_at, fair_changed_at)
    values (set_queue_fair_share.queue, set_queue_fair_share.fair_share, now(), now())
    on conflict (name) do update set fair_share = excluded.fair_share, updated_at = now(), fair_changed_at = now(),
                                     fair_waiting_for = null, fair_settled_at = null;
  exception when not_null_violation then
    -- after the settings trigger has checked the queue's name: the only nullable argument left
    raise exception 'fair_share must be true or false, got null' using errcode = '22023';
  end;
  perform pg_notify('pgsched_executions', json_build_object('queues', json_build_array(set_queue_fair_share.queue), 'delayMs', 0)::text);
end
$function$;

CREATE OR REPLACE FUNCTION pgsched.claims_in_flight_since(since timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $function$
begin
  if claims_in_flight_since.since is null then
    raise exception 'since must be the instant to count claims from (read after the pause, e.g. now()), got null' using errcode = '22023';
  end if;
  return (select count(distinct l.pid)::integer
            from pg_locks l
            join pg_stat_activity a on a.pid = l.pid
           where l.locktype = 'relation'
             and l.mode = 'RowExclusiveLock'
             and l.granted
             and l.relation = 'pgsched.runs'::regclass
             and a.xact_start < claims_in_flight_since.since
             and l.pid <> pg_backend_pid());
end
$function$;
