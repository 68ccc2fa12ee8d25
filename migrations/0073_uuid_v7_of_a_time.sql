-- pgsched.uuid_v7(at): the time-ordered UUID of a given instant, as pgsched.uuid_v7() makes of the
-- clock's (milliseconds, the fraction of the millisecond in 1/4096 steps, random bits). A row that
-- keeps both an id and the time it was written takes both from one reading of the clock: two
-- readings, one for each, could be milliseconds apart on a busy server (the process descheduled in
-- between), so that the rows' order by id differed from their order by time.
create function pgsched.uuid_v7(at timestamptz) returns uuid
language sql volatile parallel safe as $$
  select encode(
    overlay(uuid_send(gen_random_uuid())
            placing substring(int8send(t.us / 1000) from 3)                              -- unix_ts_ms, 48 bits
                    || int2send((28672 + (t.us % 1000) * 4096 / 1000)::smallint)          -- version 7 (0x7000), rand_a
            from 1 for 8),
    'hex')::uuid
    from (select (extract(epoch from at) * 1000000)::bigint as us) t
$$;
comment on function pgsched.uuid_v7(timestamptz) is 'The time-ordered UUID (version 7) of the instant given: milliseconds, then the fraction of the millisecond in 1/4096 steps, then random bits.';
