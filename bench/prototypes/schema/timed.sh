#!/usr/bin/env bash
# Timed runs, alternating schemas: timed.sh <rounds> <cycles> <schema>=<database> ...
# Each run: VACUUM ANALYZE, then pgbench (1 client, prepared, generic plans) running <cycles>
# cycles of submit 500 / claim 500 / heartbeat / complete. Prints per run: jobs/s, the backend's
# CPU per job (utime + stime of the pgbench connection's backend, from /proc, between the first
# and the last cycle) and pgbench's per-statement latencies (ms per batch). NO_HEARTBEAT=1: see build-pgbench.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1 cycles=$2; shift 2
tck=$(getconf CLK_TCK)
stmts=submit,claim,heartbeat,complete,probe; [ -n "${NO_HEARTBEAT:-}" ] && stmts=submit,claim,complete,probe
for r in $(seq "$rounds"); do
  for pair in "$@"; do
    s=${pair%%=*} db=${pair#*=}
    script=$("$here/build-pgbench.sh" "$s")
    psql -h 127.0.0.1 -U postgres -qAt "$db" -c 'vacuum analyze' -c 'truncate public.cpu_probe'
    out=$(PGOPTIONS='-c plan_cache_mode=force_generic_plan' pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -t "$cycles" -f "$script" "$db" 2>&1)
    cpu=$(psql -h 127.0.0.1 -U postgres -qAt "$db" -c "select round(((max(ticks) - min(ticks)) * 1e6 / $tck / ((count(*) - 1) * 500))::numeric, 1) from public.cpu_probe")
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    lat=$(awk '/statement latencies/{f=1;next} f&&NF>2{printf "%s ", $1}' <<<"$out")
    echo "round=$r schema=$s db=$db jobs_per_s=$(awk -v t="$tps" 'BEGIN{printf "%.0f", t*500}') backend_cpu_us_per_job=$cpu stmt_ms($stmts)=$lat load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
