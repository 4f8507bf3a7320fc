//! Writes the seed corpora under `fuzz/corpus/<target>/`: a handful of small, meaningful inputs
//! per target, each checked to decode back to itself and to pass its target's properties.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --bin seeds
//!
//! (A plain build: no fuzzing instrumentation is needed to write the files.)

use arbitrary::{Arbitrary, Unstructured};
#[cfg(feature = "http")]
use orq_fuzz::http;
use orq_fuzz::scripts::{Arg, Corruption, Kind, Step};
use orq_fuzz::{engine, scripts};
use std::path::Path;

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("create the corpus directory");
    std::fs::write(dir.join(name), bytes).expect("write a seed");
}

fn submit(tenant: u8, retries: u8, lease: u8, delay: u8, batch: u8) -> Step {
    Step::Submit {
        tenant,
        priority: 3,
        delay,
        retries,
        lease,
        idem: 0,
        batch,
    }
}

fn scripts_seeds() -> Vec<(&'static str, Vec<Step>)> {
    let lease = |n| Step::Lease { worker: 0, n };
    vec![
        (
            "group_commit",
            vec![
                submit(0, 1, 2, 0, 3),
                submit(1, 1, 2, 0, 1),
                lease(3),
                Step::CompleteBatch {
                    leases: vec![0, 1, 1, 2],
                },
                Step::CompleteBatch { leases: vec![0] },
                Step::Read { what: 2, arg: 0 },
            ],
        ),
        (
            "complete_and_lease",
            vec![
                submit(0, 1, 2, 0, 3),
                submit(1, 1, 2, 0, 3),
                lease(0),
                Step::CompleteAndLease {
                    leases: vec![0],
                    worker: 1,
                    n: 3,
                },
                Step::CompleteAndLease {
                    leases: vec![1, 2, 3],
                    worker: 0,
                    n: 0,
                },
                Step::Read { what: 2, arg: 0 },
            ],
        ),
        (
            "lifecycle",
            vec![
                submit(0, 1, 2, 0, 0),
                lease(0),
                Step::Heartbeat {
                    lease: 0,
                    extend: 0,
                },
                Step::Complete { lease: 0 },
                Step::Read { what: 2, arg: 0 },
                Step::Read { what: 1, arg: 7 },
            ],
        ),
        (
            "retry_then_dlq_replay_purge",
            vec![
                submit(1, 1, 0, 0, 0),
                lease(0),
                Step::Fail {
                    lease: 0,
                    retryable: true,
                },
                Step::Tick { ms: 2_000 },
                Step::Promote { bound: 7 },
                lease(0),
                Step::Fail {
                    lease: 1,
                    retryable: true,
                },
                Step::Replay { task: 0 },
                lease(0),
                Step::Fail {
                    lease: 2,
                    retryable: false,
                },
                Step::Purge { task: 0 },
            ],
        ),
        (
            "lease_expires_and_is_reaped",
            vec![
                submit(2, 2, 0, 0, 0),
                lease(0),
                Step::Tick { ms: 1_500 },
                Step::Reap {
                    bound: 7,
                    retention: 2,
                },
                Step::Complete { lease: 0 },
                Step::Tick { ms: 1_000 },
                lease(0),
                Step::Release { lease: 1 },
                Step::Read { what: 4, arg: 0 },
            ],
        ),
        (
            "cancel_and_clock_back",
            vec![
                submit(0, 0, 1, 2, 1),
                Step::Cancel { task: 0 },
                lease(3),
                Step::Cancel { task: 1 },
                Step::Heartbeat {
                    lease: 0,
                    extend: 1,
                },
                Step::ClockBack { ms: 3_000 },
                Step::Tick { ms: 9_000 },
                Step::Reap {
                    bound: 1,
                    retention: 0,
                },
                Step::Read { what: 3, arg: 0 },
            ],
        ),
        (
            "tenancy_caps_rates_aging_pause",
            vec![
                Step::ConfigureTenant {
                    tenant: 0,
                    weight: 3,
                    max_inflight: 2,
                    max_queued: 3,
                    rate: 2,
                    burst: 2,
                },
                Step::ConfigureQueue {
                    paused: 0,
                    aging: 2,
                },
                submit(0, 1, 2, 0, 2),
                submit(1, 1, 2, 0, 2),
                Step::ConfigureQueue {
                    paused: 1,
                    aging: 0,
                },
                lease(3),
                Step::ConfigureQueue {
                    paused: 2,
                    aging: 1,
                },
                lease(3),
                Step::Complete { lease: 0 },
                Step::ReplayBulk {
                    tenant: 3,
                    limit: 4,
                },
                Step::Read { what: 2, arg: 0 },
            ],
        ),
        (
            "idempotent_submits",
            vec![
                Step::Submit {
                    tenant: 0,
                    priority: 9,
                    delay: 0,
                    retries: 0,
                    lease: 0,
                    idem: 1,
                    batch: 1,
                },
                Step::Submit {
                    tenant: 0,
                    priority: 0,
                    delay: 3,
                    retries: 3,
                    lease: 2,
                    idem: 1,
                    batch: 0,
                },
                Step::Read { what: 5, arg: 0 },
            ],
        ),
        (
            "raw_arguments",
            vec![
                submit(0, 0, 2, 0, 0),
                Step::Raw {
                    script: 1, // lease with no token bits
                    args: vec![Arg::Word(17), Arg::Word(8)],
                },
                Step::Raw {
                    script: 16, // events after a huge id
                    args: vec![
                        Arg::Bytes(b"99999999999999999999999-1".to_vec()),
                        Arg::Word(8),
                    ],
                },
                Step::Raw {
                    script: 12, // list with a huge cursor
                    args: vec![
                        Arg::Word(9),
                        Arg::Word(9),
                        Arg::Word(9),
                        Arg::Bytes(b"1:0:99999999999999999999".to_vec()),
                        Arg::Word(8),
                        Arg::Word(8),
                    ],
                },
                Step::Raw {
                    script: 3, // complete with a token from a lease
                    args: vec![Arg::TaskId(0), Arg::Token(0)],
                },
                Step::Raw {
                    script: 9, // replay with ids
                    args: vec![Arg::Word(0), Arg::TaskId(0), Arg::Int(-1)],
                },
            ],
        ),
        (
            "raw_keys",
            vec![
                submit(0, 0, 2, 0, 0),
                Step::RawKeys {
                    script: 1,
                    keys: vec![Arg::Int(0), Arg::Int(1), Arg::Bytes(b"k".to_vec())],
                    args: vec![Arg::Word(17), Arg::Word(8), Arg::Word(7)],
                },
                Step::RawKeys {
                    script: 14,
                    keys: vec![Arg::Int(10)],
                    args: vec![Arg::Word(5)],
                },
            ],
        ),
        (
            "corrupt_task_fields",
            vec![
                submit(0, 1, 2, 0, 2),
                Step::Corrupt(Corruption::TaskField {
                    task: 0,
                    field: 2,
                    value: 0,
                }),
                Step::Corrupt(Corruption::DeleteTaskField { task: 1, field: 1 }),
                lease(3),
                Step::Complete { lease: 0 },
                Step::Fail {
                    lease: 1,
                    retryable: true,
                },
                Step::Read { what: 1, arg: 7 },
            ],
        ),
        (
            "dangling_entries_and_deleted_hashes",
            vec![
                submit(0, 1, 0, 0, 2),
                Step::Corrupt(Corruption::DeleteTask(1)),
                Step::Corrupt(Corruption::Dangling {
                    index: 1,
                    member: 0,
                    score: 0,
                }),
                Step::Corrupt(Corruption::Dangling {
                    index: 2,
                    member: 0,
                    score: 0,
                }),
                Step::Promote { bound: 7 },
                Step::Reap {
                    bound: 7,
                    retention: 0,
                },
                lease(3),
                Step::Read { what: 2, arg: 0 },
            ],
        ),
        (
            "wrong_type_keys",
            vec![
                submit(0, 1, 0, 0, 2),
                lease(0),
                Step::Corrupt(Corruption::TaskType {
                    task: 1,
                    kind: Kind::String,
                }),
                Step::Corrupt(Corruption::QueueKeyType {
                    key: 6,
                    kind: Kind::List,
                }),
                Step::Complete { lease: 0 },
                Step::Corrupt(Corruption::TenantKeyType {
                    tenant: 1,
                    which: 1,
                    kind: Kind::String,
                }),
                lease(3),
                Step::Read { what: 0, arg: 1 },
                Step::Purge { task: 1 },
            ],
        ),
        (
            "garbage_counters",
            vec![
                submit(0, 1, 0, 0, 2),
                Step::Corrupt(Corruption::QueueField {
                    key: 0,
                    field: 2,
                    value: 0,
                }),
                Step::Corrupt(Corruption::QueueField {
                    key: 2,
                    field: 0,
                    value: 4,
                }),
                lease(3),
                Step::Complete { lease: 0 },
                submit(0, 1, 0, 0, 0),
            ],
        ),
    ]
}

fn engine_seeds() -> Vec<(&'static str, engine::Input)> {
    let base = engine::Input {
        seed: 1,
        workload: [6, 1, 0, 1, 2, 1, 50, 50, 0, 100, 60, 10, 40, 3],
        faults: [20, 2, 1, 1, 1, 60, 60, 50, 100, 100, 100, 50, 50, 50],
        tenancy: [0; 16],
    };
    let mut tenancy = base.clone();
    tenancy.seed = 2;
    tenancy.tenancy = [1, 0, 0, 2, 3, 3, 0, 1, 0, 0, 3, 0, 0, 3, 2, 1];
    let mut quiet = base.clone();
    quiet.seed = 3;
    quiet.faults = [255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut lossy = base.clone();
    lossy.seed = 4;
    lossy.tenancy[15] = 8;
    vec![
        ("faults", base),
        ("tenancy", tenancy),
        ("no_faults", quiet),
        ("lossy_restart", lossy),
    ]
}

#[cfg(feature = "http")]
fn http_seeds() -> Vec<(&'static str, http::Input)> {
    let req = |route: u8, arg: &[u8], query: &[u8], body: &[u8]| http::Input {
        route,
        arg: arg.to_vec(),
        query: query.to_vec(),
        body: body.to_vec(),
    };
    vec![
        (
            "submit",
            req(
                0,
                b"",
                b"",
                br#"{"queue":"q","tenant":"t","type":"echo","payload":{"a":[1,2.5,"x"]},"priority":5,"delay_ms":10,"max_retries":2,"backoff":{"initial_ms":100,"multiplier":2.0,"max_ms":1000,"jitter":0.1},"lease_ms":5000,"timeout_ms":1000,"idempotency_key":"k:1"}"#,
            ),
        ),
        (
            "submit_run_at",
            req(0, b"", b"", br#"{"payload":null,"run_at":"2027-01-15T08:00:00.000Z"}"#),
        ),
        (
            "batch",
            req(1, b"", b"", br#"{"tasks":[{"payload":1},{"payload":"x","tenant":"b"}]}"#),
        ),
        (
            "tenant",
            req(
                2,
                b"q/t",
                b"",
                br#"{"weight":2.5,"max_inflight":3,"max_queued":null,"rate_per_s":10,"burst":5}"#,
            ),
        ),
        (
            "settings",
            req(
                3,
                b"q",
                b"",
                br#"{"aging_step_ms":100,"defaults":{"priority":1,"max_retries":0,"backoff":{"jitter":0},"lease_ms":2000}}"#,
            ),
        ),
        (
            "bulk_replay",
            req(4, b"", b"", br#"{"queue":"q","tenant":"t","type":"echo","limit":5}"#),
        ),
        (
            "list",
            req(5, b"", b"queue=q&status=queued&tenant=t&limit=2&cursor=1:0:0", b""),
        ),
        ("get", req(7, b"01ARZ3NDEKTSV4RRFFQ69G5FAV", b"queue=q", b"")),
        ("bad_json", req(0, b"", b"", br#"{"payload":1,"priority":"9""#)),
        ("bad_path", req(11, b"{q} x", b"", b"")),
        (
            "http_submit",
            req(
                0,
                b"HTTP://0x7f.1:9/api/./x/%2e%2e/%61b;v=1?q=/../z#f",
                b"",
                br#"{"type":"http","payload":{"url":"http://127.0.0.1:9/api/../admin","headers":{"x-a":"b"},"timeout_ms":100}}"#,
            ),
        ),
        (
            "http_dot_segments",
            req(
                0,
                b"..;/%252e%252e\\..%2fadmin",
                b"",
                br#"{"type":"http","payload":{"url":"http://127.0.0.1:9/%2e%2E/x"}}"#,
            ),
        ),
    ]
}

fn check<'a, T: Arbitrary<'a> + PartialEq + std::fmt::Debug>(bytes: &'a [u8], want: &T) {
    let got = T::arbitrary_take_rest(Unstructured::new(bytes)).expect("a seed decodes");
    assert_eq!(&got, want, "a seed does not decode to what it encodes");
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, steps) in scripts_seeds() {
        let input = scripts::Input { steps };
        let bytes = input.encode();
        check(&bytes, &input);
        scripts::run(&input);
        write(&root.join("scripts"), name, &bytes);
    }
    for (name, input) in engine_seeds() {
        let bytes = input.encode();
        check(&bytes, &input);
        engine::run_input(&input);
        write(&root.join("engine"), name, &bytes);
    }
    #[cfg(feature = "http")]
    for (name, input) in http_seeds() {
        let bytes = input.encode();
        check(&bytes, &input);
        http::run(&input);
        write(&root.join("http"), name, &bytes);
    }
    println!("seed corpora written under {}", root.display());
}
