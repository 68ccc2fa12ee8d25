-- A worker is live while it has been seen within its own lease length, not within a fixed 60 s.
--
-- A worker process that is killed cannot mark itself stopped; until now it showed `alive` (and
-- counted as serving its queues, so jobs waiting for it were not reported unserved) for 60 s after
-- its last heartbeat, whatever its settings. Each worker now records the lease length it runs with:
-- a worker not seen for that long has lost every lease it held (its heartbeat, every
-- SCHEDULER_HEARTBEAT_MS, less than a third of the lease, renews them and its last_seen_at
-- together), so it is no longer counted as live: 30 s with the default settings, and as long as its
-- leases for a worker set to hold longer ones. Rows of workers registered before this migration
-- have no lease length and keep the 60 s.

alter table pgsched.workers add column lease_ms integer;
alter table pgsched.workers add constraint workers_lease_ms_check check (lease_ms > 0);
comment on column pgsched.workers.lease_ms is 'The lease length the worker runs with (SCHEDULER_LEASE_MS): it is live while seen within it (pgsched.worker_live); null for workers registered before migration 0053 (60 s).';

create function pgsched.worker_live(stopped_at timestamptz, last_seen_at timestamptz, lease_ms integer)
returns boolean language sql stable parallel safe as $$
  select stopped_at is null and last_seen_at > now() - coalesce(lease_ms, 60000) * interval '1 millisecond'
$$;
comment on function pgsched.worker_live(timestamptz, timestamptz, integer) is 'Whether a worker (its stopped_at, last_seen_at and lease_ms) is live: not stopped, and seen within its lease length (60 s when it recorded none).';
