//! The `engine` target: one simulation run (`orq_sim::harness::run`) of the engine's real
//! client, worker pools and schedulers against `MemoryStore`, with a configuration and fault mix
//! drawn from the input instead of from a seed alone.
//!
//! The input picks every parameter of [`SimConfig`] within the ranges `SimConfig::draw` uses,
//! but sized small (at most [`TASKS_MAX`] tasks, a safety phase of at most ~12 s of virtual
//! time) so that one execution takes milliseconds. Property: the verdict is a pass, i.e. every
//! invariant of the checker held after every call, and once faults stopped every task finished
//! within the liveness budget. A failure prints the configuration and the verdict.

use crate::codec::{Reader, Writer};
use arbitrary::{Arbitrary, Result, Unstructured};
use orq_sim::harness::config::TenantSetting;
use orq_sim::harness::{run, SimConfig, Verdict};

/// Most tasks one input submits.
pub const TASKS_MAX: u32 = 12;

/// The parameters an input picks; each byte maps onto a range of [`SimConfig`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Input {
    /// Seed of the run's random draws (interleavings, handler outcomes, fault times).
    pub seed: u64,
    /// Workload: tasks, tenants, batch, workers, concurrency, schedulers, windows, lease and
    /// handler times, failure, delay and cancel probabilities, retries.
    pub workload: [u8; 14],
    /// Faults: gap, weights, crash probabilities, downtime, lost / failed / duplicated calls,
    /// clock offset, drift and jumps.
    pub faults: [u8; 14],
    /// Tenancy: on/off, per-tenant cap, rate, burst and weight, aging, pauses; lossy restart.
    pub tenancy: [u8; 16],
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut r = Reader::new(u);
        let mut input = Input {
            seed: r.i64()? as u64,
            ..Input::default()
        };
        for b in input
            .workload
            .iter_mut()
            .chain(input.faults.iter_mut())
            .chain(input.tenancy.iter_mut())
        {
            *b = r.byte()?;
        }
        Ok(input)
    }
}

impl Input {
    /// The bytes that decode to this input.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i64(self.seed as i64);
        for b in self
            .workload
            .iter()
            .chain(&self.faults)
            .chain(&self.tenancy)
        {
            w.byte(*b);
        }
        w.out
    }

    /// The simulation this input describes.
    pub fn config(&self) -> SimConfig {
        let [tasks, tenants, batch, workers, conc, scheds, window, safety, lease, handler, p_tr, p_perm, p_del, retries] =
            self.workload;
        let [gap, w_crash, w_stall, w_jump, w_flush, p_cb, p_ca, down, p_lost, p_fail, p_dup, offset, drift, jump] =
            self.faults;
        let t = self.tenancy;
        let unit = |b: u8| f64::from(b) / 256.0;
        let mut c = SimConfig::draw(self.seed);
        let lease_ms = [1_000, 2_000, 5_000][usize::from(lease) % 3];
        c.tasks = 1 + u32::from(tasks) % TASKS_MAX;
        c.tenants = 1 + u32::from(tenants) % 3;
        c.batch_max = [1, 1, 5][usize::from(batch) % 3];
        c.workers = 1 + u32::from(workers) % 2;
        c.concurrency = 1 + u32::from(conc) % 4;
        c.schedulers = u32::from(scheds) % 3;
        c.submit_window_ms = 100 + 40 * u64::from(window);
        c.safety_ms = 2_000 + 40 * u64::from(safety);
        c.lease_ms = lease_ms;
        c.handler_ms_max = 1 + u64::from(handler) * (2 * lease_ms) / 256;
        c.p_transient = unit(p_tr) * 0.3;
        c.p_permanent = unit(p_perm) * 0.05;
        c.p_delayed = unit(p_del) * 0.4;
        c.delay_ms_max = 100 + 100 * u64::from(p_del);
        c.p_cancel = unit(retries) * 0.05;
        c.max_retries_max = u32::from(retries) % 6;
        let f = &mut c.faults;
        f.mean_fault_gap_ms = 500 + 37 * u64::from(gap);
        f.w_crash = u32::from(w_crash) % 5;
        f.w_stall = u32::from(w_stall) % 4;
        f.w_clock_jump = u32::from(w_jump) % 3;
        f.w_script_flush = u32::from(w_flush) % 2;
        f.p_crash_before_effect = unit(p_cb) * 0.03;
        f.p_crash_after_effect = unit(p_ca) * 0.03;
        f.stall_ms_max = lease_ms * 3;
        f.downtime_ms_max = 40 * u64::from(down);
        f.p_lost_reply = unit(p_lost) * 0.05;
        f.p_fail_before = unit(p_fail) * 0.05;
        f.p_duplicate = unit(p_dup) * 0.03;
        f.clock_offset_ms_max = 8 * u64::from(offset);
        f.drift_ppm_max = 200 * u64::from(drift);
        f.clock_jump_ms_max = 20 * u64::from(jump);
        f.w_pause = 0;
        f.pause_ms_max = 0;
        // The store's refusals, the slow calls and the LOADING window keep the seed's own draw
        // (`SimConfig::draw`'s swarm stream): the input's bytes predate them.
        f.families = f.families_on();
        c.tenant_limits.clear();
        c.aging_step_ms = 0;
        c.lossy_restart = t[15].is_multiple_of(8);
        if t[0] % 2 == 1 {
            for i in 0..c.tenants {
                let b = |k: usize| t[1 + (i as usize * 4 + k) % 12];
                let s = TenantSetting {
                    tenant: format!("t{i}"),
                    max_inflight: b(0).is_multiple_of(3).then(|| 1 + u64::from(b(0) / 3 % 3)),
                    rate_per_s: b(1)
                        .is_multiple_of(3)
                        .then(|| [1.0, 1.5, 2.0, 5.0][usize::from(b(1) / 3) % 4]),
                    burst: Some(1 + u64::from(b(2)) % 5),
                    weight: b(3)
                        .is_multiple_of(3)
                        .then(|| [0.5, 2.0, 3.0, 5.0][usize::from(b(3) / 3) % 4]),
                };
                let s = TenantSetting {
                    burst: s.rate_per_s.and(s.burst),
                    ..s
                };
                if s.max_inflight.is_some() || s.rate_per_s.is_some() || s.weight.is_some() {
                    c.tenant_limits.push(s);
                }
            }
            if t[13].is_multiple_of(3) {
                c.aging_step_ms = 10 + 8 * u64::from(t[13]);
            }
            if t[14].is_multiple_of(2) {
                c.faults.w_pause = 1 + u32::from(t[14] % 4) / 2;
                c.faults.pause_ms_max = 500 + 18 * u64::from(t[14]);
            }
        }
        c
    }
}

/// Run the simulation the input describes.
///
/// # Panics
/// When the verdict is not a pass, with the configuration and the verdict.
pub fn run_input(input: &Input) {
    let config = input.config();
    let report = run(&config);
    if report.verdict != Verdict::Pass {
        panic!(
            "simulation failed: {:?}\nconfig: {config:?}",
            report.verdict
        );
    }
}
