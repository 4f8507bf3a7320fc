//! The pull-worker actor: a worker of the HTTP worker protocol (issue 24), as the Python and
//! TypeScript clients are, driving `POST /api/v1/leases` and the heartbeat, complete, fail and
//! release routes through the server's real router (`orq_server::app`), in process, on the
//! simulated store. Its store calls go through the run's fault injector ([`ActorStore`]) like every
//! actor's, and the HTTP layer adds its own faults: a lost answer (the call ran, the worker never
//! hears: a leased task is then held until its lease expires, a report is sent again), and a
//! report sent twice. A crash (`crash_request` before or after the side effect, or the
//! supervisor's crash fault) aborts the actor with everything it runs: a worker that vanishes
//! mid-lease. In a quarter of the seeds the pull workers lease for some tenants only
//! (`SimConfig::pull_tenants`, the lease body's `tenants`) and check that every task they get is
//! of one of them; in half they send completions through the batched route
//! (`POST /api/v1/leases/complete`, one item a call, the item's error mapped as its own route's).
//!
//! It follows the engine's own rules, as a client library must: the handler's timing, side effect
//! and outcome are [`SimHandler`]'s (drawn from the seed, the task and the epoch); heartbeats every
//! `heartbeat_ms` with [`orq::heartbeat::after_heartbeat`] deciding after each answer (a lost
//! lease or a cancellation stops the handler before its side effect); outcomes with
//! [`orq::report::report_step`] (a refused report is sent again with the engine's backoff while
//! the lease can be live, heartbeating meanwhile), so checks 7 and 9 hold it to the Rust worker's
//! standard.
//!
//! [`SimHandler`]: super::world::SimHandler

use super::checker;
use super::config::PlantedBug;
use super::world::{fnv, mix, unit, worker_clock, ActorStore, World, QUEUE};
use axum::body::Body;
use axum::http::Request;
use orq::heartbeat::{after_heartbeat, BeatStep};
use orq::report::{report_step, ReportStep};
use orq::{Clock, Entropy, Error, Transient};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt;

/// True when `actor` is a pull worker (`p<i>`, `p<i>.<incarnation>`).
pub(crate) fn is_pull_actor(actor: &str) -> bool {
    actor
        .strip_prefix('p')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// How long one lease call waits for work (ms).
const WAIT_MS: u64 = 1_000;
/// Wait before asking again after a lease call failed (ms).
const LEASE_RETRY_MS: u64 = 100;

/// What a pull worker shares between its loop and its tasks.
struct Pull {
    world: Arc<World>,
    router: axum::Router,
    id: String,
    clock: Arc<dyn Clock>,
    entropy: Arc<Entropy>,
}

/// Start pull worker `name` (incarnation `incarnation`: its id is `name.<n>` after a restart).
pub fn start_pull_worker(world: &Arc<World>, name: &str, incarnation: u32) -> JoinHandle<()> {
    let id = if incarnation == 0 {
        name.to_string()
    } else {
        format!("{name}.{incarnation}")
    };
    let store = Arc::new(ActorStore {
        world: world.clone(),
        actor: id.clone(),
    });
    let entropy = Arc::new(Entropy::from_seed(mix(world.config.seed ^ fnv(&id))));
    let clock: Arc<dyn Clock> = Arc::new(worker_clock(world, name));
    let client = orq::Client::new(store, clock.clone(), entropy.clone());
    let allow = orq_server::handlers::HttpAllow::parse(Vec::<String>::new()).expect("no prefixes");
    let state =
        orq_server::AppState::new(client, clock.clone(), Arc::new(allow)).with_submit_limit(None);
    let pull = Arc::new(Pull {
        world: world.clone(),
        router: orq_server::app(state),
        id: id.clone(),
        clock,
        entropy,
    });
    world.event(
        &id,
        "pull_worker_start",
        None,
        json!({"incarnation": incarnation}),
    );
    tokio::spawn(run(pull))
}

/// The lease loop: ask for as many tasks as there are free slots, run each beside the others.
async fn run(p: Arc<Pull>) {
    let slots = p.world.config.concurrency as usize;
    let mut running: JoinSet<()> = JoinSet::new();
    loop {
        while running.len() >= slots {
            running.join_next().await;
        }
        while running.try_join_next().is_some() {}
        let tenants = &p.world.config.pull_tenants;
        let mut body = json!({
            "worker": p.id, "queues": [QUEUE], "count": slots - running.len(), "wait_ms": WAIT_MS,
        });
        if !tenants.is_empty() {
            body["tenants"] = json!(tenants);
        }
        match p.call("/api/v1/leases", &body, false).await {
            Some((200, answer)) => {
                // The lease began when the store ran the call, after any wait: reckon its
                // deadline from the answer (as the Rust worker does from the store's reply).
                let answered_at = p.clock.now_ms();
                for t in answer["tasks"].as_array().cloned().unwrap_or_default() {
                    let tenant = t["tenant"].as_str().unwrap_or_default();
                    if !tenants.is_empty() && !tenants.iter().any(|x| x == tenant) {
                        p.world.violate(format!(
                            "{}: a lease limited to tenants {tenants:?} gave task {} of tenant {tenant}",
                            p.id, t["id"]
                        ));
                    }
                    let p = p.clone();
                    running.spawn(async move { p.run_task(t, answered_at).await });
                }
            }
            // Lost, refused, or a queue not created yet: ask again soon.
            _ => tokio::time::sleep(Duration::from_millis(LEASE_RETRY_MS)).await,
        }
    }
}

impl Pull {
    /// Send one request to the router. `None` when its answer is lost (a fault: the call ran).
    /// With `may_repeat`, the request may be sent twice (a fault), the second answer kept.
    async fn call(&self, path: &str, body: &Value, may_repeat: bool) -> Option<(u16, Value)> {
        let w = &self.world;
        let f = &w.config.faults;
        let mut answer = self.send(path, body).await;
        if may_repeat && w.fault(f.p_duplicate) {
            w.fault_event(&self.id, "http_duplicate", None, json!({"path": path}));
            answer = self.send(path, body).await;
        }
        if w.fault(f.p_lost_reply) {
            w.fault_event(&self.id, "http_lost_answer", None, json!({"path": path}));
            return None;
        }
        Some(answer)
    }

    async fn send(&self, path: &str, body: &Value) -> (u16, Value) {
        let req = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("a valid request");
        let resp = match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// One leased task: the handler (with heartbeats beside it), its side effect, its outcome.
    async fn run_task(&self, t: Value, answered_at_ms: u64) {
        let w = &self.world;
        let c = &w.config;
        let id = t["id"].as_str().unwrap_or_default().to_string();
        let token = t["token"].as_str().unwrap_or_default().to_string();
        let epoch = t["epoch"].as_u64().unwrap_or(0);
        let lease_ms = t["lease_ms"].as_u64().unwrap_or(c.lease_ms);
        let interval = t["heartbeat_ms"].as_u64().unwrap_or(lease_ms / 3).max(1);
        let lease = Arc::new(watch::Sender::new(Lease {
            deadline_ms: answered_at_ms + lease_ms,
            lost: false,
            beating: false,
        }));
        let done = tokio_util::sync::CancellationToken::new();
        let beats = self.heartbeats(&id, &token, interval, lease.clone(), done.clone());
        let work = async {
            let h = mix(c.seed ^ fnv(&id) ^ mix(epoch));
            let faults = || w.faults_on.load(Ordering::Relaxed);
            if faults() && unit(mix(h ^ 1)) < c.faults.p_crash_before_effect {
                self.crash(&id, "before_effect").await;
            }
            let run_ms = mix(h ^ 2) % c.handler_ms_max.max(1);
            let ran = tokio::select! {
                biased;
                _ = done.cancelled() => false,
                _ = tokio::time::sleep(Duration::from_millis(run_ms)) => true,
            };
            if !ran || lease.borrow().lost {
                return; // cancelled or lost: no side effect, no outcome
            }
            checker::side_effect(w, &id, &token, &self.id);
            if faults() && unit(mix(h ^ 3)) < c.faults.p_crash_after_effect {
                self.crash(&id, "after_effect").await;
            }
            let u = unit(mix(h ^ 4));
            let (path, body) = if u < c.p_permanent {
                let e = format!("planned permanent failure (epoch {epoch})");
                (
                    "fail",
                    json!({"queue": QUEUE, "token": token, "error": e, "permanent": true}),
                )
            } else if u < c.p_permanent + c.p_transient {
                let e = format!("planned transient failure (epoch {epoch})");
                ("fail", json!({"queue": QUEUE, "token": token, "error": e}))
            } else {
                let result = json!({"worker": self.id, "epoch": epoch});
                (
                    "complete",
                    json!({"queue": QUEUE, "token": token, "result": result}),
                )
            };
            self.report(&id, path, &body, &lease).await;
        };
        tokio::join!(beats, async {
            work.await;
            done.cancel();
        });
    }

    /// Ask the supervisor to crash this worker, and wait for it.
    async fn crash(&self, task: &str, point: &str) {
        let w = &self.world;
        w.fault_event(
            &self.id,
            "crash_request",
            Some(task),
            json!({"point": point}),
        );
        w.request_crash(&self.id);
        std::future::pending::<()>().await;
    }

    /// Heartbeat the lease every `interval` ms until `done`; a lost lease or a cancellation
    /// marks the lease lost and cancels `done` (the handler stops).
    async fn heartbeats(
        &self,
        id: &str,
        token: &str,
        interval: u64,
        lease: Arc<watch::Sender<Lease>>,
        done: tokio_util::sync::CancellationToken,
    ) {
        let mut next_in = interval;
        let mut refusals = 0u32;
        let body = json!({"queue": QUEUE, "token": token});
        let path = format!("/api/v1/leases/{id}/heartbeat");
        loop {
            tokio::select! {
                biased;
                _ = done.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(next_in)) => {}
            }
            // No lost answers here: the checker counts a lease as lost to this worker once the
            // store's STALE reached it (check 7). While the call is out, the report loop does not
            // give the outcome up: its answer may extend the lease.
            lease.send_modify(|l| l.beating = true);
            let (status, answer) = self.send(&path, &body).await;
            let reply = match status {
                200 => {
                    // Left when the store ran the call, which answered at once (a slow call's
                    // delay comes before the store runs it): reckon from now.
                    let left = answer["lease_left_ms"].as_u64().unwrap_or(0);
                    let deadline_ms = self.clock.now_ms() + left;
                    lease.send_modify(|l| l.deadline_ms = deadline_ms);
                    refusals = 0;
                    Ok((0, left))
                }
                _ => {
                    let e = http_error("heartbeat", id, status, &answer);
                    if e.is_unavailable() {
                        refusals += 1;
                    }
                    Err(e)
                }
            };
            let deadline = lease.borrow().deadline_ms;
            let step = after_heartbeat(
                &reply,
                refusals,
                self.clock.now_ms(),
                deadline,
                interval,
                self.entropy.unit(),
            );
            match step {
                BeatStep::Held { next_in_ms } => {
                    next_in = next_in_ms.max(1);
                    lease.send_modify(|l| l.beating = false);
                }
                BeatStep::Lost if self.world.config.planted == PlantedBug::PullIgnoresLostLease => {
                    next_in = interval; // planted: heard, and ignored
                    lease.send_modify(|l| l.beating = false);
                }
                BeatStep::Lost => {
                    lease.send_modify(|l| {
                        l.lost = true;
                        l.beating = false;
                    });
                    self.world.event(
                        &self.id,
                        "pull_lease_lost",
                        Some(id),
                        json!({"status": status}),
                    );
                    done.cancel();
                    return;
                }
            }
        }
    }

    /// Send outcome `what` (`complete` or `fail`) until it is recorded, refused for good, or the
    /// lease has certainly expired ([`report_step`]); a lost answer counts as a transient failure.
    /// The heartbeats run beside it: before giving up on an expired lease it waits for the
    /// heartbeat in flight, whose answer may say the lease is live after all (the store's clock
    /// had jumped back) — then it goes on trying, or the worker would hold a live lease and report
    /// nothing (seeds 729, 1574).
    async fn report(&self, id: &str, what: &str, body: &Value, lease: &watch::Sender<Lease>) {
        let batched = what == "complete" && self.world.config.pull_batch;
        let (path, body) = if batched {
            // The batched route, one item: its answer holds the item's report or error.
            let item = json!({"id": id, "token": body["token"], "result": body["result"]});
            let b = json!({"queue": body["queue"], "completions": [item]});
            ("/api/v1/leases/complete".to_string(), b)
        } else {
            (format!("/api/v1/leases/{id}/{what}"), body.clone())
        };
        let mut tries = 0u32;
        loop {
            let reply = match self.call(&path, &body, true).await {
                Some((200, answer)) if batched => match &answer["reports"][0] {
                    r if r["reported"].is_string() => Ok(()),
                    r => {
                        let status = match r["error"]["code"].as_str() {
                            Some("not_found") => 404,
                            Some("bad_request") => 400,
                            _ => 409,
                        };
                        Err(http_error("report", id, status, r))
                    }
                },
                Some((200, _)) => Ok(()),
                Some((status, answer)) => Err(http_error("report", id, status, &answer)),
                None => Err(Error::Unavailable {
                    op: "report",
                    cause: Transient::Unreachable,
                    message: "the answer was lost".into(),
                }),
            };
            let deadline = lease.borrow().deadline_ms;
            let step = report_step(
                reply.as_ref().map(|_| ()),
                tries,
                self.clock.now_ms(),
                deadline,
                self.entropy.unit(),
            );
            match step {
                ReportStep::Retry { after_ms } => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(after_ms.max(1))).await;
                }
                ReportStep::Expired => {
                    let mut beats = lease.subscribe();
                    let settled = beats
                        .wait_for(|l| !l.beating)
                        .await
                        .map(|l| (l.lost, l.deadline_ms));
                    match settled {
                        Ok((false, deadline)) if self.clock.now_ms() < deadline => tries += 1,
                        _ => return,
                    }
                }
                ReportStep::Recorded | ReportStep::Refused => return,
            }
        }
    }
}

/// A running task's lease as the worker knows it.
struct Lease {
    /// Its deadline by the worker's clock (ms).
    deadline_ms: u64,
    /// The heartbeat learned it is gone (stale, cancelled, deleted).
    lost: bool,
    /// A heartbeat is out and its answer not yet judged.
    beating: bool,
}

/// The engine error an HTTP error answer stands for (what the protocol's codes mean).
fn http_error(op: &'static str, id: &str, status: u16, answer: &Value) -> Error {
    let code = answer["error"]["code"].as_str().unwrap_or_default();
    let message = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match code {
        "lease_lost" => Error::Stale { op, message },
        "cancelled" => Error::Cancelled { op },
        "not_found" => Error::NotFound {
            op,
            id: id.to_string(),
        },
        "store_unavailable" | "unavailable" => Error::Unavailable {
            op,
            cause: Transient::Unreachable,
            message,
        },
        _ => Error::protocol(op, format!("HTTP {status}: {message}")),
    }
}
