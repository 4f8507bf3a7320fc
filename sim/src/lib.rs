//! orq's simulator: the simulation harness ([`harness`]) that runs the real engine against the
//! in-memory Redis model (`orq-model`'s [`MemoryStore`]) on a virtual clock, its invariant
//! checker, and the `orq-sim` binary.
//!
//! The model itself (the keyspace, the commands, the Lua scripting, [`MemoryStore`]) is the
//! `orq-model` crate, which the product binary links for its embedded store without this crate
//! (design note 41). Its public items are re-exported here, so the harness, the tests in
//! `sim/tests/`, the benches and the fuzz targets name them as `orq_sim::…`.

pub mod harness;

pub use orq_model::{
    crc16, format_g17, key_slot, parse_f64_strict, parse_i64, Db, Dump, DumpData, DumpValue, Hash,
    ManualClock, MemoryStore, Snapshot, StoreClock, Stream, StreamFields, StreamId, Touched, Value,
    WallClock, ZSet, CROSSSLOT, SCRIPT_CROSS_SLOT, SCRIPT_INSTRUCTIONS_MAX, SLOT_COUNT,
};
