-- Plain forms of the hottest statements.
--
-- Every statement that changes state carries the event capture (a data-modifying CTE that reads
-- pgsched.event_listeners and, while someone listens, aggregates the statement's changes into one
-- pgsched.event_batches row), and a submit carries the fair-share numbering of new executions. With
-- nobody listening and no fair queue they write nothing, but PostgreSQL still builds their executor
-- nodes at every execution: seven aggregates, a window function, a join and their subplans, about a
-- sixth of a small claim's or completion's CPU and a sixth of a small submit's.
--
-- A plain form leaves them out and holds a guard instead: should anyone listen (or should a queue of
-- the batch have fair share), the statement fails with SQLSTATE PS001 and writes nothing, and the
-- writer runs the full form. The guard reads what the capture reads, in the same statement, so a
-- plain form commits only where the full one would have captured nothing.

create function pgsched.plain_form_refused(what text, names text[] default null) returns boolean
  language plpgsql volatile
  as $$
begin
  raise exception 'pgsched: the plain form of this statement does not apply: %', what
    using errcode = 'PS001', detail = what, hint = coalesce(array_to_json(names)::text, '');
end
$$;
comment on function pgsched.plain_form_refused(text, text[]) is
  'Raises SQLSTATE PS001 with `what` as its detail and `names` (the fair queues, for `fair share`) as a JSON array in its hint: the guard of a plain statement form (migration 0042). Never returns.';
