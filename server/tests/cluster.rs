//! The `orq` roles on a Redis Cluster: `orq api`, `orq worker` and `orq scheduler` start with
//! `--redis redis+cluster://...` (the deployment checks neither refuse a cluster nor fail on it)
//! and run tasks of queues whose slots live on different primaries.

mod roles;

use orq::keys::queue_keys;
use orq::testing::RedisCluster;
use roles::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

// Goal: the three roles start on a cluster URL and work together across its primaries.
// Method: a 3×1 cluster; `orq api`, `orq worker` and `orq scheduler` with its URL; /readyz
// answers (the write probe on the registry's slot); one echo task per primary's queue over HTTP
// completes with its payload as result; a task with a 600 ms delay (which the scheduler or a
// lease call promotes) completes too; /queues lists the queues; the worker and the scheduler are
// still running at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_worker_and_scheduler_run_on_a_cluster() {
    let cluster = RedisCluster::start(3, 1);
    let url = cluster.url();
    let mut queues = BTreeMap::new();
    for i in 0..1000 {
        let name = format!("sq-{i}");
        let slot = cluster.key_slot(&queue_keys(&name)[0]);
        queues.entry(cluster.primary_of_slot(slot)).or_insert(name);
        if queues.len() == 3 {
            break;
        }
    }
    assert_eq!(queues.len(), 3, "{queues:?}");

    let listen = free_listen_addr();
    let mut api = Proc::spawn(&["api", "--redis", &url, "--listen", &listen]);
    let mut worker = Proc::spawn(&["worker", "--redis", &url, "--worker-id", "w-cluster"]);
    let mut scheduler = Proc::spawn(&["scheduler", "--redis", &url]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;

    let mut ids = Vec::new();
    for (port, q) in &queues {
        for delay in [0, 600] {
            let body = json!({"queue": q, "type": "echo", "payload": {"primary": port},
                "delay_ms": delay});
            ids.push((*port, roles::submit_task(&http, &base, body).await));
        }
    }
    for (port, id) in &ids {
        let done = wait_for("a task to complete", async || {
            let t = roles::get_json(&http, &format!("{base}/tasks/{id}")).await?;
            (t["status"] == "completed").then_some(t)
        })
        .await;
        assert_eq!(done["result"], json!({"primary": port}), "{done}");
    }
    let listed: Value = http
        .get(format!("{base}/queues"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<&str> = listed["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    names.sort();
    let mut expected: Vec<&str> = queues.values().map(String::as_str).collect();
    expected.sort();
    assert_eq!(names, expected);
    api.assert_running("api");
    worker.assert_running("worker");
    scheduler.assert_running("scheduler");
}
