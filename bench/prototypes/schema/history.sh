#!/usr/bin/env bash
# A database of schema $1 (a | b | b2) named $2 with 1,000,000 finished jobs as history, a backlog of 5,000, vacuumed.
# EXEC_FF as in setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kind=$1; [ "$kind" = b2 ] && kind=b
"$here/setup.sh" "$kind" "$2"
psql -h 127.0.0.1 -U postgres -qAt -v ON_ERROR_STOP=1 "$2" -f "$here/preload.sql"
"$here/backlog.sh" "$1" "$2"
