-- pgsched.time_zone_known refuses POSIX rules written as Area/Location names, and ICU's names that are
-- no IANA zones, as the TypeScript client and the API do (isIanaTimeZone in src/core/zone.ts):
-- - a name with a slash was checked with `now() at time zone`, and PostgreSQL reads one it has no
--   zone file for as a POSIX rule when it has an offset: Etc/GMT+05, Etc/GMT+15, Etc/UTC+1,
--   Europe/Berlin1 (a zone named EUROPE/BERLIN one hour behind UTC), Foo/Bar5. pgsched.submit_job
--   took them, and the dispatcher, which reads zones with ICU, failed the job at its first pass
--   (RangeError: Invalid time zone specified). A POSIX rule has an offset, hence a digit, and the IANA
--   database's only names with a slash and a digit are Etc/GMT-14 to Etc/GMT+12 without a leading
--   zero and Etc/GMT0: a name with a slash and a digit must now be one of those, in any case. The
--   same pattern refuses SystemV/EST5EDT and the other SystemV/ names, which ICU reads and which a
--   server without their zone files took as POSIX rules.
-- - US/Pacific-New and Canada/East-Saskatchewan, which ICU reads and the database removed (2020b and
--   2017c), are refused whatever the server's zone files.
-- A name with a slash and no digit is still checked with `now() at time zone` alone, which then
-- answers whether PostgreSQL has the zone file: no pg_timezone_names scan (about 50 ms) on a submit
-- in Europe/Berlin. The rest of the function is as migration 0047 left it.

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
    elsif lower(tz) in ('canada/east-saskatchewan', 'us/pacific-new') then
      return false;  -- read by ICU, removed from the IANA database
    elsif tz ~ '[0-9]' and tz !~* '^etc/gmt([+-]?0|-([1-9]|1[0-4])|\+([1-9]|1[0-2]))$' then
      return false;  -- a POSIX rule (Europe/Berlin1) or a SystemV/ name: no zone of the IANA database
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
