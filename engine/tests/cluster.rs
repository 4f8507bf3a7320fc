//! orq on a real Redis Cluster (3 primaries, 1 replica each, `orq::testing::RedisCluster`): the
//! `redis+cluster://` store routes every script call to the primary of its queue's slot, workers
//! and the scheduler run tasks of queues on different primaries, the pub/sub wake-ups published
//! on one node reach a subscriber on another, a failover is followed (a crash and a planned one,
//! under load: with `--wait-replicas 1` nothing acknowledged is lost, without it only the last
//! writes before a crash; the workload and its loss counts are in `failover/mod.rs`, shared with
//! `sentinel.rs`), a cluster that is down is a transient refusal, and bad cluster URLs are
//! errors, not panics or hangs.

mod common;
mod failover;

use common::{eventually, spawn_worker, spec, Echo, DEADLINE};
use failover::{client_on, node, worker_config, Workload, WAIT_ONE};
use orq::keys::{queue_keys, wake_channel, QUEUES_WAKE_CHANNEL};
use orq::testing::RedisCluster;
use orq::{Client, Handlers, ListQuery, RedisStore, Status, Store, WorkerConfig};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// PUBSUB NUMSUB of each of `channels` on the node on `port` (pub/sub is per node).
fn numsub(port: u16, channels: &[String]) -> Vec<i64> {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channels)
        .query(&mut node(port))
        .unwrap();
    counts.into_iter().map(|(_, n)| n).collect()
}

/// Queue names `<prefix>-<i>`, the first one whose slot each primary serves: `(primary port,
/// name)` for every primary, by port.
fn queue_per_primary(cluster: &RedisCluster, prefix: &str) -> BTreeMap<u16, String> {
    let primaries = cluster.primaries().len();
    let mut found = BTreeMap::new();
    for i in 0.. {
        let name = format!("{prefix}-{i}");
        let slot = cluster.key_slot(&queue_keys(&name)[0]);
        found.entry(cluster.primary_of_slot(slot)).or_insert(name);
        if found.len() == primaries {
            return found;
        }
        assert!(i < 1000, "no queue name for some primary: {found:?}");
    }
    unreachable!()
}

/// Wait until task `id` of `queue` has `status`, and return it.
async fn wait_status(client: &Client, queue: &str, id: &str, status: Status) -> orq::Task {
    eventually(&format!("task {id} of {queue} to be {status}"), || async {
        let t = client.get(Some(queue), id).await.expect("get");
        (t.status == status).then_some(t)
    })
    .await
}

// Goal: what spans queues works with the queues spread over a cluster's primaries: submit (one
// batch over three queues, so three script calls on three primaries, and the registry
// `orq:queues` on its own slot), lease and complete by a real Worker serving every known queue,
// get and cancel by id without a queue (which searches every queue), list, stats, the queue
// list, orq's function library loaded again on each primary after every node's libraries and
// script cache are flushed, the deployment probes (ping, role,
// CONFIG GET per primary, used_memory), a URL whose first node is dead and whose other node is a
// replica, and delete_matching, which must SCAN every primary. (One queue's lifecycle, retries,
// recovery, cancel and tenancy run on a cluster in the `every_store` suite.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_queues_on_every_primary_run_and_are_managed() {
    let cluster = RedisCluster::start(3, 1);
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{:?}", cluster.nodes());
    let queues = queue_per_primary(&cluster, "cq");
    assert_eq!(queues.len(), 3, "one queue on each primary: {queues:?}");
    let names: Vec<String> = queues.values().cloned().collect();
    let (q0, q2) = (&names[0], &names[2]);

    let redis = RedisStore::connect(&cluster.url())
        .await
        .expect("connect to the cluster");
    assert!(redis.is_cluster());
    assert_eq!(redis.role().await.as_deref(), Some("master"));
    let policies = redis
        .config_get_each("maxmemory-policy")
        .await
        .expect("CONFIG GET on every primary");
    let mut expected: Vec<String> = primaries
        .iter()
        .map(|p| format!("127.0.0.1:{}", p.port))
        .collect();
    expected.sort();
    assert_eq!(
        policies.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        expected,
        "one answer per primary"
    );
    assert!(policies.iter().all(|(_, v)| v == "noeviction"));
    assert_eq!(redis.config_get("appendonly").await.as_deref(), Some("no"));
    assert!(redis.used_memory().await.is_some_and(|m| m > 0));

    let store: Arc<dyn Store> = Arc::new(redis.clone());
    let client = client_on(&store);
    // One batch over the three queues, and a task far in the future to cancel.
    let mut specs = Vec::new();
    for q in &names {
        for i in 0..10 {
            specs.push(spec(q, "echo", &format!(r#"{{"q":"{q}","i":{i}}}"#)));
        }
    }
    let echo_ids: Vec<(String, String)> = client
        .submit_batch(specs)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.task.queue, s.task.id))
        .collect();
    assert_eq!(echo_ids.len(), 30);
    let later = client
        .submit(spec(q0, "echo", "{}").delay_ms(600_000))
        .await
        .unwrap();
    assert_eq!(later.task.status, Status::Scheduled);

    let worker = spawn_worker(
        store.clone(),
        Handlers::new().register("echo", Echo::default()),
        worker_config("w-cluster", &[]),
    );

    for (q, id) in &echo_ids {
        let t = wait_status(&client, q, id, Status::Completed).await;
        let want: serde_json::Value = serde_json::from_str(&t.payload).unwrap();
        let got: serde_json::Value = serde_json::from_str(t.result.as_deref().unwrap()).unwrap();
        assert_eq!(got, want, "{q} {id}");
        assert_eq!(want["q"], q.as_str());
    }
    // Cancel and get by id alone: the client finds the queue through the registry.
    let cancelled = client.cancel(None, &later.task.id).await.unwrap();
    assert_eq!(
        (cancelled.status, cancelled.queue.as_str()),
        (Status::Cancelled, q0.as_str())
    );
    assert_eq!(
        client.get(None, &later.task.id).await.unwrap().status,
        Status::Cancelled
    );

    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(client.queues().await.unwrap(), sorted);
    for q in &names {
        let page = client
            .list(&ListQuery {
                queue: q.clone(),
                status: Some(Status::Completed),
                tenant: None,
                task_type: None,
                limit: 100,
                cursor: None,
            })
            .await
            .unwrap();
        assert_eq!(page.tasks.len(), 10, "completed tasks of {q}");
        assert!(page.tasks.iter().all(|t| t.queue == *q));
        let stats = client.stats(q).await.unwrap();
        assert_eq!(stats.counts[&Status::Completed], 10, "{q}");
    }

    // Every node's function libraries and script cache emptied: the first FCALL on each primary
    // finds no function, and the store loads the library on the primary of the call's slot (the
    // cluster client routes the FUNCTION LOAD by the call's first key) and calls again.
    // (FUNCTION FLUSH is a write: sent to the primaries, whose replicas follow.)
    for port in cluster.ports() {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node(port))
            .unwrap();
    }
    for &port in queues.keys() {
        let _: () = redis::cmd("FUNCTION")
            .arg("FLUSH")
            .query(&mut node(port))
            .unwrap();
    }
    let library = &orq_lua::functions::library().name;
    let mut again = Vec::new();
    for (&port, q) in &queues {
        let s = client
            .submit(spec(q, "echo", r#"{"again":1}"#))
            .await
            .unwrap();
        let loaded: redis::Value = redis::cmd("FUNCTION")
            .arg("LIST")
            .arg("LIBRARYNAME")
            .arg(library)
            .query(&mut node(port))
            .unwrap();
        assert!(
            matches!(&loaded, redis::Value::Array(a) if !a.is_empty()),
            "the library is loaded again on {q}'s primary {port}: {loaded:?}"
        );
        again.push((q.clone(), s.task.id));
    }
    for (q, id) in &again {
        wait_status(&client, q, id, Status::Completed).await;
    }

    // Any one reachable node is enough, even a replica after a dead one.
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let replica = cluster
        .nodes()
        .into_iter()
        .find(|n| !n.primary)
        .expect("a replica");
    let other = RedisStore::connect(&format!(
        "redis+cluster://127.0.0.1:{dead_port},127.0.0.1:{}",
        replica.port
    ))
    .await
    .expect("connect through a replica after a dead node");
    let other: Arc<dyn Store> = Arc::new(other);
    let via_replica = client_on(&other)
        .submit(spec(q2, "echo", r#"{"via":"replica"}"#))
        .await
        .unwrap();
    wait_status(&client, q2, &via_replica.task.id, Status::Completed).await;

    worker.stop().await;

    // delete_matching SCANs every primary: afterwards no primary holds a key of these queues,
    // nor the registry (its last names removed).
    let dbsize = |port: u16| -> u64 { redis::cmd("DBSIZE").query(&mut node(port)).unwrap() };
    for (&port, q) in &queues {
        assert!(dbsize(port) > 0, "{q}'s primary {port} holds its keys");
    }
    let deleted = redis.delete_matching("orq:{cq-*", "cq-*").await.unwrap();
    assert!(deleted >= 3 * 5, "deleted {deleted} keys");
    for p in &primaries {
        assert_eq!(dbsize(p.port), 0, "primary {} emptied", p.port);
    }
    assert!(client.queues().await.unwrap().is_empty());
}

// Goal: wake-ups cross the cluster. The scripts PUBLISH on the node of their queue's slot; a
// store's one subscriber connection, on another node, hears them (Redis Cluster forwards plain
// PUBLISH to every node), so an idle worker runs a task submitted to a queue on another primary
// long before its idle poll (an hour) would find it.
// Method: (1) a store's wake receivers for every queue's channel and for the new-queue channel,
// once subscribed (the first wake-up comes after the subscriptions, and PUBSUB NUMSUB shows them
// on one node); a submit to a queue whose primary is another node makes both receivers change.
// (2) a worker on its own store with idle_poll_ms one hour, serving one queue per primary, once
// subscribed: a task submitted to each queue whose primary is not the subscriber's node runs
// within the test's deadline (30 s): only a wake-up can start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_published_on_one_node_reach_a_subscriber_on_another() {
    let cluster = RedisCluster::start(3, 1);
    let url = cluster.url();
    // The listener's queues, and the worker's (so no task of (1) is left for the worker).
    let heard = queue_per_primary(&cluster, "lq");
    let queues = queue_per_primary(&cluster, "wq");
    assert_eq!((heard.len(), queues.len()), (3, 3));
    let heard_channels: Vec<String> = heard.values().map(|q| wake_channel(q)).collect();
    let channels: Vec<String> = queues.values().map(|q| wake_channel(q)).collect();
    let submitter: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.unwrap());
    let client = client_on(&submitter);

    // The node of a store's subscriber: the first whose PUBSUB NUMSUB counts a subscriber of
    // every one of `channels`.
    let subscribed_on = |channels: Vec<String>| {
        let ports = cluster.ports();
        async move {
            eventually("the subscriptions to show in PUBSUB NUMSUB", || {
                let (ports, channels) = (ports.clone(), channels.clone());
                async move {
                    ports
                        .into_iter()
                        .find(|&port| numsub(port, &channels).iter().all(|&n| n >= 1))
                }
            })
            .await
        }
    };

    // (1) The store level.
    let listener = RedisStore::connect(&url).await.unwrap();
    let mut on_queue = listener
        .wake(&heard_channels)
        .expect("a Redis store gives wake-ups");
    let mut on_new = listener
        .wake(&[QUEUES_WAKE_CHANNEL.to_string()])
        .expect("a Redis store gives wake-ups");
    eventually("the subscriber to connect and wake everyone", || {
        let ok = *on_queue.borrow() >= 1 && *on_new.borrow() >= 1;
        async move { ok.then_some(()) }
    })
    .await;
    let mut all = heard_channels.clone();
    all.push(QUEUES_WAKE_CHANNEL.to_string());
    let sub_port = subscribed_on(all).await;
    let (&far_port, far) = heard
        .iter()
        .find(|(&port, _)| port != sub_port)
        .expect("a primary other than the subscriber's node");
    on_queue.borrow_and_update();
    on_new.borrow_and_update();
    client.submit(spec(far, "echo", "{}")).await.unwrap();
    tokio::time::timeout(DEADLINE, on_queue.changed())
        .await
        .unwrap_or_else(|_| {
            panic!("no wake-up of {far} (primary {far_port}) on the subscriber's node {sub_port}")
        })
        .unwrap();
    tokio::time::timeout(DEADLINE, on_new.changed())
        .await
        .expect("the new queue's announcement reached the subscriber")
        .unwrap();
    drop(listener);

    // (2) A worker that only a wake-up can start.
    let worker_store: Arc<dyn Store> = Arc::new(RedisStore::connect(&url).await.unwrap());
    let echo = Echo::default();
    let worker = spawn_worker(
        worker_store,
        Handlers::new().register("echo", echo.clone()),
        WorkerConfig {
            id: "w-idle".into(),
            queues: queues.values().cloned().collect(),
            concurrency: 2,
            lanes: 1,
            idle_poll_ms: 3_600_000,
            ..WorkerConfig::default()
        },
    );
    let worker_port = subscribed_on(channels.clone()).await;
    let mut ran = Vec::new();
    for (&port, q) in &queues {
        if port == worker_port {
            continue;
        }
        let s = client
            .submit(spec(q, "echo", &format!(r#"{{"far":{port}}}"#)))
            .await
            .unwrap();
        ran.push((q.clone(), s.task.id));
    }
    assert_eq!(ran.len(), 2, "two queues live on other primaries");
    for (q, id) in &ran {
        let t = wait_status(&client, q, id, Status::Completed).await;
        assert_eq!(echo.runs.of(id).len(), 1, "{q} ran once");
        assert_eq!(t.attempt, 1);
    }
    worker.stop().await;
}

// Goal: a bad cluster URL is an error, never a panic or a hang: no host, an unparsable port, and
// a node nobody listens on (open is lazy and succeeds; connect, a submit and a wake-up request
// fail or go on without blocking, within a timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cluster_urls_are_errors_not_panics_or_hangs() {
    for bad in [
        "redis+cluster://",
        "redis+cluster:///",
        "redis+cluster://127.0.0.1:notaport",
        "redis+cluster://127.0.0.1:70000",
        "redis+cluster://127.0.0.1:7000,,127.0.0.1:7001",
        "redis+clustr://127.0.0.1:7000",
    ] {
        let e = RedisStore::open(bad).expect_err(bad);
        assert!(e.0.starts_with("bad Redis"), "{bad}: {e}");
    }
    let nobody = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("redis+cluster://127.0.0.1:{nobody}");
    let e = tokio::time::timeout(DEADLINE, RedisStore::connect(&url))
        .await
        .expect("connect gives up within the deadline")
        .expect_err("nobody listens");
    assert!(!e.0.is_empty());
    let store: Arc<dyn Store> = Arc::new(RedisStore::open(&url).unwrap());
    assert!(store.wake(&[wake_channel("q")]).is_some());
    let e = tokio::time::timeout(DEADLINE, client_on(&store).submit(spec("q", "echo", "{}")))
        .await
        .expect("a submit gives up within the deadline")
        .expect_err("nobody listens");
    assert!(e.is_unavailable(), "{e}");
}

// Goal: the store follows a failover, and a cluster that cannot serve reaches the engine as a
// transient refusal (CLUSTERDOWN, which the cluster client retries a few times and then hands
// back), not as a protocol error or a hang.
// Method: one queue per primary. (1) SIGKILL one primary; until its replica is promoted, every
// failed submit to its queue is Unavailable; then a submit succeeds, the replica is the slot's
// primary, and the task reads back. (2) SIGKILL a second primary and its replica: with slots
// uncovered the cluster goes down (`cluster_state:fail` on the last primary); a call on the
// last primary's queue is Unavailable with cause ClusterDown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_is_followed_and_a_cluster_down_is_transient() {
    let mut cluster = RedisCluster::start(3, 1);
    let queues = queue_per_primary(&cluster, "fq");
    let ports: Vec<u16> = queues.keys().copied().collect();
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&cluster.url()).await.unwrap());
    let client = client_on(&store);
    for q in queues.values() {
        client.submit(spec(q, "echo", "{}")).await.unwrap();
    }

    // (1) A failover.
    let (p1, q1) = (ports[0], &queues[&ports[0]]);
    let r1 = cluster
        .nodes()
        .into_iter()
        .find(|n| n.replica_of == Some(p1))
        .expect("the primary's replica")
        .port;
    cluster.kill_node(p1);
    let after = eventually(&format!("a submit to {q1} after the failover"), || async {
        match client.submit(spec(q1, "echo", r#"{"after":1}"#)).await {
            Ok(s) => Some(s),
            Err(e) => {
                assert!(e.is_unavailable(), "only Unavailable meanwhile: {e}");
                None
            }
        }
    })
    .await;
    // The submit went to the promoted replica: the other nodes learn of it by gossip.
    let slot = cluster.key_slot(&queue_keys(q1)[0]);
    eventually("the cluster to show the replica promoted", || async {
        let promoted = cluster.nodes().iter().any(|n| n.port == r1 && n.primary);
        (promoted && cluster.primary_of_slot(slot) == r1).then_some(())
    })
    .await;
    let t = client.get(Some(q1), &after.task.id).await.unwrap();
    assert_eq!(t.payload, r#"{"after":1}"#);

    // (2) A shard lost with its replica: the cluster is down.
    let (p2, p3) = (ports[1], ports[2]);
    let r2 = cluster
        .nodes()
        .into_iter()
        .find(|n| n.replica_of == Some(p2))
        .expect("the second primary's replica")
        .port;
    cluster.kill_node(p2);
    cluster.kill_node(r2);
    eventually("the last primary to say the cluster is down", || async {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut node(p3))
            .unwrap();
        info.lines()
            .any(|l| l.trim_end() == "cluster_state:fail")
            .then_some(())
    })
    .await;
    let e = tokio::time::timeout(DEADLINE, client.stats(&queues[&p3]))
        .await
        .expect("the call gives up within the deadline")
        .expect_err("the cluster is down");
    assert!(
        matches!(
            e,
            orq::Error::Unavailable {
                cause: orq::Transient::ClusterDown,
                ..
            }
        ),
        "{e:?}"
    );
}

/// The workload's queue for a failover test: the first name `<prefix>-<i>` whose slot the first
/// primary (by port) serves, with that primary's port and its replica's.
fn queue_on_a_primary(cluster: &RedisCluster, prefix: &str) -> (String, u16, u16) {
    let (primary, queue) = queue_per_primary(cluster, prefix)
        .into_iter()
        .next()
        .expect("a primary");
    let replica = cluster.replica_of(primary).expect("the primary's replica");
    (queue, primary, replica)
}

// Goal: on a cluster, a crash of the primary serving a busy queue is followed, and without
// --wait-replicas loses at most what that primary acknowledged just before it died. Method: the
// failover workload (failover/mod.rs: a submitter retrying each submit with its idempotency key,
// a worker pool and a scheduler, each on its own store) on a queue of one primary; SIGKILL that
// primary; its replica takes over after the node timeout (2 s). Submits and outcomes resume
// within the bound (30 s), the scheduler reaps a crashed worker's lease on the new primary, and
// every acknowledged task completes or is lost; a loss (a task unknown after the failover, or a
// recorded success rolled back so that the task ran again) is counted and printed, and must be of
// something acknowledged in the 2 s before the kill (`LOSS_WINDOW`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_load_loses_at_most_its_last_writes() {
    let mut cluster = RedisCluster::start(3, 1);
    let (queue, primary, replica) = queue_on_a_primary(&cluster, "kq");
    let workload = Workload::start(&cluster.url(), None, &queue).await;
    cluster.kill_node(primary);
    let fault = Instant::now();
    tokio::task::block_in_place(|| cluster.wait_until_primary(replica));
    let figures = workload.finish(fault).await;
    figures.report("cluster, kill -9 of the queue's primary, no --wait-replicas");
    figures.assert_loss_within_window();
}

// Goal: on a cluster with --wait-replicas 1, a crash of the primary serving a busy queue loses no
// acknowledged submit and no acknowledged outcome. Method: the failover workload on stores that
// wait for one replica; SIGKILL the queue's primary; once its replica has taken over, a new node
// joins as the new primary's replica (as an operator replaces a lost node: until a replica has
// the writes, the shard's acknowledgements wait and calls are refused as transient NOREPLICAS).
// Submits and outcomes resume within the bound (30 s), every acknowledged task completes, none
// ran again after its success was acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_under_load_with_wait_replicas_loses_nothing() {
    let mut cluster = RedisCluster::start(3, 1);
    let (queue, primary, replica) = queue_on_a_primary(&cluster, "wq");
    let workload = Workload::start(&cluster.url(), Some(WAIT_ONE), &queue).await;
    cluster.kill_node(primary);
    let fault = Instant::now();
    tokio::task::block_in_place(|| {
        cluster.wait_until_primary(replica);
        cluster.add_replica(replica);
    });
    let figures = workload.finish(fault).await;
    figures.report("cluster, kill -9 of the queue's primary, --wait-replicas 1");
    figures.assert_nothing_lost();
}

// Goal: on a cluster with --wait-replicas 1, a planned failover (CLUSTER FAILOVER on the replica)
// of the primary serving a busy queue loses nothing. Method: the failover workload on stores that
// wait for one replica; CLUSTER FAILOVER on the queue's replica (the primary pauses its clients
// until the replica has caught up, the replica takes over, the old primary follows it, so the
// shard keeps a replica); the store follows MOVED to the new primary. Submits and outcomes
// resume within the bound (30 s), every acknowledged task completes, none ran again after its
// success was acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_with_wait_replicas_loses_nothing() {
    let cluster = RedisCluster::start(3, 1);
    let (queue, primary, replica) = queue_on_a_primary(&cluster, "pq");
    let workload = Workload::start(&cluster.url(), Some(WAIT_ONE), &queue).await;
    let fault = Instant::now();
    tokio::task::block_in_place(|| cluster.failover(replica));
    let figures = workload.finish(fault).await;
    figures.report("cluster, CLUSTER FAILOVER, --wait-replicas 1");
    figures.assert_nothing_lost();
    eventually("the old primary to follow the new one", || async {
        (cluster.replica_of(replica) == Some(primary)).then_some(())
    })
    .await;
}
