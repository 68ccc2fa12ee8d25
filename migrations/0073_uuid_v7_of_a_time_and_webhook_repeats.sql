-- pgsched.uuid_v7(at): the time-ordered UUID of a given instant, as pgsched.uuid_v7() makes of the
-- clock's (milliseconds, the fraction of the millisecond in 1/4096 steps, random bits). A row that
-- keeps both an id and the time it was written takes both from one reading of the clock: two
-- readings, one for each, could be milliseconds apart on a busy server (the process descheduled in
-- between), so that the rows' order by id differed from their order by time.
create function pgsched.uuid_v7(at timestamptz) returns uuid
language sql volatile parallel safe as $$
  select encode(
    overlay(uuid_send(gen_random_uuid())
            placing substring(int8send(t.us / 1000) from 3)                              -- unix_ts_ms, 48 bits
                    || int2send((28672 + (t.us % 1000) * 4096 / 1000)::smallint)          -- version 7 (0x7000), rand_a
            from 1 for 8),
    'hex')::uuid
    from (select (extract(epoch from at) * 1000000)::bigint as us) t
$$;
comment on function pgsched.uuid_v7(timestamptz) is 'The time-ordered UUID (version 7) of the instant given: milliseconds, then the fraction of the millisecond in 1/4096 steps, then random bits.';

-- A subscription kept as a repeat of another (duplicate_of) takes that one's place under the unique
-- key once it is deleted or moved to another receiver (the oldest repeat; the others repeat it),
-- rather than naming a subscription that no longer exists or sends elsewhere. Repeats of one deleted
-- before this migration are promoted here (should a subscription of their receiver that the key holds
-- have been written since, by SQL, they repeat that one).
with orphans as (
  select s.id, s.duplicate_of as gone, s.tenant, s.queue, s.url
    from pgsched.webhook_subscriptions s
   where s.duplicate_of is not null
     and not exists (select 1 from pgsched.webhook_subscriptions o where o.id = s.duplicate_of)
),
heads as (
  select distinct on (o.gone) o.gone, coalesce(h.id, o.id) as head
    from orphans o
    left join lateral (select h.id from pgsched.webhook_subscriptions h
                        where h.duplicate_of is null and h.tenant = o.tenant and h.queue = o.queue
                          and pgsched.webhook_url_key(h.url) = pgsched.webhook_url_key(o.url)
                        limit 1) h on true
   order by o.gone, o.id
)
update pgsched.webhook_subscriptions s
   set duplicate_of = nullif(h.head, s.id)
  from orphans o
  join heads h on h.gone = o.gone
 where s.id = o.id;
comment on column pgsched.webhook_subscriptions.duplicate_of is 'Set by migrations 0064, 0068 and 0071 on a subscription that repeated an earlier one of its tenant (same queue, and the same URL, compared by pgsched.webhook_url_key since 0068; that one''s id), kept as it was; null for every other, once its URL changes to another receiver, and for the oldest repeat once the one it repeated is deleted or moved to another receiver (the others then repeat it). Left out of webhook_subscriptions_target_key.';
