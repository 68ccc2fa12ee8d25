-- pgsched.uuid_v7() with the clock's sub-millisecond part in its 12 rand_a bits (RFC 9562, section
-- 6.2, method 3), as PostgreSQL 18's uuidv7() does: ids made by the database were ordered by the
-- millisecond only, so two made within one millisecond (two quick inserts of a job, say) came in
-- random order. Now they are ordered to 1/4096 ms (the clock's microseconds, scaled); the random
-- rand_b (62 bits) keeps them unique.
create or replace function pgsched.uuid_v7() returns uuid
language sql volatile parallel safe as $$
  select encode(
    overlay(uuid_send(gen_random_uuid())
            placing substring(int8send(t.us / 1000) from 3)                              -- unix_ts_ms, 48 bits
                    || int2send((28672 + (t.us % 1000) * 4096 / 1000)::smallint)          -- version 7 (0x7000), rand_a
            from 1 for 8),
    'hex')::uuid
    from (select (extract(epoch from clock_timestamp()) * 1000000)::bigint as us) t
$$;
comment on function pgsched.uuid_v7() is 'A time-ordered UUID (version 7) from the database clock: milliseconds, then the fraction of the millisecond in 1/4096 steps, then random bits.';
