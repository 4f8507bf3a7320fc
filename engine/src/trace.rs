//! The spans a worker opens for a task, for distributed tracing (OpenTelemetry, when the process
//! exports traces; `orq worker --otlp-endpoint`).
//!
//! Every such span has the target [`TARGET`], which the logs leave out and only an exporting
//! layer enables: without one, the spans are disabled at their call sites and cost a load and a
//! branch. Per task: `orq.task` (attributes `orq.queue`, `orq.tenant`, `orq.type`, `orq.task_id`,
//! `orq.attempt`, `orq.epoch`, `orq.worker`), with the children `orq.lease` (the lease this attempt
//! runs under: `orq.lease_expires_at_ms`), `orq.handler` (the handler's run) and `orq.outcome`
//! (its report: `orq.outcome` = `completed`, `failed`, `released`, `lease_lost`; a failed
//! attempt marks `orq.task` and `orq.outcome` with the error status and the handler's message).
//! `orq.task`
//! continues the trace context stored with the task ([`TraceContext`]), through the hook a
//! process that exports installs ([`set_continue`]).

/// The target of the tracing spans meant for trace export.
pub const TARGET: &str = "orq_trace";

use orq_lua::facts::TRACESTATE_MAX_BYTES;
use std::sync::OnceLock;

/// A task's W3C trace context: the `traceparent` and `tracestate` of the span that submitted it
/// (the API's `orq.submit`, or the caller's own when the API exports no traces). It is stored
/// with the task (its `trace` field, `tc` in Redis; at most
/// [`orq_lua::facts::TRACE_CONTEXT_MAX_BYTES`]) and every attempt's `orq.task` span continues it,
/// so submit, lease, handler and outcome share one trace. Only a well-formed one can be made
/// ([`TraceContext::parse`]): a malformed `traceparent` is no context at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: String,
}

impl TraceContext {
    /// A context from a `traceparent` in W3C Trace Context's version-00 form
    /// (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lowercase, neither id all
    /// zeros: 55 bytes) and an optional `tracestate` (printable ASCII, else none; empty is none;
    /// cut as the specification says: at most 32 list members, and within
    /// [`TRACESTATE_MAX_BYTES`] by dropping members over 128 bytes first, then members from
    /// its end). `None` when the `traceparent` is malformed, whatever the `tracestate`.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        if !well_formed(traceparent) {
            return None;
        }
        let state = tracestate.unwrap_or("").trim();
        let state = if state.bytes().all(|b| (32..=126).contains(&b)) {
            truncated(state)
        } else {
            String::new()
        };
        Some(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate: state,
        })
    }

    /// The `traceparent` header's value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header's value, `None` when there is none.
    pub fn tracestate(&self) -> Option<&str> {
        (!self.tracestate.is_empty()).then_some(self.tracestate.as_str())
    }

    /// The stored form (the task's `trace` field, enqueue's `trace` setting): the
    /// `traceparent`, then a comma and the `tracestate` when there is one.
    pub fn stored(&self) -> String {
        match self.tracestate() {
            Some(state) => format!("{},{state}", self.traceparent),
            None => self.traceparent.clone(),
        }
    }

    /// The context of a stored form ([`TraceContext::stored`]); `None` when it is not one.
    pub fn from_stored(stored: &str) -> Option<TraceContext> {
        let (parent, state) = match stored.split_once(',') {
            Some((p, s)) => (p, Some(s)),
            None => (stored, None),
        };
        TraceContext::parse(parent, state)
    }
}

/// Whether `s` is a version-00 `traceparent` with ids that are not all zeros (the only form a
/// [`TraceContext`] holds).
fn well_formed(s: &str) -> bool {
    s.starts_with("00-") && valid_traceparent(s)
}

/// Whether a `traceparent` header's value is valid by W3C Trace Context level 1: a version of
/// two lowercase hex digits other than `ff`, a trace id of 32 and a parent id of 16 lowercase hex
/// digits, neither all zeros, and flags of 2; version 00 ends there (55 bytes); a later version
/// may go on after a `-`. What a receiver must ignore (a new trace starts) is anything else:
/// lengths off by one, a sign, upper case, a trailing `-` (the OpenTelemetry SDK's own parser
/// lets such values through, with other ids).
pub fn valid_traceparent(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b.get(r).is_some_and(|p| {
            p.iter()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
        })
    };
    let not_zero = |r: std::ops::Range<usize>| b[r].iter().any(|&c| c != b'0');
    let dashes = [2, 35, 52].iter().all(|&i| b.get(i) == Some(&b'-'));
    if b.len() < 55 || !dashes || !hex(0..2) || !hex(3..35) || !hex(36..52) || !hex(53..55) {
        return false;
    }
    let version_ok = match &b[0..2] {
        b"ff" => false,
        b"00" => b.len() == 55,
        _ => b.len() == 55 || b[55] == b'-',
    };
    version_ok && not_zero(3..35) && not_zero(36..52)
}

/// The most list members a `tracestate` holds (W3C Trace Context level 1, 3.3.1.1): the rest
/// are dropped from its end.
const TRACESTATE_MAX_MEMBERS: usize = 32;

/// A `tracestate` list member longer than this (bytes) is the first to go when the list must be
/// cut (W3C Trace Context level 1, 3.3.1.5).
const TRACESTATE_LONG_MEMBER_BYTES: usize = 128;

/// `state` as W3C Trace Context says to cut it: at most [`TRACESTATE_MAX_MEMBERS`] list members
/// (empty ones dropped, whitespace around each trimmed); when they are longer together than
/// [`TRACESTATE_MAX_BYTES`], members longer than [`TRACESTATE_LONG_MEMBER_BYTES`] go first, then
/// members from the end until the rest fit.
fn truncated(state: &str) -> String {
    let max = TRACESTATE_MAX_BYTES as usize;
    let mut members: Vec<&str> = state
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .take(TRACESTATE_MAX_MEMBERS)
        .collect();
    let joined_len = |m: &[&str]| {
        m.iter()
            .map(|s| s.len() + 1)
            .sum::<usize>()
            .saturating_sub(1)
    };
    if joined_len(&members) > max {
        members.retain(|m| m.len() <= TRACESTATE_LONG_MEMBER_BYTES);
        while joined_len(&members) > max {
            members.pop();
        }
    }
    members.join(",")
}

/// How a span is made to continue a stored trace context: installed once by a process that
/// exports traces (`orq` does it in `telemetry::start`, with OpenTelemetry's propagator); without
/// it, task spans start traces of their own.
pub type Continue = fn(&tracing::Span, &TraceContext);

static CONTINUE: OnceLock<Continue> = OnceLock::new();

/// Install how task spans continue their task's trace context (once per process; a second call
/// is ignored).
pub fn set_continue(f: Continue) {
    let _ = CONTINUE.set(f);
}

/// Make `span` continue `context` when a [`Continue`] is installed and the span is enabled.
pub(crate) fn continue_in(span: &tracing::Span, context: Option<&TraceContext>) {
    if let (Some(f), Some(cx), false) = (CONTINUE.get(), context, span.is_disabled()) {
        f(span, cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    // Goal: only a version-00 traceparent with real ids makes a context; its tracestate is
    // kept as list members within the limit, and the stored form reads back as itself.
    #[test]
    fn a_context_is_a_well_formed_traceparent_and_its_state() {
        let cx = TraceContext::parse(TP, Some("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE")).unwrap();
        assert_eq!(cx.traceparent(), TP);
        assert_eq!(
            cx.tracestate(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        assert_eq!(TraceContext::from_stored(&cx.stored()), Some(cx.clone()));
        assert_eq!(
            TraceContext::parse(TP, Some("")).unwrap().tracestate(),
            None
        );
        assert_eq!(TraceContext::parse(TP, None).unwrap().stored(), TP);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad, Some("a=b")), None, "{bad:?}");
        }
        let long: Vec<String> = (0..40)
            .map(|i| format!("k{i}={}", "v".repeat(20)))
            .collect();
        let cx = TraceContext::parse(TP, Some(&long.join(","))).unwrap();
        let state = cx.tracestate().unwrap();
        assert!(
            state.len() <= TRACESTATE_MAX_BYTES as usize,
            "{}",
            state.len()
        );
        assert!(
            state.starts_with("k0=") && state.ends_with(&"v".repeat(20)),
            "{state}"
        );
        assert!(cx.stored().len() <= orq_lua::facts::TRACE_CONTEXT_MAX_BYTES as usize);
        assert_eq!(
            TraceContext::parse(TP, Some("a=b\n")).unwrap().tracestate(),
            Some("a=b"),
            "surrounding whitespace is trimmed"
        );
        assert_eq!(
            TraceContext::parse(TP, Some("a=\u{7f}"))
                .unwrap()
                .tracestate(),
            None
        );
    }

    // Goal: a tracestate is cut as W3C Trace Context says: at most 32 members; over 512 bytes,
    // members over 128 bytes go first, then members from the end; a long member of a list that
    // fits stays.
    #[test]
    fn a_tracestate_is_cut_as_the_specification_says() {
        let state = |s: &str| {
            TraceContext::parse(TP, Some(s))
                .unwrap()
                .tracestate()
                .map(str::to_string)
        };
        let long = format!("long={}", "x".repeat(200));
        let fits = format!("a=1,{long},b=2");
        assert_eq!(state(&fits), Some(fits.clone()), "a list that fits is kept");
        let small: Vec<String> = (0..20)
            .map(|i| format!("k{i}={}", "v".repeat(20)))
            .collect();
        let over = format!("first=1,{long},{}", small.join(","));
        let cut = state(&over).unwrap();
        assert!(cut.len() <= TRACESTATE_MAX_BYTES as usize, "{}", cut.len());
        assert!(!cut.contains("long="), "the long member goes first: {cut}");
        assert!(cut.starts_with("first=1,k0="), "{cut}");
        assert!(
            cut.ends_with("k19=vvvvvvvvvvvvvvvvvvvv"),
            "all the small ones fit: {cut}"
        );
        let many: Vec<String> = (0..40).map(|i| format!("m{i}=1")).collect();
        let cut = state(&many.join(",")).unwrap();
        assert_eq!(cut.split(',').count(), 32, "{cut}");
        assert!(cut.ends_with("m31=1"), "{cut}");
    }

    // Goal: a traceparent header is valid exactly as W3C Trace Context level 1 says, including
    // the cases the OpenTelemetry SDK's parser lets through (found by a new user's try).
    #[test]
    fn a_traceparent_header_is_held_to_the_w3c_rules() {
        let t = "4bf92f3577b34da6a3ce929d0e0e4736";
        let p = "00f067aa0ba902b7";
        for ok in [
            format!("00-{t}-{p}-01"),
            format!("00-{t}-{p}-00"),
            format!("01-{t}-{p}-01"),
            format!("01-{t}-{p}-01-what-the-future-holds"),
            format!("fe-{t}-{p}-ff"),
        ] {
            assert!(valid_traceparent(&ok), "{ok}");
        }
        for bad in [
            format!("00-{}-{p}-01", &t[1..]),
            format!("00-+{}-{p}-01", &t[1..]),
            format!("00-0{t}-{p}-01"),
            format!("00-{t}-0{p}-01"),
            format!("00-{t}-{p}-1"),
            format!("00-{t}-{p}-001"),
            format!("000-{t}-{p}-01"),
            format!("0-{t}-{p}-01"),
            format!("+0-{t}-{p}-01"),
            format!("00-{t}-{p}-01-"),
            format!("00-{t}-{p}-01-extra"),
            format!("01-{t}-{p}-01extra"),
            format!("ff-{t}-{p}-01"),
            format!("00-{}-{p}-01", t.to_uppercase()),
            format!("00-{}-{p}-01", "0".repeat(32)),
            format!("00-{t}-{}-01", "0".repeat(16)),
            "00-5-7-01".to_string(),
            String::new(),
        ] {
            assert!(!valid_traceparent(&bad), "{bad}");
            assert_eq!(TraceContext::parse(&bad, None), None, "{bad}");
        }
    }
}
