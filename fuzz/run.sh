#!/usr/bin/env bash
# Run each fuzz target for SECONDS (default 60) and print, per target, libFuzzer's executions per
# second and total executions (its final stats) as a Markdown table. Installs cargo-fuzz when it
# is missing; builds on the stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z
# flags). The targets use the embedded MemoryStore only: no Redis is started or touched.
#
#   fuzz/run.sh [SECONDS] [TARGET...]        # targets: scripts engine http (default: all)
#
# libFuzzer's working corpora grow in fuzz/work/<target>/ (ignored by git), seeded from the
# checked-in fuzz/corpus/<target>/ (never written to); each target's output is in
# fuzz/work/<target>.log. A crash is saved under fuzz/artifacts/<target>/, the log is printed from
# the panic on, and this script exits 1 (after running the other targets); reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run -s none [--no-default-features] <target> <crash file>
# and turn it into a regression test in the normal suite (sim/tests/fuzz_regressions.rs).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(scripts engine http)
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
# No sanitizer by default: orq's own crates forbid `unsafe`, and AddressSanitizer's allocator
# makes the Lua interpreter about ten times slower. FUZZ_SANITIZER=address turns it back on.
sanitizer=${FUZZ_SANITIZER:-none}
status=0
rows=()
for t in "${targets[@]}"; do
  # Only the http target builds orq-server (the `http` feature, on by default). The scripts and
  # engine targets share one build; http's adds orq-server and rebuilds the crates its features
  # change. Building all three with default features is not cheaper (measured: ~8.5-9 min
  # cold on 2 cores), and this way each target is built as the README reproduces it.
  features=()
  [ "$t" != http ] && features=(--no-default-features)
  mkdir -p "work/$t"
  log="work/$t.log"
  execs='' rate='' fuzzed='-'
  echo "building $t (log: fuzz/$log)"
  start=$SECONDS
  if cargo fuzz build -s "$sanitizer" "${features[@]}" "$t" >"$log" 2>&1; then
    built=$((SECONDS - start))
    echo "fuzzing $t for ${seconds}s (built in ${built}s)"
    start=$SECONDS
    # The same options as the build, so cargo-fuzz finds it up to date and runs it.
    if cargo fuzz run -s "$sanitizer" "${features[@]}" "$t" "work/$t" "corpus/$t" -- \
      -max_total_time="$seconds" -print_final_stats=1 >>"$log" 2>&1; then
      result=ok
    else
      result="FAILED: fuzz/artifacts/$t/"
    fi
    fuzzed=$((SECONDS - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
  else
    built=$((SECONDS - start))
    result="BUILD FAILED"
  fi
  if [ "$result" != ok ]; then
    status=1
    # CI keeps only its log: show this one from the panic (or libFuzzer's or rustc's first error)
    # on: the crash report, the input in Base64 when it is small, cargo-fuzz's reproduce command.
    first=$(grep -n -m 1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)|^error" "$log" \
      | cut -d: -f1)
    echo "---- $t: $result; fuzz/$log from its first error:" >&2
    tail -n +"$(( ${first:-1} > 5 ? ${first:-1} - 5 : 1 ))" "$log" | head -n 400 >&2
    echo "---- end of fuzz/$log" >&2
  fi
  rows+=("| $t | ${rate:-?} | ${execs:-?} | $seconds | $built | $fuzzed | $result |")
done
echo
echo "fuzz summary (FUZZ_SANITIZER=$sanitizer)"
echo "| target | exec/s | executions | seconds | build s | run s | result |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $status
