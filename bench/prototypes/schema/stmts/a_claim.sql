with due as materialized (
      select id, job_id
        from pgsched.executions
       where state = 'pending'
         and queue = 'default'::text
         and not exists (select 1 from pgsched.queues s where s.name = 'default'::text and (s.paused or s.fair_share or s.concurrency_limit is not null or s.key_concurrency_limit is not null or s.rate_limit is not null))
         and type = any('{email.send}'::text[])
         and run_at <= now()
         and (start_deadline is null or attempt > 0 or start_deadline > now())
       order by priority desc, run_at, id
       limit 500
         for update skip locked
    ),
    claimed as (
    update pgsched.executions e
       set state = 'running',
           attempt = e.attempt + 1,
           worker_id = '00000000-0000-7000-8000-00000000b001'::uuid,
           lease_expires_at = now() + 60000 * interval '1 millisecond',
           started_at = (select clock_timestamp())
     where e.id = any(array(select id from due))
       and e.job_id = any(array(select job_id from due))
       and e.state = 'pending'
    returning e.id, e.job_id, e.type, e.queue, e.priority, e.attempt, e.max_attempts, e.timeout_ms, e.scheduled_for, e.run_at, e.started_at, e.tenant
    ),
    captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (select 'started', tenant, job_id, id, queue, type, attempt from claimed) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from pgsched.event_listeners l where l.until > now())
         and c.job_type not like 'pgsched.%'
         and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)
              or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
      returning 1
    )
    select array_agg(c.id)::text as ids, array_agg(c.job_id)::text as jids, array_agg(c.attempt)::text as atts,
           sum(length((select j.payload from pgsched.jobs j where j.id = c.job_id)::text)) as payload_bytes,
           max(extract(epoch from c.started_at) - extract(epoch from c.run_at)) as lag, sum(c.timeout_ms + c.max_attempts + c.priority) as x,
           (select count(*) from captured) as ev
      from claimed c
