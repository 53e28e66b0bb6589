//! Statistics counters shared between threads, updated with relaxed atomics.
//!
//! Counters are monotonic totals or current values read by `show info`/`show stat`; no
//! decision of the data path depends on their exact ordering, so `Relaxed` is enough and costs
//! nothing on x86. [`Gauge`] keeps a current value and its maximum.

use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonic total.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn incr(&self) {
        self.add(1);
    }

    /// The current total.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Starts again from zero (`clear counters all`).
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Raises `max` to `value` if it is higher. A plain load first: a new maximum is rare, and
/// the atomic maximum is a locked compare-and-swap loop on x86 even when nothing changes
/// (several per request: sessions, rates, timing averages).
pub fn raise_max(max: &AtomicU64, value: u64) {
    if value > max.load(Ordering::Relaxed) {
        max.fetch_max(value, Ordering::Relaxed);
    }
}

/// A current value (such as open sessions) with the highest value it reached.
#[derive(Debug, Default)]
pub struct Gauge {
    current: AtomicU64,
    max: AtomicU64,
}

impl Gauge {
    /// Adds one and updates the maximum.
    pub fn incr(&self) {
        let now = self.current.fetch_add(1, Ordering::Relaxed) + 1;
        raise_max(&self.max, now);
    }

    /// Removes one.
    pub fn decr(&self) {
        self.current.fetch_sub(1, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// The highest value reached.
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Forgets the maximum: it becomes the current value (`clear counters`).
    pub fn reset_max(&self) {
        self.max.store(self.get(), Ordering::Relaxed);
    }
}

/// What every proxy side and server counts.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Sessions open now, and the most there were at once.
    pub sessions: Gauge,
    /// Sessions since start.
    pub total_sessions: Counter,
    /// Bytes received from clients (`bin` in `show stat`).
    pub bytes_in: Counter,
    /// Bytes sent to clients (`bout` in `show stat`).
    pub bytes_out: Counter,
    /// New sessions per second (`rate`, `rate_max`).
    pub session_rate: crate::freq::Rate,
}

impl Traffic {
    /// Counts a new session; [`Traffic::close_session`] must follow when it ends.
    pub fn open_session(&self) {
        self.sessions.incr();
        self.total_sessions.incr();
        self.session_rate.incr();
    }

    /// Counts the end of a session counted by [`Traffic::open_session`].
    pub fn close_session(&self) {
        self.sessions.decr();
    }
}

/// Tracks one open session on a [`Traffic`]; the count drops when this is dropped.
#[derive(Debug)]
pub struct SessionMark<'a>(&'a Traffic);

impl<'a> SessionMark<'a> {
    /// Counts a new session on `traffic`.
    pub fn open(traffic: &'a Traffic) -> Self {
        traffic.open_session();
        SessionMark(traffic)
    }
}

impl Drop for SessionMark<'_> {
    fn drop(&mut self) {
        self.0.close_session();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_keeps_its_maximum() {
        let g = Gauge::default();
        g.incr();
        g.incr();
        g.decr();
        assert_eq!((g.get(), g.max()), (1, 2));
    }

    #[test]
    fn session_mark_counts_open_and_total() {
        let t = Traffic::default();
        {
            let _a = SessionMark::open(&t);
            let _b = SessionMark::open(&t);
            assert_eq!(t.sessions.get(), 2);
        }
        assert_eq!(t.sessions.get(), 0);
        assert_eq!(t.total_sessions.get(), 2);
        assert_eq!(t.sessions.max(), 2);
    }
}
