//! The load: a local HTTP receiver that the `http` tasks call, recording every request (its
//! side effect) with the `x-orq-task-id`, `x-orq-attempt` and `x-orq-epoch` headers the handler
//! sends; submitters that post tasks with idempotency keys and resubmit a key after any error
//! until it is acknowledged; and the reader that waits for every acknowledged task to finish.
//! Key number `n` goes to queue `n mod queues` (one queue on one Redis, one per primary on a
//! cluster).

use crate::nemesis::mix;
use crate::procs::{lock, now_ms};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got: a side effect of an attempt.
#[derive(Debug, Clone)]
pub struct Effect {
    /// `x-orq-task-id`.
    pub task: String,
    /// `x-orq-attempt`.
    pub attempt: u32,
    /// `x-orq-epoch` (the lease's fencing epoch).
    pub epoch: u64,
    /// The idempotency key, from the body.
    pub key: String,
    /// When it arrived (wall ms).
    pub at_ms: u64,
    /// What the receiver answered: 200 (the effect happened) or a planned 500.
    pub status: u16,
}

/// What the receiver keeps.
#[derive(Debug, Default, Clone)]
pub struct Received {
    /// Every well-formed request, in arrival order.
    pub effects: Vec<Effect>,
    /// Requests without orq's headers or the test's body.
    pub malformed: u64,
}

/// The in-process webhook the tasks call (never faulted).
#[derive(Debug)]
pub struct Receiver {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// What it recorded.
    pub received: Arc<Mutex<Received>>,
}

impl Receiver {
    /// Bind a free port and serve `POST /hook`.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let received = Arc::new(Mutex::new(Received::default()));
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(received.clone());
        tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("serve the receiver");
        });
        Receiver { port, received }
    }
}

/// Record the request, then answer after the task's `delay_ms`: a 500 on the first attempt of a
/// task whose body says `fail_first` (exercising retries), else 200. The effect counts when the
/// request arrives, so a worker killed while it waits for the answer has done it.
async fn hook(
    State(rx): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let parsed = (|| {
        Some((
            header("x-orq-task-id")?.to_string(),
            header("x-orq-attempt")?.parse::<u32>().ok()?,
            header("x-orq-epoch")?.parse::<u64>().ok()?,
            body["key"].as_str()?.to_string(),
        ))
    })();
    let Some((task, attempt, epoch, key)) = parsed else {
        lock(&rx).malformed += 1;
        return StatusCode::OK;
    };
    let status = if body["fail_first"] == true && attempt == 1 {
        500
    } else {
        200
    };
    lock(&rx).effects.push(Effect {
        task,
        attempt,
        epoch,
        key,
        at_ms: now_ms(),
        status,
    });
    let delay = body["delay_ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
}

/// The task drawn for key number `n` of a seed.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Its idempotency key.
    pub key: String,
    /// 0 for one task in ten (a lost attempt sends it to the DLQ), else 3.
    pub max_retries: u32,
    /// The receiver answers its first attempt with 500 (one in eight of those with retries).
    pub fail_first: bool,
    /// How long the receiver takes to answer (20–300 ms).
    pub delay_ms: u64,
}

/// The task of key number `n` (a function of the seed and `n`).
pub fn spec(seed: u64, n: u64) -> Spec {
    let h = mix(seed ^ mix(n.wrapping_add(0x5EED)));
    let max_retries = if h % 10 == 0 { 0 } else { 3 };
    Spec {
        key: format!("k{seed}-{n}"),
        max_retries,
        fail_first: max_retries > 0 && (h >> 8) % 8 == 0,
        delay_ms: 20 + (h >> 16) % 280,
    }
}

/// An acknowledged task.
#[derive(Debug, Clone)]
pub struct Acked {
    /// Its id, as the first acknowledgement gave it.
    pub id: String,
    /// Its queue.
    pub queue: String,
    /// Its `max_retries`.
    pub max_retries: u32,
    /// Submits of its key before the acknowledgement (0: acknowledged at once).
    pub retries: u32,
}

/// What the client saw.
#[derive(Debug, Default)]
pub struct ClientStats {
    /// Keys whose submitting started.
    pub started: u64,
    /// Acknowledged keys.
    pub acked: BTreeMap<String, Acked>,
    /// A key acknowledged with two different ids.
    pub conflicts: Vec<String>,
    /// Every answer of the API other than 2xx (submits and reads), by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that got no complete answer (API down or restarting).
    pub transport_errors: u64,
    /// The first 500 answers, with time and route.
    pub server_errors: Vec<String>,
    /// Keys given up on at the overall deadline.
    pub unacked: Vec<String>,
}

/// The client: submitters and the reader, over HTTP to `orq api`.
#[derive(Debug)]
pub struct Load {
    http: reqwest::Client,
    base: String,
    hook: String,
    seed: u64,
    /// The queues, key number `n` to `queues[n % len]`.
    queues: Vec<String>,
    /// The queue of each acknowledged task, by id (for reads).
    queue_of: Mutex<BTreeMap<String, String>>,
    /// What it saw.
    pub stats: Mutex<ClientStats>,
    next: AtomicU64,
    stop_new: AtomicBool,
    give_up: Mutex<Option<Instant>>,
}

/// How a read of one task ended.
#[derive(Debug)]
pub enum Read {
    /// 200 with the task.
    Found(Value),
    /// 404.
    Missing,
}

/// A status that ends a task's life.
pub fn is_final(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "dead" | "cancelled")
    )
}

/// Whether a read found a task in a final status.
pub fn is_final_read(t: Option<&Option<Value>>) -> bool {
    matches!(t, Some(Some(v)) if is_final(v))
}

impl Load {
    /// A client of the API at `api` (`host:port`) whose tasks go to `queues` and call the
    /// receiver on `hook_port`.
    pub fn new(api: &str, hook_port: u16, seed: u64, queues: Vec<String>) -> Load {
        assert!(!queues.is_empty(), "no queue to submit to");
        Load {
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(15))
                .build()
                .expect("build the HTTP client"),
            base: format!("http://{api}/api/v1"),
            hook: format!("http://127.0.0.1:{hook_port}/hook"),
            seed,
            queues,
            queue_of: Mutex::new(BTreeMap::new()),
            stats: Mutex::new(ClientStats::default()),
            next: AtomicU64::new(0),
            stop_new: AtomicBool::new(false),
            give_up: Mutex::new(None),
        }
    }

    fn saw(&self, status: u16, what: &str, body: &str) {
        let mut s = lock(&self.stats);
        *s.statuses.entry(status).or_default() += 1;
        if status == 500 && s.server_errors.len() < 20 {
            s.server_errors
                .push(format!("{} ms {what}: {body}", now_ms()));
        }
    }

    /// Wait until `GET /readyz` answers 200 (at most `within`).
    pub async fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.http.get(format!("{}/readyz", self.base)).send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => {
                    let status = r.status();
                    format!("{status}: {}", r.text().await.unwrap_or_default())
                }
                Err(e) => format!("no HTTP answer: {e}"),
            };
            if Instant::now() > deadline {
                return Err(format!(
                    "the API was not ready within {within:?}; its last answer: {last}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Start `n` submitters, each submitting one key at a time (until acknowledged), a new key
    /// every `period` at most, until [`Load::stop_new_keys`].
    pub fn start_submitters(
        self: &Arc<Self>,
        n: usize,
        period: Duration,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let me = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(period * i as u32 / n as u32).await;
                    let mut tick = tokio::time::interval(period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tick.tick().await;
                        if me.stop_new.load(Ordering::Acquire) {
                            break;
                        }
                        let n = me.next.fetch_add(1, Ordering::AcqRel);
                        me.submit_until_acked(n).await;
                    }
                })
            })
            .collect()
    }

    /// No new keys from now on; keys being submitted go on until acknowledged or `give_up`.
    pub fn stop_new_keys(&self, give_up: Instant) {
        *lock(&self.give_up) = Some(give_up);
        self.stop_new.store(true, Ordering::Release);
    }

    /// Submit key number `n` until the API acknowledges it (201 or 200), backing off 100 ms
    /// doubling to 1 s after each error.
    async fn submit_until_acked(&self, n: u64) {
        let spec = spec(self.seed, n);
        let queue = self.queues[(n % self.queues.len() as u64) as usize].clone();
        let body = json!({
            "queue": queue,
            "type": "http",
            "payload": {
                "url": self.hook,
                "body": {"key": spec.key, "fail_first": spec.fail_first, "delay_ms": spec.delay_ms},
                "timeout_ms": 10_000,
            },
            "max_retries": spec.max_retries,
            "lease_ms": crate::LEASE_MS,
            "backoff": {"initial_ms": 200, "multiplier": 2.0, "max_ms": 2000, "jitter": 0.2},
            "idempotency_key": spec.key,
        });
        lock(&self.stats).started += 1;
        let mut backoff = Duration::from_millis(100);
        let mut tries = 0;
        loop {
            if lock(&self.give_up).is_some_and(|g| Instant::now() > g) {
                lock(&self.stats).unacked.push(spec.key.clone());
                return;
            }
            let sent = self
                .http
                .post(format!("{}/tasks", self.base))
                .json(&body)
                .send()
                .await;
            match sent {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let text = r.text().await;
                    match (status, text) {
                        (200 | 201, Ok(text)) => {
                            let id = serde_json::from_str::<Value>(&text)
                                .ok()
                                .and_then(|t| t["id"].as_str().map(str::to_string));
                            if let Some(id) = id {
                                self.ack(&spec, &queue, id, tries);
                                return;
                            }
                            lock(&self.stats).transport_errors += 1;
                        }
                        (200 | 201, Err(_)) => lock(&self.stats).transport_errors += 1,
                        (s, text) => self.saw(s, "POST /tasks", &text.unwrap_or_default()),
                    }
                }
                Err(_) => lock(&self.stats).transport_errors += 1,
            }
            tries += 1;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    fn ack(&self, spec: &Spec, queue: &str, id: String, retries: u32) {
        lock(&self.queue_of).insert(id.clone(), queue.to_string());
        let mut s = lock(&self.stats);
        match s.acked.get(&spec.key) {
            Some(a) if a.id != id => {
                let msg = format!("key {}: id {} then {id}", spec.key, a.id);
                s.conflicts.push(msg);
            }
            Some(_) => {}
            None => {
                s.acked.insert(
                    spec.key.clone(),
                    Acked {
                        id,
                        queue: queue.to_string(),
                        max_retries: spec.max_retries,
                        retries,
                    },
                );
            }
        }
    }

    /// Wait until every submitter has ended (its last key acknowledged or given up).
    pub async fn join(handles: Vec<tokio::task::JoinHandle<()>>) {
        for h in handles {
            let _ = h.await;
        }
    }

    /// Read one task (`GET /tasks/{id}?queue=`), retrying any answer but 200 and 404 until
    /// `deadline` (then `None`).
    pub async fn read(&self, id: &str, deadline: Instant) -> Option<Read> {
        let queue = lock(&self.queue_of)
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("task {id} was never acknowledged"));
        loop {
            let r = self
                .http
                .get(format!("{}/tasks/{id}?queue={queue}", self.base))
                .send()
                .await;
            match r {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let text = r.text().await.unwrap_or_default();
                    match status {
                        200 => {
                            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                                return Some(Read::Found(v));
                            }
                        }
                        404 => return Some(Read::Missing),
                        s => self.saw(s, "GET /tasks/{id}", &text),
                    }
                }
                Err(_) => lock(&self.stats).transport_errors += 1,
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Read every task of `ids` until all are final (or only missing ones remain, three rounds
    /// in a row), or until `deadline`. Returns the last read of each task: final ones, and
    /// those still not final (stuck) or missing (lost).
    pub async fn wait_final(
        &self,
        ids: &[String],
        deadline: Instant,
    ) -> BTreeMap<String, Option<Value>> {
        let mut last: BTreeMap<String, Option<Value>> = BTreeMap::new();
        let mut pending: BTreeSet<String> = ids.iter().cloned().collect();
        let mut missing_rounds: BTreeMap<String, u32> = BTreeMap::new();
        let mut said = Instant::now();
        loop {
            let reads: Vec<(String, Option<Read>)> = stream::iter(pending.iter().cloned())
                .map(|id| async move {
                    let r = self.read(&id, deadline).await;
                    (id, r)
                })
                .buffer_unordered(16)
                .collect()
                .await;
            for (id, r) in reads {
                match r {
                    Some(Read::Found(t)) => {
                        missing_rounds.remove(&id);
                        if is_final(&t) {
                            pending.remove(&id);
                        }
                        last.insert(id, Some(t));
                    }
                    Some(Read::Missing) => {
                        *missing_rounds.entry(id.clone()).or_default() += 1;
                        last.insert(id, None);
                    }
                    None => {}
                }
            }
            let only_missing = pending
                .iter()
                .all(|id| missing_rounds.get(id).is_some_and(|n| *n >= 3));
            if pending.is_empty() || only_missing || Instant::now() > deadline {
                return last;
            }
            if said.elapsed() > Duration::from_secs(10) {
                println!(
                    "chaos: liveness: {} of {} tasks final",
                    ids.len() - pending.len(),
                    ids.len()
                );
                said = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
