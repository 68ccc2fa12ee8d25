with input as (
      select pgsched.uuid_v7() as id, pgsched.uuid_v7() as execution_id, 'email.send'::text as type, 'default'::text as queue,
             (g % 3)::int as priority,
             format('{"to": "user%s@example.com","template": "welcome","locale": "en-GB","vars": {"name": "User %s","plan": "pro","trial": false}}', g, g) as payload,
             5 as max_attempts, 300000 as timeout_ms, 1000 as backoff_base_ms, 3600000 as backoff_max_ms,
             null::text as concurrency_key, null::int as start_deadline_ms, null::timestamptz as run_at
        from generate_series(1, 500) g
    ),
    new_jobs as (
      insert into pgsched.jobs (id, tenant, type, queue, priority, payload, max_attempts, backoff_base_ms, backoff_max_ms,
                                timeout_ms, concurrency_key, start_deadline_ms, created_by, execution_id, run_at)
      select id, 't1'::text, type, queue, priority, payload::jsonb, max_attempts, backoff_base_ms, backoff_max_ms,
             timeout_ms, concurrency_key, start_deadline_ms, 'bench'::text, execution_id, coalesce(run_at, now())
        from input
      returning 1
    ),
    new_due as (
      insert into pgsched.due (execution_id, job_id, queue, type, priority, run_at, scheduled_for, tenant, concurrency_key, start_deadline)
      select execution_id, id, queue, type, priority, coalesce(run_at, now()), coalesce(run_at, now()), 't1'::text,
             concurrency_key, coalesce(run_at, now()) + start_deadline_ms * interval '1 millisecond'
        from input
      returning 1
    ),
    captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (select 'submitted', 't1'::text, id, execution_id, queue, type, 0 from input) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from pgsched.event_listeners l where l.until > now())
         and c.job_type not like 'pgsched.%'
         and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)
              or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
      returning 1
    )
    select now() as now, (select count(*) from new_jobs) as j, (select count(*) from new_due) as e, (select count(*) from captured) as ev
