//! orq's fuzz targets, as a library so that the targets in `fuzz_targets/` stay one line each and
//! the seed helper (`src/bin/seeds.rs`) can build inputs from the same types.
//!
//! Every input is decoded from libFuzzer's bytes by hand-written `Arbitrary` implementations
//! over a small byte format ([`codec`]): one byte picks a variant, lengths are one byte, numbers
//! are little-endian. The format is ours, not `arbitrary`'s derive layout, so the seed helper can
//! encode meaningful inputs exactly (and checks that each decodes back to itself).
//!
//! - [`scripts`]: sequences of transition-script calls against `orq_model::MemoryStore`, through
//!   the engine's own calls (well formed), with raw ARGV and KEYS, and with planted corrupt state.
//! - [`engine`]: one small simulation (`orq_sim::harness`) with an arbitrary configuration and
//!   fault mix; the verdict must be a pass.
//! - [`http`]: the HTTP request decoders of `orq-server`, and the whole router on an embedded
//!   store: no panic, no 5xx, a JSON error body for every 4xx.

pub mod codec;
pub mod engine;
#[cfg(feature = "http")]
pub mod http;
pub mod scripts;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Run a future that completes without waiting: every store call of the fuzz targets runs on
/// `MemoryStore`, whose calls finish when first polled.
///
/// # Panics
/// When the future is still pending after one poll (it waited on a timer or a channel).
pub fn ready<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a MemoryStore call did not complete at once"),
    }
}
