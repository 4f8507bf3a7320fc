//! The stored names of a task hash's fields, written once: the engine maps them with
//! `orq::task::stored_name` and `field_of_stored`, and every script gets them as its `F` table,
//! declared on the second line of the source sent to Redis ([`lua_table`]).

/// Declares [`STORED_NAMES`] and the [`stored`] constants from one list, so each stored name is
/// written once.
macro_rules! stored_names {
    ($($name:ident = $stored:literal),* $(,)?) => {
        /// The stored names of a task hash's fields, as `(name, stored name)`: the scripts' `F`
        /// table is generated from them ([`lua_table`]; design note 26). Redis keeps a small hash
        /// as a listpack of its field names and values, so every task pays for its names: the
        /// short ones save about 32 bytes a queued task. Scripts and replies use the stored names
        /// in Redis; the engine's `decode::task` maps them back. A queued task stores no `status`:
        /// an absent `s` in a hash that has `c` reads as queued.
        pub const STORED_NAMES: [(&str, &str); [$($stored),*].len()] = [$((unraw(stringify!($name)), $stored)),*];

        /// Each field's stored name as a constant named after the field (`stored::status` is
        /// `"s"`), for Rust code that reads or writes a task hash by name.
        #[allow(non_upper_case_globals)]
        pub mod stored {
            $(
                #[doc = concat!("The stored name of the field `", stringify!($name), "`.")]
                pub const $name: &str = $stored;
            )*
        }
    };
}

/// A field name as written in [`stored_names!`], without the `r#` of a raw identifier (`type`).
const fn unraw(name: &'static str) -> &'static str {
    match name.as_bytes() {
        [b'r', b'#', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(bare) => bare,
            Err(_) => panic!("a field name is ASCII"),
        },
        _ => name,
    }
}

stored_names! {
    status = "s",
    tenant = "t",
    r#type = "y",
    payload = "p",
    created_at = "c",
    updated_at = "u",
    run_at = "r",
    priority = "pr",
    attempt = "a",
    epoch = "e",
    token = "k",
    worker = "w",
    lease_exp = "x",
    hb_at = "hb",
    outcome = "o",
    last_error = "le",
    finished_at = "f",
    result = "rs",
    history = "hi",
    idem = "i",
    timeout_ms = "to",
    max_retries = "mr",
    b_init = "bi",
    b_mult = "bm",
    b_max = "bx",
    b_jitter = "bj",
    lease_ms = "l",
    replays = "rn",
    trace = "tc",
}

/// The line that declares the stored names to a script, `local F = {status = 's', ...}` (no
/// newline).
pub fn lua_table() -> String {
    let fields: Vec<String> = STORED_NAMES
        .iter()
        .map(|(name, stored)| format!("{name} = '{stored}'"))
        .collect();
    format!("local F = {{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    // Goal: no lib file defines `F` itself (the generated line does), and the line names
    // every field once.
    #[test]
    fn f_is_generated_not_written() {
        assert!(!crate::LIB_FILES
            .iter()
            .any(|f| f.source.contains("local F = {")));
        let line = super::lua_table();
        for (name, stored) in super::STORED_NAMES {
            assert_eq!(
                line.matches(&format!(" {name} = '{stored}'")).count()
                    + line.matches(&format!("{{{name} = '{stored}'")).count(),
                1,
                "{line}"
            );
        }
    }
}
