//! A queue's life: created within a tenant's allowance, deleted when it holds no work (design
//! note 67). Queues are otherwise created implicitly by an admin's (or a trusted client's) first
//! submit ([`Client::register_queue`]).

use super::{arg, call, check_queue, eval, Client};
use crate::decode::{array_at, int_at, items, str_at};
use crate::error::{Error, Result};
use crate::keys::{is_valid_name, CREATORS_KEY, QUEUES_KEY};

/// Most finished tasks (then tenant hashes) one `configure` drop call deletes: a bounded script
/// call, so deleting a big queue does not block Redis for long.
pub const DROP_BOUND: u64 = 1000;
/// Most drop calls one [`Client::delete_queue`] makes (so at most 200,000 finished tasks are
/// deleted with a queue; beyond, it answers [`Deleted::More`] and can be asked again).
pub const DROP_ROUNDS_MAX: u32 = 200;

/// What [`Client::create_queues`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// Every queue existed already.
    Existed {
        /// The queues the tenant has created that exist.
        count: u64,
    },
    /// The queues that did not exist were created, counted against the tenant.
    Created {
        /// How many were new.
        new: u64,
        /// The queues the tenant has created that exist, these included.
        count: u64,
    },
    /// Refused: the new ones would take the tenant past its allowance; none was created.
    Refused {
        /// The queues the tenant has created that exist.
        count: u64,
    },
}

/// Most queue names one [`Client::create_queues`] call takes (a batch's distinct queues).
pub const CREATE_QUEUES_MAX: usize = 1000;

/// What [`Client::delete_queue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The queue is gone: its finished tasks, tenants and keys.
    Deleted {
        /// Finished tasks deleted with it.
        finished: u64,
    },
    /// The queue holds work: nothing was deleted. The counts as its stats hash holds them.
    Busy {
        /// Queued tasks.
        queued: u64,
        /// Scheduled tasks.
        scheduled: u64,
        /// Tasks waiting for a retry.
        retrying: u64,
        /// Leased tasks.
        leased: u64,
        /// Dead tasks (the DLQ).
        dead: u64,
    },
    /// [`DROP_ROUNDS_MAX`] calls deleted finished tasks and more are left; ask again.
    More {
        /// Finished tasks deleted so far.
        finished: u64,
    },
    /// No queue of that name is registered.
    NotFound,
}

impl Client {
    /// Create those of `queues` that do not exist on behalf of `tenant`, whose keys may bring
    /// at most `allowance` queues into existence (counted in [`CREATORS_KEY`] until each is
    /// deleted): all of them, or none when they would take the tenant past its allowance. An
    /// existing queue is not counted again. Errors: `Invalid` (a bad name, none or more than
    /// [`CREATE_QUEUES_MAX`], `allowance` 0), `Unavailable`.
    pub async fn create_queues(
        &self,
        queues: &[&str],
        tenant: &str,
        allowance: u64,
    ) -> Result<Created> {
        let op = "create_queue";
        if queues.is_empty() || queues.len() > CREATE_QUEUES_MAX {
            return Err(Error::invalid(
                op,
                format!("queues: 1 to {CREATE_QUEUES_MAX}"),
            ));
        }
        let mut distinct: Vec<&str> = Vec::with_capacity(queues.len());
        for q in queues {
            check_queue(op, q)?;
            if !distinct.contains(q) {
                distinct.push(q);
            }
        }
        if !is_valid_name(tenant) || allowance == 0 {
            return Err(Error::invalid(
                op,
                "tenant and allowance: a valid name, 1 or more",
            ));
        }
        let mut args = vec![arg("create"), arg(tenant), arg(allowance)];
        args.extend(distinct.iter().map(|q| arg(*q)));
        let reply = eval(
            &*self.store,
            "queues",
            op,
            &[QUEUES_KEY.to_string(), CREATORS_KEY.to_string()],
            &args,
        )
        .await?;
        let it = items(op, &reply, "")?;
        let count = int_at(op, it, 2)?.max(0) as u64;
        let created = match int_at(op, it, 1)? {
            -1 => return Ok(Created::Refused { count }),
            0 => Created::Existed { count },
            n if n > 0 => Created::Created {
                new: n as u64,
                count,
            },
            other => return Err(Error::protocol(op, format!("unknown outcome {other}"))),
        };
        let mut registered = self.registered.lock().unwrap();
        registered.extend(distinct.iter().map(|q| q.to_string()));
        Ok(created)
    }

    /// Delete `queue` when it holds no queued, scheduled, retrying, leased or dead task: its
    /// finished tasks, tenants' settings and keys go, and it leaves the registry. Safe against
    /// a submit racing it: the name leaves the registry first, and the queue's keys go only if
    /// no work arrived meanwhile (else the name is put back and the answer is
    /// [`Deleted::Busy`]); a submit after the keys went finds the queue new and records it
    /// again. Errors: `Invalid`, `Unavailable` (the name may then be out of the registry while
    /// the queue still exists: asking again finishes or undoes it).
    pub async fn delete_queue(&self, queue: &str) -> Result<Deleted> {
        let op = "delete_queue";
        check_queue(op, queue)?;
        // Out of the registry first (design note 67 has the race this order closes). A name
        // that was not there is a queue that does not exist, unless an earlier delete stopped
        // half-way (its name out, its keys still there): the drop calls below finish that one.
        let (was_registered, creator) = self.unregister_queue(queue).await?;
        self.registered.lock().unwrap().remove(queue);
        let mut finished = 0u64;
        for round in 0..DROP_ROUNDS_MAX {
            let reply = call(
                &*self.store,
                "configure",
                queue,
                vec![arg("drop"), arg(DROP_BOUND)],
            )
            .await;
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    self.reregister(queue, &creator).await;
                    return Err(e);
                }
            };
            let it = match items(op, &reply, "") {
                Ok(it) => it,
                Err(e) => {
                    self.reregister(queue, &creator).await;
                    return Err(e);
                }
            };
            match str_at(op, it, 1)? {
                "dropped" => {
                    finished += int_at(op, it, 2)?.max(0) as u64;
                    if !was_registered && round == 0 && finished == 0 {
                        return Ok(Deleted::NotFound);
                    }
                    return Ok(Deleted::Deleted { finished });
                }
                "more" => finished += int_at(op, it, 2)?.max(0) as u64,
                "busy" => {
                    self.reregister(queue, &creator).await;
                    let n = array_at(op, it, 2)?;
                    let at =
                        |i: usize| n.get(i).and_then(|v| v.as_int()).unwrap_or(0).max(0) as u64;
                    return Ok(Deleted::Busy {
                        queued: at(0),
                        scheduled: at(1),
                        retrying: at(2),
                        leased: at(3),
                        dead: at(4),
                    });
                }
                other => return Err(Error::protocol(op, format!("unknown outcome {other}"))),
            }
        }
        // Still finished tasks left after every round: the name goes back in the registry (the
        // queue still exists); asking again deletes the rest.
        self.reregister(queue, &creator).await;
        Ok(Deleted::More { finished })
    }

    /// Take `queue` out of the registry; returns whether it was there and the tenant that
    /// created it ('' for none).
    async fn unregister_queue(&self, queue: &str) -> Result<(bool, String)> {
        let op = "delete_queue";
        let reply = eval(
            &*self.store,
            "queues",
            op,
            &[QUEUES_KEY.to_string(), CREATORS_KEY.to_string()],
            &[arg("remove"), arg(queue)],
        )
        .await?;
        let it = items(op, &reply, "")?;
        Ok((int_at(op, it, 1)? == 1, str_at(op, it, 2)?.to_string()))
    }

    /// Put `queue` back in the registry after a delete that did not finish, counted against
    /// `creator` again when a tenant created it. Best effort: a failure is logged (the next
    /// submit to the queue records it again when its keys are gone; while they are not, asking
    /// for the delete again finishes it).
    async fn reregister(&self, queue: &str, creator: &str) {
        let r = if creator.is_empty() {
            self.register_queue(queue, true).await.map(|_| ())
        } else {
            self.create_queues(&[queue], creator, u64::MAX >> 11)
                .await
                .map(|_| ())
        };
        if let Err(e) = r {
            tracing::warn!(queue, error = %e, "a queue that could not be deleted could not be put back in the registry; ask for the delete again");
        }
    }
}
