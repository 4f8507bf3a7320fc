#!/usr/bin/env bash
# Make docs/images/prometheus-metrics.png, the README's picture of orq's metrics in use: an
# `orq serve` (embedded store) runs a steady workload of echo, sleep and failing tasks while a
# local Prometheus (Debian's `prometheus` package) scrapes its /metrics every 2 s with
# deploy/prometheus/orq-alerts.yml loaded; after a few minutes headless Chromium (playwright-core
# from dashboard/node_modules) photographs Prometheus's graph of the queues' throughput. By hand:
# `bash deploy/prometheus/screenshot.sh` (needs target/release/orq, prometheus, chromium).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work=$(mktemp -d)
api_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

ORQ_LOG=warn "$root/target/release/orq" serve --listen "127.0.0.1:$api_port" --no-dashboard-build \
  > "$work/orq.log" 2>&1 &
pids+=($!)
cp deploy/prometheus/orq-alerts.yml "$work/"
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [orq-alerts.yml]
scrape_configs:
  - job_name: orq-api
    static_configs: [{targets: ["127.0.0.1:$api_port"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prom.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$api_port/api/v1/readyz" >/dev/null && break; sleep 0.2; done

# The workload: three queues, a few tenants, some failures that retry and some that die.
python3 - "$api_port" <<'PY' &
import json, random, sys, time, urllib.request
port = sys.argv[1]
def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/tasks/batch",
        data=json.dumps({"tasks": body}).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()
end = time.time() + 240
while time.time() < end:
    t = []
    for q, n in (("emails", 40), ("reports", 15), ("webhooks", 25)):
        for _ in range(n + random.randint(-5, 5)):
            kind = random.random()
            if kind < 0.08:
                t.append({"queue": q, "tenant": random.choice(["acme", "globex", "initech"]), "type": "fail",
                          "payload": {"times": 1}, "max_retries": random.choice([0, 2]),
                          "backoff": {"initial_ms": 200}})
            elif kind < 0.3:
                t.append({"queue": q, "tenant": random.choice(["acme", "globex"]), "type": "sleep",
                          "payload": {"ms": random.randint(50, 400)}})
            else:
                t.append({"queue": q, "tenant": random.choice(["acme", "globex", "initech", "umbrella"]),
                          "payload": {}})
    post(t)
    time.sleep(1)
PY
pids+=($!)
sleep 240

cd dashboard
PROM="http://127.0.0.1:$prom_port" OUT="$root/docs/images/prometheus-metrics.png" node --input-type=module <<'JS'
import { chromium } from "playwright-core";
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const expr = encodeURIComponent("sum by (queue) (rate(orq_tasks_completed_total[30s]))");
await page.goto(`${process.env.PROM}/graph?g0.expr=${expr}&g0.tab=0&g0.range_input=4m`);
await page.waitForTimeout(3000);
await page.screenshot({ path: process.env.OUT });
await browser.close();
JS
echo "wrote docs/images/prometheus-metrics.png"
