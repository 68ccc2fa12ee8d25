with history as (
      -- the history row, inserted by the claim, carries the lease's worker and attempt: the fence is
      -- checked on it, in the shape of lease.ts (each input row probes its own partition's key)
      update pgsched.executions e
         set state = 'succeeded',
             finished_at = now(),
             result = format('{"ok": true,"messageId": "%s","provider": "smtp","durationMs": %s}', d.id, 12)::jsonb,
             output_uri = null,
             error = null,
             last_worker_id = e.worker_id,
             worker_id = null
        from unnest(:ids::uuid[], :jids::uuid[], :atts::int[]) as d(id, job_id, attempt)
       where e.id = d.id and e.job_id = d.job_id
         and e.attempt = d.attempt
         and (case when e.state = 'running' then e.worker_id end) = '00000000-0000-7000-8000-00000000b001'::uuid
      returning e.id, e.job_id, e.tenant, e.queue, e.type, e.attempt
    ),
    done as (
      delete from pgsched.runs r where r.execution_id = any(array(select id from history)) returning 1
    ),
    captured as (
      insert into pgsched.events (type, tenant, job_id, execution_id, queue, job_type, attempt)
      select c.type, c.tenant, c.job_id, c.execution_id, c.queue, c.job_type, c.attempt
        from (select 'succeeded', tenant, job_id, id, queue, type, attempt from history) as c (type, tenant, job_id, execution_id, queue, job_type, attempt)
       where exists (select 1 from pgsched.event_listeners l where l.until > now())
         and c.job_type not like 'pgsched.%'
         and (exists (select 1 from pgsched.event_listeners l where l.until > now() and l.tenant is null)
              or c.tenant = any (array(select l.tenant from pgsched.event_listeners l where l.until > now())))
      returning 1
    )
    select count(*) as n, (select count(*) from done) as r, (select count(*) from captured) as ev from history
