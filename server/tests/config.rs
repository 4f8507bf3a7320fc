//! Config files (`--config` / `ORQ_CONFIG`), through the `orq` binary: the precedence rule
//! (flag > environment variable > file > default) as `orq config print` reports it, the file's
//! values used by running roles, bad files refused with the file, line and key (exit code 2),
//! secrets redacted, and the example file under `deploy/` valid for every role.

mod roles;

use orq::testing::RedisServer;
use roles::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The environment variables these tests set: removed from every child first, so a developer's
/// own `ORQ_*` settings cannot change what is checked.
const ENV: [&str; 6] = [
    "ORQ_CONFIG",
    "ORQ_CONCURRENCY",
    "ORQ_REDIS_URL",
    "ORQ_LANES",
    "ORQ_LISTEN",
    "ORQ_WORKER_ID",
];

/// Run `orq <args>` with `env` set (and the [`ENV`] variables otherwise removed) to its end.
fn orq(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_orq"));
    for v in ENV {
        c.env_remove(v);
    }
    c.args(args)
        .envs(env.iter().copied())
        .env("ORQ_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run orq")
}

/// A temporary directory removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("orq-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// Write `text` to `name` in the directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `key = value  # source` line of `key` in `orq config print` output.
fn line<'a>(printed: &'a str, key: &str) -> &'a str {
    printed
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{printed}"))
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

// Goal: the one precedence rule, for a top-level key, a role table's key, a list, a switch and
// the default, through ORQ_CONFIG and --config alike. Method: `orq config print` with the same
// file and each layer added in turn; each line's value and source.
#[test]
fn a_flag_beats_its_environment_variable_which_beats_the_file_which_beats_the_default() {
    let dir = Dir::new("precedence");
    let f = dir.file(
        "orq.toml",
        "# shared\nredis = \"redis://127.0.0.1:6390/\"\nconcurrency = 8\nqueues = [\"a\", \"b\"]\n\
         lanes = 3\n\n[worker]\nconcurrency = 4\n\n[api]\ninsecure-no-auth = true\n",
    );
    let print = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["config", "print"];
        all.extend_from_slice(args);
        stdout(&orq(&all, env))
    };

    let p = print(&["worker", "--config", &f], &[]);
    assert_eq!(
        line(&p, "redis"),
        format!("redis = \"redis://127.0.0.1:6390/\"  # {f}:2")
    );
    assert_eq!(line(&p, "concurrency"), format!("concurrency = 4  # {f}:8"));
    assert_eq!(
        line(&p, "queues"),
        format!("queues = [\"a\", \"b\"]  # {f}:4")
    );
    assert!(p.contains("\n# lease-linger-ms = 1  # default\n"), "{p}");
    assert!(p.contains("# worker-id: not set"), "{p}");

    // The scheduler has no --concurrency: the top-level key is for the roles that have it.
    let s = print(&["scheduler"], &[("ORQ_CONFIG", &f)]);
    assert!(!s.contains("\nconcurrency ="), "{s}");
    assert!(s.contains(&format!(
        "# concurrency ({f}:3): not an option of orq scheduler"
    )));
    let api = print(&["api", "--config", &f], &[]);
    assert_eq!(
        line(&api, "insecure-no-auth"),
        format!("insecure-no-auth = true  # {f}:11")
    );

    let env = [("ORQ_CONCURRENCY", "6"), ("ORQ_LANES", "5")];
    let p = print(&["worker", "--config", &f], &env);
    assert_eq!(
        line(&p, "concurrency"),
        "concurrency = 6  # $ORQ_CONCURRENCY"
    );
    assert_eq!(line(&p, "lanes"), "lanes = 5  # $ORQ_LANES");
    let p = print(&["worker", "--config", &f, "--concurrency", "2"], &env);
    assert_eq!(line(&p, "concurrency"), "concurrency = 2  # flag");
    assert_eq!(line(&p, "lanes"), "lanes = 5  # $ORQ_LANES");

    // Without a file: the defaults.
    let p = print(&["worker"], &[]);
    assert!(p.contains("\n# concurrency = 16  # default\n"), "{p}");
    assert!(p.contains("config file (none)"), "{p}");
}

// Goal: what `orq config print` prints is itself a config file that gives the same values.
// Method: print a role's configuration from a file, flags and the environment; feed the output
// back as the only source; every value line is the same (only the sources differ).
#[test]
fn the_printed_configuration_is_a_config_file_with_the_same_values() {
    let dir = Dir::new("roundtrip");
    let f = dir.file(
        "orq.toml",
        "listen = \"127.0.0.1:8181\"\nhttp-allow = [\"https://hooks.example/api/\"]\n",
    );
    let first = stdout(&orq(
        &[
            "config",
            "print",
            "serve",
            "--config",
            &f,
            "--timelines",
            "/tmp",
        ],
        &[("ORQ_CONCURRENCY", "0")],
    ));
    let again_file = dir.file("printed.toml", &first);
    let again = stdout(&orq(
        &["config", "print", "serve", "--config", &again_file],
        &[],
    ));
    let values = |p: &str| -> Vec<String> {
        p.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split("  # ").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(values(&first), values(&again), "{first}\n---\n{again}");
    assert!(values(&again).contains(&"concurrency = 0".to_string()));
    assert!(values(&again).contains(&"timelines = \"/tmp\"".to_string()));
}

// Goal: a password never leaves `orq config print`, whether it came from the file, the
// environment or a flag.
#[test]
fn passwords_in_urls_are_redacted() {
    let dir = Dir::new("secrets");
    let f = dir.file(
        "orq.toml",
        "redis = \"redis://app:filepw@127.0.0.1:6390/\"\n",
    );
    for (args, env) in [
        (vec!["config", "print", "worker", "--config", &f], vec![]),
        (
            vec!["config", "print", "worker"],
            vec![("ORQ_REDIS_URL", "redis+sentinel://:envpw@s1:26379/main")],
        ),
        (
            vec![
                "config",
                "print",
                "api",
                "--redis",
                "redis+cluster://u:flagpw@a:1,u:flagpw@b:2",
            ],
            vec![],
        ),
        (
            vec![
                "config",
                "print",
                "api",
                "--redis",
                "redis://a:1/?password=flagpw",
            ],
            vec![],
        ),
    ] {
        let p = stdout(&orq(&args, &env));
        for pw in ["filepw", "envpw", "flagpw"] {
            assert!(!p.contains(pw), "{pw} printed:\n{p}");
        }
        assert!(line(&p, "redis").contains("***"), "{p}");
    }
}

// Goal: bad files stop orq before it starts (exit 2) with the file, line and key named, for
// every role, including values checked after parsing (--concurrency 0) and a Redis that does not
// answer (the check does not wait for it).
#[test]
fn bad_files_stop_orq_naming_the_file_line_and_key() {
    let dir = Dir::new("bad");
    let unreachable = "redis://127.0.0.1:1/";
    for (role, text, want) in [
        ("worker", "redis = 1.5\n", ":1: redis: a string, an integer"),
        (
            "worker",
            "\nconcurrency = \"many\"\n",
            ":2: concurrency: invalid value 'many'",
        ),
        (
            "api",
            "wait-replicas = 99\n",
            ":1: wait-replicas: invalid value '99': 99 is not in 0..=16",
        ),
        (
            "worker",
            "lanes = [1, 2]\n",
            ":1: lanes: one value is expected",
        ),
        (
            "serve",
            "insecure-no-auth = \"yes\"\n",
            ":1: insecure-no-auth: true or false is expected",
        ),
        ("scheduler", "a = 1\nconcurency = 3\n", ":1: unknown key a"),
        (
            "worker",
            "[worker]\nlisten = \"127.0.0.1:1\"\n",
            ":2: [worker] listen: not an option of orq worker",
        ),
        (
            "api",
            "[workers]\nlanes = 1\n",
            ":1: [workers]: unknown table",
        ),
        (
            "worker",
            "config = \"other.toml\"\n",
            ":1: config: names the config file itself",
        ),
        ("worker", "concurrency = \n", ":1:15: not valid TOML"),
        (
            "worker",
            "lanes = 1\nlanes = 2\n",
            ":2:1: not valid TOML: duplicate key lanes",
        ),
        (
            "worker",
            "concurrency = 0\n",
            "--concurrency: must be 1..=10000",
        ),
        (
            "serve",
            "lease-linger-ms = 5000\n",
            "--lease-linger-ms: must be 0..=1000",
        ),
        (
            "api",
            "http-allow = [\"ftp://x/\"]\n",
            ":1: http-allow: invalid value 'ftp://x/'",
        ),
        (
            "worker",
            "concurrency = [4]\n",
            ":1: concurrency: one value is expected",
        ),
        (
            "worker",
            "[api]\nwait-replicas = 17\n",
            ":2: wait-replicas: invalid value '17'",
        ),
        (
            "worker",
            "insecure-no-auth = \"yes\"\n",
            ":1: insecure-no-auth: true or false",
        ),
        (
            "worker",
            "otlp-endpoint = \"collector:4317\"\n",
            "--otlp-endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): invalid value 'collector:4317': an \
             http:// or https:// URL with a host (set in ",
        ),
    ] {
        let f = dir.file("bad.toml", text);
        let o = orq(&[role, "--config", &f, "--redis", unreachable], &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{role} {text:?}: {err}");
        assert!(
            err.contains(&format!("{f}{want}")) || err.contains(want),
            "{role} {text:?}: {err}"
        );
        assert!(
            err.contains(&f),
            "{role} {text:?}: the file is named: {err}"
        );
    }
    let o = orq(&["worker", "--config", "/nonexistent/orq.toml"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("config file /nonexistent/orq.toml: cannot read it"));
    // `orq config print` makes the checks the role makes before it starts.
    let f = dir.file("range.toml", "lanes = 17\n");
    let o = orq(&["config", "print", "worker", "--config", &f], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("--lanes: must be 1..=16 (set in {f}:1)")),
        "{err}"
    );
    let o = orq(&["config", "print", "worker", "--bogus"], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    // A directory is refused; an empty file (or /dev/null, or a pipe) is an empty config.
    let o = orq(&["worker", "--config", dir.0.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a directory"));
    stdout(&orq(
        &["config", "print", "worker", "--config", "/dev/null"],
        &[],
    ));
    let o = orq(&["config", "print", "bench"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the roles are: serve, api, worker, scheduler")
    );
}

// Goal: running roles use the file's values, not only print them. Method: `orq api` and
// `orq worker` started with ORQ_CONFIG alone: the API listens on the file's address on the
// file's Redis; the worker leases under the file's worker id from the file's queue; a flag still
// wins (the worker's --concurrency).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_run_with_the_files_values() {
    let redis = RedisServer::start();
    let listen = free_listen_addr();
    let dir = Dir::new("run");
    let f = dir.file(
        "orq.toml",
        &format!(
            "redis = \"{}\"\nqueues = [\"cfgq\"]\n[api]\nlisten = \"{listen}\"\n\
             [worker]\nworker-id = \"w-from-file\"\nconcurrency = 0\n",
            redis.url()
        ),
    );
    let spawn = |args: &[&str]| Proc::spawn_with(args, &ENV, &[("ORQ_CONFIG", &f)]);
    let mut api = spawn(&["api"]);
    let mut worker = spawn(&["worker", "--concurrency", "2"]);
    let http = reqwest::Client::new();
    let base = format!("http://{listen}/api/v1");
    wait_ready(&http, &base).await;
    let id = submit_task(
        &http,
        &base,
        json!({"queue": "cfgq", "type": "echo", "payload": {"from": "file"}}),
    )
    .await;
    let done = wait_for("the task to complete", async || {
        let t = get_json(&http, &format!("{base}/tasks/{id}")).await?;
        (t["status"] == "completed").then_some(t)
    })
    .await;
    assert_eq!(done["attempts"][0]["worker"], "w-from-file", "{done}");
    api.assert_running("api");
    worker.assert_running("worker");
}

// Goal: the example config file under deploy/ is valid for every role it names, and shows every
// key it sets as coming from it.
#[test]
fn the_example_config_file_is_valid_for_every_role() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/orq.example.toml");
    let example = example.display().to_string();
    for role in ["serve", "api", "worker", "scheduler"] {
        let p = stdout(&orq(&["config", "print", role, "--config", &example], &[]));
        assert!(p.contains(&format!("# {example}:")), "{role}:\n{p}");
    }
}
