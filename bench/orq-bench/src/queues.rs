//! The names of a bench phase's queues (`--queues`), chosen so their hash slots spread evenly
//! over a Redis Cluster's, and how many of a phase's tasks each gets.

use orq_model::{key_slot, SLOT_COUNT};

/// The most queues a phase may spread its tasks over (`--queues`).
pub const QUEUES_MAX: usize = 64;

/// How many names [`queue_names`] tries for one queue before it takes a name whatever its slot.
/// A name lands in its target (half of one of at most [`QUEUES_MAX`] equal slices of the 16,384
/// slots) with probability 1/128 or more, so this bound is never reached in practice.
const QUEUE_NAME_TRIES_MAX: u32 = 100_000;

/// The names of a phase's `n` queues: `<base>` alone when `n` is 1 (the names of a one-queue run
/// do not change); otherwise queue i is `<base>-<i>`, or `<base>-<i>.<k>` with the smallest k
/// that puts its hash slot in the middle half of the i-th of n equal slices of the 16,384 slots.
/// So on a cluster whose primaries hold equal runs of slots (as `redis-cli --cluster create`
/// splits them) the queues spread evenly over the primaries, and a run's spread does not depend
/// on its random prefix. A user's queues land wherever their names hash.
pub fn queue_names(base: &str, n: usize) -> Vec<String> {
    assert!((1..=QUEUES_MAX).contains(&n), "queues {n}");
    if n == 1 {
        return vec![base.to_string()];
    }
    let slots = u32::from(SLOT_COUNT);
    let width = slots / n as u32;
    (0..n as u32)
        .map(|i| {
            let lo = i * slots / n as u32 + width / 4;
            let target = lo..lo + width / 2;
            let plain = format!("{base}-{i}");
            std::iter::once(plain.clone())
                .chain((1..QUEUE_NAME_TRIES_MAX).map(|k| format!("{plain}.{k}")))
                .find(|name| target.contains(&u32::from(queue_slot(name))))
                .unwrap_or(plain)
        })
        .collect()
}

/// The hash slot of queue `q`: that of its keys, which all carry the hash tag `{q}`.
fn queue_slot(q: &str) -> u16 {
    key_slot(orq::keys::queue_keys(q)[0].as_bytes())
}

/// How many of `n` tasks spread round robin over `queues` queues go to queue `i`.
pub fn tasks_of_queue(n: u64, queues: usize, i: usize) -> u64 {
    let q = queues as u64;
    n / q + u64::from((i as u64) < n % q)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: one queue keeps its old name; several spread evenly over the slots.
    // Method: for each count, each queue's slot lies in the middle half of its slice, and the
    // names are distinct, valid and derived from the base.
    #[test]
    fn queue_names_spread_over_the_slots() {
        assert_eq!(queue_names("ob-x-e2e", 1), vec!["ob-x-e2e".to_string()]);
        for n in [2, 3, 6, 7, QUEUES_MAX] {
            let names = queue_names("ob-abcdefgh-delayed", n);
            assert_eq!(names.len(), n);
            let distinct: std::collections::BTreeSet<_> = names.iter().collect();
            assert_eq!(distinct.len(), n, "{names:?}");
            let slots = u32::from(SLOT_COUNT);
            let width = slots / n as u32;
            for (i, name) in names.iter().enumerate() {
                assert!(
                    name.starts_with(&format!("ob-abcdefgh-delayed-{i}")),
                    "{name}"
                );
                assert!(orq::keys::is_valid_name(name), "{name}");
                let slot = u32::from(queue_slot(name));
                let lo = i as u32 * slots / n as u32 + width / 4;
                assert!((lo..lo + width / 2).contains(&slot), "{name}: {slot}");
            }
        }
    }

    // Goal: round robin gives each queue its share, and the shares add up.
    #[test]
    fn tasks_of_queue_adds_up() {
        for (n, q) in [(10, 3), (1, 6), (50_000, 6), (7, 7)] {
            let shares: Vec<u64> = (0..q).map(|i| tasks_of_queue(n, q, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), n, "{n} over {q}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }
}
