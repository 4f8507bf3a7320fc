//! The `orq` roles on a Redis Cluster: `orq api`, `orq worker` and `orq scheduler` start with
//! `--redis redis+cluster://...` (the deployment checks neither refuse a cluster nor fail on it)
//! and run tasks of queues whose slots live on different primaries.

use orq::keys::queue_keys;
use orq::testing::RedisCluster;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(90);

/// A child process killed (SIGKILL) and reaped when dropped.
struct Proc(Child);

impl Proc {
    fn spawn(args: &[&str]) -> Proc {
        let child = Command::new(env!("CARGO_BIN_EXE_orq"))
            .args(args)
            .env("ORQ_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn orq");
        Proc(child)
    }

    /// Panics when the process has exited (a role that refused the cluster).
    fn assert_running(&mut self, role: &str) {
        if let Some(status) = self.0.try_wait().expect("try_wait") {
            panic!("orq {role} exited with {status}");
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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

    let listen = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let mut api = Proc::spawn(&["api", "--redis", &url, "--listen", &listen]);
    let mut worker = Proc::spawn(&["worker", "--redis", &url, "--worker-id", "w-cluster"]);
    let mut scheduler = Proc::spawn(&["scheduler", "--redis", &url]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_for("the API to be ready", async || {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        r.status().is_success().then_some(Value::Null)
    })
    .await;

    let mut ids = Vec::new();
    for (port, q) in &queues {
        for delay in [0, 600] {
            let body = json!({"queue": q, "type": "echo", "payload": {"primary": port},
                "delay_ms": delay});
            let r = http
                .post(format!("{base}/tasks"))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
            let task: Value = r.json().await.unwrap();
            ids.push((*port, task["id"].as_str().unwrap().to_string()));
        }
    }
    for (port, id) in &ids {
        let done = wait_for("a task to complete", async || {
            let r = http.get(format!("{base}/tasks/{id}")).send().await.ok()?;
            let t: Value = r.json().await.ok()?;
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
