//! Managing tasks and queues: cancel, replay (one, or the DLQ in bulk), purge, queue and tenant
//! settings, and drain.

use super::{
    arg, call, check_queue, BulkReplay, Client, TenantLimits, REPLAY_LIMIT_MAX, REPLAY_SCAN_MAX,
};
use crate::decode::{self, array_at, int_at, items};
use crate::error::{Error, Result};
use crate::keys::is_valid_name;
use crate::resp::Resp;
use crate::task::{Status, Task};

impl Client {
    /// Cancel a task that has not finished. Cancelling a cancelled task returns it unchanged.
    /// Errors: `NotFound`; `Conflict` when it is completed or dead.
    pub async fn cancel(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        let op = "cancel";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg(id)]).await?;
        let it = items(op, &reply, id)?;
        decode::task(op, &found.queue, array_at(op, it, 2)?)
    }

    /// Put a dead task back in its queue with a fresh retry budget.
    /// Errors: `NotFound`; `Conflict` when it is not dead.
    pub async fn replay(&self, queue: Option<&str>, id: &str) -> Result<Task> {
        let op = "replay";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg("ids"), arg(id)]).await?;
        let it = items(op, &reply, id)?;
        let outcome = array_at(op, it, 1)?
            .first()
            .and_then(Resp::as_str)
            .ok_or_else(|| Error::protocol(op, "no per-id result"))?;
        match outcome {
            "replayed" => self.get(Some(&found.queue), id).await,
            "notfound" => Err(Error::NotFound {
                op,
                id: id.to_string(),
            }),
            status => Err(Error::Conflict {
                op,
                status: status.to_string(),
            }),
        }
    }

    /// Replay up to `limit` dead tasks of `queue`, oldest first, optionally only one tenant's or
    /// one type's, examining at most [`REPLAY_SCAN_MAX`] DLQ entries.
    pub async fn replay_bulk(
        &self,
        queue: &str,
        tenant: Option<&str>,
        task_type: Option<&str>,
        limit: u64,
    ) -> Result<BulkReplay> {
        let op = "replay";
        check_queue(op, queue)?;
        for v in [tenant, task_type].into_iter().flatten() {
            if !is_valid_name(v) {
                return Err(Error::invalid(
                    op,
                    "tenant and type: must match [A-Za-z0-9._-]{1,64}",
                ));
            }
        }
        if limit == 0 || limit > REPLAY_LIMIT_MAX {
            return Err(Error::invalid(
                op,
                format!("limit: must be 1..={REPLAY_LIMIT_MAX}"),
            ));
        }
        let args = vec![
            arg("filter"),
            arg(tenant.unwrap_or("")),
            arg(task_type.unwrap_or("")),
            arg(limit),
            arg(REPLAY_SCAN_MAX),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        let it = items(op, &reply, "")?;
        Ok(BulkReplay {
            replayed: int_at(op, it, 1)? as u64,
            more: int_at(op, it, 2)? == 1,
        })
    }

    /// Delete a dead task for good. Errors: `NotFound`; `Conflict` when it is not dead.
    pub async fn purge(&self, queue: Option<&str>, id: &str) -> Result<()> {
        let op = "purge";
        let found = self.locate(op, queue, id).await?;
        let reply = call(&*self.store, op, &found.queue, vec![arg(id)]).await?;
        let it = items(op, &reply, id)?;
        let outcome = array_at(op, it, 1)?
            .first()
            .and_then(Resp::as_str)
            .ok_or_else(|| Error::protocol(op, "no per-id result"))?;
        match outcome {
            "purged" => Ok(()),
            "notfound" => Err(Error::NotFound {
                op,
                id: id.to_string(),
            }),
            status => Err(Error::Conflict {
                op,
                status: status.to_string(),
            }),
        }
    }

    /// Pause (`Some(true)`) or resume (`Some(false)`) leasing in `queue`, and/or set its
    /// starvation bound step (`aging_step_ms`, 0 = strict priority; applies at once, to the
    /// tasks already queued too). Submits, promotion and reaping go on while paused.
    pub async fn configure_queue(
        &self,
        queue: &str,
        paused: Option<bool>,
        aging_step_ms: Option<u64>,
    ) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("queue"),
            arg(match paused {
                Some(true) => "1",
                Some(false) => "0",
                None => "",
            }),
            aging_step_ms.map(arg).unwrap_or_default(),
            Vec::new(),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Set (`Some(json)`, at most 4,096 bytes, validated by the caller) or remove (`None`) the
    /// default task options of `queue`, which submitters apply to the fields a submit leaves out.
    pub async fn set_queue_defaults(&self, queue: &str, defaults: Option<&str>) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        if defaults.is_some_and(|d| d.is_empty() || d == "-") {
            return Err(Error::invalid(op, "defaults: must be a JSON object"));
        }
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("queue"),
            Vec::new(),
            Vec::new(),
            arg(defaults.unwrap_or("-")),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Change one tenant's share and limits in `queue` (see [`TenantLimits`]).
    /// Errors: `Invalid` naming the field.
    pub async fn configure_tenant(
        &self,
        queue: &str,
        tenant: &str,
        l: &TenantLimits,
    ) -> Result<()> {
        let op = "configure";
        check_queue(op, queue)?;
        if !is_valid_name(tenant) {
            return Err(Error::invalid(
                op,
                "tenant: must match [A-Za-z0-9._-]{1,64}",
            ));
        }
        fn field<T: ToString>(v: &Option<Option<T>>) -> Vec<u8> {
            match v {
                None => Vec::new(),
                Some(None) => b"-".to_vec(),
                Some(Some(x)) => x.to_string().into_bytes(),
            }
        }
        self.register_queue(queue, false).await?;
        let args = vec![
            arg("tenant"),
            arg(tenant),
            field(&l.weight),
            field(&l.max_inflight),
            field(&l.max_queued),
            field(&l.rate_per_s),
            field(&l.burst),
        ];
        let reply = call(&*self.store, op, queue, args).await?;
        items(op, &reply, "")?;
        Ok(())
    }

    /// Wait until `queue` has no queued, scheduled, retrying or leased task, polling every
    /// `poll_ms`, for at most `timeout_ms`. Returns the tasks still waiting or running (0 when
    /// drained).
    pub async fn drain(&self, queue: &str, timeout_ms: u64, poll_ms: u64) -> Result<i64> {
        let start = self.clock.now_ms();
        loop {
            let st = self.stats(queue).await?;
            let left: i64 = [
                Status::Queued,
                Status::Scheduled,
                Status::Retrying,
                Status::Leased,
            ]
            .iter()
            .map(|s| st.counts.get(s).copied().unwrap_or(0))
            .sum();
            if left == 0 || self.clock.now_ms().saturating_sub(start) >= timeout_ms {
                return Ok(left);
            }
            self.clock.sleep(poll_ms.max(1)).await;
        }
    }
}
