//! Rebuild `orq-server` when what a release build embeds changes: the dashboard's static export
//! (`../dashboard/out`, embedded by `src/dashboard_files.rs`). rust-embed's derive tracks the
//! files it embedded (`include_bytes!`) but not files added or removed later, nor the export
//! appearing after a build without it.
//!
//! Only builds without debug assertions embed the export: with them (debug builds, the tests),
//! rust-embed reads it from disk at each request, so nothing of the dashboard is compiled in and
//! nothing is watched: editing or building the dashboard never recompiles a debug server.
//!
//! Cargo treats a missing `rerun-if-changed` path as always stale (it would rebuild every time),
//! so while the export is missing a release build watches `../dashboard` instead: `npm run build`
//! creates `out/` in it (until then, editing the dashboard's sources reruns this too).

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The condition of rust-embed's reading from disk (`cfg(debug_assertions)`, without its
    // `debug-embed` feature, which orq does not turn on).
    if std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some() {
        return;
    }
    if Path::new("../dashboard/out").exists() {
        println!("cargo:rerun-if-changed=../dashboard/out");
    } else if Path::new("../dashboard").exists() {
        println!("cargo:rerun-if-changed=../dashboard");
    }
}
