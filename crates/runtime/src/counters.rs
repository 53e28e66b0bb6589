//! Statistics counters shared between threads, updated with relaxed atomics.
//!
//! Counters are monotonic totals or current values read by `show info`/`show stat`; no
//! decision of the data path depends on their exact ordering, so `Relaxed` is enough. A
//! relaxed load or store costs nothing on x86, but a read-modify-write (`fetch_add`, a
//! compare-and-swap) is a locked instruction all the same, some 20 cycles each, and a
//! kept-alive request makes about 30 of them on the counters below. The event-loop thread of
//! a process that has only one ([`count_alone`], `nbthread 1`) is the only writer of the
//! data path's counters ([`LoopCounter`], [`Gauge`], the rates and averages of
//! [`crate::freq`]), so it updates them with a plain load and store, as a HAProxy built
//! without threads does; with several loops every update stays atomic. [`Counter`], for
//! counts that other threads keep too (health checks, the log writer), is always atomic.
//! [`Gauge`] keeps a current value and its maximum.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// Set on the event-loop thread of a process that runs only one: see [`count_alone`].
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

/// Declares the calling thread the only one that updates the data path's counters: the
/// event loop of a process with one (`nbthread 1`), which also runs the control tasks (the
/// CLI's `clear counters`). Health checks and the log writer run on threads of their own and
/// only update [`Counter`]s, which stay atomic.
pub fn count_alone() {
    ALONE.set(true);
}

/// Whether this thread updates the data path's counters without locked instructions.
pub(crate) fn alone() -> bool {
    ALONE.get()
}

/// Adds `n` to a counter of the data path: plain on the only event loop, atomic otherwise.
pub(crate) fn add_on_loop(cell: &AtomicU64, n: u64) -> u64 {
    if alone() {
        let total = cell.load(Ordering::Relaxed).wrapping_add(n);
        cell.store(total, Ordering::Relaxed);
        total
    } else {
        cell.fetch_add(n, Ordering::Relaxed).wrapping_add(n)
    }
}

/// A monotonic total. `ANY_THREAD` says who counts it: any thread ([`Counter`]), or only
/// event-loop threads ([`LoopCounter`], see the module's documentation).
#[derive(Debug, Default)]
pub struct Total<const ANY_THREAD: bool>(AtomicU64);

/// A monotonic total that any thread may count: always updated atomically.
pub type Counter = Total<true>;

/// A monotonic total of the data path, counted only by event-loop threads: updated with plain
/// loads and stores on the only event loop of a process.
pub type LoopCounter = Total<false>;

impl<const ANY_THREAD: bool> Total<ANY_THREAD> {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        if ANY_THREAD {
            self.0.fetch_add(n, Ordering::Relaxed);
        } else {
            add_on_loop(&self.0, n);
        }
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
/// the atomic maximum is a locked compare-and-swap loop on x86 even when nothing changes.
/// Only for maxima of the data path (see [`count_alone`]).
pub fn raise_max(max: &AtomicU64, value: u64) {
    if value > max.load(Ordering::Relaxed) {
        if alone() {
            max.store(value, Ordering::Relaxed);
        } else {
            max.fetch_max(value, Ordering::Relaxed);
        }
    }
}

/// A current value of the data path (such as open sessions) with the highest value it
/// reached.
#[derive(Debug, Default)]
pub struct Gauge {
    current: AtomicU64,
    max: AtomicU64,
}

impl Gauge {
    /// Adds one and updates the maximum.
    pub fn incr(&self) {
        let now = add_on_loop(&self.current, 1);
        raise_max(&self.max, now);
    }

    /// Removes one.
    pub fn decr(&self) {
        // Adding the all-ones word takes one away, wrapping as `fetch_sub` would.
        add_on_loop(&self.current, u64::MAX);
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
    pub total_sessions: LoopCounter,
    /// Bytes received from clients (`bin` in `show stat`).
    pub bytes_in: LoopCounter,
    /// Bytes sent to clients (`bout` in `show stat`).
    pub bytes_out: LoopCounter,
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

    /// Counts another connection attempt of an open session (a retry on the same server):
    /// HAProxy counts each attempt as a server session (`stot`, `rate`).
    pub fn count_attempt(&self) {
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

/// Runs `test` twice, each time on a thread of its own: once as one of several event loops
/// (atomic updates), once as the only one ([`count_alone`]: plain loads and stores).
#[cfg(test)]
pub(crate) fn on_both_paths(test: fn()) {
    for alone in [false, true] {
        std::thread::spawn(move || {
            if alone {
                count_alone();
            }
            assert_eq!(self::alone(), alone);
            test();
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gauge_keeps_its_maximum() {
        on_both_paths(|| {
            let g = Gauge::default();
            g.incr();
            g.incr();
            g.decr();
            assert_eq!((g.get(), g.max()), (1, 2));
            g.decr();
            g.decr();
            // Below zero it wraps, as an atomic subtraction does (a bug elsewhere, not a panic).
            assert_eq!(g.get(), u64::MAX);
        });
    }

    #[test]
    fn session_mark_counts_open_and_total() {
        on_both_paths(|| {
            let t = Traffic::default();
            {
                let _a = SessionMark::open(&t);
                let _b = SessionMark::open(&t);
                assert_eq!(t.sessions.get(), 2);
            }
            assert_eq!(t.sessions.get(), 0);
            assert_eq!(t.total_sessions.get(), 2);
            assert_eq!(t.sessions.max(), 2);
            t.bytes_in.add(5);
            t.bytes_in.add(7);
            assert_eq!(t.bytes_in.get(), 12);
            t.bytes_in.reset();
            assert_eq!(t.bytes_in.get(), 0);
        });
    }

    #[test]
    fn only_the_declared_thread_counts_alone() {
        assert!(!alone(), "test threads and other threads update atomically");
        on_both_paths(|| {});
        assert!(!alone(), "declaring another thread changes nothing here");
    }

    #[test]
    fn a_counter_any_thread_counts_stays_atomic_on_the_only_loop() {
        // The log writer and the loop thread both count dropped lines, for one.
        let c = std::sync::Arc::new(Counter::default());
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [true, false]
            .into_iter()
            .map(|alone| {
                let (c, start) = (std::sync::Arc::clone(&c), std::sync::Arc::clone(&start));
                std::thread::spawn(move || {
                    if alone {
                        count_alone();
                    }
                    start.wait();
                    (0..1_000_000).for_each(|_| c.incr());
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.get(), 2_000_000);
    }

    #[test]
    fn counters_of_several_loops_lose_no_update() {
        // Several threads that did not declare themselves alone share a counter safely.
        let c = std::sync::Arc::new(LoopCounter::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || (0..10_000).for_each(|_| c.incr()))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.get(), 40_000);
    }
}
