-- The comments of a fair share change's settling columns name who writes them: the setters record a
-- change as settled themselves (src/db/queries/queues.ts queueSetFairShare), a reaper the others.
comment on column pgsched.queues.fair_waiting_for is 'The transactions (virtual ids) open when the change was made (noted by the setter, which waits for them) or when a reaper first saw it (a change made in SQL, or whose setter stopped waiting); the queue is marked again once they have all ended.';
comment on column pgsched.queues.fair_settled_at is 'When the due executions of the queue were marked after that change, once those transactions had ended: by the setter, or by a reaper.';
