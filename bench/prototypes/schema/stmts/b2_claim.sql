with picked as materialized (
      select ctid as tid, execution_id, job_id, queue, type, priority, run_at, scheduled_for, attempt, tenant, concurrency_key
        from pgsched.due
       where queue = 'default'::text
         and not exists (select 1 from pgsched.queues s where s.name = 'default'::text and (s.paused or s.fair_share or s.concurrency_limit is not null or s.key_concurrency_limit is not null or s.rate_limit is not null))
         and type = any('{email.send}'::text[])
         and run_at <= now()
         and (start_deadline is null or attempt > 0 or start_deadline > now())
       order by priority desc, run_at, execution_id
       limit 500
         for update skip locked
    ),
    gone as (
      delete from pgsched.due d where d.ctid = any(array(select tid from picked)) returning 1
    ),
    withjob as materialized (
      select p.*, j.max_attempts, j.timeout_ms, j.payload, (select clock_timestamp()) as started_at
        from picked p
       -- one probe of the job's partition per row (offset 0 keeps it a parameterised lookup, not a merge join over every partition)
       cross join lateral (select j.max_attempts, j.timeout_ms, j.payload from pgsched.jobs j where j.id = p.job_id offset 0) j
    ),
    leased as (
      insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, tenant,
                                priority, concurrency_key, scheduled_for, run_at, max_attempts, timeout_ms)
      select execution_id, job_id, '00000000-0000-7000-8000-00000000b001'::uuid, attempt + 1, now() + 60000 * interval '1 millisecond', started_at, queue, type, tenant,
             priority, concurrency_key, scheduled_for, run_at, max_attempts, timeout_ms
        from withjob
      returning 1
    ),
    
    captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (select 'started', tenant, job_id, execution_id, queue, type, attempt + 1 from withjob) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from pgsched.event_listeners l where l.until > now())
         and c.job_type not like 'pgsched.%'
         and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)
              or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
      returning 1
    )
    select array_agg(c.execution_id)::text as ids, array_agg(c.job_id)::text as jids, array_agg(c.attempt + 1)::text as atts,
           sum(length(c.payload::text)) as payload_bytes,
           max(extract(epoch from c.started_at) - extract(epoch from c.run_at)) as lag, sum(c.timeout_ms + c.max_attempts + c.priority) as x,
           (select count(*) from gone) as g, (select count(*) from leased) as l, 0 as h, (select count(*) from captured) as ev
      from withjob c
