#!/usr/bin/env bash
# Run the TypeScript client's tests against a live `orq serve` (each test file starts its own).
# ORQ_BIN names the orq binary (default: this repository's target/debug/orq; build it first).
# Installs the dev dependencies with `npm ci` when node_modules is missing or older than
# package-lock.json.
set -euo pipefail
cd "$(dirname "$0")"
ORQ_BIN="${ORQ_BIN:-$(cd ../.. && pwd)/target/debug/orq}"
export ORQ_BIN
if [ ! -x "$ORQ_BIN" ]; then
  echo "run-tests.sh: no orq binary at $ORQ_BIN (cargo build, or set ORQ_BIN)" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
# The generated types must be those of the server's OpenAPI document (the dashboard's copy,
# which server/tests/openapi.rs keeps equal to the served one).
fresh=$(mktemp --suffix=.ts)
trap 'rm -f "$fresh"' EXIT
npx openapi-typescript ../../dashboard/lib/openapi.json -o "$fresh" >/dev/null
if ! cmp -s "$fresh" src/api-types.ts; then
  echo "run-tests.sh: src/api-types.ts is stale; run \`npm run gen:api\` here and commit it" >&2
  exit 1
fi
npm test
