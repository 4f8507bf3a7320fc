#!/usr/bin/env bash
# Run schemathesis against a live `orq serve` on the embedded store (no Redis): every operation
# of /api/v1/openapi.json is called with generated requests, valid and invalid, and every
# response must be documented, match its schema and content type, and never be a 5xx
# (`--checks all`). Fails on any finding. Needs python3 with venv and target/debug/orq (built by
# test.sh before it calls this); installs the pinned schemathesis into target/schemathesis-venv
# on first use. Bounded and reproducible: --max-examples per operation, deterministic generation
# (the same cases every run), about a minute here.
#
# Not called: GET /events (an event stream never ends, so every case would wait for the
# request timeout). hooks.py says what the positive cases are adjusted for.
set -euo pipefail
cd "$(dirname "$0")/../../.."

SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES=${ORQ_SCHEMATHESIS_MAX_EXAMPLES:-100}

venv=target/schemathesis-venv
if [ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

schemathesis=$PWD/$venv/bin/schemathesis
orq=$PWD/target/debug/orq
[ -x "$orq" ] || { echo "$orq is missing: cargo build --bin orq first" >&2; exit 1; }
hooks=$PWD/server/tests/schemathesis/hooks.py
work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# An admin key (the run also checks that the secured operations refuse requests without one),
# and a timelines directory for the /timelines routes.
"$orq" key new --admin --name schemathesis >"$work/key.out"
key=$(head -n 1 "$work/key.out")
tail -n +2 "$work/key.out" >"$work/keys.toml"
mkdir "$work/timelines"
echo '{"kind":"header","seed":1}' >"$work/timelines/seed-1.jsonl"
echo '{"kind":"header","seed":2}' >"$work/timelines/seed-2.json"
# A stand-in simulator for POST /simulations: the API's checks and answers are under test here,
# not the simulator (server/tests/simulations.rs runs the real one), and a real run of up to
# 1,000 tasks per generated case would make this run minutes longer.
cat >"$work/orq-sim" <<'SIM'
#!/bin/sh
case "$1" in
options) echo '{"families":["crash","stall","clock","restart","network","refusal"],"planted":["none","complete_ignores_token"],"tasks_max":1000}' ;;
run) echo '{"kind":"header","version":1,"seed":0}'
     echo '{"t_ms":0,"actor":"harness","kind":"end","task":null,"tenant":null,"attempt":null,"details":{"verdict":"Pass"}}' ;;
*) exit 64 ;;
esac
SIM
chmod +x "$work/orq-sim"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
"$orq" serve --no-dashboard-build --listen "127.0.0.1:$port" --api-keys "$work/keys.toml" \
  --timelines "$work/timelines" --sim-binary "$work/orq-sim" >"$work/server.log" 2>&1 &
server_pid=$!
ready=
for _ in $(seq 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    break
  fi
  if python3 -c "import urllib.request as u; u.urlopen('$base/api/v1/readyz', timeout=1)" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.1
done
if [ -z "$ready" ]; then
  echo "orq serve did not become ready on $base:" >&2
  cat "$work/server.log" >&2
  exit 1
fi

# Dead tasks for the routes that act on one (DELETE /dlq/{id}, POST /dlq/{id}/replay): without
# them every generated id is unknown and only the 404 path runs. hooks.py hands their ids to the
# positive cases.
dead_ids=$(ORQ_BASE="$base" ORQ_KEY="$key" python3 - <<'PY'
import json, os, time, urllib.request as u
base, key = os.environ["ORQ_BASE"] + "/api/v1", os.environ["ORQ_KEY"]
def call(method, path, body=None):
    req = u.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                    headers={"authorization": "Bearer " + key, "content-type": "application/json"})
    return json.load(u.urlopen(req, timeout=10))
ids = [call("POST", "/tasks", {"type": "fail", "payload": {"times": 1000000}, "max_retries": 0})["id"]
       for _ in range(20)]
deadline = time.time() + 60
while time.time() < deadline and any(call("GET", f"/tasks/{i}")["status"] != "dead" for i in ids):
    time.sleep(0.1)
print(",".join(ids))
PY
)
export ORQ_SCHEMATHESIS_DEAD_IDS=$dead_ids

start=$(date +%s)
status=0
# In $work: schemathesis keeps its example database and cache in the working directory.
(cd "$work" && SCHEMATHESIS_HOOKS="$hooks" "$schemathesis" run \
  "$base/api/v1/openapi.json" \
  --header "Authorization: Bearer $key" \
  --checks all \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "$MAX_EXAMPLES" \
  --generation-deterministic \
  --exclude-path /api/v1/events \
  --workers 1 \
  --request-timeout 70 \
  --no-color) || status=$?
echo "schemathesis: exit $status after $(($(date +%s) - start)) s (deterministic, at most $MAX_EXAMPLES cases per operation)"
if [ "$status" -ne 0 ]; then
  echo "== orq serve's log" >&2
  tail -n 100 "$work/server.log" >&2
fi
exit "$status"
