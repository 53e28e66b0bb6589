//! Events per second as HAProxy's statistics report them (`rate`, `req_rate`, `conn_rate` in
//! `show stat`, "Session rate" on the stats page).
//!
//! A [`Rate`] counts the events of the current second and keeps the count of the previous one;
//! the rate read at a moment is the current count plus the previous one weighted by how much of
//! the current second is still to come, the sliding estimate HAProxy's frequency counters give
//! (`read_freq_ctr`, rounded as it rounds); its maximum is the most events one second counted.
//! One atomic word holds the second and its count, so counting is one `fetch_add` on the hot
//! path (a compare-and-swap once per second when the second turns) and threads share it
//! without a lock; the only event loop of a process counts with plain loads and stores
//! instead (see `counters`).
//!
//! A [`SlidingAverage`] is HAProxy's sliding average of the last [`TIME_SAMPLES`] values (the
//! `qtime`, `ctime`, `rtime` and `ttime` of `show stat`), kept as a running sum from which each
//! new value removes an average share, with the highest value seen beside it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The rates' clock (`clock::millis`).
fn now_ms() -> u64 {
    crate::clock::millis()
}

/// The most events a [`Rate`] counts in one second: half of what its count's 32 bits hold,
/// so that events counted at once by several threads never carry into the second.
pub const MAX_PER_SECOND: u32 = u32::MAX >> 1;

/// Events per second, with the highest rate seen, counted by event-loop threads only (see
/// `counters::count_alone`).
#[derive(Debug, Default)]
pub struct Rate {
    /// The second (high 32 bits) and the events counted in it (low 32 bits).
    current: AtomicU64,
    /// The events of the second before `current`'s (0 if that one saw none).
    previous: AtomicU32,
    /// The highest rate seen (a `u32`, in the word `counters::raise_max` keeps maxima in).
    max: AtomicU64,
}

impl Rate {
    /// Counts one event now.
    pub fn incr(&self) {
        self.add_at(now_ms(), 1);
    }

    /// Counts `n` events now (bytes, for a byte rate); a second holds at most
    /// [`MAX_PER_SECOND`].
    pub fn add(&self, n: u64) {
        self.add_at(
            now_ms(),
            u32::try_from(n.min(u64::from(MAX_PER_SECOND))).unwrap_or(0),
        );
    }

    /// The rate now: events per second.
    pub fn get(&self) -> u32 {
        self.get_at(now_ms())
    }

    /// The highest rate seen when an event was counted.
    pub fn max(&self) -> u32 {
        u32::try_from(self.max.load(Ordering::Relaxed)).unwrap_or(u32::MAX)
    }

    /// Forgets the maximum (`clear counters`).
    pub fn reset_max(&self) {
        self.max.store(0, Ordering::Relaxed);
    }

    fn add_at(&self, ms: u64, n: u32) {
        let n = n.min(MAX_PER_SECOND);
        let second = (ms / 1000) as u32;
        // The events counted in this second so far, this one included.
        let counted = if crate::counters::alone() {
            // The only event loop counts alone: no locked instruction (`counters`).
            let seen = self.current.load(Ordering::Relaxed);
            let (at, count) = split(seen);
            if at == second {
                let count = count.saturating_add(n).min(MAX_PER_SECOND);
                self.current.store(join(second, count), Ordering::Relaxed);
                count
            } else {
                self.current.store(join(second, n), Ordering::Relaxed);
                self.previous
                    .store(count_before(at, second, count), Ordering::Relaxed);
                n
            }
        } else {
            let mut seen = self.current.load(Ordering::Relaxed);
            loop {
                let (at, count) = split(seen);
                // Counts stay at most `MAX_PER_SECOND`, half the low word: one event added
                // below it, even by every thread at once, cannot carry into the second's
                // half. A batch, or a count at the limit, goes through the exchange below.
                if at == second && n == 1 && count < MAX_PER_SECOND {
                    let (_, before) = split(self.current.fetch_add(1, Ordering::Relaxed));
                    break before.saturating_add(1);
                }
                // The same second, or a new one: then the count of the one just ended
                // becomes the previous one.
                let now = if at == second {
                    count.saturating_add(n).min(MAX_PER_SECOND)
                } else {
                    n
                };
                match self.current.compare_exchange_weak(
                    seen,
                    join(second, now),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        if at != second {
                            self.previous
                                .store(count_before(at, second, count), Ordering::Relaxed);
                        }
                        break now;
                    }
                    Err(now) => seen = now,
                }
            }
        };
        // HAProxy's maximum is that of the events counted in one second, not of the
        // sliding estimate `get` reads.
        crate::counters::raise_max(&self.max, u64::from(counted));
    }

    /// HAProxy's `read_freq_ctr`: the events of this second plus those of the second before
    /// weighted by the share of this second still to come (rounded down, 999 parts of 1000
    /// at its first millisecond); a rate of at most one event a second, with none yet in
    /// this one, reads as the previous second's count, so that it does not flap to 0.
    fn get_at(&self, ms: u64) -> u32 {
        let second = (ms / 1000) as u32;
        let (at, count) = split(self.current.load(Ordering::Relaxed));
        let (current, previous) = match second.wrapping_sub(at) {
            0 => (count, self.previous.load(Ordering::Relaxed)),
            // No event yet in this second: the last counted second is the previous one.
            1 => (0, count),
            _ => (0, 0),
        };
        if previous <= 1 && current == 0 {
            return previous;
        }
        // The share left, as a fraction of 2^32 (HAProxy's `ms_left_scaled`).
        let left = (999 - ms % 1000) * 4_294_971;
        let weighted = (u64::from(previous) * left) >> 32;
        current.saturating_add(u32::try_from(weighted).unwrap_or(u32::MAX))
    }
}

/// How many recent streams the timing averages cover (HAProxy's `TIME_STATS_SAMPLES`).
pub const TIME_SAMPLES: u64 = 512;

/// A sliding average of durations in milliseconds, with their maximum, fed by event-loop
/// threads only (see `counters::count_alone`).
#[derive(Debug, Default)]
pub struct SlidingAverage {
    sum: AtomicU64,
    max: AtomicU64,
}

impl SlidingAverage {
    /// Adds a value: the sum loses one average share and gains the value.
    pub fn add(&self, ms: u64) {
        let next = |sum: u64| sum - sum.div_ceil(TIME_SAMPLES) + ms;
        if crate::counters::alone() {
            self.sum
                .store(next(self.sum.load(Ordering::Relaxed)), Ordering::Relaxed);
        } else {
            let _ = self
                .sum
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sum| Some(next(sum)));
        }
        crate::counters::raise_max(&self.max, ms);
    }

    /// The average of the recent values (rounded up, as HAProxy reads it).
    pub fn get(&self) -> u64 {
        self.sum.load(Ordering::Relaxed).div_ceil(TIME_SAMPLES)
    }

    /// The highest value added.
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Forgets the maximum (`clear counters`).
    pub fn reset_max(&self) {
        self.max.store(0, Ordering::Relaxed);
    }

    /// Forgets everything (`clear counters all`).
    pub fn reset(&self) {
        self.sum.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }
}

fn split(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

fn join(second: u32, count: u32) -> u64 {
    (u64::from(second) << 32) | u64::from(count)
}

/// What becomes the previous second's count when `second` starts and `count` events were
/// counted in second `at`: that count if `at` is the second just ended, none otherwise.
fn count_before(at: u32, second: u32, count: u32) -> u32 {
    if at.wrapping_add(1) == second {
        count
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_current_second_and_weighs_the_previous_one() {
        crate::counters::on_both_paths(|| {
            let r = Rate::default();
            for _ in 0..10 {
                r.add_at(5_100, 1);
            }
            assert_eq!(r.get_at(5_900), 10, "all in this second");
            r.add_at(6_000, 1);
            assert_eq!(
                r.get_at(6_000),
                1 + 9,
                "999 parts of 1000 of the previous second still count, rounded down"
            );
            assert_eq!(r.get_at(6_500), 1 + 4, "half of it half-way through");
            assert_eq!(
                r.get_at(7_000),
                1,
                "the second with one event is the previous one now"
            );
            assert_eq!(r.get_at(7_999), 1, "one event a second does not flap to 0");
            assert_eq!(r.get_at(8_000), 0, "nothing for two seconds");
            assert_eq!(r.max(), 10, "the most events one second counted");
        });
    }

    #[test]
    fn batches_add_up_and_saturate_within_their_second() {
        crate::counters::on_both_paths(|| {
            let r = Rate::default();
            r.add_at(3_000, 700);
            r.add_at(3_500, 300);
            assert_eq!(r.get_at(3_999), 1000);
            r.add_at(4_000, 50);
            assert_eq!(
                r.get_at(4_000),
                50 + 999,
                "the previous second almost whole, and the new one"
            );
            assert_eq!(r.max(), 1000);
            r.add_at(4_100, u32::MAX);
            r.add_at(4_200, 1);
            let (second, count) = split(r.current.load(Ordering::Relaxed));
            assert_eq!(
                (second, count),
                (4, MAX_PER_SECOND),
                "saturated, the second intact"
            );
        });
    }

    #[test]
    fn the_sliding_average_moves_towards_recent_values() {
        crate::counters::on_both_paths(|| {
            let a = SlidingAverage::default();
            for _ in 0..TIME_SAMPLES * 8 {
                a.add(10);
            }
            assert_eq!(a.get(), 10, "a steady value is its own average");
            a.add(1000);
            assert_eq!(a.max(), 1000);
            assert!(
                (11..=12).contains(&a.get()),
                "one outlier moves it by 1/512: {}",
                a.get()
            );
            a.reset_max();
            assert_eq!(a.max(), 0);
        });
    }

    #[test]
    fn events_a_second_and_a_half_apart_read_as_one_per_second() {
        crate::counters::on_both_paths(|| {
            let r = Rate::default();
            r.add_at(10_000, 1);
            r.add_at(11_500, 1);
            // HAProxy reads 1 + 1 * 499/1000, rounded down.
            assert_eq!(r.get_at(11_500), 1);
            assert_eq!(r.max(), 1);
        });
    }

    #[test]
    fn a_gap_forgets_the_old_seconds() {
        crate::counters::on_both_paths(|| {
            let r = Rate::default();
            r.add_at(1_000, 1);
            r.add_at(9_000, 1);
            assert_eq!(r.get_at(9_000), 1);
            r.reset_max();
            assert_eq!(r.max(), 0);
        });
    }
}
