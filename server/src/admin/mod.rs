//! The admin commands: `orq tasks`, `orq dlq`, `orq queues` and `orq tenants`, a shell client of
//! a running orq's HTTP API (`--url` / `ORQ_URL`, `--api-key` / `ORQ_API_KEY`). Tables for people
//! by default, the API's JSON with `--output json`, a progress bar on bulk replay and purge, and
//! the exit codes of [`exit::Exit`].
//!
//! [`http`] calls the API, [`show`] prints, [`bulk`] runs bulk replays and purges; this file
//! holds the command line and what each command calls.

pub mod bulk;
pub mod exit;
pub mod http;
pub mod show;

use clap::{Args, Subcommand};
use exit::{Exit, Failure};
use http::{enc, query, Api};
use reqwest::Method;
use serde_json::{json, Map, Value};
use show::Output;

/// Where the API is and how to print: the options of every admin command.
#[derive(Debug, Args, Clone)]
pub struct Conn {
    /// The orq API: http(s)://HOST:PORT, with or without /api/v1.
    #[arg(
        long,
        env = "ORQ_URL",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL",
        global = true
    )]
    pub url: String,
    /// API key (see `orq key new`), sent as a bearer token. Prefer the environment variable: a
    /// flag is visible to other users in the process list.
    #[arg(
        long = "api-key",
        env = "ORQ_API_KEY",
        hide_env_values = true,
        value_name = "KEY",
        global = true
    )]
    pub api_key: Option<String>,
    /// table: for people; json: the API's answer, for scripts.
    #[arg(long, short = 'o', value_enum, default_value = "table", global = true)]
    pub output: Output,
}

/// The queue a command applies to.
#[derive(Debug, Args, Clone)]
pub struct QueueArg {
    /// The queue.
    #[arg(long, short = 'q', default_value = "default", value_name = "Q")]
    pub queue: String,
}

/// `orq tasks`.
#[derive(Debug, Args)]
#[command(after_help = exit::codes_help())]
pub struct TasksArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: TasksCommand,
}

/// `orq tasks ...`.
#[derive(Debug, Subcommand)]
enum TasksCommand {
    /// Show one task: its fields, lease and attempts.
    Get {
        #[command(flatten)]
        queue: QueueArg,
        /// The task id.
        #[arg(value_parser = id)]
        id: String,
    },
    /// List a queue's tasks, newest first, a page at a time.
    List {
        #[command(flatten)]
        queue: QueueArg,
        #[command(flatten)]
        page: PageArgs,
        /// Only tasks in this status (scheduled, queued, leased, retrying, completed, dead,
        /// cancelled).
        #[arg(long, value_name = "S")]
        status: Option<String>,
    },
    /// Cancel a task that has not started (scheduled, queued or retrying).
    Cancel {
        #[command(flatten)]
        queue: QueueArg,
        /// The task id.
        #[arg(value_parser = id)]
        id: String,
    },
}

/// Filters and paging of a listing.
#[derive(Debug, Args, Clone)]
struct PageArgs {
    /// Only this tenant's tasks.
    #[arg(long, value_name = "T")]
    tenant: Option<String>,
    /// Only tasks of this type.
    #[arg(long = "type", value_name = "TYPE")]
    task_type: Option<String>,
    /// Page size (1..=1000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    /// The cursor printed after the previous page.
    #[arg(long, value_name = "C")]
    cursor: Option<String>,
}

/// `orq dlq`.
#[derive(Debug, Args)]
#[command(after_help = exit::codes_help())]
pub struct DlqArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: DlqCommand,
}

/// `orq dlq ...`.
#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// List a queue's dead tasks, a page at a time.
    List {
        #[command(flatten)]
        queue: QueueArg,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Replay dead tasks (queued again with a fresh retry budget, their history kept): the ids
    /// given, or with --all every dead task of the queue (of --tenant, of --type).
    Replay(BulkArgs),
    /// Purge (delete) dead tasks for good: the ids given, or with --all every dead task of the
    /// queue (of --tenant, of --type).
    Purge(BulkArgs),
}

/// What a bulk replay or purge applies to.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["ids", "all"])))]
struct BulkArgs {
    #[command(flatten)]
    queue: QueueArg,
    /// The dead tasks' ids (a repeated id counts once).
    #[arg(value_parser = id)]
    ids: Vec<String>,
    /// Every dead task of the queue (with --tenant, --type: of that tenant, type).
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// With --all: only this tenant's.
    #[arg(long, requires = "all", value_name = "T")]
    tenant: Option<String>,
    /// With --all: only this type's.
    #[arg(long = "type", requires = "all", value_name = "TYPE")]
    task_type: Option<String>,
}

/// `orq queues`.
#[derive(Debug, Args)]
#[command(after_help = exit::codes_help())]
pub struct QueuesArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: QueuesCommand,
}

/// `orq queues ...`.
#[derive(Debug, Subcommand)]
enum QueuesCommand {
    /// Every queue with its counts per status.
    List,
    /// One queue: counts, totals, settings and its first tenants.
    Stats {
        /// The queue.
        queue: String,
    },
    /// Stop leasing from a queue (submits still accepted; running tasks go on).
    Pause {
        /// The queue.
        queue: String,
    },
    /// Lease from a paused queue again.
    Resume {
        /// The queue.
        queue: String,
    },
    /// Delete a queue that holds no work (nothing queued, scheduled, retrying, leased or dead):
    /// its finished tasks and settings go with it (admin keys only; exit code 1 when it holds
    /// work).
    Delete {
        /// The queue.
        queue: String,
    },
    /// Wait until a queue has nothing left to run (exit code 6 when the wait ends first).
    Drain {
        /// The queue.
        queue: String,
        /// Longest wait, ms (0..=60000).
        #[arg(long = "timeout-ms", default_value_t = 10_000,
              value_parser = clap::value_parser!(u64).range(0..=60_000))]
        timeout_ms: u64,
    },
}

/// `orq tenants`.
#[derive(Debug, Args)]
#[command(after_help = exit::codes_help())]
pub struct TenantsArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(subcommand)]
    command: TenantsCommand,
}

/// `orq tenants ...`.
#[derive(Debug, Subcommand)]
enum TenantsCommand {
    /// A queue's tenants with their settings and counts: the ones named, or every tenant.
    Get {
        #[command(flatten)]
        queue: QueueArg,
        /// Tenants to show (default: all).
        tenants: Vec<String>,
    },
    /// Set a tenant's fair-share settings in a queue; the others stay as they are.
    Set(TenantSetArgs),
}

/// `orq tenants set`.
#[derive(Debug, Args)]
struct TenantSetArgs {
    #[command(flatten)]
    queue: QueueArg,
    /// The tenant.
    tenant: String,
    /// Fair-share weight in (0, 1000].
    #[arg(long, value_parser = finite)]
    weight: Option<f64>,
    /// Most live leases, 1..=1000000.
    #[arg(long = "max-inflight")]
    max_inflight: Option<u64>,
    /// Most waiting tasks, 0..=1000000000.
    #[arg(long = "max-queued")]
    max_queued: Option<u64>,
    /// Leases per second, in (0, 1000000].
    #[arg(long = "rate-per-s", value_parser = finite)]
    rate_per_s: Option<f64>,
    /// Token bucket size of the rate limit, 1..=1000000.
    #[arg(long)]
    burst: Option<u64>,
    /// Remove settings (back to weight 1, no cap, no rate limit): weight, max-inflight,
    /// max-queued, rate-per-s, burst (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "SETTING",
          value_parser = ["weight", "max-inflight", "max-queued", "rate-per-s", "burst"])]
    clear: Vec<String>,
}

/// A finite number (`NaN` and `inf` have no JSON form: sent as `null`, they would clear the
/// setting).
fn finite(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err("a finite number is expected".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// An id: not empty, no whitespace or control characters (it goes into a URL path).
fn id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("an id is not empty and has no spaces or control characters".into());
    }
    Ok(s.to_string())
}

/// One of the admin commands.
#[derive(Debug)]
pub enum Admin<'a> {
    /// `orq tasks`.
    Tasks(&'a TasksArgs),
    /// `orq dlq`.
    Dlq(&'a DlqArgs),
    /// `orq queues`.
    Queues(&'a QueuesArgs),
    /// `orq tenants`.
    Tenants(&'a TenantsArgs),
}

/// Run an admin command: what it prints on stdout, or its failure.
pub async fn run(cmd: Admin<'_>) -> Result<String, Failure> {
    let conn = match &cmd {
        Admin::Tasks(a) => &a.conn,
        Admin::Dlq(a) => &a.conn,
        Admin::Queues(a) => &a.conn,
        Admin::Tenants(a) => &a.conn,
    };
    let api = Api::new(&conn.url, conn.api_key.clone())?;
    let out = conn.output;
    match cmd {
        Admin::Tasks(a) => tasks(&api, out, &a.command).await,
        Admin::Dlq(a) => dlq(&api, out, &a.command).await,
        Admin::Queues(a) => queues(&api, out, &a.command).await,
        Admin::Tenants(a) => tenants(&api, out, &a.command).await,
    }
}

/// `text` for a table, `json` pretty for `--output json`.
fn pick(out: Output, json: &Value, text: impl FnOnce() -> String) -> String {
    match out {
        Output::Json => show::json(json),
        Output::Table => text(),
    }
}

/// A page of tasks as a table, with the command for the next page.
fn page_text(v: &Value, again: &str) -> String {
    let tasks = v["tasks"].as_array().cloned().unwrap_or_default();
    let mut s = if tasks.is_empty() {
        "no tasks".to_string()
    } else {
        show::tasks(&tasks)
    };
    if let Some(c) = v["next_cursor"].as_str() {
        s.push_str(&format!("\nmore: {again} --cursor {c}"));
    }
    s
}

fn page_query(queue: &str, p: &PageArgs, status: Option<&String>) -> String {
    query(&[
        ("queue", Some(queue.to_string())),
        ("tenant", p.tenant.clone()),
        ("type", p.task_type.clone()),
        ("status", status.cloned()),
        ("limit", Some(p.limit.to_string())),
        ("cursor", p.cursor.clone()),
    ])
}

async fn tasks(api: &Api, out: Output, cmd: &TasksCommand) -> Result<String, Failure> {
    match cmd {
        TasksCommand::Get { queue, id } => {
            let path = format!(
                "/tasks/{}{}",
                enc(id),
                query(&[("queue", Some(queue.queue.clone()))])
            );
            let t = api.get(&path).await?;
            Ok(pick(out, &t, || show::task(&t)))
        }
        TasksCommand::List {
            queue,
            page,
            status,
        } => {
            let v = api
                .get(&format!(
                    "/tasks{}",
                    page_query(&queue.queue, page, status.as_ref())
                ))
                .await?;
            Ok(pick(out, &v, || {
                page_text(&v, &format!("orq tasks list --queue {}", queue.queue))
            }))
        }
        TasksCommand::Cancel { queue, id } => {
            let path = format!(
                "/tasks/{}/cancel{}",
                enc(id),
                query(&[("queue", Some(queue.queue.clone()))])
            );
            let t = api.call(Method::POST, &path, None, 0).await?;
            Ok(pick(out, &t, || {
                format!("cancelled {id} (status {})", show::cell(&t["status"]))
            }))
        }
    }
}

async fn dlq(api: &Api, out: Output, cmd: &DlqCommand) -> Result<String, Failure> {
    match cmd {
        DlqCommand::List { queue, page } => {
            let v = api
                .get(&format!("/dlq{}", page_query(&queue.queue, page, None)))
                .await?;
            Ok(pick(out, &v, || {
                page_text(&v, &format!("orq dlq list --queue {}", queue.queue))
            }))
        }
        DlqCommand::Replay(b) | DlqCommand::Purge(b) => {
            let replay = matches!(cmd, DlqCommand::Replay(_));
            let q = &b.queue.queue;
            let mut seen = std::collections::HashSet::new();
            let ids: Vec<String> = b.ids.iter().filter(|i| seen.insert(*i)).cloned().collect();
            let done = match (b.all, replay) {
                (true, _) => {
                    let f = bulk::Filter {
                        queue: q.clone(),
                        tenant: b.tenant.clone(),
                        task_type: b.task_type.clone(),
                    };
                    if replay {
                        bulk::replay_all(api, &f).await?
                    } else {
                        bulk::purge_all(api, &f).await?
                    }
                }
                (false, true) => bulk::replay_ids(api, q, &ids).await?,
                (false, false) => {
                    let pb = bulk::purge_bar(ids.len());
                    let d = bulk::purge_ids(api, q, &ids, &pb).await;
                    pb.finish_and_clear();
                    d?
                }
            };
            let verb = if replay { "replayed" } else { "purged" };
            let v = json!({"queue": q, verb: done.done, "not_found": done.gone});
            let text = pick(out, &v, || {
                format!("{verb} {} dead task(s) of queue {q}", done.done)
            });
            if done.gone.is_empty() {
                Ok(text)
            } else {
                Err(Failure::new(
                    Exit::NotFound,
                    format!(
                        "not_found: no dead task in queue {q} with id {} (not found, or no \
                         longer dead)",
                        done.gone.join(", ")
                    ),
                )
                .with_stdout(text))
            }
        }
    }
}

async fn queues(api: &Api, out: Output, cmd: &QueuesCommand) -> Result<String, Failure> {
    match cmd {
        QueuesCommand::List => {
            let v = api.get("/queues").await?;
            let qs = v["queues"].as_array().cloned().unwrap_or_default();
            Ok(pick(out, &v, || {
                if qs.is_empty() {
                    "no queues".into()
                } else {
                    show::queues(&qs)
                }
            }))
        }
        QueuesCommand::Stats { queue } => {
            let v = api.get(&format!("/queues/{}", enc(queue))).await?;
            Ok(pick(out, &v, || {
                let mut s = show::queues(std::slice::from_ref(&v));
                let mut t = show::table(&["TOTAL", "COUNT"]);
                if let Some(totals) = v["totals"].as_object() {
                    for (k, n) in totals {
                        t.add_row(vec![k.clone(), show::cell(n)]);
                    }
                    s.push_str(&format!("\n{t}"));
                }
                let tenants = v["tenants"].as_array().cloned().unwrap_or_default();
                if !tenants.is_empty() {
                    s.push_str(&format!(
                        "\n{}\n{} tenant(s) in all (orq tenants get --queue {queue})",
                        show::tenants(&tenants),
                        show::cell(&v["tenants_total"])
                    ));
                }
                s
            }))
        }
        QueuesCommand::Pause { queue } | QueuesCommand::Resume { queue } => {
            let verb = if matches!(cmd, QueuesCommand::Pause { .. }) {
                "pause"
            } else {
                "resume"
            };
            let v = api
                .call(
                    Method::POST,
                    &format!("/queues/{}/{verb}", enc(queue)),
                    None,
                    0,
                )
                .await?;
            Ok(pick(out, &v, || {
                format!(
                    "queue {queue} {}",
                    if v["paused"] == Value::Bool(true) {
                        "paused"
                    } else {
                        "resumed"
                    }
                )
            }))
        }
        QueuesCommand::Delete { queue } => {
            let v = api
                .call(Method::DELETE, &format!("/queues/{}", enc(queue)), None, 0)
                .await?;
            Ok(pick(out, &v, || {
                let n = show::cell(&v["finished_deleted"]);
                if v["deleted"] == Value::Bool(true) {
                    format!("queue {queue} deleted ({n} finished task(s) with it)")
                } else {
                    format!(
                        "queue {queue} partly deleted ({n} finished task(s)); run the command again for the rest"
                    )
                }
            }))
        }
        QueuesCommand::Drain { queue, timeout_ms } => {
            let path = format!("/queues/{}/drain?timeout_ms={timeout_ms}", enc(queue));
            let v = api.call(Method::POST, &path, None, *timeout_ms).await?;
            if v["drained"] == Value::Bool(true) {
                return Ok(pick(out, &v, || format!("queue {queue} drained")));
            }
            let failure = Failure::new(
                Exit::Incomplete,
                format!(
                    "queue {queue} not drained after {timeout_ms} ms: {} task(s) left",
                    show::cell(&v["remaining"])
                ),
            );
            Err(match out {
                Output::Json => failure.with_stdout(show::json(&v)),
                Output::Table => failure,
            })
        }
    }
}

/// Every tenant entry of `queue`, page after page.
async fn all_tenants(api: &Api, queue: &str) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let v = api
            .get(&format!(
                "/queues/{}/tenants{}",
                enc(queue),
                query(&[("limit", Some("1000".into())), ("cursor", cursor.clone())])
            ))
            .await?;
        out.extend(v["tenants"].as_array().cloned().unwrap_or_default());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return Ok(out),
        }
    }
}

async fn tenants(api: &Api, out: Output, cmd: &TenantsCommand) -> Result<String, Failure> {
    match cmd {
        TenantsCommand::Get { queue, tenants } => {
            let q = &queue.queue;
            let all = all_tenants(api, q).await?;
            let chosen: Vec<Value> = if tenants.is_empty() {
                all
            } else {
                all.into_iter()
                    .filter(|e| {
                        e["tenant"]
                            .as_str()
                            .is_some_and(|t| tenants.iter().any(|n| n == t))
                    })
                    .collect()
            };
            let missing: Vec<&String> = tenants
                .iter()
                .filter(|n| {
                    !chosen
                        .iter()
                        .any(|e| e["tenant"].as_str() == Some(n.as_str()))
                })
                .collect();
            let v = json!({"queue": q, "tenants": chosen});
            let text = pick(out, &v, || {
                if chosen.is_empty() {
                    format!("no tenants in queue {q}")
                } else {
                    show::tenants(&chosen)
                }
            });
            if missing.is_empty() {
                return Ok(text);
            }
            let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            let failure = Failure::new(
                Exit::NotFound,
                format!("not_found: queue {q} has no tenant {}", names.join(", ")),
            );
            // What was found is still printed; nothing when none was.
            Err(if chosen.is_empty() {
                failure
            } else {
                failure.with_stdout(text)
            })
        }
        TenantsCommand::Set(s) => {
            let mut body = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    body.insert(k.to_string(), v);
                }
            };
            put("weight", s.weight.map(Value::from));
            put("max_inflight", s.max_inflight.map(Value::from));
            put("max_queued", s.max_queued.map(Value::from));
            put("rate_per_s", s.rate_per_s.map(Value::from));
            put("burst", s.burst.map(Value::from));
            for c in &s.clear {
                let field = c.replace('-', "_");
                if body.contains_key(&field) {
                    return Err(Failure::new(
                        Exit::Usage,
                        format!("orq tenants set: --{c} and --clear {c}: give one of them"),
                    ));
                }
                body.insert(field, Value::Null);
            }
            if body.is_empty() {
                return Err(Failure::new(
                    Exit::Usage,
                    "orq tenants set: give at least one of --weight, --max-inflight, \
                     --max-queued, --rate-per-s, --burst, --clear",
                ));
            }
            let path = format!("/queues/{}/tenants/{}", enc(&s.queue.queue), enc(&s.tenant));
            let v = api
                .call(Method::PUT, &path, Some(&Value::Object(body)), 0)
                .await?;
            Ok(pick(out, &v, || show::tenants(std::slice::from_ref(&v))))
        }
    }
}
