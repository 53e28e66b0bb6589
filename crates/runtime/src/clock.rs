//! The data path's clock, read once each time a session's task is woken, as HAProxy reads its
//! clock once per turn of its event loop.
//!
//! A request used to read the time a dozen times or more (its log's timers, the deadline of
//! every wait, the statistics' rates), each reading a call into the vDSO: a few percent of the
//! proxy's CPU time per request. While a session's task is polled ([`polling`], called by
//! [`crate::streams::Registered::scope`]), [`now`] answers the moment that poll started: one
//! poll's work takes microseconds, far below the milliseconds logs and timeouts count in.
//! Outside a poll (the CLI, health checks, callers in tests) it reads the clock. It follows
//! tokio's clock, so tests that pause time see paused time.

use std::cell::Cell;
use std::future::IntoFuture;
use std::time::Duration;
use tokio::time::Instant;

thread_local! {
    /// When the session task being polled on this thread was woken, during its poll.
    static POLL_STARTED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The time: when the current session's poll started, or the clock outside one.
pub fn now() -> Instant {
    POLL_STARTED.get().unwrap_or_else(Instant::now)
}

/// [`now`] as a standard instant.
pub fn now_std() -> std::time::Instant {
    now().into_std()
}

/// The time since `earlier` (zero if `earlier` is later).
pub fn since(earlier: std::time::Instant) -> Duration {
    now_std().saturating_duration_since(earlier)
}

/// Runs `f` within `limit` from [`now`], as `tokio::time::timeout` would from the clock.
pub fn timeout<F: IntoFuture>(limit: Duration, f: F) -> tokio::time::Timeout<F::IntoFuture> {
    match now().checked_add(limit) {
        Some(deadline) => tokio::time::timeout_at(deadline, f),
        // Too far to represent: tokio's own timeout stands for "never".
        None => tokio::time::timeout(limit, f),
    }
}

/// Runs one poll of a session: [`now`] is the moment it starts for everything the poll does.
pub fn polling<R>(poll: impl FnOnce() -> R) -> R {
    let outer = POLL_STARTED.replace(Some(Instant::now()));
    let polled = poll();
    POLL_STARTED.set(outer);
    polled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_sees_one_moment_and_outside_one_the_clock_moves() {
        let (first, later) = polling(|| {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            (first, now())
        });
        assert_eq!(first, later);
        assert!(now() - first >= Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_count_from_the_polls_moment() {
        let started = now();
        let waiting = polling(|| timeout(Duration::from_secs(2), std::future::pending::<()>()));
        assert!(waiting.await.is_err());
        assert_eq!(now() - started, Duration::from_secs(2));
    }
}
