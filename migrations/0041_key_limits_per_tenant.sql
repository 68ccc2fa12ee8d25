-- Concurrency keys are counted per tenant.
--
-- A queue's per-key limits (key_concurrency_limit, key_rate_limit) counted the running executions
-- and spaced the starts by (queue, concurrency_key): two tenants sharing a queue that both used the
-- key "customer-7" shared one limit, so one tenant could hold back another's work (and learn from
-- the wait that the other used that key). A key now names a customer of the tenant that submitted
-- the job: the claims count and space by (queue, tenant, concurrency_key). pgsched.queue_key_slots
-- gets the tenant in its key; its rows from before (tenant '') match no execution and are removed
-- by the next claim of their queue once their slot has passed, as every past slot is.
--
-- Workers of the previous version keep claiming, but their claims of a queue with a rate limit per
-- key fail (their upsert names the old key) and are retried until they are replaced; their other
-- claims are unaffected.

alter table pgsched.queue_key_slots add column tenant text not null default '';
alter table pgsched.queue_key_slots drop constraint queue_key_slots_pkey;
alter table pgsched.queue_key_slots add constraint queue_key_slots_pkey primary key (queue, tenant, concurrency_key);
comment on column pgsched.queue_key_slots.tenant is 'The tenant whose key it is: keys are counted per tenant (migration 0041). '''' for rows from before, which match nothing.';
