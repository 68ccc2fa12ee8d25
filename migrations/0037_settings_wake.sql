-- A change of a queue's settings, through the functions or a direct insert, update or delete of its
-- row, tells the workers at once (pgsched_executions with "settings": true). A worker keeps the
-- settings it read for up to a second (src/worker/queue-claims.ts); on this notification it reads
-- them again before its next claim, so a resume or a raised limit starts work without waiting for
-- that second to end. Only the columns that change what a claim may take notify: the columns the
-- claims themselves keep (running_bound, next_start_at, the fair share clock) do not.

create function pgsched.queues_notify_settings() returns trigger
language plpgsql as $$
begin
  perform pg_notify('pgsched_executions',
    json_build_object('queues', json_build_array(coalesce(new.name, old.name)), 'delayMs', 0, 'settings', true)::text);
  return null;
end
$$;
comment on function pgsched.queues_notify_settings() is 'Tells the workers that a queue''s settings changed (pgsched_executions, "settings": true), so that they read them again before their next claim.';

create trigger queues_notify_settings_insert after insert on pgsched.queues
  for each row execute function pgsched.queues_notify_settings();
create trigger queues_notify_settings_delete after delete on pgsched.queues
  for each row execute function pgsched.queues_notify_settings();
create trigger queues_notify_settings_update after update on pgsched.queues
  for each row when (
    old.name is distinct from new.name
    or old.paused is distinct from new.paused
    or old.concurrency_limit is distinct from new.concurrency_limit
    or old.key_concurrency_limit is distinct from new.key_concurrency_limit
    or old.rate_limit is distinct from new.rate_limit
    or old.rate_period_ms is distinct from new.rate_period_ms
    or old.key_rate_limit is distinct from new.key_rate_limit
    or old.key_rate_period_ms is distinct from new.key_rate_period_ms
    or old.fair_share is distinct from new.fair_share
  )
  execute function pgsched.queues_notify_settings();
