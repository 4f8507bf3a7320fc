//! The `orq` roles on a Sentinel deployment: `orq api`, `orq worker` and `orq scheduler` start
//! with `--redis redis+sentinel://...` (the deployment checks look at the primary the sentinels
//! name, so the replica check does not refuse) and run tasks.

mod roles;

use orq::testing::RedisSentinel;
use roles::*;
use serde_json::json;

// Goal: the three roles start on a sentinel URL and work together on the primary.
// Method: `orq api`, `orq worker` and `orq scheduler` with the fixture's sentinel URL; /readyz
// answers; an echo task and a delayed one submitted over HTTP complete with their payload as
// result; every role is still running at the end (none refused the URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_worker_and_scheduler_run_through_sentinel() {
    let fx = RedisSentinel::start();
    let url = fx.url();
    let listen = free_listen_addr();
    let mut api = Proc::spawn(&["api", "--redis", &url, "--listen", &listen]);
    let mut worker = Proc::spawn(&["worker", "--redis", &url, "--worker-id", "w-sentinel"]);
    let mut scheduler = Proc::spawn(&["scheduler", "--redis", &url]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let mut ids = Vec::new();
    for delay in [0, 600] {
        let body = json!({"queue": "sentq", "type": "echo", "payload": {"delay": delay},
            "delay_ms": delay});
        ids.push((delay, roles::submit_task(&http, &base, body).await));
    }
    for (delay, id) in &ids {
        let done = wait_for("a task to complete", async || {
            let t = roles::get_json(&http, &format!("{base}/tasks/{id}")).await?;
            (t["status"] == "completed").then_some(t)
        })
        .await;
        assert_eq!(done["result"], json!({"delay": delay}), "{done}");
    }
    api.assert_running("api");
    worker.assert_running("worker");
    scheduler.assert_running("scheduler");
}
