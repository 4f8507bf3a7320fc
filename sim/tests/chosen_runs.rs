//! Runs with draws chosen instead of the seed's (`orq-sim run --faults`, `--tasks`; the
//! dashboard's run form), and a run's timeline streamed as it goes (`--timeline -`): a choice
//! changes only what it names, the replay command repeats it, a streamed timeline is the written
//! one, and the process limits its own memory.

use orq_sim::harness::{
    replay_command, run, run_streaming, Choice, SimConfig, Verdict, FAULT_FAMILIES, TASKS_MAX,
};
use std::io::Read;
use std::process::{Command, Stdio};

fn chosen(families: Option<&[&str]>, tasks: Option<u32>) -> Choice {
    Choice {
        families: families.map(|f| f.iter().map(|s| s.to_string()).collect()),
        tasks,
    }
}

// Goal: nothing chosen is the seed's own run, so every seed of the soak runs and every replay
// command written before choices existed still names the same run. Method: compare whole
// configurations for 200 seeds.
#[test]
fn nothing_chosen_is_the_seeds_own_draw() {
    for seed in 0..200 {
        assert_eq!(
            SimConfig::draw_chosen(seed, Choice::default()),
            SimConfig::draw(seed)
        );
    }
    let header = serde_json::to_value(SimConfig::draw(5)).unwrap();
    assert!(
        header.get("chosen").is_none(),
        "a seed's own run has no `chosen` in its header"
    );
}

// Goal: chosen fault families are exactly the families on, each keeps the sizes the seed draws
// for it, and nothing outside the faults changes. Method: for 100 seeds, choose each single
// family, none, and all; compare with the seed's own draw.
#[test]
fn chosen_families_are_the_families_on_and_keep_the_seeds_sizes() {
    for seed in 0..100 {
        let own = SimConfig::draw(seed);
        let mut choices: Vec<Vec<&str>> = FAULT_FAMILIES.iter().map(|f| vec![*f]).collect();
        choices.push(vec![]);
        choices.push(FAULT_FAMILIES.to_vec());
        for c in choices {
            let got = SimConfig::draw_chosen(seed, chosen(Some(&c), None));
            assert_eq!(got.faults.families, c, "seed {seed}");
            assert_eq!(
                got.faults.families_on(),
                c,
                "seed {seed}: a family on does nothing"
            );
            // The workload is the seed's.
            assert_eq!(
                (got.tasks, got.workers, got.lease_ms, &got.tenant_limits),
                (own.tasks, own.workers, own.lease_ms, &own.tenant_limits),
                "seed {seed}"
            );
            // A family on in both draws has the same sizes.
            if c.contains(&"refusal") && own.faults.families.iter().any(|f| f == "refusal") {
                assert_eq!(got.faults.p_refusal, own.faults.p_refusal);
                assert_eq!(got.faults.refusal_ms_max, own.faults.refusal_ms_max);
            }
            if c.contains(&"crash") && own.faults.families.iter().any(|f| f == "crash") {
                assert_eq!(got.faults.w_crash, own.faults.w_crash);
            }
        }
    }
}

// Goal: a chosen task count is the run's, bounded by TASKS_MAX, and the liveness budget grows
// with it. Method: choose 1 and TASKS_MAX tasks; parse the command-line forms.
#[test]
fn chosen_tasks_size_the_run() {
    let small = SimConfig::draw_chosen(9, chosen(None, Some(1)));
    let large = SimConfig::draw_chosen(9, chosen(None, Some(TASKS_MAX)));
    assert_eq!((small.tasks, large.tasks), (1, TASKS_MAX));
    assert!(large.liveness_budget_ms >= small.liveness_budget_ms);
    assert!(Choice::check_tasks(0).is_err());
    assert!(Choice::check_tasks(TASKS_MAX + 1).is_err());
    assert_eq!(
        Choice::parse_families(" network , crash ").unwrap(),
        ["crash", "network"],
        "kept in FAULT_FAMILIES' order"
    );
    assert_eq!(
        Choice::parse_families("none").unwrap(),
        Vec::<String>::new()
    );
    for bad in ["", "fire", "crash,crash", "crash,,network"] {
        assert!(Choice::parse_families(bad).is_err(), "{bad:?}");
    }
}

// Goal: the replay command of a run with choices replays it: the same timeline, byte for byte.
// Method: run a chosen configuration, then the replay command's arguments through the binary.
#[test]
fn the_replay_command_repeats_the_choices() {
    let c = SimConfig::draw_chosen(12, chosen(Some(&["crash", "stall"]), Some(30)));
    let cmd = replay_command(&c);
    assert!(
        cmd.ends_with("--seed 12 --faults crash,stall --tasks 30"),
        "{cmd}"
    );
    let r = run(&c);
    assert_eq!(r.verdict, Verdict::Pass);
    let args: Vec<&str> = cmd.split(" -- ").nth(1).unwrap().split(' ').collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_orq-sim"))
        .args(&args)
        .arg("--timeline")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), r.timeline_text());
}

// Goal: a streamed run hands over the timeline's lines as the run records them, the same lines
// as the report's, the header first; several hand-overs happen before the end. Method: count
// the lines the sink had when each later line arrived.
#[test]
fn a_streamed_timeline_is_the_written_one() {
    let c = SimConfig::draw(42);
    let mut got: Vec<String> = Vec::new();
    let r = run_streaming(&c, &mut |l: &str| got.push(l.to_string()));
    assert_eq!(got, r.timeline);
    assert!(got[0].contains("\"kind\":\"header\""));
    assert!(got.last().unwrap().contains("\"kind\":\"end\""));

    // The binary streams the same bytes to stdout, its summary on stderr.
    let out = Command::new(env!("CARGO_BIN_EXE_orq-sim"))
        .args(["run", "--seed", "42", "--timeline", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), r.timeline_text());
    assert!(String::from_utf8_lossy(&out.stderr).contains("verdict Pass"));
}

// Goal: `--max-memory-mb` limits the run's own memory, RLIMIT_DATA (what the API relies on to bound a
// run's memory). Method: a streamed run whose output nobody reads blocks on its full pipe; while
// it does, its /proc limits are read.
#[test]
fn a_run_limits_its_own_memory() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orq-sim"))
        .args(["run", "--seed", "1", "--tasks", "1000", "--timeline", "-"])
        .args(["--max-memory-mb", "768"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max data size"))
        .unwrap();
    assert!(
        line.split_whitespace()
            .filter(|w| *w == (768u64 << 20).to_string())
            .count()
            == 2,
        "{line}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_orq-sim"))
        .args(["run", "--seed", "1", "--max-memory-mb", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "below the smallest limit is a usage error"
    );
}
