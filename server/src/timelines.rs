//! Simulation timelines for the dashboard's replay view: `GET /api/v1/timelines` lists the
//! `.jsonl` / `.json` files of the directory given with `--timelines DIR`, and
//! `GET /api/v1/timelines/{name}` answers one of them (format: `docs/timeline.md`).

use crate::api::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::NoQuery;
use crate::openapi_errors::{FileErrors, QueueLookupErrors};
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::path::Path as FsPath;
use std::time::UNIX_EPOCH;
use tokio::io::AsyncReadExt;
use tokio_util::io::ReaderStream;
use utoipa::ToSchema;

/// Most files `GET /timelines` lists (the first ones by name).
pub const LIST_MAX: usize = 1000;

/// Most directory entries one listing examines (bounds the work on a huge directory).
pub const SCAN_MAX: usize = 100_000;

/// Largest timeline served (bytes); a larger file answers 413.
pub const FILE_MAX_BYTES: u64 = 64 << 20;

/// Longest timeline file name (bytes).
pub const NAME_MAX: usize = 128;

/// True when `name` can name a timeline: `[A-Za-z0-9._-]{1,128}`, no `..`, ending in `.jsonl`
/// or `.json`. Such a name has no path separator, so it stays inside the directory.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.contains("..")
        && (name.ends_with(".jsonl") || name.ends_with(".json"))
}

fn disabled() -> ApiError {
    ApiError::not_found("timelines are not enabled: start orq with --timelines DIR")
}

/// `GET /api/v1/timelines` →
/// `{"timelines": [{"name": "seed-42.jsonl", "bytes": 123, "modified_ms": 1700000000000}]}`:
/// the regular files (not symlinks) directly in the timelines directory whose names are valid
/// ([`is_valid_name`]), sorted by name, at most [`LIST_MAX`]; `modified_ms` is the file's
/// modification time in ms since the Unix epoch. 404 `not_found` without `--timelines`; 403 for
/// a tenant key (timelines are operators' files).
#[utoipa::path(
    get,
    path = "/api/v1/timelines",
    tag = "timelines",
    operation_id = "list_timelines",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The timeline files, by name.", body = TimelinesJson),
        QueueLookupErrors,
    ),
)]
pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> Result<Response, ApiError> {
    caller.require_admin("the timelines")?;
    let dir = s.timelines.clone().ok_or_else(disabled)?;
    let mut rd = tokio::fs::read_dir(dir.as_path()).await.map_err(|e| {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot read the timelines directory");
        ApiError::new(
            crate::error::ErrorCode::Unavailable,
            "the timelines directory cannot be read",
        )
    })?;
    let mut files = Vec::new();
    for _ in 0..SCAN_MAX {
        let Ok(Some(entry)) = rd.next_entry().await else {
            break;
        };
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !is_valid_name(&name) {
            continue;
        }
        // `DirEntry::metadata` does not follow symlinks: a link is not listed.
        let Ok(meta) = entry.metadata().await else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let modified_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        files.push((name, meta.len(), modified_ms));
    }
    files.sort();
    files.truncate(LIST_MAX);
    let timelines: Vec<_> = files
        .into_iter()
        .map(|(name, bytes, modified_ms)| TimelineFileJson {
            name,
            bytes,
            modified_ms,
        })
        .collect();
    Ok(Json(TimelinesJson { timelines }).into_response())
}

/// `GET /timelines`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TimelineList)]
pub struct TimelinesJson {
    /// The files, by name.
    pub timelines: Vec<TimelineFileJson>,
}

/// One file of [`TimelinesJson`].
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TimelineFile)]
pub struct TimelineFileJson {
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time (ms since the Unix epoch).
    pub modified_ms: u64,
}

/// The `{name}` of `GET /timelines/{name}`.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TimelineName {
    /// `[A-Za-z0-9._-]{1,128}`, ending in `.jsonl` or `.json`, without `..`.
    #[param(pattern = "^[A-Za-z0-9._-]{0,123}\\.jsonl?$")]
    pub name: String,
}

/// `GET /api/v1/timelines/{name}` → the file's bytes, `Content-Type: application/x-ndjson`
/// (`application/json` for a `.json` file). 404 `not_found` for an invalid name
/// ([`is_valid_name`]), a missing file, a symlink or without `--timelines`; 413
/// `payload_too_large` above [`FILE_MAX_BYTES`]; 403 for a tenant key.
#[utoipa::path(
    get,
    path = "/api/v1/timelines/{name}",
    tag = "timelines",
    operation_id = "get_timeline",
    security(("bearer" = [])),
    params(TimelineName),
    responses(
        (
            status = 200,
            description = "The file's bytes (format: docs/timeline.md).",
            content(
                (String = "application/x-ndjson"),
                (serde_json::Value = "application/json"),
            ),
        ),
        FileErrors,
    ),
)]
pub async fn get(
    State(s): State<AppState>,
    caller: Caller,
    _: NoQuery,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    caller.require_admin("the timelines")?;
    let dir = s.timelines.clone().ok_or_else(disabled)?;
    let unknown = || {
        ApiError::not_found(
            "no such timeline (names match [A-Za-z0-9._-]{1,128} and end in .jsonl or .json)",
        )
    };
    let name = path.map(|Path(n)| n).map_err(|_| unknown())?;
    if !is_valid_name(&name) {
        return Err(unknown());
    }
    let file_path = dir.join(&name);
    let meta = tokio::fs::symlink_metadata(&file_path)
        .await
        .map_err(|_| unknown())?;
    if !meta.is_file() {
        return Err(unknown());
    }
    check_size(&file_path, meta.len())?;
    let file = tokio::fs::File::open(&file_path)
        .await
        .map_err(|_| unknown())?;
    // `take` keeps the cap even when the file grows after the size check.
    let body = Body::from_stream(ReaderStream::new(file.take(FILE_MAX_BYTES)));
    let content_type = if name.ends_with(".jsonl") {
        "application/x-ndjson"
    } else {
        "application/json"
    };
    Ok((
        [(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-cache")],
        body,
    )
        .into_response())
}

fn check_size(path: &FsPath, bytes: u64) -> Result<(), ApiError> {
    if bytes > FILE_MAX_BYTES {
        tracing::info!(path = %path.display(), bytes, "timeline too large to serve");
        return Err(ApiError::too_large(format!(
            "timeline: {bytes} bytes, larger than the {FILE_MAX_BYTES} bytes served"
        )));
    }
    Ok(())
}
