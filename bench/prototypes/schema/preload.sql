-- 1,000,000 finished one-time jobs as history (psql -v kind=a|b): a job row and a succeeded execution each,
-- created over the past day. Then VACUUM ANALYZE, as autovacuum would have by then.
insert into pgsched.jobs (id, tenant, type, queue, priority, payload, created_by, created_at)
select pgsched.uuid_v7(), 't' || (g % 50), 'email.send', 'default', (g % 3),
       format('{"to": "user%s@example.com","template": "welcome","locale": "en-GB","vars": {"name": "User %s","plan": "pro","trial": false}}', g, g)::jsonb,
       'bench', now() - interval '1 day' + g * interval '80 ms'
  from generate_series(1, 1000000) g;
insert into pgsched.executions (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts, timeout_ms,
                                started_at, finished_at, result, tenant, last_worker_id)
select pgsched.uuid_v7(), j.id, j.queue, j.type, j.priority, j.created_at, j.created_at, 'succeeded', 1, 5, 300000,
       j.created_at + interval '5 ms', j.created_at + interval '20 ms',
       format('{"ok": true,"messageId": "%s","provider": "smtp","durationMs": %s}', j.id, 12)::jsonb, j.tenant,
       '00000000-0000-7000-8000-00000000b001'
  from pgsched.jobs j where j.created_by = 'bench' and j.created_at < now() - interval '1 minute';
