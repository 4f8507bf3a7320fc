//! What dashboards read: a queue's event stream in pages (`Client::events`) and the workers it
//! has seen with their leases (`Client::workers`), on every deployment.

use crate::common::{spec, Env};
use orq::{ops, Error};

// Goal: the event stream reads back in order, in pages after a stream id, with the wait and run
// times of leased and completed tasks; bad arguments are typed errors.
async fn events_page_through_the_stream_with_wait_and_run_times(env: Env) {
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

/// Every event of `queue`, read in pages of `count` after the last id of the page before.
async fn all_events(env: &Env, queue: &str, count: usize) -> Vec<orq::QueueEvent> {
    let mut out: Vec<orq::QueueEvent> = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = env
            .client
            .events(queue, after.as_deref(), count)
            .await
            .unwrap();
        assert!(page.len() <= count, "a page holds at most {count} events");
        let Some(last) = page.last() else { break };
        after = Some(last.stream_id.clone());
        out.extend(page);
    }
    out
}

/// Submit 11 batches of 1,000 tasks to "q", read every event the stream kept, and check that it
/// kept the last 10,000..10,099 (whole entries are trimmed).
async fn submit_11_batches_and_read_the_kept_events(env: &Env) -> Vec<orq::QueueEvent> {
    for _ in 0..11 {
        env.submit_ids((0..1000).map(|_| spec("q", "echo", "{}")).collect())
            .await;
    }
    let all = all_events(env, "q", 1000).await;
    assert!(
        (10_000..10_100).contains(&all.len()),
        "kept {} events",
        all.len()
    );
    all
}

/// A stream id's two numbers, for ordering.
fn id_of(e: &orq::QueueEvent) -> (u64, u64) {
    orq::decode::stream_id(&e.stream_id).expect("event ids are stream ids")
}

// Goal: a batch call's events, grouped into a few stream entries, read back one by one: every
// page size gives the same events in order under unique increasing ids, a page may end inside an
// entry, and the fields of each event are its own.
async fn batch_events_read_back_one_by_one_in_pages_of_any_size(env: Env) {
    let specs: Vec<_> = (0..250)
        .map(|i| spec("q", "echo", "{}").tenant(if i % 2 == 0 { "t1" } else { "t2" }))
        .collect();
    let ids = env.submit_ids(specs).await;
    let leased = env.lease("q", "w1", 30).await.tasks;
    let batch: Vec<ops::Completion> = leased
        .iter()
        .map(|t| ops::Completion {
            id: t.id.clone(),
            token: t.lease.as_ref().unwrap().token.clone(),
            result: "null".into(),
        })
        .collect();
    ops::complete_batch(&*env.store, "q", &batch).await.unwrap();

    let mut raw = env.raw().await;
    let entries: usize = redis::cmd("XLEN")
        .arg("orq:{q}:events")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(
        entries <= 6,
        "310 events in a handful of entries, not {entries}"
    );

    let all = all_events(&env, "q", 1000).await;
    assert_eq!(all.len(), 310);
    let queued: Vec<&str> = all[..250].iter().map(|e| e.task_id.as_str()).collect();
    assert_eq!(queued, ids.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(all[..250]
        .iter()
        .all(|e| e.kind == "queued" && e.attempt == 0));
    assert_eq!(all[1].tenant, "t2");
    for (e, t) in all[250..280].iter().zip(&leased) {
        assert_eq!(
            (e.kind.as_str(), e.task_id.as_str()),
            ("leased", t.id.as_str())
        );
        assert_eq!((e.fields["w"].as_str(), e.attempt), ("w1", 1));
        assert!(e.fields.contains_key("wait_ms"));
    }
    for (e, t) in all[280..].iter().zip(&leased) {
        assert_eq!(
            (e.kind.as_str(), e.task_id.as_str()),
            ("completed", t.id.as_str())
        );
        assert!(e.fields.contains_key("run_ms"));
    }
    assert!(
        all.windows(2).all(|w| id_of(&w[0]) < id_of(&w[1])),
        "ids increase"
    );
    for count in [1, 7, 99, 100, 101, 333] {
        assert_eq!(all_events(&env, "q", count).await, all, "pages of {count}");
    }
}

// Goal: the stream keeps at least the last 10,000 events (whole entries, so fewer than 10,100)
// and drops older ones; when the stats hash's record of the last event id is lost or garbage,
// new events still get ids after every id the stream holds.
async fn the_stream_keeps_the_last_events_and_its_numbering_survives_a_lost_record(env: Env) {
    let mut raw = env.raw().await;
    env.submit_ids(vec![spec("q", "echo", "{}")]).await;
    let early = all_events(&env, "q", 1000).await;
    assert_eq!(early.len(), 1);
    let all = submit_11_batches_and_read_the_kept_events(&env).await;
    assert!(id_of(&all[0]) > id_of(&early[0]), "the oldest were trimmed");
    assert!(all.windows(2).all(|w| id_of(&w[0]) < id_of(&w[1])));
    let last = id_of(all.last().unwrap());
    assert_eq!(last.1, 1 + 11_000, "numbered 1, 2, ...");

    // The record lost, then garbage: the next events still come after the last one.
    let _: () = redis::cmd("HDEL")
        .arg("orq:{q}:stats")
        .arg("events")
        .query_async(&mut raw)
        .await
        .unwrap();
    env.submit_ids(vec![spec("q", "echo", "{}")]).await;
    let _: () = redis::cmd("HSET")
        .arg("orq:{q}:stats")
        .arg("events")
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let two = env
        .submit_ids((0..2).map(|_| spec("q", "echo", "{}")).collect())
        .await;
    let after = format!("{}-{}", last.0, last.1);
    let new = env.client.events("q", Some(&after), 10).await.unwrap();
    assert_eq!(new.len(), 3, "{new:?}");
    assert_eq!(new[1].task_id, two[0]);
    assert!(id_of(&new[0]) > last);
    assert!(new.windows(2).all(|w| id_of(&w[0]) < id_of(&w[1])));
    let stats = env.stats("q").await;
    assert!(
        stats.totals.get("repaired").copied().unwrap_or(0) >= 1,
        "{stats:?}"
    );
}

// Goal: old entries of one event each are trimmed as fast as new entries of a hundred come, so
// the stream keeps fewer than 10,100 events after each call whatever the entries hold.
// Method: 10,000 tasks submitted one by one (10,000 plain-sized entries), then 11 batches of
// 1,000 (110 entries of 100): the stream then holds the last 10,000..10,099 events, and every
// one of the single submits' events is gone.
async fn single_event_entries_are_trimmed_as_fast_as_batches_come(env: Env) {
    for _ in 0..10_000 {
        env.client.submit(spec("q", "echo", "{}")).await.unwrap();
    }
    submit_11_batches_and_read_the_kept_events(&env).await;
}

// Goal: when Redis loses its latest writes (a failover to a lagging replica, a restart), the
// events written after it get ids after the lost ones, so a reader whose cursor names a lost
// event still reads them.
// Method: DUMP the stream and the stats hash, submit two tasks (the reader's cursor is the last
// of their events), RESTORE both, wait a few ms, submit two more: the reader gets those two.
async fn events_after_a_store_rollback_come_after_the_lost_ones(env: Env) {
    let mut raw = env.raw().await;
    env.submit_ids((0..3).map(|_| spec("q", "echo", "{}")).collect())
        .await;
    let mut dumps = Vec::new();
    for key in ["orq:{q}:events", "orq:{q}:stats"] {
        let d: Vec<u8> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut raw)
            .await
            .unwrap();
        dumps.push((key, d));
    }
    env.submit_ids((0..2).map(|_| spec("q", "echo", "{}")).collect())
        .await;
    let cursor = all_events(&env, "q", 100)
        .await
        .last()
        .unwrap()
        .stream_id
        .clone();
    for (key, d) in &dumps {
        let _: () = redis::cmd("RESTORE")
            .arg(*key)
            .arg(0)
            .arg(d.as_slice())
            .arg("REPLACE")
            .query_async(&mut raw)
            .await
            .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let two = env
        .submit_ids((0..2).map(|_| spec("q", "echo", "{}")).collect())
        .await;
    let new = env.client.events("q", Some(&cursor), 10).await.unwrap();
    let ids: Vec<&str> = new.iter().map(|e| e.task_id.as_str()).collect();
    assert_eq!(ids, two.iter().map(String::as_str).collect::<Vec<_>>());
}

// Goal: workers that lease or heartbeat are listed, most recent first, with their leases and the
// time of the last heartbeat; a lease that ends leaves the list of leases.
async fn workers_are_listed_with_their_leases_and_heartbeats(env: Env) {
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

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    use crate::deployment::ONE_NODE;
    cases![
        events_page_through_the_stream_with_wait_and_run_times,
        batch_events_read_back_one_by_one_in_pages_of_any_size => ONE_NODE,
        the_stream_keeps_the_last_events_and_its_numbering_survives_a_lost_record => ONE_NODE,
        single_event_entries_are_trimmed_as_fast_as_batches_come,
        events_after_a_store_rollback_come_after_the_lost_ones => ONE_NODE,
        workers_are_listed_with_their_leases_and_heartbeats,
    ]
}
