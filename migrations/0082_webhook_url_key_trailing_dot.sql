-- Webhook URLs whose hosts differ only in a trailing dot are one receiver.
--
-- `https://example.com./hook` and `https://example.com/hook` name the same host (a fully qualified
-- name's trailing dot; the allow-list already reads them as one), but pgsched.webhook_url_key kept the
-- dot, so a tenant could subscribe the receiver twice in one queue and get every event twice. The key
-- now drops it. Subscriptions that become repeats of an earlier one under this comparison are kept as
-- they were and marked duplicate_of (left out of the unique index), as migrations 0068 and 0071 did,
-- but only among those that repeated none: the repeats migration 0073 pointed at a receiver's
-- subscription stay so. The index is built again on the new key.

create or replace function pgsched.webhook_url_key(url text) returns text
language plpgsql immutable strict parallel safe as $$
declare
  m text[] := regexp_match(url, '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*@)?(\[[^]/?#]*\]|[^/?#:@]*)(:[0-9]*)?([/?#].*)?$');
  rest text;
  path text;
  query text := '';
  segments text[];
  kept text[] := '{}';
  seg text;
  i integer;
  n integer;
  port text := '';
  scheme text;
begin
  if m is null then
    return url;   -- not of the form checked at creation: compared as it is
  end if;
  scheme := lower(m[1]);
  -- the port: any run of digits read as a number; dropped when empty or the scheme's default
  if m[4] is not null and m[4] <> ':' then
    port := ltrim(substr(m[4], 2), '0');
    if port = '' then
      port := '0';
    end if;
    if length(port) > 5 then
      port := ':' || substr(m[4], 2);   -- no port number: left as it is
    elsif port::int = (case scheme when 'http' then 80 when 'https' then 443 end) then
      port := '';
    else
      port := ':' || port;
    end if;
  end if;
  -- the fragment is never sent: dropped
  rest := split_part(coalesce(m[5], ''), '#', 1);
  if strpos(rest, '?') > 0 then
    path := left(rest, strpos(rest, '?') - 1);
    query := substr(rest, strpos(rest, '?'));
  else
    path := rest;
  end if;
  if left(path, 1) <> '/' then
    path := '/' || path;   -- an empty path is "/"
  end if;
  -- dot segments resolved, "." and ".." as %2e too, a trailing one leaving the path ending in "/"
  segments := string_to_array(substr(path, 2), '/');
  n := coalesce(array_length(segments, 1), 0);
  for i in 1 .. n loop
    seg := lower(segments[i]);
    if seg in ('.', '%2e') then
      if i = n then
        kept := kept || ''::text;
      end if;
    elsif seg in ('..', '.%2e', '%2e.', '%2e%2e') then
      kept := kept[1:coalesce(array_length(kept, 1), 0) - 1];
      if i = n then
        kept := kept || ''::text;
      end if;
    else
      kept := kept || segments[i];
    end if;
  end loop;
  -- a fully qualified name's trailing dot (example.com. is example.com) dropped
  return scheme || '://' || coalesce(m[2], '') || regexp_replace(lower(m[3]), '\.$', '') || port || '/' || array_to_string(kept, '/') || query;
end
$$;
comment on function pgsched.webhook_url_key(text) is 'A webhook URL as compared with the others of its tenant and queue (migrations 0068, 0071, 0082): scheme and host in lower case, the host without a trailing dot, no default or empty port (any run of digits read as a number), an empty path as "/", dot segments resolved, no fragment; the rest as given.';

drop index pgsched.webhook_subscriptions_target_key;

-- Among the subscriptions that repeat no other (duplicate_of null), those that now share a key: the
-- earliest stays, the others become its repeats, and so do the repeats they had. Repeats already
-- marked, and whom they repeat, stay as they are.
with demoted as (
  select id, first_id
    from (select id, first_value(id) over (partition by tenant, queue, md5(pgsched.webhook_url_key(url)) order by created_at, id) as first_id
            from pgsched.webhook_subscriptions
           where duplicate_of is null) g
   where g.first_id <> g.id
)
update pgsched.webhook_subscriptions s
   set duplicate_of = d.first_id
  from demoted d
 where s.id = d.id or s.duplicate_of = d.id;

create unique index webhook_subscriptions_target_key on pgsched.webhook_subscriptions (tenant, queue, md5(pgsched.webhook_url_key(url))) where duplicate_of is null;
comment on index pgsched.webhook_subscriptions_target_key is 'A tenant subscribes a receiver once per queue (migrations 0064, 0068, 0071, 0082: URLs compared by pgsched.webhook_url_key); subscriptions kept from before that repeat another (duplicate_of) are left out.';
comment on column pgsched.webhook_subscriptions.duplicate_of is 'Set by migrations 0064, 0068, 0071 and 0082 on a subscription that repeated an earlier one of its tenant (same queue, and the same URL, compared by pgsched.webhook_url_key since 0068; that one''s id), kept as it was; null for every other, and once its URL changes to another receiver. Left out of webhook_subscriptions_target_key.';
