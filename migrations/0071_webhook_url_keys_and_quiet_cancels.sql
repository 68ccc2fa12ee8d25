-- Webhooks: URLs compared as the receiver sees them, and a disabling that cancels deliveries without
-- a subtransaction per job.
--
-- 1. The same receiver, more spellings.
-- pgsched.webhook_url_key (migration 0068) compared the fragment and the path's dot segments as
-- written, and left a port of more than five characters alone. But the fragment is never sent, a
-- URL parser (the worker's, which sends) resolves "." and ".." segments (and their %2e spellings),
-- and reads :0000443 as port 443. So https://example.com/h#x, https://example.com/a/../h and
-- https://example.com:0000443/h were other subscriptions of https://example.com/h, and each event was
-- delivered to it twice. The key now drops the fragment, resolves dot segments (RFC 3986 5.2.4, as
-- the WHATWG parser does) and reads any run of port digits as a number. Subscriptions that become
-- repeats of an earlier one under this comparison are kept, marked duplicate_of, as 0064 and 0068
-- did. Left as they are (the URL's bytes compared): the case of percent-escapes, internationalised
-- host names against their punycode, and IPv4 addresses in other notations.
--
-- 2. Cancels without subtransactions.
-- pgsched.webhook_deliveries_cancel (0070) called pgsched.cancel_job once per delivery, up to 1,000,
-- each in a BEGIN … EXCEPTION block to pass over a job that finished meanwhile: a subtransaction per
-- job, each with a transaction id (it locks and writes). Past 64 of them a transaction's
-- subtransactions no longer fit the server's per-backend cache, and until it commits every other
-- session's snapshot checks take the slower path through pg_subtrans, on the busiest tables.
-- pgsched.cancel_job_unless_ended does what cancel_job does, returning instead of raising when the
-- job is missing, already cancelled or finished; cancel_job is now that and the raise, and
-- webhook_deliveries_cancel calls it with no exception block.

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
  return scheme || '://' || coalesce(m[2], '') || lower(m[3]) || port || '/' || array_to_string(kept, '/') || query;
end
$$;
comment on function pgsched.webhook_url_key(text) is 'A webhook URL as compared with the others of its tenant and queue (migrations 0068, 0071): scheme and host in lower case, no default or empty port (any run of digits read as a number), an empty path as "/", dot segments resolved, no fragment; the rest as given.';

drop index pgsched.webhook_subscriptions_target_key;

update pgsched.webhook_subscriptions s
   set duplicate_of = g.first_id
  from (select id, first_value(id) over (partition by tenant, queue, md5(pgsched.webhook_url_key(url)) order by created_at, id) as first_id
          from pgsched.webhook_subscriptions) g
 where g.id = s.id and g.first_id <> s.id and s.duplicate_of is distinct from g.first_id;

create unique index webhook_subscriptions_target_key on pgsched.webhook_subscriptions (tenant, queue, md5(pgsched.webhook_url_key(url))) where duplicate_of is null;
comment on index pgsched.webhook_subscriptions_target_key is 'A tenant subscribes a receiver once per queue (migrations 0064, 0068, 0071: URLs compared by pgsched.webhook_url_key); subscriptions kept from before that repeat another (duplicate_of) are left out.';
comment on column pgsched.webhook_subscriptions.duplicate_of is 'Set by migrations 0064, 0068 and 0071 on a subscription that repeated an earlier one of its tenant (same queue, and the same URL, compared by pgsched.webhook_url_key since 0068; that one''s id), kept as it was; null for every other, and once its URL changes to another receiver. Left out of webhook_subscriptions_target_key.';

create function pgsched.cancel_job_unless_ended(job_id uuid, out outcome text, out status text)
language plpgsql as $$
#variable_conflict use_column
declare
  one_time_ended boolean;
begin
  -- locked as pgsched.job_lock_for locks: its trigger, then the job
  perform 1 from pgsched.triggers t where t.job_id = cancel_job_unless_ended.job_id for update;
  perform 1 from pgsched.jobs j where j.id = cancel_job_unless_ended.job_id for update;
  if not found then
    outcome := 'not found';
    return;
  end if;
  status := pgsched.job_status(cancel_job_unless_ended.job_id);
  if exists (select 1 from pgsched.jobs j where j.id = cancel_job_unless_ended.job_id and j.state = 'cancelled') then
    outcome := 'already cancelled';
    return;
  end if;
  -- finished: a one-time job's execution ended, or a recurring job has nothing to come (its schedule
  -- ended or stopped, its last run ended)
  select not exists (select 1 from pgsched.triggers t where t.job_id = cancel_job_unless_ended.job_id)
         and coalesce((select x.state from pgsched.executions x where x.job_id = cancel_job_unless_ended.job_id
                        order by x.scheduled_for desc limit 1) in ('succeeded', 'failed', 'cancelled'), false)
    into one_time_ended;
  if status in ('COMPLETED', 'FAILED', 'EXPIRED') or one_time_ended then
    outcome := 'finished';
    return;
  end if;
  update pgsched.jobs set state = 'cancelled', updated_at = now() where id = cancel_job_unless_ended.job_id;
  update pgsched.triggers set next_fire_at = null, updated_at = now() where triggers.job_id = cancel_job_unless_ended.job_id;
  perform pgsched.job_cancel_effects(cancel_job_unless_ended.job_id, true);
  -- The sweep, as the client's after its commit (jobCancelSweep): a statement of its own, so its
  -- snapshot is taken after what the first waited for has committed. A worker's outcome write in
  -- flight holds the run's row; the first statement waits for it and then finds the lease gone, but
  -- cannot see the retry that write put in pgsched.due. This one cancels it.
  perform pgsched.job_cancel_effects(cancel_job_unless_ended.job_id, false);
  outcome := 'cancelled';
end
$$;
comment on function pgsched.cancel_job_unless_ended(uuid) is 'pgsched.cancel_job without its refusals: cancels the job in the caller''s transaction and returns outcome ''cancelled'', or, changing nothing, ''already cancelled'', ''finished'' (status: which) or ''not found''. For callers that pass over jobs that ended meanwhile without a subtransaction each (pgsched.webhook_deliveries_cancel).';

create or replace function pgsched.cancel_job(job_id uuid) returns boolean
language plpgsql as $$
declare
  r record;
begin
  if cancel_job.job_id is null then
    raise exception 'job_id must be the id of the job to cancel, got null' using errcode = '22023';
  end if;
  r := pgsched.cancel_job_unless_ended(cancel_job.job_id);
  if r.outcome = 'not found' then
    raise exception 'job % not found', cancel_job.job_id using errcode = 'P0002';
  elsif r.outcome = 'finished' then
    raise exception 'job % has already finished (%); nothing to cancel', cancel_job.job_id, r.status using errcode = '55000';
  end if;
  return r.outcome = 'cancelled';
end
$$;

create or replace function pgsched.webhook_deliveries_cancel(tenant text, queue text, subscription_id uuid, except_job_id uuid, max integer)
returns integer
language plpgsql as $$
declare
  job uuid;
  n integer := 0;
begin
  -- the arguments, not the subscription's row: the statement that disables it calls this, and its
  -- change is not what this reads
  for job in
    select j.id
      from (select d.job_id from pgsched.due d
             where d.tenant = webhook_deliveries_cancel.tenant and d.queue = webhook_deliveries_cancel.queue
               and d.type = 'pgsched.webhook'   -- as due_webhook_idx's predicate
            union
            select r.job_id from pgsched.runs r
             where r.tenant = webhook_deliveries_cancel.tenant and r.queue = webhook_deliveries_cancel.queue
               and r.type = 'pgsched.webhook') w
      join pgsched.jobs j on j.id = w.job_id
     where j.state = 'active' and j.payload ->> 'subscriptionId' = webhook_deliveries_cancel.subscription_id::text
       and j.id is distinct from webhook_deliveries_cancel.except_job_id
     order by j.id
     limit webhook_deliveries_cancel.max
  loop
    -- one that finished or was deleted meanwhile is passed over (no subtransaction per job)
    if (pgsched.cancel_job_unless_ended(job)).outcome = 'cancelled' then
      n := n + 1;
    end if;
  end loop;
  return n;
end
$$;
