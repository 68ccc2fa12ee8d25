-- Webhooks: a subscription whose deliveries keep failing is disabled, and a subscription's URL is
-- compared with its scheme and host in lower case and without its default port.
--
-- 1. Disabling.
-- Each event of a subscription became a delivery job retried for up to 27 minutes, whatever the
-- tenant's quota (migration 0064). A receiver down for hours while its tenant is busy thus had a
-- pending delivery job per event, without bound, each retried, and a failed job per event kept for
-- the retention. As Stripe, GitLab or Svix do, a subscription whose delivery attempts have failed
-- for a while with none succeeding is now disabled: its tenant's events are no longer turned into
-- deliveries for it (its event listener ends, so while no other listens nothing is captured either),
-- its deliveries still to come end at their next attempt without sending, and it says so (disabled_at,
-- disabled_reason) until an update enables it again. The workers decide, when they record a failed
-- attempt (SCHEDULER_WEBHOOK_DISABLE_AFTER_MS, _FAILURES). The subscription row is written only when
-- it starts or stops failing and when it is disabled, not at every attempt: failing_since is when
-- its first failed attempt after the last success was recorded, and the failed attempts since are
-- counted from webhook_deliveries (up to the threshold, through webhook_deliveries_subscription_idx)
-- only once failing_since is older than the threshold. enabled_at, where the dispatcher read
-- created_at, is when events began to be sent to it: a subscription enabled again is sent the events
-- from then on, not those of the time it was disabled.

alter table pgsched.webhook_subscriptions
  add column failing_since timestamptz,
  add column disabled_at timestamptz,
  add column disabled_reason text,
  add column enabled_at timestamptz;
update pgsched.webhook_subscriptions set enabled_at = created_at;
alter table pgsched.webhook_subscriptions
  alter column enabled_at set default now(),
  alter column enabled_at set not null,
  add constraint webhook_subscriptions_disabled_check check ((disabled_at is null) = (disabled_reason is null));

comment on column pgsched.webhook_subscriptions.failing_since is 'When the first failed delivery attempt since the last successful one was recorded; null while the last recorded attempt succeeded (or none was made), and once it is enabled again. Written only when it starts or stops failing.';
comment on column pgsched.webhook_subscriptions.disabled_at is 'When the subscription was disabled (its delivery attempts failing for longer than the workers'' SCHEDULER_WEBHOOK_DISABLE_AFTER_MS, with at least SCHEDULER_WEBHOOK_DISABLE_AFTER_FAILURES failed attempts and none succeeding, or by an update): no event is sent to it until an update enables it. Null: enabled.';
comment on column pgsched.webhook_subscriptions.disabled_reason is 'Why it was disabled (the failures and the last attempt''s error, or an update); null while enabled.';
comment on column pgsched.webhook_subscriptions.enabled_at is 'When events began to be sent to it: its creation, or when it was last enabled again. The events of its tenant from then on are delivered.';

-- 2. One subscription per receiver.
-- https://Example.COM/h and https://example.com:443/h are the same receiver as https://example.com/h,
-- and were two subscriptions. URLs are now compared by pgsched.webhook_url_key, which lowers the case
-- of the scheme and host, drops a default (or empty) port and gives an empty path its "/": what a URL
-- parser does, so what is sent does not change (the URL is kept as given). User info, path, query and
-- fragment are compared as they are (they may be case-sensitive). Subscriptions that become repeats of
-- an earlier one under this comparison are kept, marked duplicate_of, as migration 0064 did.

create function pgsched.webhook_url_key(url text) returns text
language sql immutable strict parallel safe
return (
  select case
           when m is null then url   -- not of the form checked at creation: compared as it is
           else lower(m[1]) || '://' || coalesce(m[2], '') || lower(m[3])
                || case
                     when m[4] is null or m[4] = ':' then ''
                     when length(m[4]) > 6 then m[4]   -- no port number: left as it is
                     when substr(m[4], 2)::int = case lower(m[1]) when 'http' then 80 when 'https' then 443 end then ''
                     else ':' || substr(m[4], 2)::int::text
                   end
                || case when m[5] is null or left(m[5], 1) <> '/' then '/' || coalesce(m[5], '') else m[5] end
         end
    from (select regexp_match(url, '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*@)?(\[[^]/?#]*\]|[^/?#:@]*)(:[0-9]*)?([/?#].*)?$') as m) r
);
comment on function pgsched.webhook_url_key(text) is 'A webhook URL as compared with the others of its tenant and queue (migration 0068): scheme and host in lower case, no default or empty port, an empty path as "/"; the rest as given.';

drop index pgsched.webhook_subscriptions_target_key;

update pgsched.webhook_subscriptions s
   set duplicate_of = g.first_id
  from (select id, first_value(id) over (partition by tenant, queue, md5(pgsched.webhook_url_key(url)) order by created_at, id) as first_id
          from pgsched.webhook_subscriptions) g
 where g.id = s.id and g.first_id <> s.id and s.duplicate_of is distinct from g.first_id;

create unique index webhook_subscriptions_target_key on pgsched.webhook_subscriptions (tenant, queue, md5(pgsched.webhook_url_key(url))) where duplicate_of is null;
comment on index pgsched.webhook_subscriptions_target_key is 'A tenant subscribes a receiver once per queue (migrations 0064, 0068: URLs compared by pgsched.webhook_url_key); subscriptions kept from before that repeat another (duplicate_of) are left out.';
comment on column pgsched.webhook_subscriptions.duplicate_of is 'Set by migrations 0064 and 0068 on a subscription that repeated an earlier one of its tenant (same queue, and the same URL, compared by pgsched.webhook_url_key since 0068; that one''s id), kept as it was; null for every other, and once its URL changes to another receiver. Left out of webhook_subscriptions_target_key.';
