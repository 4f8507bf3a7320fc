//! Per-key caps on what one API key may hold open at once (event streams, waiting lease calls),
//! below the process's global caps: without them one tenant key could open every event stream
//! slot (256) and leave every other key, the admin's too, with a 503.
//!
//! A slot is taken for the life of a request or stream and given back when its [`KeySlot`] is
//! dropped. Requests without a key (authentication off: every request is the one anonymous
//! admin) are not counted per key; only the global caps apply to them.

use crate::auth::Caller;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most event streams (`GET /api/v1/events`) one API key holds open at once in one API process,
/// a tenth of the global [`crate::live::SSE_CLIENTS_MAX`]: a dashboard tab holds one.
pub const SSE_CLIENTS_PER_KEY_MAX: usize = 24;
/// Most lease calls (`POST /api/v1/leases`) one API key has waiting for work at once in one API
/// process; beyond, a lease call with `wait_ms` is answered 429 with `Retry-After`. One HTTP
/// worker process waits in one call at a time (the Python and TypeScript workers do), so this is
/// the number of worker processes one key can serve through one API process.
pub const LEASE_WAITS_PER_KEY_MAX: usize = 256;

/// Counts of slots held per key name, capped at `max` each. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct KeySlots {
    max: usize,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// One slot of a key, given back when dropped.
#[derive(Debug)]
pub struct KeySlot {
    /// The key's name; `None` for an uncounted (keyless) caller.
    key: Option<String>,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl KeySlots {
    /// Slots of at most `max` per key.
    ///
    /// # Panics
    /// When `max` is 0 (no key could ever hold one).
    pub fn new(max: usize) -> Self {
        assert!(max > 0, "a per-key cap of 0 refuses every key");
        KeySlots {
            max,
            held: Arc::default(),
        }
    }

    /// The cap per key.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A slot for `caller`'s key, or `None` when it holds [`KeySlots::max`] already. A caller
    /// without a key (authentication off) always gets one, uncounted.
    pub fn take(&self, caller: &Caller) -> Option<KeySlot> {
        let Some(name) = &caller.name else {
            return Some(KeySlot {
                key: None,
                held: self.held.clone(),
            });
        };
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(name.clone()).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(KeySlot {
            key: Some(name.clone()),
            held: self.held.clone(),
        })
    }

    /// Slots `name` holds now.
    pub fn held_by(&self, name: &str) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(name).copied().unwrap_or(0)
    }
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let Some(key) = &self.key else { return };
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(key) {
            assert!(*n > 0, "a key's slot count is never below its live slots");
            *n -= 1;
            if *n == 0 {
                held.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;

    fn tenant_key(name: &str) -> Caller {
        Caller {
            name: Some(name.into()),
            scope: Scope::Tenant {
                tenant: "acme".into(),
                queues: None,
            },
        }
    }

    // Goal: a key holds at most `max` slots, other keys are unaffected, dropping a slot gives
    // it back, and a keyless caller is never counted.
    #[test]
    fn a_key_holds_at_most_its_cap_and_others_keep_theirs() {
        let slots = KeySlots::new(2);
        let a = tenant_key("a");
        let first = slots.take(&a).expect("first");
        let _second = slots.take(&a).expect("second");
        assert!(slots.take(&a).is_none(), "a third is over the cap");
        assert!(slots.take(&tenant_key("b")).is_some(), "another key");
        drop(first);
        assert_eq!(slots.held_by("a"), 1);
        assert!(slots.take(&a).is_some(), "a dropped slot is given back");
        let anon = Caller::anonymous_admin();
        let many: Vec<_> = (0..10).map(|_| slots.take(&anon).unwrap()).collect();
        assert_eq!(many.len(), 10, "keyless callers are not counted");
        drop(many);
        assert_eq!(slots.held_by("b"), 0, "b's slot was dropped with its guard");
    }
}
