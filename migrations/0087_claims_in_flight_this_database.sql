-- pgsched.claims_in_flight_since counts the write transactions on this database's pgsched.runs only.
-- pg_locks lists the locks of every database of the cluster, and a relation's OID is the same in
-- databases made from one template (or restored alike): a pause waited for the claims of another
-- pgsched database on the same server. The rest of the function is as migration 0084 left it.

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
             and l.database = (select d.oid from pg_database d where d.datname = current_database())
             and l.mode = 'RowExclusiveLock'
             and l.granted
             and l.relation = 'pgsched.runs'::regclass
             -- null: another role's session, whose start this role may not see
             and coalesce(a.xact_start < claims_in_flight_since.since, true)
             and l.pid <> pg_backend_pid());
end
$function$;

comment on function pgsched.claims_in_flight_since(timestamptz) is
  'Open write transactions on this database''s pgsched.runs (claims among them) that started before the given time; one whose start the caller may not see (another role''s, unless the caller is a superuser or in pg_read_all_stats) counts too (migrations 0084, 0087).';
