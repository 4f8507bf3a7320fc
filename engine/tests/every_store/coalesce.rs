//! Natural batching of single submits (`Client::coalescing`, engine/src/client/coalesce.rs):
//! submits that arrive while their queue's call is in flight share the next call, and each
//! still gets its own answer.

use crate::common::{eventually, spec, Env};
use orq::{Client, Entropy, Error, Status, SystemClock, TenantLimits};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Holds every `enqueue` call until the test gives a permit; records each call's task count
/// (ARGV[1]); passes every call on.
struct GatedEnqueue {
    inner: Arc<dyn orq::Store>,
    gate: tokio::sync::Semaphore,
    entered: AtomicUsize,
    sizes: Mutex<Vec<usize>>,
}

#[async_trait::async_trait]
impl orq::Store for GatedEnqueue {
    async fn eval(
        &self,
        script: &'static orq_lua::Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<orq::Resp, orq::StoreError> {
        if script.name == "enqueue" {
            let n = std::str::from_utf8(&args[0]).unwrap().parse().unwrap();
            self.sizes.lock().unwrap().push(n);
            self.entered.fetch_add(1, Ordering::SeqCst);
            self.gate.acquire().await.expect("open").forget();
        }
        self.inner.eval(script, keys, args).await
    }
}

fn gated(env: &Env) -> (Arc<GatedEnqueue>, Client) {
    let store = Arc::new(GatedEnqueue {
        inner: env.store.clone(),
        gate: tokio::sync::Semaphore::new(0),
        entered: AtomicUsize::new(0),
        sizes: Mutex::new(Vec::new()),
    });
    let client = Client::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Entropy::from_os()),
    )
    .coalescing();
    (store, client)
}

/// Submit `spec` on a task of its own.
fn spawn_submit(
    client: &Client,
    spec: orq::TaskSpec,
) -> tokio::task::JoinHandle<orq::Result<orq::Submitted>> {
    let client = client.clone();
    tokio::spawn(async move { client.submit(spec).await })
}

/// Wait until `n` submits to `q` wait for the call in flight.
async fn wait_waiting(client: &Client, q: &str, n: usize) {
    eventually(&format!("{n} submits waiting"), || async {
        (client.submits_waiting(q) == n).then_some(())
    })
    .await;
}

// Goal: single submits that arrive while their queue's call is in flight go together in the
// next call, each answered as if alone: new tasks created with their own ids, and two submits
// with one idempotency key answered with one task (created once).
// Method: hold the first call; submit ten more (two sharing an idempotency key); once all ten
// wait, let the calls through: two enqueue calls (1 task, then 10), every answer right, every
// task stored once.
async fn concurrent_single_submits_share_a_call_each_with_its_own_answer(env: Env) {
    let (store, client) = gated(&env);
    let first = spawn_submit(&client, spec("q", "echo", "{\"n\":0}"));
    eventually("the first call to reach the store", || async {
        (store.entered.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let mut rest = Vec::new();
    for n in 1..=8 {
        rest.push(spawn_submit(
            &client,
            spec("q", "echo", &format!("{{\"n\":{n}}}")),
        ));
    }
    for n in 9..=10 {
        let s = spec("q", "echo", &format!("{{\"n\":{n}}}"))
            .tenant("t2")
            .idempotency_key("same-key");
        rest.push(spawn_submit(&client, s));
    }
    wait_waiting(&client, "q", 10).await;
    store.gate.add_permits(100);
    let first = first.await.unwrap().unwrap();
    assert!(first.created);
    let mut answers = Vec::new();
    for h in rest {
        answers.push(h.await.unwrap().unwrap());
    }
    assert_eq!(
        *store.sizes.lock().unwrap(),
        vec![1, 10],
        "one call, then one for the ten"
    );
    let mut ids: Vec<&str> = answers[..8].iter().map(|a| a.task.id.as_str()).collect();
    ids.push(first.task.id.as_str());
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 9, "nine distinct tasks");
    for (n, a) in answers[..8].iter().enumerate() {
        assert!(a.created);
        assert_eq!(
            a.task.payload,
            format!("{{\"n\":{}}}", n + 1),
            "each its own task"
        );
        let stored = env.get("q", &a.task.id).await;
        assert_eq!(stored.status, Status::Queued);
    }
    let (a, b) = (&answers[8], &answers[9]);
    assert_eq!(a.task.id, b.task.id, "one idempotency key, one task");
    assert_eq!(
        [a.created, b.created].iter().filter(|c| **c).count(),
        1,
        "created once"
    );
    assert_eq!(client.submits_waiting("q"), 0);
}

// Goal: a batch refused as a whole for one submit's fault (a tenant over its max_queued) does
// not refuse the others that shared its call: each is tried again alone.
// Method: tenant "full" may hold no waiting task; hold a first call, then submit one task of
// "full" and one of "ok"; the shared call is refused (LIMITED), then each goes alone: "full"
// is refused with Limited, "ok" is created.
async fn a_submit_refused_by_its_tenant_limit_does_not_refuse_the_others_of_its_call(env: Env) {
    let limits = TenantLimits {
        max_queued: Some(Some(0)),
        ..TenantLimits::default()
    };
    env.client
        .configure_tenant("q", "full", &limits)
        .await
        .unwrap();
    let (store, client) = gated(&env);
    let first = spawn_submit(&client, spec("q", "echo", "{}"));
    eventually("the first call to reach the store", || async {
        (store.entered.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let full = spawn_submit(&client, spec("q", "echo", "{}").tenant("full"));
    let ok = spawn_submit(&client, spec("q", "echo", "{}").tenant("ok"));
    wait_waiting(&client, "q", 2).await;
    store.gate.add_permits(100);
    assert!(first.await.unwrap().unwrap().created);
    let full = full.await.unwrap();
    assert!(
        matches!(full, Err(Error::Limited { .. })),
        "the tenant over its limit is refused: {full:?}"
    );
    let ok = ok.await.unwrap().unwrap();
    assert!(ok.created, "the other tenant's task is stored");
    assert_eq!(env.get("q", &ok.task.id).await.status, Status::Queued);
    assert_eq!(
        *store.sizes.lock().unwrap(),
        vec![1, 2, 1, 1],
        "the shared call, then each alone"
    );
}

// Goal: a submit that finds no call of its queue in flight goes at once, alone (no linger):
// one at a time, every call carries one task.
async fn a_lone_submit_goes_at_once(env: Env) {
    let (store, client) = gated(&env);
    store.gate.add_permits(1_000);
    for n in 0..5 {
        let a = client
            .submit(spec("q", "echo", &format!("{{\"n\":{n}}}")))
            .await
            .unwrap();
        assert!(a.created);
    }
    assert_eq!(*store.sizes.lock().unwrap(), vec![1; 5]);
}

pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        concurrent_single_submits_share_a_call_each_with_its_own_answer,
        a_submit_refused_by_its_tenant_limit_does_not_refuse_the_others_of_its_call,
        a_lone_submit_goes_at_once,
    ]
}
