//! Rebuild `orq-server` when the dashboard's static export (`../dashboard/out`) changes, so a
//! release build embeds the dashboard as it is now (`src/dashboard_files.rs`). rust-embed's
//! derive tracks the files it embedded (`include_bytes!`) but not files added or removed later,
//! nor the export appearing after a build without it.
//!
//! Cargo treats a missing `rerun-if-changed` path as always stale (it would rebuild every time),
//! so while the export is missing this watches `../dashboard` instead: `npm run build` creates
//! `out/` in it.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if Path::new("../dashboard/out").exists() {
        println!("cargo:rerun-if-changed=../dashboard/out");
    } else if Path::new("../dashboard").exists() {
        println!("cargo:rerun-if-changed=../dashboard");
    }
}
