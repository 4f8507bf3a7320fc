//! The error codes a script answers with: the first word of its error reply
//! (`redis.error_reply('<CODE> <message>')`), written once. The engine maps each to an error
//! variant (`engine/src/error.rs`, `Error::from_script`); the fuzz targets and the simulator's
//! tests accept exactly these. Every script header's `Errors:` line names the ones it can answer.

/// Every code, in the order the fuzz targets and tests list them.
pub const ERROR_CODES: [&str; 7] = [
    // The task (or its id) does not exist.
    "NOTFOUND",
    // The caller's lease token is not the task's current one: its lease ended.
    "STALE",
    // The task was cancelled while leased: the worker stops its handler.
    "CANCELLED",
    // The task is in a status the call cannot act on (`CONFLICT <status>`).
    "CONFLICT",
    // An argument is missing or out of range (`INVALID <message>`); nothing was written.
    "INVALID",
    // A tenant limit refused the call (`LIMITED <tenant> <limit> retry_after_ms=<n>`).
    "LIMITED",
    // A key holds data of another type or shape than orq writes (`CORRUPT <key> ...`).
    "CORRUPT",
];

#[cfg(test)]
mod tests {
    use super::ERROR_CODES;

    // Goal: the list is exactly the codes the scripts answer with. Method: collect the first
    // word of every literal `error_reply('<WORD>` in the scripts and the lib files; it must equal the
    // list, so a code added on one side alone fails here.
    #[test]
    fn the_codes_are_those_the_scripts_answer_with() {
        let mut found = std::collections::BTreeSet::new();
        let sources = crate::all()
            .iter()
            .map(|s| s.body)
            .chain(crate::LIB_FILES.iter().map(|f| f.source));
        for src in sources {
            for (i, _) in src.match_indices("error_reply('") {
                let rest = &src[i + "error_reply('".len()..];
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase())
                    .collect();
                assert!(
                    !word.is_empty(),
                    "an error_reply without a code: {}",
                    &rest[..20]
                );
                found.insert(word);
            }
        }
        let listed: std::collections::BTreeSet<String> =
            ERROR_CODES.iter().map(|c| c.to_string()).collect();
        assert_eq!(found, listed);
    }
}
