-- pgsched.time_zone_known checks a name without a slash against the IANA database's names without a
-- slash, as the TypeScript client and the API do (IANA_NAMES_WITHOUT_SLASH in src/core/zone.ts), then
-- asks PostgreSQL whether it reads the name, instead of scanning pg_timezone_names: that scan reads
-- every zone file of the server, 25 to 90 ms per call, so a submit in EST5EDT or Japan from SQL cost
-- that much. The names PostgreSQL lists without a slash are these 44 and Factory, localtime and
-- posixrules, which were refused already. An abbreviation that is no zone (CEST, PDT) and a POSIX rule
-- (EST5, XYZ-3) are still refused: neither is in the list. The rest of the function is as migration
-- 0057 left it.

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
  elsif lower(tz) not in (
    'cet', 'cst6cdt', 'cuba', 'eet', 'est', 'est5edt', 'egypt', 'eire', 'gb', 'gb-eire', 'gmt', 'gmt+0', 'gmt-0', 'gmt0',
    'greenwich', 'hst', 'hongkong', 'iceland', 'iran', 'israel', 'jamaica', 'japan', 'kwajalein', 'libya', 'met', 'mst',
    'mst7mdt', 'nz', 'nz-chat', 'navajo', 'prc', 'pst8pdt', 'poland', 'portugal', 'roc', 'rok', 'singapore', 'turkey',
    'uct', 'universal', 'w-su', 'wet', 'zulu'
  ) then
    return false;
  end if;
  begin
    perform now() at time zone tz;
  exception when others then
    return false;
  end;
  return true;
end
$$;
