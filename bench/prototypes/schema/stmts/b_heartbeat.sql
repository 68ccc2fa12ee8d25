with seen as (
      update pgsched.workers set last_seen_at = now() where id = '00000000-0000-7000-8000-00000000b001'::uuid returning 1
    ),
    renewed as (
    update pgsched.runs r
       set lease_expires_at = now() + 60000 * interval '1 millisecond'
      from unnest(:ids::uuid[], :jids::uuid[], :atts::int[]) as d(id, job_id, attempt)
     where r.execution_id = d.id and r.attempt = d.attempt and r.worker_id = '00000000-0000-7000-8000-00000000b001'::uuid
    returning r.execution_id
    )
    select (select count(*) from seen) as w, count(*) as n from renewed
