//! A task's attempts as records. The store keeps a task's ended attempts compactly, as lines of
//! `<attempt> <time ms> <worker> <outcome> <error>` in one hash field (written by `add_history`
//! in `lua/scripts/lib/task.lua`, for each failed or expired attempt, at most 20 kept); readers
//! get them as [`Attempt`]s, with a completed task's successful attempt added from its fields
//! (the completion writes no line: it would cost every task a write for what the task's
//! `attempt`, `worker` and `finished_at` already say).

use serde::{Deserialize, Serialize};

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The handler reported a failure (`fail`), or its timeout ran out.
    Failed,
    /// The lease expired without an outcome (the worker crashed, hung or lost the store); the
    /// scheduler's reaper ended it.
    Expired,
    /// The handler succeeded.
    Completed,
}

impl AttemptOutcome {
    /// Every outcome.
    pub const ALL: [AttemptOutcome; 3] = [
        AttemptOutcome::Failed,
        AttemptOutcome::Expired,
        AttemptOutcome::Completed,
    ];

    /// The word stored in a history line (and the API's `outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Expired => "expired",
            AttemptOutcome::Completed => "completed",
        }
    }

    /// The outcome a stored word names, `None` for another word.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// One attempt of a task: which, when it ended, on which worker, how, and its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The attempt's number in its life (1 first; a replay from the DLQ starts again at 1).
    pub attempt: u32,
    /// When it ended, ms since the Unix epoch.
    pub at_ms: u64,
    /// The worker that ran it (its lease's worker id; `-` when unknown).
    pub worker: String,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The error message (at most 2 KiB), `None` for a completed attempt.
    pub error: Option<String>,
}

impl Attempt {
    /// A stored history line as an attempt. A line that is not one (foreign or corrupt state) is
    /// kept whole as the error of a failed attempt 0 at time 0, so nothing is lost.
    pub fn from_line(line: &str) -> Attempt {
        let mut parts = line.splitn(5, ' ');
        let mut next = || parts.next();
        let parsed = (|| {
            let attempt = next()?.parse().ok()?;
            let at_ms = next()?.parse().ok()?;
            let worker = next()?.to_string();
            let outcome = AttemptOutcome::parse(next()?)?;
            let error = next().unwrap_or_default().to_string();
            Some(Attempt {
                attempt,
                at_ms,
                worker,
                outcome,
                error: Some(error),
            })
        })();
        parsed.unwrap_or_else(|| Attempt {
            attempt: 0,
            at_ms: 0,
            worker: "-".to_string(),
            outcome: AttemptOutcome::Failed,
            error: Some(line.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a stored line reads back field by field, its error keeping its spaces; a line that
    // is not one keeps its text.
    #[test]
    fn a_history_line_reads_as_an_attempt() {
        let a = Attempt::from_line("2 1796176578735 w6726-0b01c6 failed smtp down (attempt 2)");
        assert_eq!(
            a,
            Attempt {
                attempt: 2,
                at_ms: 1_796_176_578_735,
                worker: "w6726-0b01c6".into(),
                outcome: AttemptOutcome::Failed,
                error: Some("smtp down (attempt 2)".into()),
            }
        );
        let e = Attempt::from_line("1 5 w-1 expired lease expired");
        assert_eq!(e.outcome, AttemptOutcome::Expired);
        assert_eq!(e.error.as_deref(), Some("lease expired"));
        let empty = Attempt::from_line("3 7 w failed");
        assert_eq!(empty.error.as_deref(), Some(""));
        let odd = Attempt::from_line("not a line");
        assert_eq!((odd.attempt, odd.outcome), (0, AttemptOutcome::Failed));
        assert_eq!(odd.error.as_deref(), Some("not a line"));
    }
}
