-- A delivery attempt of a webhook records whether another attempt follows: a receiver's operator
-- reading the log can tell an attempt that will be retried (a 500, a timeout) from one that was the
-- end of the delivery (delivered, refused for good by a 4xx, or the last of its attempts).

alter table pgsched.webhook_deliveries add column will_retry boolean;
comment on column pgsched.webhook_deliveries.will_retry is
  'Whether another attempt of this delivery follows: false when it was delivered, refused for good (a 4xx other than 408 and 429, a refused address) or the last attempt; null for attempts recorded before migration 0051.';
