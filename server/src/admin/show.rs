//! How the admin commands print: human tables (comfy-table) by default, the API's own JSON with
//! `--output json`.

use comfy_table::{presets::NOTHING, ContentArrangement, Table};
use serde_json::Value;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Tables for people.
    Table,
    /// The API's JSON answer, pretty-printed (one document per command).
    Json,
}

/// Longest text shown in a table cell (characters); longer text is cut with `…`.
pub const CELL_CHARS_MAX: usize = 60;

/// Print `v` pretty on stdout (`--output json`).
pub fn json(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A table with `header`: plain columns (as `kubectl get` prints), laid out to the terminal's width.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    t
}

/// A JSON value as a cell: strings bare, null as `-`, other values as compact JSON; cut at
/// [`CELL_CHARS_MAX`].
pub fn cell(v: &Value) -> String {
    let s = match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    cut(&s)
}

/// `s` cut at [`CELL_CHARS_MAX`] characters (never inside a character), one line.
pub fn cut(s: &str) -> String {
    let one_line = s.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= CELL_CHARS_MAX {
        return one_line;
    }
    let mut out: String = one_line.chars().take(CELL_CHARS_MAX - 1).collect();
    out.push('…');
    out
}

/// The statuses of a `counts` object, in the API's order.
fn statuses() -> impl Iterator<Item = &'static str> {
    orq::task::Status::ALL.iter().map(|s| s.as_str())
}

/// Tasks (`GET /tasks`, `GET /dlq`) as a table.
pub fn tasks(tasks: &[Value]) -> String {
    let mut t = table(&[
        "ID",
        "QUEUE",
        "TENANT",
        "TYPE",
        "STATUS",
        "ATTEMPT",
        "UPDATED",
        "LAST ERROR",
    ]);
    for task in tasks {
        t.add_row(
            [
                "id",
                "queue",
                "tenant",
                "type",
                "status",
                "attempt",
                "updated_at",
                "last_error",
            ]
            .map(|k| cell(&task[k])),
        );
    }
    t.to_string()
}

/// One task: its fields, then its attempts.
pub fn task(task: &Value) -> String {
    let mut t = table(&["FIELD", "VALUE"]);
    for k in [
        "id",
        "queue",
        "tenant",
        "type",
        "status",
        "attempt",
        "max_retries",
        "priority",
        "created_at",
        "run_at",
        "updated_at",
        "finished_at",
        "replays",
        "idempotency_key",
        "last_error",
        "payload",
        "result",
    ] {
        t.add_row(vec![k.to_string(), cell(&task[k])]);
    }
    // The trace context it was submitted under, when it has one.
    for k in ["traceparent", "tracestate"] {
        if !task[k].is_null() {
            t.add_row(vec![k.to_string(), cell(&task[k])]);
        }
    }
    if let Some(lease) = task["lease"].as_object() {
        for (k, v) in lease {
            t.add_row(vec![format!("lease.{k}"), cell(v)]);
        }
    }
    let mut out = t.to_string();
    let attempts = task["attempts"].as_array().cloned().unwrap_or_default();
    if !attempts.is_empty() {
        let mut a = table(&["ATTEMPT", "AT", "WORKER", "OUTCOME", "ERROR"]);
        for at in &attempts {
            a.add_row(["attempt", "at", "worker", "outcome", "error"].map(|k| cell(&at[k])));
        }
        out.push('\n');
        out.push_str(&a.to_string());
    }
    out
}

/// Queues (`GET /queues`) as a table: name, paused, counts per status.
pub fn queues(queues: &[Value]) -> String {
    let mut header = vec!["QUEUE", "PAUSED"];
    let upper: Vec<String> = statuses().map(str::to_uppercase).collect();
    header.extend(upper.iter().map(String::as_str));
    let mut t = table(&header);
    for q in queues {
        let mut row = vec![cell(&q["queue"]), cell(&q["paused"])];
        row.extend(statuses().map(|s| cell(&q["counts"][s])));
        t.add_row(row);
    }
    t.to_string()
}

/// Tenants (entries of `GET /queues/{q}/tenants`) as a table: settings and counts.
pub fn tenants(tenants: &[Value]) -> String {
    let mut t = table(&[
        "TENANT",
        "WEIGHT",
        "MAX INFLIGHT",
        "MAX QUEUED",
        "RATE/S",
        "BURST",
        "QUEUED",
        "LEASED",
        "DEAD",
        "HELD",
    ]);
    for e in tenants {
        let held = match &e["held"] {
            Value::Null => "-".to_string(),
            h => cell(&h["by"]),
        };
        t.add_row(vec![
            cell(&e["tenant"]),
            cell(&e["weight"]),
            cell(&e["max_inflight"]),
            cell(&e["max_queued"]),
            cell(&e["rate_per_s"]),
            cell(&e["burst"]),
            cell(&e["counts"]["queued"]),
            cell(&e["counts"]["leased"]),
            cell(&e["counts"]["dead"]),
            held,
        ]);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_are_one_bounded_line() {
        assert_eq!(cell(&json!(null)), "-");
        assert_eq!(cell(&json!("a\nb")), "a b");
        assert_eq!(cell(&json!({"k": 1})), "{\"k\":1}");
        let long = "é".repeat(100);
        let c = cell(&json!(long));
        assert_eq!(c.chars().count(), CELL_CHARS_MAX);
        assert!(c.ends_with('…'));
    }
}
