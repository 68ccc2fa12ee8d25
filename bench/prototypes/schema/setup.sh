#!/usr/bin/env bash
# Creates a scratch database with the current schema (a) or candidate B (b; B2 runs on the same schema).
#   setup.sh a proto_a   |   setup.sh b proto_b
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
kind=$1 db=$2
psql_() { psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -qAt "$db" "$@"; }
dropdb -h 127.0.0.1 -U postgres --if-exists "$db"
createdb -h 127.0.0.1 -U postgres "$db"
(cd "$repo" && DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db" node bin/scheduler migrate >/dev/null)
[ "$kind" = b ] && psql_ -f "$here/b_ddl.sql"
# EXEC_FF: another fillfactor for the executions partitions of schema b (b_ddl.sql sets 70)
if [ "$kind" = b ] && [ -n "${EXEC_FF:-}" ]; then
  psql_ -c "do \$\$ declare p regclass; begin for p in select inhrelid::regclass from pg_inherits where inhparent = 'pgsched.executions'::regclass loop execute format('alter table %s set (fillfactor = $EXEC_FF)', p); end loop; end \$\$"
fi
psql_ <<'SQL'
insert into pgsched.workers (id, host, pid, queues, types, concurrency)
values ('00000000-0000-7000-8000-00000000b001', 'bench', 1, '{default}', '{email.send}', 100);
-- the backend's own CPU (utime + stime, clock ticks), sampled by the pgbench script once per cycle
create unlogged table public.cpu_probe (at timestamptz not null, ticks bigint not null);
create extension if not exists pg_walinspect;
SQL
