with done as (
      delete from pgsched.runs r
       using unnest(:ids::uuid[], :jids::uuid[], :atts::int[]) as d(id, job_id, attempt)
       where r.execution_id = d.id and r.attempt = d.attempt and r.worker_id = '00000000-0000-7000-8000-00000000b001'::uuid
      returning r.*
    ),
    history as (
      insert into pgsched.executions (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts,
                                      timeout_ms, last_worker_id, started_at, finished_at, result, tenant, concurrency_key)
      select d.execution_id, d.job_id, d.queue, d.type, d.priority, d.scheduled_for, d.run_at, 'succeeded', d.attempt, d.max_attempts,
             d.timeout_ms, d.worker_id, d.started_at, now(), format('{"ok": true,"messageId": "%s","provider": "smtp","durationMs": %s}', d.execution_id, 12)::jsonb,
             d.tenant, d.concurrency_key
        from done d
      returning 1
    ),
    captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (select 'succeeded', tenant, job_id, execution_id, queue, type, attempt from done) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from pgsched.event_listeners l where l.until > now())
         and c.job_type not like 'pgsched.%'
         and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)
              or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
      returning 1
    )
    select count(*) as n, (select count(*) from history) as h, (select count(*) from captured) as ev from done
