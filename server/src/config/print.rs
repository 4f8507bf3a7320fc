//! `orq config print ROLE`: a role's effective configuration as a config file, each value with
//! where it came from, secrets redacted.

use super::merge::{Merged, CONFIG_ID};
use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command};

/// What stands for a redacted secret.
pub const REDACTED: &str = "***";

/// The effective configuration of `merged`'s role (a role of `cli`) as TOML: one
/// `key = value  # source` line per option set by a flag, an environment variable or the file
/// (source: `flag`, `$ENV_VAR` or `FILE:LINE`), a comment line `# key = value  # default` for
/// each option left at its default (so that the output, used as a config file, sets what was
/// set and nothing more), `# key: not set` for each option without a value, and a comment for
/// each file key the role ignores. Passwords in URLs are shown as [`REDACTED`].
pub fn render(cli: &Command, merged: &Merged) -> String {
    let role = merged.role.as_deref().expect("a role");
    let cmd = cli.find_subcommand(role).expect("a role");
    let (_, sub) = merged.matches.subcommand().expect("a role");
    let mut out = format!(
        "# orq {role}: the effective configuration; a flag wins over its environment variable, \
         which wins over the config file ({}), which wins over the default.\n\
         # Passwords in URLs are shown as {REDACTED}.\n",
        merged
            .file
            .as_ref()
            .map_or("none".to_string(), |p| p.display().to_string())
    );
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(key) = arg.get_long() else { continue };
        if key == "help" || id == CONFIG_ID || arg.is_hide_set() {
            continue;
        }
        let source = match merged.from_file.iter().find(|f| f.id == id) {
            Some(f) => f.at.clone(),
            None => match sub.value_source(id) {
                Some(ValueSource::CommandLine) => "flag".to_string(),
                Some(ValueSource::EnvVariable) => format!(
                    "${}",
                    arg.get_env()
                        .map(|e| e.to_string_lossy())
                        .unwrap_or_default()
                ),
                Some(ValueSource::DefaultValue) => {
                    out.push_str(&format!("# {key} = {}  # default\n", value(arg, sub, id)));
                    continue;
                }
                _ => {
                    let env = arg
                        .get_env()
                        .map(|e| format!(", environment variable {}", e.to_string_lossy()))
                        .unwrap_or_default();
                    out.push_str(&format!("# {key}: not set (flag --{key}{env})\n"));
                    continue;
                }
            },
        };
        out.push_str(&format!("{key} = {}  # {source}\n", value(arg, sub, id)));
    }
    for (key, at) in &merged.ignored {
        out.push_str(&format!(
            "# {key} ({at}): not an option of orq {role}; other roles read it\n"
        ));
    }
    out
}

/// The TOML text of option `id`'s value: a boolean for a switch, an array for an option of
/// many values, an integer when the option parses numbers, else a string.
fn value(arg: &Arg, sub: &clap::ArgMatches, id: &str) -> String {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return sub.get_flag(id).to_string();
    }
    let words: Vec<String> = sub
        .get_raw(id)
        .map(|v| v.map(|w| redact(&w.to_string_lossy())).collect())
        .unwrap_or_default();
    let textual = [
        ValueParser::string(),
        ValueParser::path_buf(),
        ValueParser::os_string(),
    ]
    .iter()
    .any(|p| p.type_id() == arg.get_value_parser().type_id());
    let one = |w: &String| {
        if !textual && w.parse::<i64>().is_ok() {
            w.clone()
        } else {
            toml_string(w)
        }
    };
    let many = arg.get_value_delimiter().is_some() || matches!(arg.get_action(), ArgAction::Append);
    if many {
        format!("[{}]", words.iter().map(one).collect::<Vec<_>>().join(", "))
    } else {
        words.first().map(one).unwrap_or_else(|| "\"\"".into())
    }
}

/// A TOML basic string of `s`.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `word` with the passwords of a URL replaced by [`REDACTED`]: the password of each host's
/// user information (`scheme://user:PASSWORD@host`, and every `user:PASSWORD@host` of a
/// comma-separated host list) and the value of a `password`, `pass`, `pwd`, `secret` or `token`
/// query parameter. A word that holds no URL is kept.
pub fn redact(word: &str) -> String {
    let Some(scheme_end) = word.find("://") else {
        return word.to_string();
    };
    let (head, rest) = word.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let hosts: Vec<String> = authority
        .split(',')
        .map(|h| match h.rfind('@') {
            Some(at) => match h[..at].find(':') {
                Some(colon) => format!("{}{REDACTED}{}", &h[..colon + 1], &h[at..]),
                None => h.to_string(),
            },
            None => h.to_string(),
        })
        .collect();
    format!("{head}{}{}", hosts.join(","), redact_query(tail))
}

/// The query parameters named like secrets in `tail` (a URL's path, query and fragment) with
/// their values replaced by [`REDACTED`].
fn redact_query(tail: &str) -> String {
    let Some(q) = tail.find('?') else {
        return tail.to_string();
    };
    let (path, query) = tail.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(f) => query.split_at(f),
        None => (query, ""),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _))
                if ["password", "pass", "pwd", "secret", "token"]
                    .contains(&k.to_ascii_lowercase().as_str()) =>
            {
                format!("{k}={REDACTED}")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{path}{}{fragment}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a password never reaches the printed configuration, whatever the URL's shape; a
    // word that holds none is kept as it is.
    #[test]
    fn passwords_in_urls_are_redacted() {
        for (word, want) in [
            ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://app:p@ss:w@h:1/", "redis://app:***@h:1/"),
            (
                "redis+cluster://u:x@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
            (
                "redis+sentinel://:pw@s1:26379,s2:26379/main",
                "redis+sentinel://:***@s1:26379,s2:26379/main",
            ),
            ("redis://h:6379/", "redis://h:6379/"),
            ("redis://user@h:6379/", "redis://user@h:6379/"),
            (
                "https://hooks.example/api/?a=b@c",
                "https://hooks.example/api/?a=b@c",
            ),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            (
                "redis+cluster://u:pw@h1:1,u:pw2@h2:2/0",
                "redis+cluster://u:***@h1:1,u:***@h2:2/0",
            ),
            (
                "redis://h:1/?password=s3cret&db=2",
                "redis://h:1/?password=***&db=2",
            ),
            ("redis://h:1/0?Token=x#frag", "redis://h:1/0?Token=***#frag"),
            (
                "error sending request for url (http://a:b@h:1/api/v1/x)",
                "error sending request for url (http://a:***@h:1/api/v1/x)",
            ),
        ] {
            assert_eq!(redact(word), want, "{word}");
        }
    }

    #[test]
    fn strings_are_valid_toml() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
    }
}
