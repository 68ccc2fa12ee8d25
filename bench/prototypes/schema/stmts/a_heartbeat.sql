with seen as (
      update pgsched.workers set last_seen_at = now() where id = '00000000-0000-7000-8000-00000000b001'::uuid returning 1
    ),
    renewed as (
    update pgsched.executions e
       set lease_expires_at = now() + 60000 * interval '1 millisecond'
      from unnest(:ids::uuid[], :jids::uuid[], :atts::int[]) as d(id, job_id, attempt)
     where e.id = d.id and e.job_id = d.job_id
       and e.attempt = d.attempt
       and (case when e.state = 'running' then e.worker_id end) = '00000000-0000-7000-8000-00000000b001'::uuid
    returning e.id
    )
    select (select count(*) from seen) as w, count(*) as n from renewed
