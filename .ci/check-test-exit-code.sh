#!/usr/bin/env bash
# Proves that `npm test` tells the truth: a test that fails makes it exit non-zero, on the
# DATABASE_URL path and on the embedded-PostgreSQL fallback (DATABASE_URL unset), and neither
# path leaves a temp folder or a process behind. Runs on a copy of test/honesty/must-fail.fixture.ts.
set -uo pipefail
cd "$(dirname "$0")/.."

fixture=test/zz-must-fail.test.ts
cp test/honesty/must-fail.fixture.ts "$fixture"
sed -i "s#'../db.ts'#'./db.ts'#" "$fixture"
trap 'rm -f "$fixture"' EXIT

failed=0
run_path() { # $1 = label, $2 = DATABASE_URL ('' for the embedded fallback)
  local label=$1 url=$2 tmp code left procs
  tmp=$(mktemp -d /tmp/pgsched-exit-check.XXXXXX)
  chmod 755 "$tmp" # like /tmp: the embedded server runs as the postgres user and must pass through it
  if [ -n "$url" ]; then
    TMPDIR=$tmp DATABASE_URL=$url npm test --silent -- "$fixture" >"$tmp.log" 2>&1
  else
    TMPDIR=$tmp env -u DATABASE_URL npm test --silent -- "$fixture" >"$tmp.log" 2>&1
  fi
  code=$?
  left=$(find "$tmp" -mindepth 1 -maxdepth 1 | head -5)
  procs=$(pgrep -f -- "$tmp" || true)
  if [ "$code" -eq 0 ]; then
    echo "FAIL ($label): npm test exited 0 although a test failed"; sed -n '1,60p' "$tmp.log"; failed=1
  elif ! grep -q "fails when a test fails" "$tmp.log"; then
    echo "FAIL ($label): npm test exited $code without running the failing test"; sed -n '1,60p' "$tmp.log"; failed=1
  else
    echo "ok ($label): a failing test makes npm test exit $code"
  fi
  if [ -n "$left" ]; then echo "FAIL ($label): left in the temp folder:"; echo "$left"; failed=1
  else echo "ok ($label): no temp folder left behind"; fi
  if [ -n "$procs" ]; then echo "FAIL ($label): processes left running: $procs"; pkill -f -- "$tmp"; failed=1
  else echo "ok ($label): no process left behind"; fi
  rm -rf "$tmp" "$tmp.log"
}

run_path "DATABASE_URL set" "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
run_path "DATABASE_URL unset: embedded PostgreSQL" ""
exit $failed
