//! A queue's life on every deployment: created within a tenant's allowance (counted in the
//! registry's slot), deleted only when it holds no work, its finished tasks and keys with it,
//! and a deleted name that is a fresh queue when used again.

use crate::common::{spec, Env};
use orq::client::{Created, Deleted};
use orq::Status;

// Goal: a tenant creates at most its allowance of queues, a set of names all or none; an
// existing queue is not counted again, and another tenant has its own allowance.
// Method: an allowance of 3; creates by acme of one, of a set too big, of a set that fits (with
// an existing name and a repeated one), then one too many; one by bolt.
async fn queues_are_created_within_a_tenants_allowance(env: Env) {
    let c = &env.client;
    let created = |new, count| Created::Created { new, count };
    assert_eq!(
        c.create_queues(&["a1"], "acme", 3).await.unwrap(),
        created(1, 1)
    );
    assert_eq!(
        c.create_queues(&["a1"], "acme", 3).await.unwrap(),
        Created::Existed { count: 1 }
    );
    // All or nothing: three new names with two left are refused whole.
    assert_eq!(
        c.create_queues(&["a1", "a2", "a3", "a4"], "acme", 3)
            .await
            .unwrap(),
        Created::Refused { count: 1 }
    );
    assert_eq!(
        c.queues().await.unwrap(),
        ["a1"],
        "none of the refused names"
    );
    assert_eq!(
        c.create_queues(&["a1", "a2", "a2", "a3"], "acme", 3)
            .await
            .unwrap(),
        created(2, 3)
    );
    assert_eq!(
        c.create_queues(&["a4"], "acme", 3).await.unwrap(),
        Created::Refused { count: 3 }
    );
    assert_eq!(
        c.create_queues(&["b1"], "bolt", 3).await.unwrap(),
        created(1, 1)
    );
    let queues = c.queues().await.unwrap();
    assert_eq!(
        queues,
        ["a1", "a2", "a3", "b1"],
        "a refused queue is not registered"
    );
}

// Goal: a queue that holds work is not deleted (nothing is); once its tasks are finished it is
// deleted with them, its allowance is given back, and the name used again is a fresh queue that
// workers serving every queue see.
// Method: a scheduled task blocks the delete; cancelled, the delete removes queue and task;
// acme can then create another; a submit to the deleted name registers it again.
async fn a_queue_is_deleted_only_when_it_holds_no_work(env: Env) {
    let c = &env.client;
    assert_eq!(
        c.create_queues(&["q"], "acme", 1).await.unwrap(),
        Created::Created { new: 1, count: 1 }
    );
    let sub = c
        .submit(spec("q", "echo", "{}").delay_ms(600_000))
        .await
        .unwrap();
    let done = c
        .submit(spec("q", "echo", "{}").delay_ms(600_000))
        .await
        .unwrap();
    c.cancel(Some("q"), &done.task.id).await.unwrap();
    match c.delete_queue("q").await.unwrap() {
        Deleted::Busy { scheduled, .. } => assert_eq!(scheduled, 1),
        other => panic!("a queue with a scheduled task was deleted: {other:?}"),
    }
    assert_eq!(c.queues().await.unwrap(), ["q"], "back in the registry");
    assert_eq!(env.get("q", &sub.task.id).await.status, Status::Scheduled);
    assert_eq!(
        c.create_queues(&["r"], "acme", 1).await.unwrap(),
        Created::Refused { count: 1 }
    );

    c.cancel(Some("q"), &sub.task.id).await.unwrap();
    assert_eq!(
        c.delete_queue("q").await.unwrap(),
        Deleted::Deleted { finished: 2 }
    );
    assert_eq!(c.delete_queue("q").await.unwrap(), Deleted::NotFound);
    assert!(c.queues().await.unwrap().is_empty());
    assert!(matches!(
        c.get(Some("q"), &sub.task.id).await,
        Err(orq::Error::NotFound { .. })
    ));
    let stats = env.stats("q").await;
    assert_eq!(
        stats.counts[&Status::Cancelled],
        0,
        "the queue's counters went too"
    );
    assert_eq!(
        c.create_queues(&["r"], "acme", 1).await.unwrap(),
        Created::Created { new: 1, count: 1 }
    );

    // Another client (another process) that recorded `q` before: its next submit finds the
    // queue new to the store and records it again.
    let again = c.submit(spec("q", "echo", "{}")).await.unwrap();
    assert_eq!(c.queues().await.unwrap(), ["q", "r"]);
    assert_eq!(env.lease("q", "w-1", 10).await.tasks[0].id, again.task.id);
}

/// The first half of a delete alone, as a crash between the two would leave it: the name out of
/// the registry (`queues.lua` mode remove), the queue's keys as they were.
async fn unregister_only(env: &Env, queue: &str) {
    let keys = [
        orq::keys::QUEUES_KEY.to_string(),
        orq::keys::CREATORS_KEY.to_string(),
    ];
    let args = [b"remove".to_vec(), queue.as_bytes().to_vec()];
    env.store
        .eval(orq_lua::script("queues"), &keys, &args)
        .await
        .unwrap();
}

// Goal: a delete that stopped half-way (its name out of the registry, as after a crash between
// the two steps) is finished or undone by asking again: a queue that still holds work is put
// back in the registry, so workers serving every queue see its tasks again.
// Method: take the name out with the registry script alone, then ask for the delete.
async fn a_delete_stopped_half_way_is_undone_by_asking_again(env: Env) {
    let c = &env.client;
    let sub = c
        .submit(spec("q", "echo", "{}").delay_ms(600_000))
        .await
        .unwrap();
    unregister_only(&env, "q").await;
    assert!(c.queues().await.unwrap().is_empty(), "the crash's half");
    assert!(matches!(
        c.delete_queue("q").await.unwrap(),
        Deleted::Busy { scheduled: 1, .. }
    ));
    assert_eq!(c.queues().await.unwrap(), ["q"], "back in the registry");
    c.cancel(Some("q"), &sub.task.id).await.unwrap();
    unregister_only(&env, "q").await;
    assert_eq!(
        c.delete_queue("q").await.unwrap(),
        Deleted::Deleted { finished: 1 }
    );
    assert_eq!(c.delete_queue("q").await.unwrap(), Deleted::NotFound);
}

// Goal: a drop call that stops at its bound leaves the queue's and its tenants' counts true.
// Method: two cancelled tasks of two tenants; one drop call of bound 1 ('more'), then the
// counts; the next call drops the rest.
async fn a_drop_that_stops_at_its_bound_leaves_true_counts(env: Env) {
    let c = &env.client;
    for tenant in ["acme", "bolt"] {
        let sub = c
            .submit(spec("q", "echo", "{}").tenant(tenant).delay_ms(600_000))
            .await
            .unwrap();
        c.cancel(Some("q"), &sub.task.id).await.unwrap();
    }
    let drop = || async {
        let args = [b"drop".to_vec(), b"1".to_vec()];
        let reply = env
            .store
            .eval(
                orq_lua::script("configure"),
                &orq::keys::queue_keys("q"),
                &args,
            )
            .await
            .unwrap();
        reply.as_array().unwrap()[1].as_str().unwrap().to_string()
    };
    assert_eq!(drop().await, "more");
    let stats = env.stats("q").await;
    assert_eq!(
        stats.counts[&Status::Cancelled],
        1,
        "the queue's count moved"
    );
    let per_tenant: i64 = stats
        .tenants
        .iter()
        .map(|t| t.counts.get(&Status::Cancelled).copied().unwrap_or(0))
        .sum();
    assert_eq!(
        per_tenant, 1,
        "one tenant's count moved: {:?}",
        stats.tenants
    );
    // The other task, then each tenant's hash, a bounded batch each, then the keys.
    let mut calls = 1;
    while drop().await != "dropped" {
        calls += 1;
        assert!(calls < 10, "a drop of bound 1 never ended");
    }
    assert_eq!(calls, 4);
    assert_eq!(env.stats("q").await.counts[&Status::Cancelled], 0);
}

pub fn cases() -> Vec<crate::deployment::Case> {
    cases![
        queues_are_created_within_a_tenants_allowance,
        a_queue_is_deleted_only_when_it_holds_no_work,
        a_delete_stopped_half_way_is_undone_by_asking_again,
        a_drop_that_stops_at_its_bound_leaves_true_counts,
    ]
}
