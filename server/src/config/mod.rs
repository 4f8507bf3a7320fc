//! Config files (`orq.toml`): every option of `orq serve`, `api`, `worker` and `scheduler` under
//! its flag's long name, read from `--config FILE` or `ORQ_CONFIG`. One precedence rule: a flag
//! wins over its environment variable, which wins over the file, which wins over the default.
//!
//! ```toml
//! redis = "redis://127.0.0.1:6379/"   # every role that has --redis
//! queues = ["emails", "reports"]
//! [api]
//! listen = "0.0.0.0:8080"
//! api-keys = "/etc/orq/keys.toml"
//! [worker]
//! concurrency = 32
//! ```
//!
//! Top-level keys are for every role that has the option (a key only other roles have is
//! ignored); a `[role]` table's keys are for that role only and win over the top-level ones.
//! [`file`] reads the file with each key's line, [`merge`] checks keys and values against the
//! command line and hands the values to clap, [`print`] renders `orq config print`.

pub mod file;
pub mod merge;
pub mod print;

use crate::cli::Cli;
use clap::{Args, CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::path::PathBuf;

pub use merge::{Error, Merged};

/// `--config` of the roles.
#[derive(Debug, Args, Clone)]
pub struct ConfigArgs {
    /// TOML file of options: each option of this command under its flag's long name (`redis =
    /// "redis://127.0.0.1:6379/"`, `concurrency = 16`, `queues = ["a", "b"]`,
    /// `insecure-no-auth = true`), top-level for every role, or in a [serve], [api], [worker] or
    /// [scheduler] table for one. A flag wins over its environment variable, which wins over
    /// the file, which wins over the default; `orq config print ROLE` shows the result. An
    /// unknown key or a bad value stops orq (exit 2) naming the file, line and key.
    #[arg(long, env = "ORQ_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `orq config ...`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print a role's effective configuration as a config file: each value with where it came
    /// from (flag, $ENV_VAR, FILE:LINE or default), passwords in URLs as ***. Takes the role's
    /// own flags: `orq config print worker --config orq.toml --concurrency 4`.
    Print(PrintArgs),
}

/// `orq config print`.
#[derive(Debug, Args)]
pub struct PrintArgs {
    /// The role: serve, api, worker or scheduler.
    #[arg(value_name = "ROLE")]
    pub role: String,
    /// The role's flags, as it would be started with.
    #[arg(
        value_name = "FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub flags: Vec<OsString>,
}

/// Parse `argv` (the binary's name first) into the command line, with the config file's values
/// when a role is given one.
pub fn parse(argv: Vec<OsString>) -> Result<(Cli, Merged), Error> {
    let merged = merge::merge(&Cli::command(), argv)?;
    let cli = Cli::from_arg_matches(&merged.matches).map_err(Error::Clap)?;
    Ok((cli, merged))
}

/// `orq config print ROLE FLAGS...`: the text to print. Errors: not a role that takes a config
/// file, or the role's command line or config file is bad (the message says which).
pub fn print(a: &PrintArgs) -> Result<String, String> {
    let cli = Cli::command();
    let roles: Vec<String> = merge::roles(&cli)
        .iter()
        .map(|r| r.get_name().to_string())
        .collect();
    if !roles.contains(&a.role) {
        return Err(format!(
            "orq config print: {:?} is not a role with a configuration; the roles are: {}",
            a.role,
            roles.join(", ")
        ));
    }
    let mut argv = vec![OsString::from("orq"), OsString::from(&a.role)];
    argv.extend(a.flags.iter().cloned());
    let merged = match merge::merge(&cli, argv) {
        Ok(merged) => merged,
        Err(Error::Config(e)) => return Err(e),
        Err(Error::Clap(e)) => {
            return Err(format!(
                "orq config print {}: {}",
                a.role,
                merge::first_line(&e)
            ))
        }
    };
    // The checks a role makes before it starts: a configuration it would refuse is not printed
    // as if it were fine.
    let parsed = Cli::from_arg_matches(&merged.matches).map_err(|e| merge::first_line(&e))?;
    crate::cli::preflight(&parsed.command).map_err(|e| merged.annotate(e))?;
    Ok(print::render(&cli, &merged))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the command line is consistent (clap's own checks), and every role a config file
    // can hold a table for takes --config, so `orq config print` and the tables name the same
    // roles.
    #[test]
    fn the_roles_with_a_config_file() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        let roles: Vec<&str> = merge::roles(&cli).iter().map(|r| r.get_name()).collect();
        assert_eq!(roles, ["serve", "api", "worker", "scheduler"]);
    }

    // Goal: a check made after parsing names the file's line when the value came from it, and
    // only then.
    #[test]
    fn later_errors_name_the_line_of_a_file_value() {
        let dir = std::env::temp_dir().join(format!("orq-config-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("orq.toml");
        std::fs::write(&f, "lanes = 99\n").unwrap();
        let argv = ["orq", "worker", "--config", f.to_str().unwrap()];
        let (_, merged) = parse(argv.iter().map(OsString::from).collect()).unwrap();
        let at = format!("{}:1", f.display());
        assert_eq!(
            merged.annotate("--lanes: must be 1..=16".into()),
            format!("--lanes: must be 1..=16 (set in {at})")
        );
        for other in ["--lanes-x: no", "--concurrency: must be 1..=10000", "lanes"] {
            assert_eq!(merged.annotate(other.into()), other);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
