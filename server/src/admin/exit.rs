//! The exit codes of the admin commands (`orq tasks`, `dlq`, `queues`, `tenants`), the one list
//! scripts can rely on, and the error that carries one.

/// Why an admin command ended, as its process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Exit {
    /// Done.
    Ok = 0,
    /// The API refused the request (a 4xx other than those below: invalid input, a conflict, a
    /// rate limit).
    Refused = 1,
    /// Bad command line (clap's own code).
    Usage = 2,
    /// What was named does not exist (404).
    NotFound = 3,
    /// No key, a wrong key, or a key without the right (401, 403).
    Denied = 4,
    /// orq could not be reached or could not answer: connection refused, timeout, 503 (the store
    /// refuses calls), any 5xx. Trying again later may succeed.
    Unavailable = 5,
    /// The command ran but did not finish its work: a drain that timed out with tasks left, a
    /// bulk replay or purge that stopped before the end.
    Incomplete = 6,
}

impl Exit {
    /// Every code, in order, for `--help` and the tests.
    pub const ALL: [Exit; 7] = [
        Exit::Ok,
        Exit::Refused,
        Exit::Usage,
        Exit::NotFound,
        Exit::Denied,
        Exit::Unavailable,
        Exit::Incomplete,
    ];

    /// The process exit code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// What the code means, one line.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "done",
            Exit::Refused => "the API refused the request (invalid input, conflict, rate limit)",
            Exit::Usage => "bad command line",
            Exit::NotFound => "not found",
            Exit::Denied => "no key, a wrong key, or a key without the right",
            Exit::Unavailable => "orq unreachable or unavailable (try again later)",
            Exit::Incomplete => {
                "stopped before the end (drain timed out, bulk operation cut short)"
            }
        }
    }

    /// The code an HTTP error status maps to.
    pub fn of_status(status: u16) -> Exit {
        match status {
            404 => Exit::NotFound,
            401 | 403 => Exit::Denied,
            408 | 429 => Exit::Refused,
            s if s >= 500 => Exit::Unavailable,
            _ => Exit::Refused,
        }
    }
}

/// The `after_help` of the admin commands: every exit code and its meaning.
pub fn codes_help() -> String {
    let mut s = String::from("Exit codes:\n");
    for e in Exit::ALL {
        s.push_str(&format!("  {}  {}\n", e.code(), e.meaning()));
    }
    s.push_str(
        "Errors are printed on stderr as `error: CODE: message (HTTP status)`, CODE being the \
         API's error code.",
    );
    s
}

/// An admin command's failure: its exit code and the message for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// For stderr (without `error: `).
    pub message: String,
    /// What the command still prints on stdout (a partial result: the tasks it did replay, the
    /// tenants it found), before the message.
    pub stdout: Option<String>,
}

impl Failure {
    /// A failure with `exit` and `message`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Failure {
            exit,
            message: message.into(),
            stdout: None,
        }
    }

    /// This failure, printing `text` on stdout first.
    pub fn with_stdout(mut self, text: String) -> Self {
        self.stdout = Some(text);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_codes() {
        for (status, exit) in [
            (400, Exit::Refused),
            (409, Exit::Refused),
            (422, Exit::Refused),
            (429, Exit::Refused),
            (404, Exit::NotFound),
            (401, Exit::Denied),
            (403, Exit::Denied),
            (500, Exit::Unavailable),
            (503, Exit::Unavailable),
        ] {
            assert_eq!(Exit::of_status(status), exit, "{status}");
        }
        let codes: Vec<i32> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, (0..7).collect::<Vec<_>>());
    }
}
