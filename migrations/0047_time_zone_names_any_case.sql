-- pgsched.time_zone_known takes the zone database's names without a slash in any case, as the
-- TypeScript client, the API and the workers (ICU) do: `utc`, `japan` and `est5edt` were accepted over
-- REST and refused by pgsched.submit_job (names with a slash, `europe/berlin`, already were taken in
-- any case by both). The names refused stay refused in any case: Factory, localtime, posixrules and
-- the posix/ and right/ copies.

CREATE OR REPLACE FUNCTION pgsched.time_zone_known(tz text) returns boolean
language plpgsql stable as $$
begin
  if tz is null then
    return false;
  elsif upper(tz) = 'UTC' then
    return true;
  elsif lower(tz) in ('factory', 'localtime', 'posixrules') or lower(tz) like 'posix/%' or lower(tz) like 'right/%' then
    return false;
  elsif position('/' in tz) > 0 then
    if tz !~ '^[A-Za-z]+(/[A-Za-z0-9_+-]+)+$' then
      return false;
    end if;
    begin
      perform now() at time zone tz;
    exception when others then
      return false;
    end;
    return true;
  end if;
  return exists (select 1 from pg_timezone_names n where lower(n.name) = lower(tz));
end
$$;
