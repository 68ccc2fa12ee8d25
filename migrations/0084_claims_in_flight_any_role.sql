-- pgsched.claims_in_flight_since(t) counts the write transactions on pgsched.runs (claims among them)
-- that began before t: after pgsched.pause_queue, an operator waits for it to be 0. It read each
-- transaction's start from pg_stat_activity.xact_start, which PostgreSQL shows of another role's
-- sessions only to superusers and members of pg_read_all_stats: asked by any other role (an operator
-- connected as the migrating role while the workers run as their service role, docs/roles.md), every
-- transaction's start was null, none counted, and the answer was 0 while claims were still in flight.
-- A transaction whose start the caller cannot see now counts as in flight: the answer may then include
-- claims that began after t (each a short statement), never leave one out. (The client, the API and the
-- CLI no longer call it: they wait for the transactions pg_locks shows, which every role sees.)

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
             -- null: another role's session, whose start this role may not see
             and coalesce(a.xact_start < claims_in_flight_since.since, true)
             and l.pid <> pg_backend_pid());
end
$function$;

comment on function pgsched.claims_in_flight_since(timestamptz) is
  'Open write transactions on pgsched.runs (claims among them) that started before the given time; one whose start the caller may not see (another role''s, unless the caller is a superuser or in pg_read_all_stats) counts too (migration 0084).';
