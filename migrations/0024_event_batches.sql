-- Events in batches: one row per capturing statement instead of one per event.
--
-- Migration 0022 wrote a pgsched.events row per state change and numbered each one after commit
-- (an update per event by the sequencer): with one stream listening, the burn-down's database work
-- per job almost doubled. Now each statement that changes state (submit, claim, complete, fail,
-- rescue, expire, cancel, pause, resume) writes one pgsched.event_batches row holding all its
-- changes as arrays of columns (element i of each array is the statement's i-th change, in order),
-- and the sequencer numbers batches: the heap tuple, index entries and sequencer update are paid
-- once per statement (up to the claim or completion batch size, 10,000 for a batch submit).
--
-- An event's id is `<batch seq>-<index>` (index from 0). Readers page by (seq, index): batches are
-- numbered after commit in insertion order as before, so every guarantee of 0022 carries over (no
-- gap, per execution in the order it happened). A Last-Event-ID of the old form `<n>` means "after
-- every event of number n": each old event is carried over as a batch of one with its number
-- (its new id `<n>-0`), so a reconnect with an id given before this migration resumes exactly.
-- The view pgsched.events shows one row per event, as the table of that name did.

create table pgsched.event_batches (
  id bigint generated always as identity,
  seq bigint,
  at timestamptz not null default now(),
  types text[] not null,
  tenants text[] not null,
  job_ids uuid[] not null,
  execution_ids uuid[] not null,
  queues text[] not null,
  job_types text[] not null,
  attempts integer[] not null,
  size integer not null generated always as (cardinality(types)) stored,
  constraint event_batches_pkey primary key (id),
  constraint event_batches_types_check check (types <@ array['submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed']),
  constraint event_batches_arrays_check check (
    cardinality(types) >= 1
    and cardinality(tenants) = cardinality(types) and cardinality(job_ids) = cardinality(types)
    and cardinality(execution_ids) = cardinality(types) and cardinality(queues) = cardinality(types)
    and cardinality(job_types) = cardinality(types) and cardinality(attempts) = cardinality(types))
) with (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);
comment on table pgsched.event_batches is 'State changes of jobs and executions, one row per statement that changed state while someone listened (pgsched.event_listeners); element i of each array is its i-th change. Kept for the event retention (SCHEDULER_EVENTS_RETENTION_MS). One row per event: the view pgsched.events.';
comment on column pgsched.event_batches.id is 'Insertion order (an identity); not an order readers can page by: a transaction may commit after one that inserted later.';
comment on column pgsched.event_batches.seq is 'The batch''s number in the stream, given after commit by the sequencer in id order; null until then. Event ids are <seq>-<index>.';
comment on column pgsched.event_batches.types is 'submitted | started | retrying (a failed attempt with attempts left, or an expired lease) | succeeded | failed | cancelled | expired (start deadline missed) | paused | resumed.';
comment on column pgsched.event_batches.execution_ids is 'The execution that changed; null for a change of the job alone (a recurring job submitted, paused, resumed or cancelled with nothing running).';
comment on column pgsched.event_batches.job_types is 'The job''s type (handler name).';
comment on column pgsched.event_batches.size is 'How many events the batch holds (read without the arrays, which a large batch keeps out of line).';
comment on column pgsched.event_batches.attempts is 'The execution''s attempt after the change (0: not started; null for a change of the job alone).';

create index event_batches_unsequenced_idx on pgsched.event_batches (id) where seq is null;
create unique index event_batches_seq_idx on pgsched.event_batches (seq) where seq is not null;

-- Carried over: each event a batch of one, its number kept (numbered ones) or given later in the
-- same order (unnumbered ones, in insertion order).
insert into pgsched.event_batches (seq, at, types, tenants, job_ids, execution_ids, queues, job_types, attempts)
select seq, at, array[type], array[tenant], array[job_id], array[execution_id], array[queue], array[job_type], array[attempt]
  from pgsched.events
 order by id;

drop table pgsched.events;

create view pgsched.events as
select b.seq::text || '-' || (e.n - 1)::text as id,
       b.seq, (e.n - 1)::int as index, b.id as batch_id, b.at,
       e.type, e.tenant, e.job_id, e.execution_id, e.queue, e.job_type, e.attempt
  from pgsched.event_batches b
 cross join lateral unnest(b.types, b.tenants, b.job_ids, b.execution_ids, b.queues, b.job_types, b.attempts)
       with ordinality as e (type, tenant, job_id, execution_id, queue, job_type, attempt, n);
comment on view pgsched.events is 'One row per event of pgsched.event_batches; id (<seq>-<index>, null until numbered) is the stream''s event id.';

-- Processes of the previous version, until they are replaced, still capture into pgsched.events:
-- each row they insert becomes a batch of one, so their statements neither fail nor lose events.
create function pgsched.events_insert_one() returns trigger language plpgsql as $$
begin
  insert into pgsched.event_batches (types, tenants, job_ids, execution_ids, queues, job_types, attempts)
  values (array[new.type], array[new.tenant], array[new.job_id], array[new.execution_id], array[new.queue], array[new.job_type], array[new.attempt]);
  return new;
end
$$;
create trigger events_insert_one instead of insert on pgsched.events for each row execute function pgsched.events_insert_one();

-- A delivery names its event by the stream's id (text now); the old numbers stay valid ids.
alter table pgsched.webhook_deliveries rename column event_seq to event_id;
alter table pgsched.webhook_deliveries alter column event_id type text using event_id::text;

comment on table pgsched.event_cursors is 'How far a consumer inside pgsched has read the events, as a batch number (the webhook dispatcher: name webhooks).';
