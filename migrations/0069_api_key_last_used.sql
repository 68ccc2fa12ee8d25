-- When each API key was last used, so that a rotation can tell whether clients still use the old key.
--
-- Rotating a key means creating a new one, moving the clients to it and revoking the old one; nothing
-- said whether a client still sent the old key. The API now records a key's use in last_used_at, but
-- not at every request (a write per request would turn every read into one): each API process writes
-- it at most once a minute per key, after the request and never holding it up, and a failed write only
-- loses that record. It is thus up to a minute (plus the write's own delay) behind the key's last use,
-- and null for a key no request has used since this migration. A revoked key's requests do not write it.

alter table pgsched.api_keys add column last_used_at timestamptz;

comment on column pgsched.api_keys.last_used_at is 'When an API request last authenticated with the key, to within a minute: each API process writes it at most once a minute per key, so a use within a minute of that process''s last write of it is not shown. Null: no use recorded (none since migration 0069). Not written for a revoked key.';
