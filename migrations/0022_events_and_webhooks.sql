-- Job and execution events (a live stream, GET /v1/events) and webhooks.
--
-- Capture only while someone listens: the statements that change an execution's or a job's state
-- (submit, claim, complete, fail, rescue, expire, cancel, pause, resume) each end with one
-- `insert … select` into pgsched.events from the rows they changed, gated by a one-time check of
-- pgsched.event_listeners. With no live listener the insert reads nothing and writes nothing. A
-- listener is an event stream (live while connected, and for the retention window after it left,
-- so a reconnect with Last-Event-ID finds every event it missed) or a webhook subscription (live
-- until deleted). Capture is per tenant (a stream of an operator key listens to every tenant).
--
-- Order: an event is inserted with `id` (an identity, in insertion order) and no `seq`. A sequencer
-- (any process that reads events; one at a time, under an advisory lock) numbers the committed
-- unnumbered events in id order with pgsched.event_seq. Readers page by seq: a number is given only
-- to committed events and sequencer transactions follow one another, so a reader that has seen seq
-- n never later finds a committed event below n (no gap), and two changes of one execution, the
-- later waiting for the earlier's row lock, are numbered in the order they happened.

create table pgsched.event_listeners (
  id uuid not null default pgsched.uuid_v7(),
  tenant text,
  kind text not null,
  until timestamptz not null,
  created_at timestamptz not null default now(),
  constraint event_listeners_pkey primary key (id),
  constraint event_listeners_kind_check check (kind in ('stream', 'webhook'))
);
comment on table pgsched.event_listeners is 'Who listens to events (streams and webhook subscriptions): while a row is live (until > now()), the state changes of its tenant''s jobs are written to pgsched.events.';
comment on column pgsched.event_listeners.tenant is 'The tenant listened to; null: every tenant (a stream of an operator key).';
-- The streams of one tenant (null: of every tenant) share one row, renewed to the later end; the
-- table every state change checks holds a row per tenant listened to and per webhook subscription,
-- so it is read whole (no index on until: the renewals stay HOT updates).
create unique index event_listeners_stream_idx on pgsched.event_listeners (coalesce(tenant, ''), kind) where kind = 'stream';
comment on column pgsched.event_listeners.until is 'A stream renews this while connected (now + the event retention); a webhook subscription''s is infinity.';

create sequence pgsched.event_seq as bigint;
comment on sequence pgsched.event_seq is 'Numbers events (pgsched.events.seq) once committed, one sequencer at a time.';

create table pgsched.events (
  id bigint generated always as identity,
  seq bigint,
  at timestamptz not null default now(),
  type text not null,
  tenant text not null,
  job_id uuid not null,
  execution_id uuid,
  queue text not null,
  job_type text not null,
  attempt integer,
  constraint events_pkey primary key (id),
  constraint events_type_check check (type in ('submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed'))
) with (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);
comment on table pgsched.events is 'State changes of jobs and executions, written while someone listens (pgsched.event_listeners) and kept for the event retention (SCHEDULER_EVENTS_RETENTION_MS).';
comment on column pgsched.events.id is 'Insertion order (an identity); not an order readers can page by: a transaction may commit after one that inserted later.';
comment on column pgsched.events.seq is 'The event''s number in the stream (SSE id), given after commit by the sequencer in id order; null until then.';
comment on column pgsched.events.type is 'submitted | started | retrying (a failed attempt with attempts left, or an expired lease) | succeeded | failed | cancelled | expired (start deadline missed) | paused | resumed.';
comment on column pgsched.events.execution_id is 'The execution that changed; null for a change of the job alone (a recurring job submitted, paused, resumed or cancelled with nothing running).';
comment on column pgsched.events.job_type is 'The job''s type (handler name).';
comment on column pgsched.events.attempt is 'The execution''s attempt after the change (0: not started).';

create index events_unsequenced_idx on pgsched.events (id) where seq is null;
create unique index events_seq_idx on pgsched.events (seq) where seq is not null;

create table pgsched.event_cursors (
  name text not null,
  seq bigint not null default 0,
  constraint event_cursors_pkey primary key (name)
);
comment on table pgsched.event_cursors is 'How far a consumer inside pgsched has read the events (the webhook dispatcher: name webhooks).';
insert into pgsched.event_cursors (name, seq) values ('webhooks', 0);

create table pgsched.webhook_subscriptions (
  id uuid not null default pgsched.uuid_v7(),
  tenant text not null,
  url text not null,
  events text[] not null default '{}',
  secret text not null,
  queue text not null default 'default',
  created_at timestamptz not null default now(),
  constraint webhook_subscriptions_pkey primary key (id),
  constraint webhook_subscriptions_url_check check (url ~ '^https?://' and length(url) <= 2048),
  constraint webhook_subscriptions_events_check check (events <@ array['submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed']),
  constraint webhook_subscriptions_secret_check check (length(secret) between 16 and 256),
  constraint webhook_subscriptions_queue_check check (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$')
);
comment on table pgsched.webhook_subscriptions is 'Webhooks: each event of the tenant whose type is in events (empty: every type) is POSTed to url by a job of type pgsched.webhook in queue, signed with secret (header Pgsched-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">).';
create index webhook_subscriptions_tenant_idx on pgsched.webhook_subscriptions (tenant, id);

create table pgsched.webhook_deliveries (
  id uuid not null default pgsched.uuid_v7(),
  subscription_id uuid not null,
  event_seq bigint not null,
  event_type text not null,
  job_id uuid not null,
  attempt integer not null,
  at timestamptz not null default now(),
  status_code integer,
  ok boolean not null,
  error text,
  duration_ms integer not null,
  constraint webhook_deliveries_pkey primary key (id),
  constraint webhook_deliveries_subscription_fkey foreign key (subscription_id) references pgsched.webhook_subscriptions (id) on delete cascade
);
comment on table pgsched.webhook_deliveries is 'One row per delivery attempt of a webhook (pgsched.webhook job attempt): the answer''s status code, or the error. Pruned with the executions.';
create index webhook_deliveries_subscription_idx on pgsched.webhook_deliveries (subscription_id, id desc);
create index webhook_deliveries_at_idx on pgsched.webhook_deliveries (at);
