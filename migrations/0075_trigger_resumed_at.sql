-- When a paused schedule was resumed. docs/recurring-jobs.md has the fire times that passed while a
-- schedule was paused as missed ones, to which its misfire policy applies at the resume (skip: none
-- runs; fire_once: one catch-up run); but the dispatcher counted a fire time as missed only when it
-- was older than its misfire threshold (SCHEDULER_MISFIRE_THRESHOLD_MS, 5 s by default), so those of
-- the pause's last seconds ran as if on time, whatever the policy. A resume now dates itself here,
-- and the dispatcher and the views count every fire time before it as missed.
alter table pgsched.triggers add column resumed_at timestamptz;
comment on column pgsched.triggers.resumed_at is 'When the schedule was last resumed after a pause (null: never): its fire times before then passed while it was paused and are missed ones, to which misfire_policy applies, however recent.';
