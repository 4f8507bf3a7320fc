//! The one precedence rule, flag > environment variable > config file > default, left to clap:
//! clap already ranks a flag over its `env` and both over the default, so a file value is handed
//! to clap as a flag (`--key=value`) exactly when clap found neither a flag nor an environment
//! variable for that option. Every key is first checked against the role's own options (the
//! file's keys are the flags' long names, so the command line is the one list of keys), and
//! every value with that option's own clap parser, so a bad one is named by file, line and key.

use super::file::{self, Entry};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// The id of the option that names the config file; a role takes a config file when it has it.
pub const CONFIG_ID: &str = "config";

/// Why the command line could not be read.
#[derive(Debug)]
pub enum Error {
    /// clap's own (a bad flag, `--help`, `--version`): it prints and exits as usual.
    Clap(clap::Error),
    /// The config file is unreadable or holds a bad key or value: the message names the file,
    /// the line and the key (exit code 2).
    Config(String),
}

/// File keys a role ignores (only other roles have them): `(key, FILE:LINE)`.
pub type Ignored = Vec<(String, String)>;

/// One option whose value came from the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromFile {
    /// clap's id of the option (`worker_id`).
    pub id: String,
    /// Its key in the file, the flag's long name (`worker-id`).
    pub key: String,
    /// `FILE:LINE` of the value used.
    pub at: String,
}

/// The command line with the config file's values in place.
#[derive(Debug)]
pub struct Merged {
    /// What clap parsed (flags, environment, file values, defaults).
    pub matches: ArgMatches,
    /// The role run (`worker`), when the command is a role.
    pub role: Option<String>,
    /// The config file read, if any.
    pub file: Option<PathBuf>,
    /// The options the file set.
    pub from_file: Vec<FromFile>,
    /// The file's top-level keys this role has no option for but another role has (`listen`
    /// for `orq worker`): `(key, FILE:LINE)`.
    pub ignored: Ignored,
}

impl Merged {
    /// `message` with ` (set in FILE:LINE)` added when it is about an option the file set (it
    /// starts with `--key`), for checks made after parsing (`--concurrency: must be ...`).
    pub fn annotate(&self, message: String) -> String {
        for f in &self.from_file {
            let flag = format!("--{}", f.key);
            if message.strip_prefix(&flag).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with(':') || rest.starts_with(' ')
            }) {
                return format!("{message} (set in {})", f.at);
            }
        }
        message
    }
}

/// The roles that take a config file: the subcommands with a [`CONFIG_ID`] option.
pub fn roles(cli: &Command) -> Vec<&Command> {
    cli.get_subcommands()
        .filter(|c| c.get_arguments().any(|a| a.get_id() == CONFIG_ID))
        .collect()
}

/// Parse `argv` with `cli`, then, when the role was given a config file (`--config` or its
/// environment variable), parse it again with the file's values for the options that neither a
/// flag nor an environment variable set.
pub fn merge(cli: &Command, argv: Vec<OsString>) -> Result<Merged, Error> {
    let first = cli
        .clone()
        .try_get_matches_from(&argv)
        .map_err(Error::Clap)?;
    let none = |matches, role| Merged {
        matches,
        role,
        file: None,
        from_file: Vec::new(),
        ignored: Vec::new(),
    };
    let Some((role, sub)) = first.subcommand() else {
        return Ok(none(first, None));
    };
    let role = role.to_string();
    let role_cmd = cli.find_subcommand(&role).expect("clap matched it");
    let takes_config = role_cmd.get_arguments().any(|a| a.get_id() == CONFIG_ID);
    let path = takes_config
        .then(|| sub.get_one::<PathBuf>(CONFIG_ID).cloned())
        .flatten();
    let Some(path) = path else {
        return Ok(none(first, Some(role)));
    };
    let parsed = file::read(&path).map_err(Error::Config)?;
    let (entries, ignored) = entries_for(cli, &role, parsed)?;

    let mut tokens = Vec::new();
    let mut from_file = Vec::new();
    for e in &entries {
        let arg = role_cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(e.key.as_str()))
            .expect("entries_for keeps the role's keys");
        let flag = format!("--{}", e.key);
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        check(arg, e, switch).map_err(Error::Config)?;
        let id = arg.get_id().as_str();
        if matches!(
            sub.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        if switch {
            if e.words[0] == "true" {
                tokens.push(OsString::from(flag));
            }
        } else {
            tokens.extend(
                e.words
                    .iter()
                    .map(|w| OsString::from(format!("{flag}={w}"))),
            );
        }
        from_file.push(FromFile {
            id: id.to_string(),
            key: e.key.clone(),
            at: e.at.clone(),
        });
    }
    let matches = if tokens.is_empty() {
        first
    } else {
        let mut argv = argv;
        argv.extend(tokens);
        cli.clone().try_get_matches_from(argv).map_err(|e| {
            Error::Config(format!(
                "with the values of config file {}: {}",
                path.display(),
                first_line(&e)
            ))
        })?
    };
    Ok(Merged {
        matches,
        role: Some(role),
        file: Some(path),
        from_file,
        ignored,
    })
}

/// The entries that apply to `role` (its table's over the top-level ones), and the top-level
/// keys only other roles have. Errors: a table that is not a role's, a key no role has (or, in
/// a role's table, that this role does not have), the key `config`.
fn entries_for(
    cli: &Command,
    role: &str,
    file: file::File,
) -> Result<(Vec<Entry>, Ignored), Error> {
    let roles = roles(cli);
    let has = |cmd: &Command, key: &str| cmd.get_arguments().any(|a| a.get_long() == Some(key));
    let role_names: Vec<String> = roles
        .iter()
        .map(|r| format!("[{}]", r.get_name()))
        .collect();
    let keys_of = |cmd: &Command| {
        cmd.get_arguments()
            .filter_map(Arg::get_long)
            .filter(|k| *k != "help" && *k != CONFIG_ID)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let bad_key = |e: &Entry, cmd: Option<&Command>| {
        if e.key == CONFIG_ID {
            return Error::Config(format!(
                "{}: config: names the config file itself; give it with --config or ORQ_CONFIG",
                e.at
            ));
        }
        Error::Config(match cmd {
            Some(cmd) => format!(
                "{}: [{}] {}: not an option of orq {}, whose keys are: {}",
                e.at,
                cmd.get_name(),
                e.key,
                cmd.get_name(),
                keys_of(cmd)
            ),
            None => format!(
                "{}: unknown key {}: not an option of any orq role (orq {role}'s keys are: {})",
                e.at,
                e.key,
                keys_of(cli.find_subcommand(role).expect("a role"))
            ),
        })
    };

    let this = cli.find_subcommand(role).expect("a role");
    let mut chosen: BTreeMap<String, Entry> = BTreeMap::new();
    let mut ignored = Vec::new();
    for e in file.top {
        let Some(owner) = roles
            .iter()
            .find(|r| has(r, &e.key))
            .filter(|_| e.key != CONFIG_ID)
        else {
            return Err(bad_key(&e, None));
        };
        if has(this, &e.key) {
            chosen.insert(e.key.clone(), e);
        } else {
            // Checked as the role that reads it would: a bad value is found by any role.
            check_entry(owner, &e).map_err(Error::Config)?;
            ignored.push((e.key, e.at));
        }
    }
    for (name, (at, entries)) in file.tables {
        let Some(cmd) = roles.iter().find(|r| r.get_name() == name) else {
            return Err(Error::Config(format!(
                "{at}: [{name}]: unknown table; a config file has top-level keys for every role \
                 and the tables {} for one role's",
                role_names.join(", ")
            )));
        };
        for e in entries {
            if e.key == CONFIG_ID || !has(cmd, &e.key) {
                return Err(bad_key(&e, Some(cmd)));
            }
            if name == role {
                chosen.insert(e.key.clone(), e);
            } else {
                check_entry(cmd, &e).map_err(Error::Config)?;
            }
        }
    }
    // In the file's order, for messages and for `orq config print`.
    let mut entries: Vec<Entry> = chosen.into_values().collect();
    entries.sort_by_key(|e| line_of(&e.at));
    Ok((entries, ignored))
}

/// Check `e` against the option of `cmd` it names (which `cmd` has).
fn check_entry(cmd: &Command, e: &Entry) -> Result<(), String> {
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some(e.key.as_str()))
        .expect("the caller checked the key");
    check(arg, e, matches!(arg.get_action(), ArgAction::SetTrue))
}

/// The line number of `FILE:LINE`.
fn line_of(at: &str) -> usize {
    at.rsplit(':')
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0)
}

/// Check `e`'s value with `arg`'s own parser: a switch takes `true` or `false`, an option of one
/// value one, and every word must parse as the flag's would.
fn check(arg: &Arg, e: &Entry, switch: bool) -> Result<(), String> {
    let at = |what: String| format!("{}: {}: {what}", e.at, e.key);
    if switch {
        if !e.boolean || e.words.len() != 1 {
            return Err(at("true or false is expected (it is a switch)".into()));
        }
        return Ok(());
    }
    let many = arg.get_value_delimiter().is_some() || matches!(arg.get_action(), ArgAction::Append);
    if !many && (e.array || e.words.len() != 1) {
        return Err(at(format!(
            "one value is expected, not an array of {}",
            e.words.len()
        )));
    }
    // One option alone, with the flag's parser and delimiter: the flag's own checks, without
    // the rules between options (those are checked when the whole command line is parsed).
    let mut one = Arg::new("value")
        .long("value")
        .value_parser(arg.get_value_parser().clone())
        .action(ArgAction::Append);
    if let Some(d) = arg.get_value_delimiter() {
        one = one.value_delimiter(d);
    }
    let cmd = Command::new("orq").no_binary_name(true).arg(one);
    for w in &e.words {
        cmd.clone()
            .try_get_matches_from([format!("--value={w}")])
            .map_err(|err| at(first_line(&err).replace(" for '--value <value>'", "")))?;
    }
    Ok(())
}

/// clap's message on one line, without its `error: ` prefix and its usage hints.
pub fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let message = text.split("\n\n").next().unwrap_or_default();
    let message = message.strip_prefix("error: ").unwrap_or(message);
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
