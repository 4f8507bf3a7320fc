//! The body of `POST /api/v1/simulations` and its checks: a value beyond the bounds, an unknown
//! fault family or planted bug is 422 naming the field, before any process starts.

use super::binary::Options;
use super::SEED_MAX;
use crate::error::ApiError;
use serde::Deserialize;
use utoipa::ToSchema;

/// One simulation run: a seed, and optionally draws chosen instead of the seed's.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimulationRequest {
    /// The seed: with the same choices, the same run (0..=2^53-1).
    #[serde(deserialize_with = "crate::model::int_i128")]
    #[schema(value_type = u64, minimum = 0, maximum = 9007199254740991_u64)]
    pub seed: i128,
    /// The fault families switched on (of `GET /simulations`' `families`); absent or null: the
    /// seed's own draw (each seed switches a random subset on); `[]`: no faults.
    #[serde(default)]
    pub faults: Option<Vec<String>>,
    /// A bug planted on purpose, to watch the simulator catch it (of `GET /simulations`'
    /// `planted`; default `none`).
    #[serde(default)]
    pub planted: Option<String>,
    /// Roll the store back to an earlier snapshot once (an unsynced Redis crash or an
    /// asynchronous failover); the invariants are weakened accordingly.
    #[serde(default)]
    pub lossy: Option<bool>,
    /// Tasks submitted instead of the seed's draw (20..=120): 1..=`limits.tasks_max`.
    #[serde(default, deserialize_with = "crate::model::opt_int_i128")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub tasks: Option<i128>,
}

/// A checked request: the seed (for logs) and the simulator's arguments after `run`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunArgs {
    /// The seed.
    pub seed: u64,
    /// `--seed N [--faults LIST] [--planted BUG] [--lossy] [--tasks N]`.
    pub args: Vec<String>,
}

impl SimulationRequest {
    /// Check every field against `options` (the simulator's lists and bounds) and [`SEED_MAX`].
    pub fn check(&self, options: &Options) -> Result<RunArgs, ApiError> {
        // i128, so a negative or too large seed is a bound (422), not a type (400).
        let seed = u64::try_from(self.seed)
            .ok()
            .filter(|s| *s <= SEED_MAX)
            .ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "seed: {} is not in 0..={SEED_MAX} (2^53-1; any u64 seed runs with orq-sim \
                     run --seed)",
                    self.seed
                ))
            })?;
        let mut args = vec!["--seed".to_string(), seed.to_string()];
        if let Some(faults) = &self.faults {
            let mut seen: Vec<&str> = Vec::new();
            for f in faults {
                if !options.families.contains(f) {
                    return Err(ApiError::unprocessable(format!(
                        "faults: unknown fault family {f:?}; the families are {}",
                        options.families.join(", ")
                    )));
                }
                if seen.contains(&f.as_str()) {
                    return Err(ApiError::unprocessable(format!(
                        "faults: {f:?} is given twice"
                    )));
                }
                seen.push(f);
            }
            let list = if faults.is_empty() {
                "none".to_string()
            } else {
                faults.join(",")
            };
            args.extend(["--faults".to_string(), list]);
        }
        if let Some(p) = &self.planted {
            if !options.planted.contains(p) {
                return Err(ApiError::unprocessable(format!(
                    "planted: unknown bug {p:?}; the bugs are {}",
                    options.planted.join(", ")
                )));
            }
            if p != "none" {
                args.extend(["--planted".to_string(), p.clone()]);
            }
        }
        if self.lossy == Some(true) {
            args.push("--lossy".to_string());
        }
        if let Some(n) = self.tasks {
            let max = options.tasks_max.min(super::TASKS_MAX);
            if n < 1 || n > i128::from(max) {
                return Err(ApiError::unprocessable(format!(
                    "tasks: {n} is not in 1..={max}"
                )));
            }
            args.extend(["--tasks".to_string(), n.to_string()]);
        }
        Ok(RunArgs { seed, args })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            families: vec!["crash".into(), "network".into()],
            planted: vec!["none".into(), "complete_ignores_token".into()],
            tasks_max: crate::simulations::TASKS_MAX,
        }
    }

    fn req(v: serde_json::Value) -> SimulationRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_checked_request_becomes_the_simulators_arguments() {
        let r = req(
            serde_json::json!({"seed": 7, "faults": ["network", "crash"],
            "planted": "complete_ignores_token", "lossy": true, "tasks": 1000}),
        );
        assert_eq!(
            r.check(&options()).unwrap().args,
            [
                "--seed",
                "7",
                "--faults",
                "network,crash",
                "--planted",
                "complete_ignores_token",
                "--lossy",
                "--tasks",
                "1000"
            ]
        );
        let none = req(serde_json::json!({"seed": 0, "faults": [], "planted": "none"}));
        assert_eq!(
            none.check(&options()).unwrap().args,
            ["--seed", "0", "--faults", "none"]
        );
    }

    #[test]
    fn values_beyond_the_bounds_are_refused_naming_the_field() {
        for (v, field) in [
            (serde_json::json!({"seed": SEED_MAX + 1}), "seed:"),
            (serde_json::json!({"seed": -1}), "seed:"),
            (serde_json::json!({"seed": u64::MAX}), "seed:"),
            (
                serde_json::json!({"seed": 1, "faults": ["fire"]}),
                "faults:",
            ),
            (
                serde_json::json!({"seed": 1, "faults": ["crash", "crash"]}),
                "faults:",
            ),
            (
                serde_json::json!({"seed": 1, "planted": "rm -rf"}),
                "planted:",
            ),
            (serde_json::json!({"seed": 1, "tasks": 0}), "tasks:"),
            (
                serde_json::json!({"seed": 1, "tasks": crate::simulations::TASKS_MAX + 1}),
                "tasks:",
            ),
        ] {
            let e = req(v.clone()).check(&options()).unwrap_err();
            assert_eq!(e.status(), 422, "{v}");
            assert!(e.message.starts_with(field), "{v}: {}", e.message);
        }
    }
}
