#!/usr/bin/env bash
# tests/run.sh - the whole suite: every C test program, then the end-to-end
# (pytest) suite. Ends with one line "N passed, N failed" (summed over all)
# and exits non-zero if anything failed or crashed.
#
#   BUILD=build tests/run.sh          (make test calls this)
#   QWENC_SKIP_E2E=1                  C tests only (the sanitizer build)
#   PYTHON=.venv/bin/python           interpreter with pytest for tests/e2e
#
# Kernel levels: the kernel checker and the fidelity test run every level
# this CPU runs, the e2e equality cases run once per level (conftest.py);
# the line "ISA levels covered: ..." names them, and a level that
# `qwenc --isa-levels` lists but a part of the suite did not run counts as a
# failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

passed=0 failed=0
log_dir="$BUILD/test-logs"
mkdir -p "$log_dir"

if [ -x tests/fixtures/tokenizer/prepare.sh ]; then
  tests/fixtures/tokenizer/prepare.sh "$BUILD/fixtures/tokenizer" >/dev/null || {
    echo "FAIL: tests/fixtures/tokenizer/prepare.sh"; failed=$((failed + 1)); }
fi

# One C test program: its last "N passed, N failed" line is added to the
# totals; a crash or a missing summary line counts as one failure.
run_c_test() {
  local bin=$1 name log line p f rc t0 t1
  name=${bin#"$BUILD"/tests/}
  log="$log_dir/${name//\//_}.log"
  t0=$(date +%s)
  "$bin" >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "FAIL  $name (exit $rc, no summary line; log: $log)"
    tail -n 20 "$log" | sed 's/^/    /'
    failed=$((failed + 1))
    return
  fi
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$f" -eq 0 ]; then
    echo "ok    $name: $line ($((t1 - t0)) s)"
  else
    echo "FAIL  $name: $line (exit $rc; log: $log)"
    grep -E '^(FAIL|SKIP)' "$log" | head -n 30 | sed 's/^/    /'
  fi
}

for bin in $(ls "$BUILD"/tests/*/test_* 2>/dev/null | sort); do
  [ -x "$bin" ] || continue
  case "$bin" in *.d|*.o) continue ;; esac
  run_c_test "$bin"
done

rm -f "$log_dir/e2e-isa-levels"
if [ -z "${QWENC_SKIP_E2E:-}" ] && ls tests/e2e/test_*.py >/dev/null 2>&1; then
  if "$PYTHON" -c 'import pytest' 2>/dev/null; then
    log="$log_dir/e2e.log"
    "$PYTHON" -m pytest tests/e2e -q -rfEs -p no:cacheprovider >"$log" 2>&1
    rc=$?
    line=$(tail -n 1 "$log")
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)
    f=0
    for n in $(echo "$line" | grep -oE '[0-9]+ (failed|error|errors)' | grep -oE '^[0-9]+'); do f=$((f + n)); done
    p=${p:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$f" -eq 0 ]; then echo "ok    e2e: $line"; else
      echo "FAIL  e2e: $line (log: $log)"; grep -E '^(FAILED|ERROR)' "$log" | head -n 40 | sed 's/^/    /'; fi
    # Say plainly whether the real-weights tier (tests/e2e/test_real.py) ran.
    skip=$(grep -m1 -oE 'real-weights tier skipped: .*' "$log" || true)
    if [ -n "$skip" ]; then echo "note  $skip"
    else echo "note  real-weights tier ran (tests/e2e/test_real.py on the real 0.5B GGUF)"; fi
  else
    echo "FAIL  e2e: $PYTHON has no pytest (run tools/venv.sh)"; failed=$((failed + 1))
  fi
fi

# Which kernel levels each part ran: "level NAME: ok" lines of the kernel
# checker, "[NAME]" lines of the fidelity test, the e2e levels file.
levels_in() { [ -f "$1" ] && sed -nE "$2" "$1" | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//'; }
available=$("$BUILD/qwenc" --isa-levels 2>/dev/null)
k_levels=$(levels_in "$log_dir/kernels_test_kernels.log" 's/^level ([a-z0-9]+): ok$/\1/p')
f_levels=$(levels_in "$log_dir/fidelity_test_fidelity.log" 's/^  \[([a-z0-9]+)\] .*/\1/p')
parts="kernels: ${k_levels:-none}; fidelity: ${f_levels:-none}"
if [ -z "${QWENC_SKIP_E2E:-}" ]; then
  e_levels=$(cat "$log_dir/e2e-isa-levels" 2>/dev/null)
  parts="$parts; e2e: ${e_levels:-none}"
fi
covered="" missing=""
for lv in $available; do
  all=1
  case " $k_levels " in *" $lv "*) ;; *) all=0 ;; esac
  case " $f_levels " in *" $lv "*) ;; *) all=0 ;; esac
  if [ -z "${QWENC_SKIP_E2E:-}" ]; then case " $e_levels " in *" $lv "*) ;; *) all=0 ;; esac; fi
  if [ "$all" -eq 1 ]; then covered="$covered $lv"; else missing="$missing $lv"; fi
done
echo "ISA levels covered:${covered:- none} ($parts)"
if [ -n "$missing" ]; then
  echo "FAIL  ISA levels this CPU runs but the suite did not cover:$missing"; failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
