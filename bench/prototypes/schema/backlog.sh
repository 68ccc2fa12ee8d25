#!/usr/bin/env bash
# Puts a backlog of 5,000 pending jobs (10 submits of 500) in database $2 of schema $1, then VACUUM ANALYZE.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 10); do psql -h 127.0.0.1 -U postgres -qAt -v ON_ERROR_STOP=1 "$2" -f "$here/stmts/$1_submit.sql" >/dev/null; done
psql -h 127.0.0.1 -U postgres -qAt "$2" -c 'vacuum analyze'
