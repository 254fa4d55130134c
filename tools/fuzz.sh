#!/usr/bin/env bash
# fuzz.sh NAME... - run each libFuzzer harness build-fuzz/fuzz/NAME for
# FUZZ_SECONDS (default 20) on a copy of its seeds (tests/fuzz/corpus/NAME)
# in build-fuzz/corpus/NAME; fail (exit 1) if any of them crashes, leaks or
# breaks a property. Crash inputs land in build-fuzz/crashes/NAME-*.
# FUZZ_JOBS=N runs N processes per target (a longer campaign); FUZZ_NICE=1
# runs them at the lowest priority. FUZZ_TIMEOUT (default 10) is libFuzzer's
# per-input limit in wall-clock seconds: a niced campaign on a busy machine
# can be starved that long, so an input that timed out is replayed at
# normal priority with a 10 s limit, and only one that times out again
# fails the run (the other is reported as starved, not as a hang).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-20}
fail=0
mkdir -p build-fuzz/crashes build-fuzz/logs
for name in "$@"; do
  bin=build-fuzz/fuzz/$name
  [ -x "$bin" ] || { echo "FAIL  fuzz $name: $bin not built (make fuzz-build)"; fail=1; continue; }
  corpus=build-fuzz/corpus/$name
  mkdir -p "$corpus"
  [ -d tests/fuzz/corpus/$name ] && cp -n tests/fuzz/corpus/$name/* "$corpus"/ 2>/dev/null
  log=build-fuzz/logs/$name.log
  nice=; [ "${FUZZ_NICE:-0}" = 1 ] && nice="nice -n 19"
  jobs=${FUZZ_JOBS:-1}
  extra=; [ "$jobs" -gt 1 ] && extra="-jobs=$jobs -workers=$jobs"
  # rss_limit: the parsers must never need much; timeout: nor long per input.
  $nice "$bin" "$corpus" -max_total_time="$secs" -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-10}" -max_len=65536 \
      -artifact_prefix=build-fuzz/crashes/$name- -print_final_stats=1 $extra >"$log" 2>&1
  rc=$?
  if [ "$jobs" -gt 1 ]; then cat fuzz-*.log >>"$log" 2>/dev/null; rm -f fuzz-*.log; fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s+=$2} END {print s+0}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  starved=
  if [ $rc -ne 0 ] && grep -q 'ERROR: libFuzzer: timeout after' "$log" &&
     ! grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:\|fuzz property failed' "$log"; then
    # the input that timed out, replayed at normal priority
    unit=$(grep -o "build-fuzz/crashes/$name-timeout-[0-9a-f]*" "$log" | tail -n 1)
    if [ -n "$unit" ] && "$bin" -timeout=10 -rss_limit_mb=2048 "$unit" >"$log.replay" 2>&1; then
      starved=" (one input timed out while starved by the load; replayed alone it ran in time: $unit)"
      rc=0
      sed -i 's/ERROR: libFuzzer: timeout after/starved (not a hang): timeout after/' "$log"
    fi
  fi
  if [ $rc -ne 0 ] || grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\|libFuzzer\)\|runtime error:\|fuzz property failed' "$log"; then
    echo "FAIL  fuzz $name (rc $rc, log $log):"
    grep -m 5 -A 12 'ERROR:\|runtime error:\|fuzz property failed' "$log" | head -n 30
    fail=1
  else
    echo "ok    fuzz $name: ${secs}s x $jobs, $runs runs, coverage ${cov:-?} edges, corpus $(ls "$corpus" | wc -l) inputs$starved"
  fi
done
exit $fail
