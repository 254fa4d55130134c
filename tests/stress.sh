#!/usr/bin/env bash
# tests/stress.sh - run one test program many times in a row while CPU-bound
# loops keep the other cores busy, to show that it does not depend on thread
# timing (issue 9). Every run must pass; the busy loops are ended on exit.
#
#   tests/stress.sh build/tests/unit/test_sched [RUNS=50] [BUSY_LOOPS=1]
set -u
bin=${1:?usage: tests/stress.sh TEST_BINARY [RUNS] [BUSY_LOOPS]}
runs=${2:-50}
loops=${3:-1}
[ -x "$bin" ] || { echo "stress: $bin is not an executable test program (build it first)" >&2; exit 2; }

busy_pids=()
stop_busy() { for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap stop_busy EXIT
for _ in $(seq "$loops"); do
  sh -c 'while :; do :; done' &
  busy_pids+=($!)
done

log=$(mktemp "${TMPDIR:-/tmp}/qwenc-stress-XXXXXX.log")
fails=0
for i in $(seq "$runs"); do
  if ! "$bin" >"$log" 2>&1; then
    fails=$((fails + 1))
    echo "stress: run $i of $bin failed:"
    grep -E '^(FAIL|=+|WARNING|ERROR|SUMMARY)' "$log" | head -n 20 | sed 's/^/    /'
  fi
done
rm -f "$log"
echo "stress: $bin: $runs runs with $loops busy loop(s): $((runs - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
