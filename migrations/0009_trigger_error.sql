-- A schedule whose fire times cannot be computed is stopped by the dispatcher (next_fire_at null);
-- the reason is kept on the trigger, so the job shows why it stopped instead of ending silently.
alter table pgsched.triggers add column error text;
comment on column pgsched.triggers.error is 'Why the dispatcher stopped this schedule (its fire times could not be computed); null while it runs.';
