//! What dashboards read: a queue's event stream in pages (`Client::events`) and the workers it
//! has seen with their leases (`Client::workers`), on a real Redis.

mod common;

use common::{spec, Env};
use orq::{ops, Error};

// Goal: the event stream reads back in order, in pages after a stream id, with the wait and run
// times of leased and completed tasks; bad arguments are typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_page_through_the_stream_with_wait_and_run_times() {
    let env = Env::start().await;
    let a = env
        .client
        .submit(spec("q", "echo", "{}").tenant("t1"))
        .await
        .unwrap()
        .task
        .id;
    env.client
        .submit(spec("q", "echo", "{}").tenant("t2"))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let leased = env.lease("q", "w1", 1).await.tasks.remove(0);
    assert_eq!(leased.id, a);
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let token = leased.lease.as_ref().unwrap().token.clone();
    ops::complete(&*env.store, "q", &a, &token, "1")
        .await
        .unwrap();

    let all = env.client.events("q", None, 1000).await.unwrap();
    let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["queued", "queued", "leased", "completed"]);
    assert_eq!(
        (all[0].task_id.as_str(), all[0].tenant.as_str()),
        (a.as_str(), "t1")
    );
    let wait: u64 = all[2].fields["wait_ms"].parse().unwrap();
    assert!(wait >= 30, "waited at least the 30 ms sleep: {wait}");
    assert_eq!(all[2].fields["w"], "w1");
    assert_eq!(all[2].attempt, 1);
    let run: u64 = all[3].fields["run_ms"].parse().unwrap();
    assert!(run >= 30, "ran at least the 30 ms sleep: {run}");

    // Pages: two at a time, each after the last id seen, cover the same entries.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = env.client.events("q", after.as_deref(), 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().stream_id.clone());
        paged.extend(page);
    }
    assert_eq!(paged, all);

    for (after, count) in [
        (Some("nope"), 10),
        (Some("1-2-3"), 10),
        (None, 0),
        (None, 1001),
    ] {
        assert!(
            matches!(
                env.client.events("q", after, count).await,
                Err(Error::Invalid { .. })
            ),
            "{after:?} {count}"
        );
    }
    assert!(matches!(
        env.client.events("bad name", None, 10).await,
        Err(Error::Invalid { .. })
    ));
    assert!(env
        .client
        .events("empty", None, 10)
        .await
        .unwrap()
        .is_empty());
}

// Goal: workers that lease or heartbeat are listed, most recent first, with their leases and the
// time of the last heartbeat; a lease that ends leaves the list of leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_listed_with_their_leases_and_heartbeats() {
    let env = Env::start().await;
    for _ in 0..3 {
        env.client
            .submit(spec("q", "echo", "{}").tenant("t"))
            .await
            .unwrap();
    }
    let two = env.lease("q", "wa", 2).await.tasks;
    assert_eq!(two.len(), 2);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let one = env.lease("q", "wb", 1).await.tasks;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (_, _) = ops::heartbeat(
        &*env.store,
        "q",
        &two[0].id,
        &two[0].lease.as_ref().unwrap().token,
        0,
    )
    .await
    .unwrap();
    let seen = env.client.workers("q").await.unwrap();
    let ids: Vec<&str> = seen.workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["wa", "wb"], "wa's heartbeat is the latest call");
    assert_eq!(seen.leases_total, 3);
    let wa = &seen.workers[0];
    assert_eq!(wa.leases.len(), 2);
    let hb = wa.leases.iter().find(|l| l.task_id == two[0].id).unwrap();
    assert!(
        hb.heartbeat_at_ms > hb.leased_at_ms,
        "the heartbeat is recorded"
    );
    let other = wa.leases.iter().find(|l| l.task_id == two[1].id).unwrap();
    assert_eq!(
        other.heartbeat_at_ms, other.leased_at_ms,
        "no heartbeat yet"
    );
    assert_eq!(
        (other.tenant.as_str(), other.task_type.as_str()),
        ("t", "echo")
    );
    assert_eq!(seen.workers[1].leases[0].task_id, one[0].id);
    assert!(seen.now_ms >= wa.last_seen_ms);

    let token = one[0].lease.as_ref().unwrap().token.clone();
    ops::complete(&*env.store, "q", &one[0].id, &token, "1")
        .await
        .unwrap();
    let after = env.client.workers("q").await.unwrap();
    let wb = after.workers.iter().find(|w| w.id == "wb").unwrap();
    assert!(wb.leases.is_empty(), "wb's lease ended");
    assert_eq!(after.leases_total, 2);
    assert!(matches!(
        env.client.workers("{x}").await,
        Err(Error::Invalid { .. })
    ));
}
