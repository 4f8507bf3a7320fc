#!/usr/bin/env bash
# Run each fuzz target for SECONDS (default 60) and print, per target, libFuzzer's executions per
# second and total executions (its final stats). Installs cargo-fuzz when it is missing; builds
# on the stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags). The targets use
# the embedded MemoryStore only: no Redis is started or touched.
#
#   fuzz/run.sh [SECONDS] [TARGET...]        # targets: scripts engine http (default: all)
#
# libFuzzer's working corpora grow in fuzz/work/<target>/ (ignored by git), seeded from the
# checked-in fuzz/corpus/<target>/ (never written to). A crash is saved under
# fuzz/artifacts/<target>/ and makes this script exit 1; reproduce it with
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
summary=()
for t in "${targets[@]}"; do
  # Only the http target builds orq-server (the `http` feature, on by default).
  features=()
  [ "$t" != http ] && features=(--no-default-features)
  mkdir -p "work/$t"
  log="work/$t.log"
  echo "fuzzing $t for ${seconds}s (log: fuzz/$log)"
  if cargo fuzz run -s "$sanitizer" "${features[@]}" "$t" "work/$t" "corpus/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result="FAILED: see fuzz/$log and fuzz/artifacts/$t/"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  summary+=("$(printf '%-8s %7s exec/s %11s executions in %ss  %s' "$t" "$rate" "$execs" "$seconds" "$result")")
done
printf '%s\n' "${summary[@]}"
exit $status
