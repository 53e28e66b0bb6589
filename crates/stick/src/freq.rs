//! Event rates over a period (`conn_rate(10s)`, `http_req_rate(1m)`...), computed the way
//! configuration.txt describes HAProxy's: events are counted in the current period, and the
//! rate read at time `t` adds to them the previous period's count weighted by the part of
//! the period that has not elapsed yet. The rate therefore slides smoothly instead of
//! dropping to zero when a period ends, with two counters and a start time per rate. Times
//! are milliseconds of a monotonic clock the caller owns, which keeps this pure and testable.

/// A rate counter over a period the caller passes to every call (the table's data layout
/// holds it, so counters stay small).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreqCtr {
    /// Start of the current period, in milliseconds.
    start: u64,
    /// Events counted in the current period.
    curr: u64,
    /// Events counted in the previous period.
    prev: u64,
}

impl FreqCtr {
    /// Moves to the period containing `now`: the current count becomes the previous one if
    /// `now` is in the next period, and both are forgotten if a whole period went by.
    fn rotate(&mut self, now: u64, period: u64) {
        let elapsed = now.saturating_sub(self.start);
        if elapsed < period {
            return;
        }
        if elapsed >= period.saturating_mul(2) {
            self.prev = 0;
            self.start = now;
        } else {
            self.prev = self.curr;
            self.start += period;
        }
        self.curr = 0;
    }

    /// Counts `n` events at `now`.
    pub fn add(&mut self, now: u64, period: u64, n: u64) {
        let period = period.max(1);
        self.rotate(now, period);
        self.curr = self.curr.saturating_add(n);
    }

    /// The rate at `now`: events of the current period plus the previous period's events
    /// weighted by the share of the current period still to come (rounded down).
    pub fn read(&self, now: u64, period: u64) -> u64 {
        let period = period.max(1);
        let mut copy = *self;
        copy.rotate(now, period);
        let elapsed = now.saturating_sub(copy.start).min(period);
        let weighted = u128::from(copy.prev) * u128::from(period - elapsed) / u128::from(period);
        copy.curr
            .saturating_add(u64::try_from(weighted).unwrap_or(u64::MAX))
    }

    /// Restarts the counter at `now` with `value` events in the current period (`set table`).
    pub fn set(&mut self, now: u64, value: u64) {
        *self = FreqCtr {
            start: now,
            curr: value,
            prev: 0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::FreqCtr;

    const P: u64 = 10_000;

    #[test]
    fn counts_within_the_period() {
        let mut f = FreqCtr::default();
        for t in [50_000, 50_100, 52_000] {
            f.add(t, P, 1);
        }
        assert_eq!(f.read(52_000, P), 3);
        assert_eq!(f.read(59_999, P), 3);
    }

    #[test]
    fn previous_period_fades_out() {
        let mut f = FreqCtr::default();
        f.add(50_000, P, 10);
        // 2 s into the next period: 8/10 of the previous 10 events still count.
        assert_eq!(f.read(62_000, P), 8);
        f.add(62_000, P, 1);
        assert_eq!(f.read(62_000, P), 9);
        // 9.5 s in: half an event of the previous period rounds down.
        assert_eq!(f.read(69_500, P), 1);
    }

    #[test]
    fn forgotten_after_two_periods() {
        let mut f = FreqCtr::default();
        f.add(50_000, P, 10);
        assert_eq!(f.read(70_000, P), 0);
        f.add(90_000, P, 2);
        assert_eq!(f.read(90_000, P), 2);
    }

    #[test]
    fn set_replaces_the_history() {
        let mut f = FreqCtr::default();
        f.add(1_000, P, 7);
        f.set(2_000, 5);
        assert_eq!(f.read(2_000, P), 5);
        assert_eq!(f.read(13_000, P), 4);
    }

    #[test]
    fn zero_period_does_not_divide_by_zero() {
        let mut f = FreqCtr::default();
        f.add(5, 0, 1);
        assert!(f.read(5, 0) <= 1);
    }
}
