//! Bulk replay and purge of the DLQ, with a progress bar on stderr (drawn only on a terminal):
//! by ids, or every dead task of a queue (optionally of one tenant or type).

use super::exit::{Exit, Failure};
use super::http::{enc, query, Api};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::Method;
use serde_json::{json, Value};

/// Dead tasks replayed per `POST /dlq/replay` call, and listed per page before a purge (the
/// API's own page bound).
pub const PAGE: u64 = 1000;

/// Deletes in flight at once during a purge.
pub const PURGE_CONCURRENCY: usize = 16;

/// Which dead tasks: a queue, optionally one tenant's or one type's.
#[derive(Debug, Clone)]
pub struct Filter {
    /// The queue.
    pub queue: String,
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only this type's.
    pub task_type: Option<String>,
}

/// What a bulk command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Done {
    /// Tasks replayed or purged.
    pub done: u64,
    /// Named tasks that were not (or no longer) dead: not found.
    pub gone: Vec<String>,
}

/// A progress bar of `len` steps on stderr; hidden when stderr is not a terminal.
fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta} left)")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// How many dead tasks the queue holds (the progress bar's length; a tenant or type filter
/// makes it an upper bound).
async fn dead_count(api: &Api, queue: &str) -> u64 {
    api.get(&format!("/queues/{}", enc(queue)))
        .await
        .ok()
        .and_then(|q| q["counts"]["dead"].as_u64())
        .unwrap_or(0)
}

/// Replay every dead task matching `f`: `POST /dlq/replay` pages until none is left.
pub async fn replay_all(api: &Api, f: &Filter) -> Result<Done, Failure> {
    let pb = bar(dead_count(api, &f.queue).await, "replaying");
    let body = json!({"queue": f.queue, "tenant": f.tenant, "type": f.task_type, "limit": PAGE});
    let mut done = Done::default();
    loop {
        let answer = api.call(Method::POST, "/dlq/replay", Some(&body), 0).await;
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                pb.abandon();
                return Err(cut_short(e, done.done, "replayed"));
            }
        };
        let n = answer["replayed"].as_u64().unwrap_or(0);
        done.done += n;
        pb.inc(n);
        if answer["more"] != Value::Bool(true) || n == 0 {
            break;
        }
    }
    pb.finish_and_clear();
    Ok(done)
}

/// Purge every dead task matching `f`: list a page, delete its tasks, until none is left (or a
/// page deletes nothing: what is listed is then no longer dead).
pub async fn purge_all(api: &Api, f: &Filter) -> Result<Done, Failure> {
    let pb = bar(dead_count(api, &f.queue).await, "purging");
    let mut done = Done::default();
    loop {
        let page = api
            .get(&format!(
                "/dlq{}",
                query(&[
                    ("queue", Some(f.queue.clone())),
                    ("tenant", f.tenant.clone()),
                    ("type", f.task_type.clone()),
                    ("limit", Some(PAGE.to_string())),
                ])
            ))
            .await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                pb.abandon();
                return Err(cut_short(e, done.done, "purged"));
            }
        };
        let ids: Vec<String> = page["tasks"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| t["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if ids.is_empty() {
            break;
        }
        let round = purge_ids(api, &f.queue, &ids, &pb).await;
        let round = match round {
            Ok(r) => r,
            Err(e) => {
                pb.abandon();
                return Err(cut_short(e, done.done, "purged"));
            }
        };
        done.done += round.done;
        if round.done == 0 {
            break;
        }
    }
    pb.finish_and_clear();
    Ok(done)
}

/// Replay the dead tasks `ids` of `queue`, one call each; ids not found are reported, not
/// errors.
pub async fn replay_ids(api: &Api, queue: &str, ids: &[String]) -> Result<Done, Failure> {
    let pb = bar(ids.len() as u64, "replaying");
    let mut done = Done::default();
    for id in ids {
        let path = format!(
            "/dlq/{}/replay{}",
            enc(id),
            query(&[("queue", Some(queue.to_string()))])
        );
        match api.call(Method::POST, &path, None, 0).await {
            Ok(_) => done.done += 1,
            Err(e) if gone(&e) => done.gone.push(id.clone()),
            Err(e) => {
                pb.abandon();
                return Err(cut_short(e, done.done, "replayed"));
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(done)
}

/// Purge the dead tasks `ids` of `queue`, [`PURGE_CONCURRENCY`] at a time, advancing `pb`; ids
/// not found are reported, not errors.
pub async fn purge_ids(
    api: &Api,
    queue: &str,
    ids: &[String],
    pb: &ProgressBar,
) -> Result<Done, Failure> {
    let q = query(&[("queue", Some(queue.to_string()))]);
    let mut results = futures_util::stream::iter(ids.iter().cloned())
        .map(|id| {
            let path = format!("/dlq/{}{q}", enc(&id));
            async move { (id, api.call(Method::DELETE, &path, None, 0).await) }
        })
        .buffer_unordered(PURGE_CONCURRENCY);
    let mut done = Done::default();
    while let Some((id, r)) = results.next().await {
        match r {
            Ok(_) => done.done += 1,
            Err(e) if gone(&e) => done.gone.push(id),
            Err(e) => return Err(cut_short(e, done.done, "purged")),
        }
        pb.inc(1);
    }
    Ok(done)
}

/// Whether `e` says a named task is not a dead task (any more): not found, or a conflict (it
/// was replayed meanwhile).
fn gone(e: &Failure) -> bool {
    e.exit == Exit::NotFound || e.message.starts_with("conflict:")
}

/// A bar for [`purge_ids`] of `n` named tasks.
pub fn purge_bar(n: usize) -> ProgressBar {
    bar(n as u64, "purging")
}

/// `e`, saying how far the bulk command got; a refusal after some progress is
/// [`Exit::Incomplete`] unless it is one a retry can cure ([`Exit::Unavailable`]).
fn cut_short(e: Failure, so_far: u64, verb: &str) -> Failure {
    if so_far == 0 {
        return e;
    }
    let exit = match e.exit {
        Exit::Unavailable => Exit::Unavailable,
        _ => Exit::Incomplete,
    };
    Failure::new(
        exit,
        format!("{} (stopped after {so_far} {verb})", e.message),
    )
}
