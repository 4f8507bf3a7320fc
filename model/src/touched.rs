//! The keys written since the last look: what an incremental invariant checker re-reads after a
//! call instead of the whole keyspace.

use std::collections::BTreeSet;

/// Keys that may have changed, collected by [`crate::Db`] while tracking is on
/// ([`crate::MemoryStore::track_touched`]). An over-approximation: a key looked up for change but
/// left as it was is listed too; a key that expired (removed by the active expiry of the next
/// command, script or read) is listed; a [`crate::MemoryStore::restore`] sets `all`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Every key may have changed (the data was replaced).
    pub all: bool,
    /// The keys written, in byte order.
    pub keys: BTreeSet<Vec<u8>>,
}

impl Touched {
    /// Note `key` as written (allocates only the first time a key is noted).
    pub(crate) fn note(&mut self, key: &[u8]) {
        if !self.keys.contains(key) {
            self.keys.insert(key.to_vec());
        }
    }
}
