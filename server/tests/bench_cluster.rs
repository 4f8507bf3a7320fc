//! `orq bench` on Redis: with `--queues` on a three-primary cluster its queues spread over every
//! primary and the report shows each primary's share of the Redis work; on one Redis the same
//! report has one entry, the server. No timing is asserted (a loaded machine must not fail these).

use orq::testing::{RedisCluster, RedisServer};
use orq_bench::queue_names;
use serde_json::Value;
use std::process::Command;

/// Run `orq bench --no-progress --json <tmp> <args>` to the end; its stdout (the table) and the
/// JSON report. Panics when it fails.
fn bench(args: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_orq"))
        .arg("bench")
        .args(args)
        .args(["--no-progress", "--json"])
        .arg(&json)
        .env("ORQ_LOG", "warn")
        .output()
        .expect("run orq bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "orq bench failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (stdout, report)
}

/// Keys left on the node at `port` by bench runs (`orq:{ob-*`).
fn bench_keys_left(port: u16) -> Vec<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_connection().unwrap();
    redis::cmd("KEYS")
        .arg("orq:{ob-*")
        .query(&mut conn)
        .unwrap()
}

// Goal: `--queues 6` on a 3×1 cluster puts two queues on each primary, each primary runs some
// of the scripts, and the report accounts for every task; the bench deletes its keys.
// Method: the real binary with 600 tasks in batches of 100; the JSON's `redis_work` has three
// primaries (the cluster's, by address) with script calls, two queues and 100 tasks each, shares
// that add up to 100 %, and a script time per task; the table prints a line per primary. The
// slots of the queue names agree with the cluster's `CLUSTER KEYSLOT`.
#[test]
fn bench_with_six_queues_spreads_over_every_primary_of_a_cluster() {
    let cluster = RedisCluster::start(3, 1);
    for name in queue_names("ob-abcdefgh-e2e", 6) {
        assert_eq!(
            cluster.key_slot(&format!("orq:{{{name}}}:task:")),
            orq_model::key_slot(orq::keys::queue_keys(&name)[0].as_bytes()),
            "{name}"
        );
    }
    let url = cluster.url();
    let (table, report) = bench(&[
        "--redis",
        &url,
        "--queues",
        "6",
        "--tasks",
        "600",
        "--batch",
        "100",
        "--concurrency",
        "20",
    ]);
    assert_eq!(report["queues"], 6, "{report:#}");
    let work = &report["redis_work"];
    let primaries = work["primaries"].as_array().expect("redis_work.primaries");
    let mut nodes: Vec<String> = primaries
        .iter()
        .map(|p| p["node"].as_str().unwrap().to_string())
        .collect();
    nodes.sort();
    let mut expected: Vec<String> = cluster
        .primaries()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    expected.sort();
    assert_eq!(nodes, expected, "{work:#}");
    let (mut calls_pct, mut cpu_pct) = (0.0, 0.0);
    for p in primaries {
        assert!(p["script_calls"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(
            (p["queues"].as_u64(), p["tasks"].as_u64()),
            (Some(2), Some(200)),
            "{p}"
        );
        assert!(p["script_usec_per_task"].as_f64().unwrap() > 0.0, "{p}");
        calls_pct += p["script_calls_share_pct"].as_f64().unwrap();
        cpu_pct += p["cpu_share_pct"].as_f64().unwrap();
        assert!(table.contains(&format!(
            "{}: 2 queues, 200 tasks",
            p["node"].as_str().unwrap()
        )));
    }
    assert!((calls_pct - 100.0).abs() < 0.01, "{work:#}");
    // All three may have used no measurable CPU between the snapshots only in theory.
    assert!(cpu_pct == 0.0 || (cpu_pct - 100.0).abs() < 0.01, "{work:#}");
    let sum: u64 = primaries
        .iter()
        .map(|p| p["script_calls"].as_u64().unwrap())
        .sum();
    assert_eq!(work["script_calls"].as_u64(), Some(sum));
    assert!(work["script_usec_per_task"].as_f64().unwrap() > 0.0);
    assert!(table.contains("6 queues"), "{table}");
    assert!(table.contains("redis work (end to end)"), "{table}");
    for n in cluster.primaries() {
        assert_eq!(bench_keys_left(n.port), Vec::<String>::new());
    }
}

// Goal: on one Redis with the default one queue, the report has one entry (the server) with all
// the script calls and tasks, and the workload line does not mention queues.
// Method: the real binary with 300 tasks; the JSON's `redis_work` and the table.
#[test]
fn bench_on_one_redis_reports_the_server_as_its_one_primary() {
    let server = RedisServer::start();
    let (table, report) = bench(&["--redis", &server.url(), "--tasks", "300", "--batch", "50"]);
    assert_eq!(report["queues"], 1, "{report:#}");
    let work = &report["redis_work"];
    let primaries = work["primaries"].as_array().expect("redis_work.primaries");
    assert_eq!(primaries.len(), 1, "{work:#}");
    let p = &primaries[0];
    assert_eq!(p["node"], "", "{p}");
    assert_eq!(
        (p["queues"].as_u64(), p["tasks"].as_u64()),
        (Some(1), Some(300))
    );
    assert!(p["script_calls"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["script_calls_share_pct"].as_f64(), Some(100.0), "{p}");
    assert!(!table.contains("queues,"), "{table}");
    assert!(table.contains("the server"), "{table}");
    assert_eq!(bench_keys_left(server.port()), Vec::<String>::new());
}

// Goal: `--queues` out of range is refused with a clear message before anything runs.
#[test]
fn bench_refuses_queues_out_of_range() {
    for q in ["0", "65"] {
        let out = Command::new(env!("CARGO_BIN_EXE_orq"))
            .args(["bench", "--queues", q, "--no-progress"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--queues {q}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--queues") && stderr.contains("1..=64"),
            "{stderr}"
        );
    }
}
