//! What one event stream client is sent: the broadcast entries its filter lets through (its
//! queue; a tenant key's own tenant), and a note when it fell behind and entries were missed.

use super::*;

/// What an SSE stream sends: an entry, or a note that entries were missed.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// One stream entry.
    Entry(Arc<LiveEvent>),
    /// The client fell behind: `skipped` entries were dropped for it (`None`: unknown, the
    /// resend after `Last-Event-ID` hit [`RESEND_MAX`]).
    Lagged(Option<u64>),
}

impl Message {
    /// The SSE event as `caller` receives it under `auth`: [`Message::to_event`], except that a
    /// tenant key's event ids (the `id:` line and `data`'s `stream_id`) are sealed
    /// ([`Auth::cursor_out`]): a stream id's sequence part counts every tenant's events in the
    /// queue. Its `Last-Event-ID` is opened again by [`Auth::cursor_in`].
    pub fn to_event_for(&self, auth: &crate::auth::Auth, caller: &Caller) -> Event {
        let Message::Entry(e) = self else {
            return self.to_event();
        };
        if caller.tenant().is_none() || !matches!(auth, crate::auth::Auth::Keys(_)) {
            return self.to_event();
        }
        let sealed = auth.cursor_out(caller, e.stream_id.clone());
        let mut data: serde_json::Value =
            serde_json::from_str(&e.data).unwrap_or_else(|_| json!({}));
        data["stream_id"] = json!(sealed);
        Event::default()
            .id(format!("{}/{}", e.queue, sealed))
            .event(e.class)
            .data(data.to_string())
    }

    /// The SSE event: `id: <queue>/<stream-id>`, `event: task|queue`, `data: <LiveEvent data>`;
    /// or `event: lagged`, `data: {"skipped": n|null}`.
    pub fn to_event(&self) -> Event {
        match self {
            Message::Entry(e) => Event::default()
                .id(format!("{}/{}", e.queue, e.stream_id))
                .event(e.class)
                .data(&e.data),
            Message::Lagged(n) => Event::default()
                .event("lagged")
                .data(json!({ "skipped": n }).to_string()),
        }
    }
}

/// What one SSE client may receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this queue's entries (`None`: every queue).
    pub queue: Option<String>,
    /// Who is listening: an admin receives every entry; a tenant key only the `task` entries of
    /// its own tenant in the queues it may use (no queue settings entries), and `lagged`
    /// messages without their count (which would reveal the other tenants' traffic).
    pub caller: Caller,
}

impl EventFilter {
    /// Every entry of `queue` (every queue when `None`), for an admin.
    pub fn queue(queue: Option<String>) -> Self {
        EventFilter {
            queue,
            caller: Caller::anonymous_admin(),
        }
    }

    /// True when the client may receive `e`.
    pub fn passes(&self, e: &LiveEvent) -> bool {
        if self.queue.as_ref().is_some_and(|q| *q != e.queue) {
            return false;
        }
        if self.caller.is_admin() {
            return true;
        }
        e.class == "task" && self.caller.sees(&e.queue, &e.tenant)
    }
}

/// The messages of one SSE client: `resent` first (entries of `resent_queue` after its
/// `Last-Event-ID`, then a `Lagged(None)` when the resend was cut at [`RESEND_MAX`]), then what
/// `rx` receives, skipping entries already resent; all through `filter`. Ends when `shutdown` is
/// cancelled or the poller is gone. Holds `slot` while it lives.
pub fn messages(
    resent: Vec<Arc<LiveEvent>>,
    rx: broadcast::Receiver<Arc<LiveEvent>>,
    filter: EventFilter,
    shutdown: CancellationToken,
    slot: Option<super::ClientSlot>,
) -> impl Stream<Item = Message> + Send + 'static {
    struct St {
        pending: VecDeque<Message>,
        rx: broadcast::Receiver<Arc<LiveEvent>>,
        filter: EventFilter,
        /// The last entry resent: (queue, stream id). Broadcast entries up to it are skipped.
        resent_upto: Option<(String, (u64, u64))>,
        shutdown: CancellationToken,
        _slot: Option<super::ClientSlot>,
    }
    let resent_upto = resent
        .last()
        .and_then(|e| parse_stream_id(&e.stream_id).map(|id| (e.queue.clone(), id)));
    let mut pending: VecDeque<Message> = VecDeque::with_capacity(resent.len() + 1);
    let full = resent.len() >= RESEND_MAX;
    pending.extend(
        resent
            .into_iter()
            .filter(|e| filter.passes(e))
            .map(Message::Entry),
    );
    if full {
        pending.push_back(Message::Lagged(None));
    }
    let st = St {
        pending,
        rx,
        filter,
        resent_upto,
        shutdown,
        _slot: slot,
    };
    futures_util::stream::unfold(st, |mut st| async move {
        if let Some(m) = st.pending.pop_front() {
            return Some((m, st));
        }
        loop {
            let got = tokio::select! {
                _ = st.shutdown.cancelled() => return None,
                got = st.rx.recv() => got,
            };
            match got {
                Ok(e) => {
                    if !st.filter.passes(&e) {
                        continue;
                    }
                    if let Some((q, upto)) = &st.resent_upto {
                        if *q == e.queue
                            && parse_stream_id(&e.stream_id).is_some_and(|id| id <= *upto)
                        {
                            continue;
                        }
                    }
                    return Some((Message::Entry(e), st));
                }
                Err(RecvError::Lagged(n)) => {
                    let n = st.filter.caller.is_admin().then_some(n);
                    return Some((Message::Lagged(n), st));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    })
}
