//! Simulation tests: seeds with faults pass every invariant, the same seed gives a byte-identical
//! timeline, lossy restarts keep survivors consistent, and planted bugs are caught.
//!
//! `ORQ_SIM_SEED=N` runs only seed N (with `--nocapture` to see its report); `ORQ_SIM_RUNS=K`
//! sets how many seeds the seed sweep runs (default 24, sized for CI).

use orq_sim::harness::{replay_command, run, PlantedBug, SimConfig, Verdict, FAULT_FAMILIES};
use proptest::prelude::*;

/// First seed of the default sweep.
const SEED_BASE: u64 = 1;
/// Seeds of the default sweep (CI-sized; `orq-sim check --seeds 0..10000` is the soak run).
const RUNS_DEFAULT: u64 = 24;
/// A planted bug must be caught within this many seeds.
const PLANTED_SEEDS_MAX: u64 = 40;

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("ORQ_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let runs = std::env::var("ORQ_SIM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(RUNS_DEFAULT);
    (SEED_BASE..SEED_BASE + runs).collect()
}

fn explain(c: &SimConfig, v: &Verdict) -> String {
    format!(
        "seed {} failed: {v:?}\n  config: {}\n  replay: {}\n  or: ORQ_SIM_SEED={} cargo test -p orq-sim --test simulation -- --nocapture",
        c.seed,
        serde_json::to_string(c).unwrap_or_default(),
        replay_command(c),
        c.seed
    )
}

// Goal: the product as shipped keeps every invariant under every fault, and drains all tasks
// once faults stop. Method: a sweep of seeds, each drawing its own workload and fault mix.
#[test]
fn seeds_with_faults_keep_every_invariant_and_drain() {
    let mut failures = Vec::new();
    let mut calls = 0;
    for seed in seeds() {
        let c = SimConfig::draw(seed);
        println!(
            "seed {seed}: {}",
            serde_json::to_string(&c).unwrap_or_default()
        );
        let r = run(&c);
        calls += r.stats.script_calls;
        println!(
            "  {:?} {}",
            r.verdict,
            serde_json::to_string(&r.stats).unwrap_or_default()
        );
        if r.verdict != Verdict::Pass {
            failures.push(explain(&c, &r.verdict));
        } else {
            assert!(r.stats.accepted > 0, "seed {seed} submitted nothing");
            assert_eq!(
                r.stats.accepted,
                r.stats.completed + r.stats.dead + r.stats.cancelled,
                "seed {seed}: submitted = completed + dead + cancelled"
            );
        }
    }
    println!("{calls} script calls in all");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Goal: the failures found by long soaks beyond CI's sweep stay fixed. Method: run those seeds.
// 729 and 1574: a pull worker's report gave up while a heartbeat of its lease was out, which then
// said the lease lived on; 835: check 9 allowed a slow worker clock too little (design note 59).
#[test]
fn seeds_that_once_failed_in_soaks_pass() {
    let mut failures = Vec::new();
    for seed in [729, 835, 1574] {
        let c = SimConfig::draw(seed);
        let r = run(&c);
        if r.verdict != Verdict::Pass {
            failures.push(explain(&c, &r.verdict));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Goal: determinism. Method: run seeds twice and compare the timelines byte for byte; different
// seeds must give different timelines (the comparison is not vacuous).
#[test]
fn same_seed_gives_a_byte_identical_timeline() {
    let mut previous = String::new();
    for seed in [3, 11, 42] {
        let c = SimConfig::draw(seed);
        let a = run(&c).timeline_text();
        let b = run(&c).timeline_text();
        assert!(
            a.lines().count() > 10,
            "seed {seed}: timeline too short to mean anything"
        );
        if a != b {
            let line = a
                .lines()
                .zip(b.lines())
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            panic!(
                "seed {seed}: timelines differ first at line {}:\n  {}\n  {}\n  replay: {}",
                line + 1,
                a.lines().nth(line).unwrap_or(""),
                b.lines().nth(line).unwrap_or(""),
                replay_command(&c)
            );
        }
        assert_ne!(a, previous, "two seeds gave the same timeline");
        previous = a;
    }
}

// Goal: after a lossy restart (the store rolled back to an earlier snapshot), every surviving
// task stays consistent and finishes; only tasks accepted after the rollback point may be lost.
#[test]
fn lossy_restart_keeps_survivors_consistent_and_finished() {
    let mut failures = Vec::new();
    let mut lost = 0;
    for seed in 100..110 {
        let c = SimConfig::draw(seed).with_lossy_restart();
        let r = run(&c);
        lost += r.stats.lost_to_rollback;
        if r.verdict != Verdict::Pass {
            failures.push(explain(&c, &r.verdict));
        }
        assert!(
            r.timeline.iter().any(|l| l.contains("\"lossy_restart\"")),
            "seed {seed}: no rollback happened"
        );
    }
    println!("tasks lost to rollbacks: {lost}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Goal: swarm testing really varies the fault mix (Groce et al., ISSTA 2012): some seeds are
// quiet, some have one fault family, every family is on for some seeds and off for others, and
// the families a configuration names are the ones whose faults can happen. Method: draw 200
// seeds' configurations (no runs) and count.
#[test]
fn seeds_draw_their_own_fault_families() {
    let configs: Vec<SimConfig> = (1..=200).map(SimConfig::draw).collect();
    for c in &configs {
        assert_eq!(c.faults.families, c.faults.families_on(), "seed {}", c.seed);
    }
    let count = |f: &dyn Fn(&SimConfig) -> bool| configs.iter().filter(|c| f(c)).count();
    assert!(
        count(&|c| c.faults.families.is_empty()) > 0,
        "no quiet seed"
    );
    assert!(
        count(&|c| c.faults.families.len() == 1) > 0,
        "no single-family seed"
    );
    for family in FAULT_FAMILIES {
        let on = count(&|c| c.faults.families.iter().any(|f| f == family));
        assert!(
            (50..=150).contains(&on),
            "{family} is on in {on} of 200 seeds"
        );
    }
}

// Goal: the store's own refusals (OOM, READONLY, BUSY, LOADING, ... as single refusals and as
// episodes) lose nothing and never make a task run twice for a refusal shorter than its lease:
// every refused outcome is sent again with its token (check 9). Method: the first seeds whose
// swarm draw turns refusals on run and pass; together they refused calls, saw every refusal
// kind, and delivered outcomes the store had refused, so the check was not vacuous.
#[test]
fn store_refusals_lose_nothing_and_refused_outcomes_are_delivered() {
    let configs: Vec<SimConfig> = (1..)
        .map(SimConfig::draw)
        .filter(|c| c.faults.families.iter().any(|f| f == "refusal") && c.faults.loading_ms_max > 0)
        .take(6)
        .collect();
    let (mut refused, mut delivered) = (0, 0);
    let mut kinds = std::collections::BTreeSet::new();
    for c in &configs {
        let r = run(c);
        assert_eq!(r.verdict, Verdict::Pass, "{}", explain(c, &r.verdict));
        refused += r.stats.refused_calls;
        delivered += r.stats.reports_delivered_after_refusal;
        kinds.extend(r.stats.faults.keys().cloned());
        println!(
            "seed {}: refused {} calls, {} refused outcomes delivered later, faults {:?}",
            c.seed, r.stats.refused_calls, r.stats.reports_delivered_after_refusal, r.stats.faults
        );
    }
    assert!(refused > 0, "no call was refused");
    assert!(delivered > 0, "no refused outcome was delivered later");
    for kind in ["refusal", "refusal_episode"] {
        assert!(kinds.contains(kind), "no {kind} in {kinds:?}");
    }
}

// Goal: the incremental checker (what each call touched) is as strict as checking the whole
// queue after every call. Method: seeds with every fault family, the whole queue checked after
// every call too, and the checker's kept copy of the indexes compared with a fresh one each
// time; they must agree and pass (a planted bug's seed must fail at the same call either way).
#[test]
fn the_incremental_checker_agrees_with_the_whole_queue_check_after_every_call() {
    for seed in [2, 3, 15] {
        let c = SimConfig::draw(seed).with_full_check_every(1);
        let r = run(&c);
        assert_eq!(r.verdict, Verdict::Pass, "{}", explain(&c, &r.verdict));
    }
    let bug = PlantedBug::CompleteIgnoresToken;
    let seed = (1..=PLANTED_SEEDS_MAX)
        .find(|&s| {
            matches!(
                run(&SimConfig::draw(s).with_planted(bug)).verdict,
                Verdict::Safety(_)
            )
        })
        .expect("the planted bug is caught");
    let incremental = run(&SimConfig::draw(seed).with_planted(bug));
    let full = run(&SimConfig::draw(seed)
        .with_planted(bug)
        .with_full_check_every(1));
    assert_eq!(incremental.verdict, full.verdict);
    assert_eq!(incremental.stats.script_calls, full.stats.script_calls);
}

// Goal: the simulator catches real bugs. Method: plant each known bug behind its test-only
// switch and run seeds until one fails; it must fail within PLANTED_SEEDS_MAX seeds, as a
// safety violation.
#[test]
fn planted_bugs_are_caught_within_a_bounded_number_of_seeds() {
    for bug in PlantedBug::ALL {
        let mut caught = None;
        for seed in 1..=PLANTED_SEEDS_MAX {
            let c = SimConfig::draw(seed).with_planted(bug);
            let r = run(&c);
            if let Verdict::Safety(why) = &r.verdict {
                caught = Some((seed, why.clone()));
                break;
            }
        }
        match caught {
            Some((seed, why)) => println!("{}: caught at seed {seed}: {why}", bug.name()),
            None => panic!("{} was not caught in {PLANTED_SEEDS_MAX} seeds", bug.name()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, ..ProptestConfig::default() })]

    // Goal: fault schedules chosen by proptest (and shrunk on failure) keep the invariants.
    // Method: proptest varies the seed and the fault mix; a failing case shrinks towards fewer
    // faults, and the report carries the seed and the replay command.
    #[test]
    fn proptest_fault_schedules_keep_the_invariants(
        seed in 1_000u64..1_000_000,
        p_lost in 0.0f64..0.1,
        p_dup in 0.0f64..0.05,
        w_crash in 0u32..5,
        w_stall in 0u32..4,
        p_refusal in 0.0f64..0.05,
        w_refusal in 0u32..3,
    ) {
        let mut c = SimConfig::draw(seed);
        c.faults.p_lost_reply = p_lost;
        c.faults.p_duplicate = p_dup;
        c.faults.w_crash = w_crash;
        c.faults.w_stall = w_stall;
        c.faults.p_refusal = p_refusal;
        c.faults.w_refusal = w_refusal;
        c.faults.refusal_ms_max = c.lease_ms * 2;
        c.faults.families = c.faults.families_on();
        let r = run(&c);
        prop_assert_eq!(&r.verdict, &Verdict::Pass, "{}", explain(&c, &r.verdict));
    }
}
