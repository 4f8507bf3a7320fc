#!/usr/bin/env bash
# Run every test of orq: the Rust workspace, schemathesis against the API's OpenAPI document,
# the Python client's tests (pytest, installed from PyPI into target/), the TypeScript client's
# (Node's test runner), then the dashboard's unit and browser tests (which drive a live `orq serve` on the embedded
# store with headless Chromium). Needs cargo, python3 with venv (schemathesis is installed from
# PyPI into target/), node >= 20.9 with npm, and Chromium at /usr/bin/chromium (or
# CHROMIUM_PATH); `.ci/run` installs what is missing. Never uses a Redis other than the private
# ones the Rust tests start themselves.
set -euo pipefail
cd "$(dirname "$0")"

export NEXT_TELEMETRY_DISABLED=1

echo "== cargo test"
cargo test --workspace --locked

echo "== cargo build (the binaries the browser tests run)"
cargo build --locked --bin orq --bin orq-sim

echo "== simulator: 500 seeds on every core, every invariant checked after every script call"
./target/debug/orq-sim check --seeds 1..501

echo "== schemathesis: the API against its OpenAPI document (a live orq serve, embedded store)"
server/tests/schemathesis/run.sh

echo "== Python client: pytest against live orq serve processes"
clients/python/run-tests.sh

echo "== TypeScript client: Node's test runner against live orq serve processes"
clients/typescript/run-tests.sh

echo "== dashboard: install"
cd dashboard
# npm ci only when node_modules is missing or older than the lock file (it deletes and reinstalls).
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund
fi

echo "== dashboard: build (static export in dashboard/out)"
npm run build

echo "== dashboard: lint and types"
npm run lint

echo "== dashboard: unit and browser tests"
npm test

echo "== bench smoke: orq bench and the BullMQ workload on a private Redis (no thresholds)"
cd ..
python3 bench/compare.py --orq target/debug/orq --runs 1 --tasks 500 --batch 100 \
  --concurrency 10 --delayed 50 --delay-ms 200 --delay-spread-ms 200
python3 bench/light.py --orq target/debug/orq --runs 1 --warmup 50 --single-tasks 200 \
  --light-tasks 20
