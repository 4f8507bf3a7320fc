//! Reading: a task by id (on one queue or every known one), list pages, the event stream, the
//! workers and leases of a queue, and a queue's stats.

use super::{
    arg, call, check_id, check_lookup_width, check_queue, Client, Held, ListQuery, OldestReady,
    Page, QueueEvent, QueueStats, StatsQuery, TenantStats, WorkerInfo, WorkerLease, Workers,
    EVENTS_PAGE_MAX, LIST_LIMIT_MAX, LIST_SCAN_MAX, PARKED_CAPPED, STATS_OFFSET_MAX,
    STATS_OLDEST_AMONG_MAX, STATS_TENANTS_MAX, WORKERS_MAX,
};
use crate::decode::{self, array_at, int_at, items, str_at};
use crate::error::{Error, Result};
use crate::keys::is_valid_name;
use crate::resp::Resp;
use crate::task::{Status, Task};
use std::collections::BTreeMap;

impl Client {
    /// The queues to search for a by-id operation: the one given, or every known queue when
    /// there are at most [`LOOKUP_QUEUES_MAX`] (else `Invalid`, asking for the queue: a lookup's
    /// cost grows with the queues searched, and one caller's lookups must not slow everyone's).
    pub(super) async fn queues_for(
        &self,
        op: &'static str,
        queue: Option<&str>,
    ) -> Result<Vec<String>> {
        match queue {
            Some(q) => {
                check_queue(op, q)?;
                Ok(vec![q.to_string()])
            }
            None => {
                let all = self.queues().await?;
                check_lookup_width(op, all.len())?;
                Ok(all)
            }
        }
    }

    /// Find task `id` in one of `queues` (at most [`LOOKUP_QUEUES_MAX`]: `Invalid` beyond),
    /// looked up concurrently. Errors: `NotFound`, `Invalid`, `Unavailable`.
    pub async fn get_among(&self, queues: &[String], id: &str) -> Result<Task> {
        let op = "get";
        check_id(op, id)?;
        check_lookup_width(op, queues.len())?;
        for q in queues {
            check_queue(op, q)?;
        }
        self.find(op, queues, id).await
    }

    /// Find which queue holds task `id` (checking `queue` only, when given).
    pub(super) async fn locate(
        &self,
        op: &'static str,
        queue: Option<&str>,
        id: &str,
    ) -> Result<Task> {
        check_id(op, id)?;
        let queues = self.queues_for(op, queue).await?;
        self.find(op, &queues, id).await
    }

    /// Task `id` in the first of `queues` that holds it.
    async fn find(&self, op: &'static str, queues: &[String], id: &str) -> Result<Task> {
        let lookups = queues.iter().map(|q| {
            let store = self.store.clone();
            let id = id.to_string();
            async move { call(&*store, "get", q, vec![arg(id)]).await }
        });
        for (reply, q) in futures::future::join_all(lookups)
            .await
            .into_iter()
            .zip(queues)
        {
            let reply = reply?;
            let it = items("get", &reply, id)?;
            let flat = array_at("get", it, 1)?;
            if !flat.is_empty() {
                return decode::task(op, q, flat);
            }
        }
        Err(Error::NotFound {
            op,
            id: id.to_string(),
        })
    }

    /// One task by id. `queue: None` searches every known queue. Errors: `NotFound`, `Invalid`.
    pub async fn get(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        self.locate("get", queue, id).await
    }

    /// One page of tasks. Errors: `Invalid` (bad name, limit or cursor).
    pub async fn list(&self, q: &ListQuery) -> Result<Page> {
        let op = "list";
        check_queue(op, &q.queue)?;
        for (field, v) in [("tenant", &q.tenant), ("type", &q.task_type)] {
            if let Some(v) = v {
                if !is_valid_name(v) {
                    return Err(Error::invalid(
                        op,
                        format!("{field}: must match [A-Za-z0-9._-]{{1,64}}"),
                    ));
                }
            }
        }
        if q.limit == 0 || q.limit > LIST_LIMIT_MAX {
            return Err(Error::invalid(
                op,
                format!("limit: must be 1..={LIST_LIMIT_MAX}"),
            ));
        }
        let cursor = q.cursor.clone().unwrap_or_default();
        if cursor.len() > 64 {
            return Err(Error::invalid(op, "cursor: malformed"));
        }
        let args = vec![
            arg(q.status.map(Status::as_str).unwrap_or("")),
            arg(q.tenant.as_deref().unwrap_or("")),
            arg(q.task_type.as_deref().unwrap_or("")),
            arg(cursor),
            arg(q.limit),
            arg(LIST_SCAN_MAX),
        ];
        let reply = call(&*self.store, op, &q.queue, args).await?;
        let it = items(op, &reply, "")?;
        let tasks = array_at(op, it, 1)?
            .iter()
            .map(|t| {
                t.as_array()
                    .ok_or_else(|| Error::protocol(op, "task is not an array"))
                    .and_then(|flat| decode::task(op, &q.queue, flat))
            })
            .collect::<Result<Vec<_>>>()?;
        let next = str_at(op, it, 2)?;
        Ok(Page {
            tasks,
            next_cursor: (!next.is_empty()).then(|| next.to_string()),
        })
    }

    /// Up to `count` (1..=[`EVENTS_PAGE_MAX`]) events of `queue`'s event stream strictly after
    /// the event id `after` (`None`: from the oldest event the stream still holds; it keeps at
    /// least the last 10,000), oldest first. A stream entry holds the events of one call
    /// ([`decode::stream_events`] names each event); a page may end inside one, and the next
    /// read, after the page's last id, goes on from there. Errors: `Invalid` (bad queue, id or
    /// count), `Unavailable`.
    pub async fn events(
        &self,
        queue: &str,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<QueueEvent>> {
        let op = "events";
        check_queue(op, queue)?;
        if count == 0 || count > EVENTS_PAGE_MAX {
            return Err(Error::Invalid {
                op,
                message: format!("count must be in 1..={EVENTS_PAGE_MAX}"),
            });
        }
        let reply = call(
            &*self.store,
            op,
            queue,
            vec![arg(after.unwrap_or("")), arg(count)],
        )
        .await?;
        let it = items(op, &reply, "")?;
        let after_id = after.and_then(decode::stream_id);
        let mut out = Vec::new();
        for entry in array_at(op, it, 1)? {
            let e = entry
                .as_array()
                .ok_or_else(|| Error::protocol(op, "stream entry is not an array"))?;
            let fields = e
                .get(1)
                .and_then(Resp::as_array)
                .ok_or_else(|| Error::protocol(op, "stream entry has no field list"))?;
            // A batch entry read from its middle: the events up to `after` were read before.
            out.extend(
                decode::stream_events(str_at(op, e, 0)?, fields)
                    .into_iter()
                    .filter(|ev| after_id.is_none() || decode::stream_id(&ev.stream_id) > after_id),
            );
        }
        out.truncate(count);
        Ok(out)
    }

    /// The workers `queue` has seen in the last hour and the leases each holds (at most
    /// [`WORKERS_MAX`] of each). Errors: `Invalid` (bad queue), `Unavailable`.
    pub async fn workers(&self, queue: &str) -> Result<Workers> {
        let op = "workers";
        check_queue(op, queue)?;
        let reply = call(
            &*self.store,
            op,
            queue,
            vec![arg(WORKERS_MAX), arg(WORKERS_MAX)],
        )
        .await?;
        let it = items(op, &reply, "")?;
        let mut workers: Vec<WorkerInfo> = Vec::new();
        for w in array_at(op, it, 1)? {
            let w = w
                .as_array()
                .ok_or_else(|| Error::protocol(op, "worker entry is not an array"))?;
            workers.push(WorkerInfo {
                id: str_at(op, w, 0)?.to_string(),
                last_seen_ms: int_at(op, w, 1)?,
                leases: Vec::new(),
            });
        }
        for l in array_at(op, it, 2)? {
            let l = l
                .as_array()
                .ok_or_else(|| Error::protocol(op, "lease entry is not an array"))?;
            let lease = WorkerLease {
                task_id: str_at(op, l, 0)?.to_string(),
                task_type: str_at(op, l, 2)?.to_string(),
                tenant: str_at(op, l, 3)?.to_string(),
                leased_at_ms: int_at(op, l, 4)?,
                lease_exp_ms: int_at(op, l, 5)?,
                heartbeat_at_ms: int_at(op, l, 6)?,
            };
            let worker = str_at(op, l, 1)?;
            match workers.iter_mut().find(|w| w.id == worker) {
                Some(w) => w.leases.push(lease),
                None => workers.push(WorkerInfo {
                    id: worker.to_string(),
                    last_seen_ms: lease.heartbeat_at_ms,
                    leases: vec![lease],
                }),
            }
        }
        Ok(Workers {
            now_ms: int_at(op, it, 0)?,
            workers,
            leases_total: int_at(op, it, 3)?.max(0) as u64,
        })
    }

    /// Counts of one queue, overall and per tenant (the first [`STATS_TENANTS_MAX`] in name
    /// order).
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        self.stats_with(
            queue,
            &StatsQuery {
                tenants: STATS_TENANTS_MAX,
                ..StatsQuery::default()
            },
        )
        .await
    }

    /// Counts of one queue, with the tenants and the oldest-ready read that `query` asks for.
    /// The script's work, which blocks the store while it runs, grows with both (about 12 Redis
    /// calls per tenant reported and 11 per tenant read for the oldest ready task).
    /// Errors: `Invalid` for a malformed queue or `only` tenant name.
    pub async fn stats_with(&self, queue: &str, query: &StatsQuery) -> Result<QueueStats> {
        let op = "stats";
        check_queue(op, queue)?;
        if query.only.as_deref().is_some_and(|t| !is_valid_name(t)) {
            return Err(Error::invalid(
                op,
                "tenant: must match [A-Za-z0-9._-]{1,64}",
            ));
        }
        let args = vec![
            arg(query.tenants.min(STATS_TENANTS_MAX)),
            arg(query.oldest_among.min(STATS_OLDEST_AMONG_MAX)),
            arg(query.offset.min(STATS_OFFSET_MAX)),
            arg(query.only.as_deref().unwrap_or("")),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        let it = items(op, &reply, "")?;
        let fields = decode::field_map(op, array_at(op, it, 1)?)?;
        let counts = |f: &std::collections::HashMap<String, String>| {
            Status::ALL
                .into_iter()
                .map(|s| {
                    let n = f
                        .get(&format!("n:{s}"))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    (s, n)
                })
                .collect::<BTreeMap<_, _>>()
        };
        let totals = fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("total:")?.to_string(), v.parse().ok()?)))
            .collect();
        let now_ms = int_at(op, it, 0)? as u64;
        let served_total: f64 = fields
            .get("served")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let mut tenants = Vec::new();
        for entry in array_at(op, it, 2)? {
            let e = entry
                .as_array()
                .ok_or_else(|| Error::protocol(op, "tenant entry is not an array"))?;
            let tf = decode::field_map(op, array_at(op, e, 1)?)?;
            let get = |k: &str| tf.get(k).and_then(|v| v.parse::<f64>().ok());
            let served = get("served").unwrap_or(0.0);
            // Sliding one-minute window: the previous window counts for what is left of it.
            let minute = (now_ms / 60_000) as f64;
            let elapsed = (now_ms % 60_000) as f64 / 60_000.0;
            let completed_per_s = match get("c_win") {
                Some(w) if w == minute => {
                    (get("c_prev").unwrap_or(0.0) * (1.0 - elapsed) + get("c_cur").unwrap_or(0.0))
                        / 60.0
                }
                Some(w) if w == minute - 1.0 => {
                    get("c_cur").unwrap_or(0.0) * (1.0 - elapsed) / 60.0
                }
                _ => 0.0,
            };
            // A tenant's hash counts no queued tasks: they are its ready lists' entries, which
            // the script sums (design note 55).
            let mut tenant_counts = counts(&tf);
            tenant_counts.insert(Status::Queued, int_at(op, e, 2)?.max(0));
            tenants.push(TenantStats {
                tenant: str_at(op, e, 0)?.to_string(),
                counts: tenant_counts,
                weight: get("weight").unwrap_or(1.0),
                max_inflight: get("max_inflight").map(|v| v as u64),
                max_queued: get("max_queued").map(|v| v as u64),
                rate_per_s: get("rate_per_s"),
                burst: get("burst").map(|v| v as u64),
                served: served as u64,
                share: if served_total > 0.0 {
                    served / served_total
                } else {
                    0.0
                },
                completed_per_s,
                held: match e.get(3).and_then(Resp::as_int) {
                    Some(PARKED_CAPPED) => Some(Held::MaxInflight),
                    Some(at) if at >= 0 => Some(Held::RateLimit {
                        until_ms: at as u64,
                    }),
                    _ => None,
                },
            });
        }
        let config = decode::field_map(op, it.get(5).and_then(Resp::as_array).unwrap_or_default())?;
        Ok(QueueStats {
            queue: queue.to_string(),
            counts: counts(&fields),
            totals,
            tenants,
            paused: config.get("paused").is_some_and(|v| v == "1"),
            defaults: config.get("defaults").filter(|d| !d.is_empty()).cloned(),
            aging_step_ms: config
                .get("aging_step_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            now_ms,
            tenants_total: int_at(op, it, 4)?.max(0) as u64,
            oldest_ready: match it.get(6).and_then(Resp::as_array) {
                Some(o) if int_at(op, o, 0)? >= 0 => Some(OldestReady {
                    since_ms: int_at(op, o, 0)? as u64,
                    tenants_read: int_at(op, o, 1)?.max(0) as u64,
                    tenants_ready: int_at(op, o, 2)?.max(0) as u64,
                }),
                _ => None,
            },
        })
    }
}
