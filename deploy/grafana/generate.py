#!/usr/bin/env python3
"""Write orq-dashboard.json, the Grafana dashboard of orq's Prometheus metrics (README,
Operations). Run it after changing a panel: `python3 deploy/grafana/generate.py`; the test
`deploy_files_pass_promtool_and_name_real_metrics` (server/tests/metrics.rs) checks that the JSON is
this script's output and that every metric it queries is one orq exports."""

import json
import pathlib

DS = {"type": "prometheus", "uid": "${datasource}"}
Q = 'queue=~"$queue"'


def panel(panels, title, exprs, unit, x, y, desc, stack=False, w=12, h=8):
    panels.append({
        "id": len(panels) + 1,
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {
            "defaults": {"unit": unit, "custom": {"stacking": {"mode": "normal" if stack else "none"}}},
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi"},
        },
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": e, "legendFormat": l}
            for i, (e, l) in enumerate(exprs)
        ],
    })


def dashboard():
    p = []
    panel(p, "Tasks by status", [(f"sum by (status) (orq_tasks{{{Q}}})", "{{status}}")], "short", 0, 0,
          "orq_tasks: current tasks per status in the selected queues.", stack=True)
    panel(p, "Throughput", [
        (f"sum by (queue) (rate(orq_tasks_submitted_total{{{Q}}}[$__rate_interval]))", "submitted {{queue}}"),
        (f"sum by (queue) (rate(orq_tasks_completed_total{{{Q}}}[$__rate_interval]))", "completed {{queue}}"),
        (f"sum by (queue) (rate(orq_task_attempts_failed_total{{{Q}}}[$__rate_interval]))", "failed attempts {{queue}}"),
        (f"sum by (queue) (rate(orq_tasks_cancelled_total{{{Q}}}[$__rate_interval]))", "cancelled {{queue}}"),
    ], "ops", 12, 0, "Tasks per second submitted, completed and cancelled, and failed attempts per second.")
    panel(p, "Oldest ready task", [(f"max by (queue) (orq_queue_oldest_ready_age_seconds{{{Q}}})", "{{queue}}")],
          "s", 0, 8, "How long the oldest due task has waited for a worker: what to scale workers on.")
    panel(p, "Dead-letter queue", [
        (f'sum by (queue) (orq_tasks{{{Q}, status="dead"}})', "dead {{queue}}"),
        (f"sum by (queue) (increase(orq_tasks_dead_total{{{Q}}}[$__rate_interval]))", "died {{queue}}"),
        (f"sum by (queue) (increase(orq_tasks_replayed_total{{{Q}}}[$__rate_interval]))", "replayed {{queue}}"),
        (f"sum by (queue) (increase(orq_tasks_purged_total{{{Q}}}[$__rate_interval]))", "purged {{queue}}"),
    ], "short", 12, 8, 'Dead tasks held (orq_tasks{status="dead"}), and deaths, replays and purges per interval.')
    panel(p, "Tasks by tenant (ready and leased)", [
        (f'sum by (tenant) (orq_tenant_tasks{{{Q}, status=~"queued|leased"}})', "{{tenant}}"),
    ], "short", 0, 16, 'Per tenant: the first 20 tenants of each queue by name; the rest are tenant="_other".',
          stack=True)
    panel(p, "Worker slots", [("sum by (state) (orq_worker_slots)", "{{state}}")], "short", 12, 16,
          "Busy and free handler slots of the Rust workers (orq worker, orq serve).", stack=True)
    panel(p, "Task wait and run (p95)", [
        (f"histogram_quantile(0.95, sum by (le, queue) (rate(orq_task_wait_seconds_bucket{{{Q}}}[$__rate_interval])))",
         "wait {{queue}}"),
        ("histogram_quantile(0.95, sum by (le, type) (rate(orq_task_run_seconds_bucket[$__rate_interval])))",
         "run {{type}}"),
    ], "s", 0, 24, "Wait: from due to leased. Run: handler time in the Rust workers.")
    panel(p, "Store call latency (p99)", [
        ("histogram_quantile(0.99, sum by (le, script) (rate(orq_store_call_duration_seconds_bucket[$__rate_interval])))",
         "{{script}}"),
    ], "s", 12, 24, "Script calls to Redis, from send to reply, per script.")
    panel(p, "Store errors", [
        ("sum by (kind, job) (rate(orq_store_errors_total[$__rate_interval]))", "{{kind}} ({{job}})"),
    ], "ops", 0, 32, "Store calls refused (oom, loading, readonly, ...) or unanswered (unreachable).")
    panel(p, "Lease expiries and refused reports", [
        (f"sum by (queue) (rate(orq_lease_expiries_total{{{Q}}}[$__rate_interval]))", "expired {{queue}}"),
        (f"sum by (queue, reason) (rate(orq_reports_refused_total{{{Q}}}[$__rate_interval]))",
         "refused {{queue}} {{reason}}"),
    ], "ops", 12, 32, "Leases that expired without an outcome, and outcomes refused because the lease had ended.")
    panel(p, "Scheduler pass (p99)", [
        ("histogram_quantile(0.99, sum by (le) (rate(orq_scheduler_pass_duration_seconds_bucket[$__rate_interval])))",
         "pass"),
    ], "s", 0, 40, "One scheduler pass over all queues: promote due tasks, reap expired leases, trim.")
    panel(p, "Paused queues", [(f"max by (queue) (orq_queue_paused{{{Q}}})", "{{queue}}")], "short", 12, 40,
          "1 while leasing from the queue is paused.")
    return {
        "title": "orq",
        "uid": "orq-overview",
        "description": "orq task queues: throughput, waiting, the DLQ, workers and the store. "
                       "Generated by deploy/grafana/generate.py.",
        "tags": ["orq"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "queue", "type": "query", "datasource": DS,
             "query": {"query": "label_values(orq_tasks, queue)", "refId": "queues"},
             "definition": "label_values(orq_tasks, queue)", "multi": True, "includeAll": True,
             "allValue": ".*", "current": {"text": "All", "value": "$__all"}, "refresh": 2, "label": "Queue"},
        ]},
        "panels": p,
    }


if __name__ == "__main__":
    out = pathlib.Path(__file__).with_name("orq-dashboard.json")
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
