//! `orq config print ROLE`: a role's effective configuration as a config file, each value with
//! where it came from, secrets redacted.

use super::merge::{Merged, CONFIG_ID};
use clap::builder::ValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command};

use orq::redact::{redacted, REDACTED};

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
        .map(|v| v.map(|w| redacted(&w.to_string_lossy())).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_valid_toml() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
    }
}
