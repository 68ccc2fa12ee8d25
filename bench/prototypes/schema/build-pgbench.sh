#!/usr/bin/env bash
# Builds the pgbench script of one cycle for schema $1 (a | b | b2): submit 500, claim 500, heartbeat, complete.
# Each statement is its own transaction (autocommit), as in the product. The last command samples
# the backend's CPU into an unlogged table (no WAL). NO_HEARTBEAT=1 leaves the heartbeat out (a
# burn-down of jobs shorter than the heartbeat interval).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
s=$1
{
  cat "$here/stmts/${s}_submit.sql"; echo ';'
  cat "$here/stmts/${s}_claim.sql"; echo '\gset'
  if [ -z "${NO_HEARTBEAT:-}" ]; then cat "$here/stmts/${s}_heartbeat.sql"; echo ';'; fi
  cat "$here/stmts/${s}_complete.sql"; echo ';'
  echo "insert into public.cpu_probe select clock_timestamp(), s[12]::bigint + s[13]::bigint from (select string_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ') as s) x;"
} > "/tmp/proto_cycle_${s}${NO_HEARTBEAT:+_nohb}.pgbench"
echo "/tmp/proto_cycle_${s}${NO_HEARTBEAT:+_nohb}.pgbench"
