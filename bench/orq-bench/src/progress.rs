//! Progress of a run: nothing in tests, an `indicatif` bar on a terminal.

/// Progress reporting, so a long run shows where it is (an `indicatif` bar in the CLI).
pub trait Progress: Send + Sync {
    /// A phase began, with `total` units of work.
    fn phase(&self, name: &str, total: u64);
    /// `done` units of the current phase are done.
    fn set(&self, done: u64);
    /// The run ended (clear the bar).
    fn finish(&self) {}
}

/// Progress that reports nothing (tests).
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&self, _: &str, _: u64) {}
    fn set(&self, _: u64) {}
}

/// An `indicatif` progress bar, one per phase.
pub(crate) struct Bar(pub(crate) indicatif::ProgressBar);

impl Progress for Bar {
    fn phase(&self, name: &str, total: u64) {
        self.0.reset();
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.set_message(name.to_string());
    }
    fn set(&self, done: u64) {
        self.0.set_position(done);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
