//! Listing on every deployment: pages by status and across every status, following the cursor
//! until the listing is complete, with every task seen exactly once.

use crate::common::{spec, Env};
use orq::ops;
use orq::{Client, ListQuery, Status, Task};
use std::collections::{HashMap, HashSet};

/// Every task of `query`, following `next_cursor` until `None`, with the number of pages read.
/// Bounded: more pages than tasks + 10 means the cursor does not advance.
async fn list_all(client: &Client, query: ListQuery, tasks_max: usize) -> (Vec<Task>, usize) {
    let mut query = query;
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let page = client.list(&query).await.expect("list");
        pages += 1;
        assert!(
            page.tasks.len() <= query.limit as usize,
            "page exceeds its limit"
        );
        out.extend(page.tasks);
        assert!(pages <= tasks_max + 10, "the cursor does not advance");
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => return (out, pages),
        }
    }
}

// Goal: listing one status with a small page size, following next_cursor until it is None,
// returns every task of that status exactly once, across tenants, and nothing else.
// Method: 23 queued tasks over 3 tenants plus 4 scheduled ones; list queued with limit 5;
// compare ids; then list scheduled the same way.
async fn list_by_status_pages_through_every_task_once(env: Env) {
    let specs = (0..23)
        .map(|i| spec("q", "echo", "{}").tenant(format!("t{}", i % 3)))
        .collect();
    let queued: HashSet<String> = env
        .client
        .submit_batch(specs)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.task.id)
        .collect();
    let specs = (0..4)
        .map(|_| spec("q", "echo", "{}").delay_ms(600_000))
        .collect();
    let scheduled: HashSet<String> = env
        .client
        .submit_batch(specs)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.task.id)
        .collect();

    let query = ListQuery {
        queue: "q".into(),
        status: Some(Status::Queued),
        limit: 5,
        ..ListQuery::default()
    };
    let (tasks, pages) = list_all(&env.client, query, 23).await;
    assert!(
        pages >= 5,
        "23 tasks in pages of 5 take at least 5 pages, got {pages}"
    );
    let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
    let unique: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(ids.len(), 23, "no task seen twice");
    assert_eq!(unique, queued);
    assert!(tasks.iter().all(|t| t.status == Status::Queued));

    let query = ListQuery {
        queue: "q".into(),
        status: Some(Status::Scheduled),
        limit: 3,
        ..ListQuery::default()
    };
    let (tasks, _) = list_all(&env.client, query, 4).await;
    let ids: HashSet<String> = tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(tasks.len(), 4);
    assert_eq!(ids, scheduled);

    let query = ListQuery {
        queue: "q".into(),
        status: Some(Status::Queued),
        tenant: Some("t1".into()),
        limit: 2,
        ..ListQuery::default()
    };
    let (tasks, _) = list_all(&env.client, query, 8).await;
    assert_eq!(tasks.len(), 8, "t1 has tasks 1, 4, ..., 22");
    assert!(tasks.iter().all(|t| t.tenant == "t1"));
}

// Goal: listing without a status pages through every index and returns every task exactly once
// with its current status.
// Method: build tasks in five statuses (queued, scheduled, leased, completed, dead, cancelled)
// with the low-level calls, list everything with limit 3, and compare with what was built.
async fn list_without_status_pages_through_every_index_once(env: Env) {
    let mut want: HashMap<String, Status> = HashMap::new();
    let specs = (0..12).map(|_| spec("q", "echo", "{}")).collect();
    let subs = env.client.submit_batch(specs).await.unwrap();
    // Lease 8 of the 12: complete 3, fail 2 permanently, leave 3 leased.
    let leased = env.lease("q", "w-1", 8).await.tasks;
    assert_eq!(leased.len(), 8);
    for (i, t) in leased.iter().enumerate() {
        let token = &t.lease.as_ref().unwrap().token;
        let status = match i {
            0..=2 => {
                ops::complete(&*env.store, "q", &t.id, token, "1")
                    .await
                    .unwrap();
                Status::Completed
            }
            3..=4 => {
                ops::fail(&*env.store, "q", &t.id, token, "x", false, 0.5)
                    .await
                    .unwrap();
                Status::Dead
            }
            _ => Status::Leased,
        };
        want.insert(t.id.clone(), status);
    }
    for s in &subs {
        want.entry(s.task.id.clone()).or_insert(Status::Queued);
    }
    // Cancel one of the 4 still queued.
    let to_cancel = subs
        .iter()
        .find(|s| want[&s.task.id] == Status::Queued)
        .unwrap();
    env.client
        .cancel(Some("q"), &to_cancel.task.id)
        .await
        .unwrap();
    want.insert(to_cancel.task.id.clone(), Status::Cancelled);
    for s in env
        .client
        .submit_batch(
            (0..2)
                .map(|_| spec("q", "echo", "{}").delay_ms(600_000))
                .collect(),
        )
        .await
        .unwrap()
    {
        want.insert(s.task.id, Status::Scheduled);
    }
    assert_eq!(want.len(), 14);

    let query = ListQuery {
        queue: "q".into(),
        limit: 3,
        ..ListQuery::default()
    };
    let (tasks, _) = list_all(&env.client, query, 14).await;
    assert_eq!(tasks.len(), 14, "no task seen twice or missed");
    let got: HashMap<String, Status> = tasks.iter().map(|t| (t.id.clone(), t.status)).collect();
    assert_eq!(got, want);
}

/// This suite's tests and the deployments each runs on.
pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        list_by_status_pages_through_every_task_once,
        list_without_status_pages_through_every_index_once,
    ]
}
