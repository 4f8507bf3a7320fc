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

// Goal: a call's events share stream entries (up to 100 events each, the entry's id is the
// number of its last event), read back one by one with consecutive ids, page across entry
// boundaries and from the middle of an entry, continue after entries of the older one-event
// format (even one numbered ahead of the store's clock), and the stream keeps the entries holding
// the last 10,000 events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_a_call_share_entries_and_read_back_one_by_one() {
    use redis::AsyncCommands;
    let env = Env::start().await;
    let key = "orq:{q}:events";
    let mut raw = env.raw().await;
    // An entry of the older format, numbered ahead of the clock: numbering continues after it.
    let now = env.store_now_ms("q").await;
    let old_id = format!("{}-3", now + 1_000_000);
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg(&old_id)
        .arg(&["k", "queued", "ts", "5", "id", "OLD", "t", "t0", "a", "0"])
        .query_async(&mut raw)
        .await
        .unwrap();
    let top = now + 1_000_000;

    let specs: Vec<_> = (0..250)
        .map(|i| spec("q", "echo", &format!("{{\"i\":{i}}}")))
        .collect();
    let ids: Vec<String> = env
        .client
        .submit_batch(specs)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.task.id)
        .collect();
    let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(&mut raw)
        .await
        .unwrap();
    let entry_ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
    // ts, then per event k, id, t, a: 2 + 4 pairs per event.
    let sizes: Vec<usize> = entries.iter().map(|(_, f)| f.len()).collect();
    assert_eq!(sizes, [10, 2 + 800, 2 + 800, 2 + 400]);
    let want: Vec<String> = [top + 100, top + 200, top + 250]
        .iter()
        .map(|n| format!("{n}-0"))
        .collect();
    assert_eq!(entry_ids[0], old_id);
    assert_eq!(
        entry_ids[1..],
        want.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
    let counter: String = raw.hget("orq:{q}:stats", "events").await.unwrap();
    assert_eq!(counter, (top + 250).to_string());

    // One by one: the old entry as itself, then 250 events numbered top+1 ..= top+250.
    let all = env.client.events("q", None, 1000).await.unwrap();
    assert_eq!(all.len(), 251);
    assert_eq!(
        (
            all[0].stream_id.as_str(),
            all[0].task_id.as_str(),
            all[0].ts_ms
        ),
        (old_id.as_str(), "OLD", 5)
    );
    for (i, e) in all[1..].iter().enumerate() {
        assert_eq!(e.stream_id, format!("{}-0", top + 1 + i as u64));
        assert_eq!(e.task_id, ids[i]);
        assert_eq!((e.kind.as_str(), e.tenant.as_str()), ("queued", "default"));
        assert!(e.ts_ms > 5);
    }
    // Pages of 7 cross the entry boundaries and give the same events.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = env.client.events("q", after.as_deref(), 7).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 7);
        after = Some(page.last().unwrap().stream_id.clone());
        paged.extend(page);
    }
    assert_eq!(paged, all);
    // From the middle of an entry, and from an id between numbers (after `<n>-5` comes n+1).
    let mid = env
        .client
        .events("q", Some(&format!("{}-0", top + 150)), 2)
        .await
        .unwrap();
    assert_eq!(mid, all[151..153].to_vec());
    let between = env
        .client
        .events("q", Some(&format!("{}-5", top + 150)), 1)
        .await
        .unwrap();
    assert_eq!(between, all[151..152].to_vec());

    // 10,000 more events: the stream keeps the entries holding the last 10,000.
    for _ in 0..10 {
        let specs: Vec<_> = (0..1000).map(|_| spec("q", "echo", "{}")).collect();
        env.client.submit_batch(specs).await.unwrap();
    }
    let last = top + 250 + 10_000;
    let mut held = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = env
            .client
            .events("q", after.as_deref(), 1000)
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().stream_id.clone());
        held.extend(page);
    }
    assert!(
        (10_000..10_100).contains(&held.len()),
        "held {} events",
        held.len()
    );
    assert_eq!(held.last().unwrap().stream_id, format!("{last}-0"));
    for (i, e) in held.iter().enumerate() {
        let n = last + 1 + i as u64 - held.len() as u64;
        assert_eq!(e.stream_id, format!("{n}-0"));
    }
    let len: usize = raw.xlen(key).await.unwrap();
    assert_eq!(len, 100, "10,000 events in entries of 100");
}
