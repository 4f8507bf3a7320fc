//! Distributed tracing: the spans of [`orq::trace`] (and the API's `orq.submit`) exported over
//! OTLP/HTTP (protobuf) when `--otlp-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` names a
//! collector; off by default. W3C trace context (`traceparent`, `tracestate`) is read from a
//! submit's headers (a malformed one is ignored: the submit starts a new trace), stored with the
//! submitted tasks ([`submitted_context`]), continued by each attempt's `orq.task` span on the
//! worker ([`orq::trace::set_continue`]) and written into the `http` handler's requests.
//!
//! The exporter is opentelemetry-otlp's, behind the SDK's batch processor (its own thread; the
//! standard `OTEL_BSP_*` variables tune it); the service name is `orq-<role>` unless
//! `OTEL_SERVICE_NAME` says otherwise; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
//! turn exporting off ([`env_switches`]). The spans reach it through `tracing-opentelemetry`,
//! enabled for the target [`orq::trace::TARGET`] only, which the logs leave out.

use clap::Args;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Where traces go (`orq serve`, `api`, `worker`; the scheduler has no spans).
#[derive(Debug, Args, Clone, Default)]
pub struct OtlpArgs {
    /// Export traces over OTLP/HTTP (protobuf) to this collector, e.g. http://127.0.0.1:4318
    /// (traces are POSTed to its /v1/traces; a URL that already ends with /v1/traces is used as
    /// it is). Off when unset, or when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL", value_parser = checked_endpoint)]
    pub otlp_endpoint: Option<Endpoint>,
    /// Export traces to this URL as given (no /v1/traces added), the OpenTelemetry setting for
    /// traces alone; it wins over --otlp-endpoint.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", value_name = "URL", value_parser = checked_traces_endpoint)]
    pub otlp_traces_endpoint: Option<Endpoint>,
}

/// A collector's traces URL, none (an empty `OTEL_EXPORTER_OTLP_ENDPOINT` or flag means unset,
/// as the OpenTelemetry specification says of empty variables), or why the value is not one.
/// A bad value stops orq only when it would export ([`OtlpArgs::traces_url`]): with exporting
/// switched off ([`env_switches`]) a fleet-wide variable orq cannot use is no error.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint(pub Result<Option<String>, String>);

fn checked_endpoint(s: &str) -> Result<Endpoint, String> {
    Ok(Endpoint(parse_endpoint(s).map_err(|e| invalid(s, e))))
}

fn checked_traces_endpoint(s: &str) -> Result<Endpoint, String> {
    Ok(Endpoint(
        parse_traces_endpoint(s).map_err(|e| invalid(s, e)),
    ))
}

/// Why `value` is not an endpoint, with the value (its password hidden).
fn invalid(value: &str, why: String) -> String {
    format!("invalid value '{}': {why}", shown(value))
}

impl OtlpArgs {
    /// The traces URL, when one is set (the traces endpoint wins); an error, naming the flag and
    /// its variable, when the one that would be used is not a valid URL.
    pub fn traces_url(&self) -> Result<Option<&str>, String> {
        let traces = (
            &self.otlp_traces_endpoint,
            "--otlp-traces-endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)",
        );
        let base = (
            &self.otlp_endpoint,
            "--otlp-endpoint (OTEL_EXPORTER_OTLP_ENDPOINT)",
        );
        for (endpoint, name) in [traces, base] {
            match endpoint.as_ref().map(|e| &e.0) {
                Some(Ok(Some(url))) => return Ok(Some(url.as_str())),
                Some(Err(e)) => return Err(format!("{name}: {e}")),
                Some(Ok(None)) | None => {}
            }
        }
        Ok(None)
    }
}

/// The traces URL of a collector given as a base URL (the OTLP convention: `/v1/traces` is
/// added unless the URL already ends with it).
fn parse_endpoint(s: &str) -> Result<Option<String>, String> {
    let Some(url) = parse_traces_endpoint(s)? else {
        return Ok(None);
    };
    let url = url.trim_end_matches('/');
    Ok(Some(if url.ends_with("/v1/traces") {
        url.to_string()
    } else {
        format!("{url}/v1/traces")
    }))
}

/// A traces URL used as given: http(s) with a host, without query or fragment; empty is unset.
fn parse_traces_endpoint(s: &str) -> Result<Option<String>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    let u = reqwest::Url::parse(s.trim()).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err("an http:// or https:// URL with a host".into());
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err("a URL without ?query or #fragment".into());
    }
    if !u.username().is_empty() || u.password().is_some() {
        // The exporter would not send them: refuse rather than fail every export.
        return Err(
            "a URL without user or password: the exporter does not send them; give \
            credentials as OTEL_EXPORTER_OTLP_HEADERS=authorization=Basic%20<base64>"
                .into(),
        );
    }
    Ok(Some(u.to_string()))
}

/// What the standard OpenTelemetry variables beyond the endpoint say of exporting (read by
/// [`env_switches`]): `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off; orq
/// exports OTLP over HTTP with protobuf only, so another exporter or protocol named is warned
/// about and ignored, as the specification says of values an SDK does not support.
#[derive(Debug, Default, PartialEq)]
pub struct EnvSwitches {
    /// Why traces are not exported although an endpoint is set (the variable and its value).
    pub off: Option<String>,
    /// One line each for values ignored (logged as warnings at start).
    pub ignored: Vec<String>,
}

/// [`EnvSwitches`] from `var` (the process environment in `orq`: `std::env::var(..).ok()`).
pub fn env_switches(var: impl Fn(&str) -> Option<String>) -> EnvSwitches {
    let mut out = EnvSwitches::default();
    let value = |name: &str| {
        var(name)
            .map(|v| v.trim().to_ascii_lowercase())
            .filter(|v| !v.is_empty())
    };
    match value("OTEL_SDK_DISABLED").as_deref() {
        None | Some("false") => {}
        Some("true") => out.off = Some("OTEL_SDK_DISABLED=true".into()),
        Some(other) => out.ignored.push(format!(
            "OTEL_SDK_DISABLED={other:?} is neither true nor false; taken as false"
        )),
    }
    if let Some(exporters) = value("OTEL_TRACES_EXPORTER") {
        let names: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if names.contains(&"none") {
            out.off
                .get_or_insert_with(|| "OTEL_TRACES_EXPORTER=none".into());
        } else if names.iter().any(|n| *n != "otlp") {
            out.ignored.push(format!(
                "OTEL_TRACES_EXPORTER={exporters:?}: orq exports traces with otlp only (or none)"
            ));
        }
    }
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(p) = value(name).filter(|p| p != "http/protobuf") {
            out.ignored.push(format!(
                "{name}={p:?}: orq exports OTLP over http/protobuf only (a collector's HTTP \
                 port, 4318 by default)"
            ));
        }
    }
    out
}

/// `url` with its password, if any, as `***` (for logs).
pub fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// The tracer provider of a process that exports traces (flushed by [`Exporting::shutdown`]).
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Exporting {
    /// Export what is still buffered, then stop (at the end of `main`).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "flushing the traces at exit failed");
        }
    }
}

/// Start exporting to `traces_url` as service `orq-<role>`; the layer that hands
/// [`orq::trace::TARGET`]'s spans to it, and the provider to flush at exit.
pub fn start<S>(
    traces_url: &str,
    role: &str,
) -> Result<(impl tracing_subscriber::Layer<S>, Exporting), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(traces_url)
        .build()
        .map_err(|e| format!("--otlp-endpoint {traces_url}: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(format!("orq-{role}"));
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("orq");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    orq::trace::set_continue(continue_stored);
    // Only orq's own attributes: no source location, thread or busy/idle times per span.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false);
    Ok((layer, Exporting { provider }))
}

/// Make `span` continue the trace of a request's `traceparent` / `tracestate` headers; without
/// them, or with malformed ones, it starts a new trace.
pub fn continue_trace(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if span.is_disabled() {
        return;
    }
    if let Some(parent) = caller_context(headers) {
        let _ = span.set_parent(parent);
    }
}

/// The trace context of a request's headers, `None` unless it has exactly one `traceparent`
/// header and that is valid by W3C Trace Context ([`orq::trace::valid_traceparent`]: the SDK's
/// propagator alone would take some malformed ones, with other ids). Several `tracestate`
/// headers are one list, in their order, as the specification says.
fn caller_context(headers: &axum::http::HeaderMap) -> Option<opentelemetry::Context> {
    let mut parents = headers.get_all("traceparent").iter();
    let (Some(parent), None) = (parents.next(), parents.next()) else {
        return None;
    };
    let parent = parent.to_str().ok()?;
    if !orq::trace::valid_traceparent(parent) {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_string(), parent.to_string());
    let states: Vec<&str> = headers
        .get_all("tracestate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if !states.is_empty() {
        carrier.insert("tracestate".to_string(), states.join(","));
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// The trace context a submit stores with its tasks ([`orq::trace::TraceContext`]): that of
/// `span` (the `orq.submit` span, which [`continue_trace`] made a child of the caller's) when this
/// process exports traces, else the caller's own `traceparent` / `tracestate`, so that a worker
/// that exports continues the caller's trace; `None` when there is neither (or the caller's is
/// malformed).
pub fn submitted_context(
    span: &tracing::Span,
    headers: &axum::http::HeaderMap,
) -> Option<orq::trace::TraceContext> {
    let propagator = TraceContextPropagator::new();
    let cx = if span.is_disabled() {
        caller_context(headers)?
    } else {
        span.context()
    };
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut out = std::collections::HashMap::new();
    propagator.inject_context(&cx, &mut out);
    orq::trace::TraceContext::parse(
        out.get("traceparent")?,
        out.get("tracestate").map(String::as_str),
    )
}

/// Make a task's `orq.task` span continue the trace context stored with the task (installed as
/// [`orq::trace::set_continue`] by [`start`]).
fn continue_stored(span: &tracing::Span, stored: &orq::trace::TraceContext) {
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_string(), stored.traceparent().to_string());
    if let Some(state) = stored.tracestate() {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    let parent = TraceContextPropagator::new().extract(&carrier);
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// The `traceparent` / `tracestate` headers for an outgoing request made on behalf of a task:
/// the current span's when this process exports traces; else the task's `stored` context passed
/// on unchanged (W3C Trace Context asks a participant that does not trace to forward what it
/// got); empty when neither is there. An empty `tracestate` is left out, and so is each header
/// for which `keep(name)` is false (a header the request sets itself).
pub fn outgoing_headers(
    stored: Option<&orq::TraceContext>,
    keep: impl Fn(&str) -> bool,
) -> axum::http::HeaderMap {
    let mut headers = axum::http::HeaderMap::new();
    let cx = tracing::Span::current().context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new()
            .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(&mut headers));
    } else if let Some(stored) = stored {
        let pairs = [
            ("traceparent", Some(stored.traceparent())),
            ("tracestate", stored.tracestate()),
        ];
        for (name, value) in pairs {
            // A stored context is printable ASCII (`TraceContext::parse`): always a header value.
            if let Some(v) = value.and_then(|v| axum::http::HeaderValue::from_str(v).ok()) {
                headers.insert(name, v);
            }
        }
    }
    let names: Vec<_> = headers.keys().cloned().collect();
    for name in names {
        let empty = headers.get(&name).is_some_and(|v| v.is_empty());
        if empty || !keep(name.as_str()) {
            headers.remove(&name);
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_collector_base_url() {
        let url = |s: &str| parse_endpoint(s).unwrap();
        assert_eq!(
            url("http://127.0.0.1:4318").as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            url("https://otel.example/v1/traces").as_deref(),
            Some("https://otel.example/v1/traces")
        );
        assert_eq!(
            url("http://c:4318/otlp/").as_deref(),
            Some("http://c:4318/otlp/v1/traces")
        );
        assert_eq!(url(""), None, "empty is unset");
        let traces = |s: &str| parse_traces_endpoint(s).unwrap();
        assert_eq!(
            traces("http://c:4318/custom/path").as_deref(),
            Some("http://c:4318/custom/path"),
            "a traces endpoint is used as given"
        );
        assert!(parse_traces_endpoint("http://c/?x=1").is_err());
        let args = |e: Option<&str>, t: Option<&str>| OtlpArgs {
            otlp_endpoint: e.map(|e| checked_endpoint(e).unwrap()),
            otlp_traces_endpoint: t.map(|t| checked_traces_endpoint(t).unwrap()),
        };
        assert_eq!(
            args(Some("http://a:4318"), Some("http://b/t")).traces_url(),
            Ok(Some("http://b/t")),
            "the traces endpoint wins"
        );
        assert_eq!(
            args(Some("http://a:4318"), Some("")).traces_url(),
            Ok(Some("http://a:4318/v1/traces")),
            "an empty traces endpoint is unset"
        );
        assert_eq!(args(None, None).traces_url(), Ok(None));
        let bad = args(Some("collector:4317"), None).traces_url().unwrap_err();
        assert!(
            bad.starts_with(
                "--otlp-endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): invalid value 'collector:4317': \
                 an http://"
            ),
            "{bad}"
        );
        assert_eq!(
            args(Some("collector:4317"), Some("http://b/t")).traces_url(),
            Ok(Some("http://b/t")),
            "the base endpoint is not used, so not checked"
        );
        assert!(parse_traces_endpoint("http://u:p@c/t").is_err());
        assert_eq!(
            shown("http://u:secret@c:4318/v1/traces"),
            "http://u:***@c:4318/v1/traces"
        );
        for bad in [
            "http://u:secret@c:4318",
            "http://u@c:4318",
            "localhost:4318",
            "ftp://c/",
            "http://",
            "http://c:4318/?x=1",
            "http://c/#f",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad:?}");
        }
    }

    // Goal: the standard switches turn exporting off; values orq cannot honour are named, not
    // silently taken.
    #[test]
    fn the_standard_variables_switch_exporting_off_or_are_named() {
        let switches = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            env_switches(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        };
        assert_eq!(switches(&[]), EnvSwitches::default());
        assert_eq!(
            switches(&[("OTEL_SDK_DISABLED", "TRUE")]).off.as_deref(),
            Some("OTEL_SDK_DISABLED=true")
        );
        assert_eq!(
            switches(&[("OTEL_SDK_DISABLED", "false")]),
            EnvSwitches::default()
        );
        assert_eq!(
            switches(&[("OTEL_SDK_DISABLED", "")]),
            EnvSwitches::default()
        );
        let yes = switches(&[("OTEL_SDK_DISABLED", "yes")]);
        assert_eq!(yes.off, None);
        assert!(yes.ignored[0].contains("\"yes\""), "{:?}", yes.ignored);
        assert_eq!(
            switches(&[("OTEL_TRACES_EXPORTER", "none")]).off.as_deref(),
            Some("OTEL_TRACES_EXPORTER=none")
        );
        assert_eq!(
            switches(&[("OTEL_TRACES_EXPORTER", "otlp")]),
            EnvSwitches::default()
        );
        let zipkin = switches(&[("OTEL_TRACES_EXPORTER", "zipkin")]);
        assert_eq!(zipkin.off, None);
        assert_eq!(zipkin.ignored.len(), 1, "{:?}", zipkin.ignored);
        assert_eq!(
            switches(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]),
            EnvSwitches::default()
        );
        let grpc = switches(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")]);
        assert!(
            grpc.ignored[0].contains("http/protobuf only"),
            "{:?}",
            grpc.ignored
        );
    }

    // Goal: only one valid traceparent header makes a caller's context (a new user's try found
    // malformed ones taken with other ids, and a second header ignored); several tracestate
    // headers are one list.
    #[test]
    fn a_callers_context_needs_one_valid_traceparent() {
        use axum::http::HeaderMap;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let with = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, v.parse().unwrap());
            }
            caller_context(&h)
        };
        let cx = with(&[
            ("traceparent", tp),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
        ])
        .expect("a valid context");
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.trace_state().header(), "a=1,b=2");
        for bad in [
            vec![],
            vec![("tracestate", "a=1")],
            vec![("traceparent", tp), ("traceparent", tp)],
            vec![(
                "traceparent",
                "00-1234567890123456789012345678901-00f067aa0ba902b7-01",
            )],
            vec![(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            )],
            vec![("traceparent", "00-5-7-01")],
        ] {
            assert!(with(&bad).is_none(), "{bad:?}");
        }
    }
}
