//! The store wrapper that counts a run's script calls (`script_calls` in the report).

use orq::resp::Resp;
use orq::{Store, StoreError};
use orq_lua::Script;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A store that counts the script calls going through it, in all and by script.
pub struct CountingStore {
    inner: Arc<dyn Store>,
    calls: AtomicU64,
    by_script: Mutex<BTreeMap<&'static str, u64>>,
}

impl CountingStore {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        CountingStore {
            inner,
            calls: AtomicU64::new(0),
            by_script: Mutex::new(BTreeMap::new()),
        }
    }

    /// Script calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Script calls so far, by script name.
    pub fn calls_by_script(&self) -> BTreeMap<&'static str, u64> {
        self.by_script.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Store for CountingStore {
    async fn eval(
        &self,
        script: &'static Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Resp, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        *self
            .by_script
            .lock()
            .unwrap()
            .entry(script.name)
            .or_insert(0) += 1;
        self.inner.eval(script, keys, args).await
    }

    fn wake(&self, channels: &[String]) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.wake(channels)
    }
}
