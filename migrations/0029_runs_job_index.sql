-- Runs by job: pgsched.runs had only its primary key (execution_id), so every look-up of a job's
-- runs read the whole table, dead rows included: the dispatcher's check that a fire time is not
-- running already (once per pass), the overlap policies' "busy", and a job's cancel, pause and
-- views. The table is small in live rows but churns (a row per claim, deleted at the outcome), and
-- between vacuums a pass's scan read thousands of dead rows. One entry per claim more.
create index runs_job_idx on pgsched.runs (job_id, scheduled_for);
