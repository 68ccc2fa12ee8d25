-- Comments on the columns an operator reads in `\d+` that had none and whose meaning is not in their
-- name: the API keys, a recurring job's schedule, a job's payload and retry cap, a queue's pause, the
-- fair-share and key-rate bookkeeping, webhook subscriptions, event listeners, the wake-up sign-ups and
-- the output chunks. Comments only: no table, column or row changes.

comment on column pgsched.api_keys.key_hash is 'SHA-256 of the whole key (32 bytes): a presented key is hashed and looked up here. The key itself is kept nowhere.';
comment on column pgsched.api_keys.tenant is 'The tenant the key acts for (an operator key acts for every tenant; see operator).';
comment on column pgsched.api_keys.name is 'A label for people (scheduler keys create --name); not used to authenticate.';
comment on column pgsched.api_keys.revoked_at is 'When the key was revoked; null: valid. A revoked key is refused once the API''s key cache (5 s) has passed.';

comment on column pgsched.triggers.kind is 'cron: fire times of cron_expression in timezone; interval: every interval_ms from the first fire time.';
comment on column pgsched.triggers.interval_ms is 'kind = interval: the time between fire times, in whole milliseconds, counted from the first fire time (submit time, or start_at when later); null for cron.';
comment on column pgsched.triggers.paused is 'The dispatcher creates no execution while true (pause and resume of a recurring job); fire times passed while paused are missed, as misfire_policy says at resume.';
comment on column pgsched.triggers.start_at is 'No fire time before this (null: from the submit on).';
comment on column pgsched.triggers.end_at is 'No fire time after this (null: none); once it has passed, next_fire_at is null and the job ends with its last run.';
comment on column pgsched.triggers.last_fire_at is 'The latest fire time the dispatcher created an execution for; null before the first.';
comment on column pgsched.triggers.misfire_max_runs is 'misfire_policy = fire_all: the most catch-up runs made for missed fire times at once (default 100).';

comment on column pgsched.jobs.payload is 'What the handler gets as ctx.payload: any JSON value, at most 1 MiB as JSON text.';
comment on column pgsched.jobs.idempotency_key is 'The key of the submit (null: none); unique per tenant (pgsched.job_idempotency_keys), so a repeated submit with it returns this job.';
comment on column pgsched.jobs.backoff_max_ms is 'The longest retry delay: the delay before attempt n + 1 is random(0, min(backoff_max_ms, backoff_base_ms × 2^(n − 1))).';

comment on column pgsched.queues.paused_at is 'When the queue was paused; null while it is not.';

comment on column pgsched.fair_clocks.queue is 'The fair-share queue.';
comment on column pgsched.fair_clocks.priority is 'The priority whose turns this row counts: turns are taken per priority.';
comment on column pgsched.fair_clocks.fair_key is 'The highest turn key (due.fair_key) claimed at this priority: a tenant''s new due work takes turns from here on.';

comment on column pgsched.queue_key_slots.queue is 'The queue with key_rate_limit.';
comment on column pgsched.queue_key_slots.concurrency_key is 'The jobs'' concurrency key whose starts are spaced.';
comment on column pgsched.queue_key_slots.next_start_at is 'The earliest time the next execution with this key may start.';

comment on column pgsched.webhook_subscriptions.url is 'Where each event is POSTed (http or https; the http handler''s address rules apply to every delivery).';
comment on column pgsched.webhook_subscriptions.events is 'The event types sent; empty: every type. A change applies to the events the dispatcher reads from then on.';
comment on column pgsched.webhook_subscriptions.queue is 'The queue of the delivery jobs (type pgsched.webhook), which count toward the tenant''s max_pending.';
comment on column pgsched.webhook_subscriptions.secret is 'The signing secret, kept as given because each delivery attempt signs with it (HMAC-SHA256); returned once, at creation, never by a listing.';

comment on column pgsched.event_listeners.kind is 'stream: an open (or recently closed) GET /v1/events or client.events() stream, one row per tenant; webhook: a webhook subscription''s, for as long as it exists.';

comment on column pgsched.tenants.submit_tokens_at is 'When submit_tokens was computed; the bucket refills at max_submits_per_second from then.';

comment on column pgsched.waiting_workers.worker_id is 'The worker that signed up (pgsched.workers.id).';
comment on column pgsched.waiting_workers.queues is 'The queues it serves: a submit of work due now in one of them notifies it.';
comment on column pgsched.waiting_workers.since is 'When it signed up.';

comment on column pgsched.execution_output.attempt is 'The attempt that wrote the chunk: each attempt''s output is kept apart (?attempt=N).';
comment on column pgsched.execution_output.data is 'A chunk of the handler''s output, as written (bytes).';
