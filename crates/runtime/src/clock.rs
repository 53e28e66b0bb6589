//! The data path's clock, read once per turn of a thread's event loop, as HAProxy reads its
//! clock once per turn of its own.
//!
//! A request used to read the time a dozen times or more (its log's timers, the deadline of
//! every wait, the statistics' rates), then once per poll of its session's task, four times
//! per kept-alive request: each a call into the vDSO. An event-loop thread now runs its tasks
//! inside [`turns`], which reads the clock each time the runtime polls the thread's task set
//! (after each poll of the I/O driver, and between batches of at most 61 tasks): [`now`],
//! [`wall_now`] and [`millis`] answer that moment for everything the turn does. A turn's work takes
//! microseconds to a few hundred, far below the milliseconds logs and timeouts count in.
//! Outside a turn, a session's poll ([`polling`]) fixes the moment for that poll; elsewhere
//! (the CLI, health checks, callers in tests) the clock is read each time. It follows
//! tokio's clock, so tests that pause time see paused time.

use std::cell::Cell;
use std::future::{Future, IntoFuture};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

thread_local! {
    /// The moment of the current turn of this thread's event loop (or of the session poll
    /// in progress, outside turns).
    static MOMENT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The wall-clock time of that moment, read at its first use.
    static MOMENT_WALL: Cell<Option<SystemTime>> = const { Cell::new(None) };
    /// [`millis`] at that moment, worked out at its first use.
    static MOMENT_MILLIS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The time: the current turn's (or session poll's) moment, or the clock outside one.
pub fn now() -> Instant {
    MOMENT.get().unwrap_or_else(Instant::now)
}

/// [`now`] as a standard instant.
pub fn now_std() -> std::time::Instant {
    now().into_std()
}

/// `read()`, worked out once per moment and kept in `cache` until the moment ends; outside a
/// moment, each time.
fn once_per_moment<T: Copy + 'static>(
    cache: &'static std::thread::LocalKey<Cell<Option<T>>>,
    read: impl FnOnce() -> T,
) -> T {
    if MOMENT.get().is_none() {
        return read();
    }
    cache.get().unwrap_or_else(|| {
        let value = read();
        cache.set(Some(value));
        value
    })
}

/// The wall-clock time: the current moment's, read once per moment, or the clock outside
/// one.
pub fn wall_now() -> SystemTime {
    once_per_moment(&MOMENT_WALL, SystemTime::now)
}

/// Milliseconds from the first call in the process to [`now`]: the clock of the statistics'
/// rates, several of which count each connection and request. Worked out once per moment.
pub fn millis() -> u64 {
    once_per_moment(&MOMENT_MILLIS, || {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        since(*ORIGIN.get_or_init(std::time::Instant::now)).as_millis() as u64
    })
}

/// The time since `earlier` (zero if `earlier` is later).
pub fn since(earlier: std::time::Instant) -> Duration {
    now_std().saturating_duration_since(earlier)
}

/// Runs `f` within `limit` from [`now`], as `tokio::time::timeout` would from the clock, timed
/// by the thread's queue of waits of that limit ([`crate::timers`]).
pub fn timeout<F: IntoFuture>(limit: Duration, f: F) -> crate::timers::Within<F::IntoFuture> {
    crate::timers::within(limit, now().checked_add(limit), f.into_future())
}

/// Runs `poll` with [`now`] fixed at `moment`, and the wall-clock time read at most once.
fn at_moment<R>(moment: Instant, poll: impl FnOnce() -> R) -> R {
    let outer = (
        MOMENT.replace(Some(moment)),
        MOMENT_WALL.take(),
        MOMENT_MILLIS.take(),
    );
    let polled = poll();
    MOMENT.set(outer.0);
    MOMENT_WALL.set(outer.1);
    MOMENT_MILLIS.set(outer.2);
    polled
}

/// Runs one poll of a session: [`now`] is the same moment for everything the poll does (the
/// turn's, within one).
pub fn polling<R>(poll: impl FnOnce() -> R) -> R {
    match MOMENT.get() {
        Some(_) => poll(),
        None => at_moment(Instant::now(), poll),
    }
}

/// Runs an event-loop thread's task set (the future a runtime blocks on) in turns: each
/// time the runtime polls it, the clock is read once and [`now`] answers that moment until
/// the poll returns.
pub async fn turns<F: Future>(tasks: F) -> F::Output {
    let mut tasks = std::pin::pin!(tasks);
    std::future::poll_fn(|cx| at_moment(Instant::now(), || tasks.as_mut().poll(cx))).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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

    #[test]
    fn a_turn_sees_one_moment_and_the_next_turn_a_later_one() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(turns(async {
            let (first, wall, ms) = (now(), wall_now(), millis());
            std::thread::sleep(Duration::from_millis(2));
            assert_eq!(now(), first);
            assert_eq!(wall_now(), wall);
            assert_eq!(millis(), ms);
            // A session's poll within the turn keeps the turn's moment.
            assert_eq!(polling(now), first);
            // Yielding ends the turn: the runtime polls the task set again, in a new one.
            tokio::task::yield_now().await;
            assert!(now() - first >= Duration::from_millis(2));
            assert_ne!(wall_now(), wall);
            assert!(millis() >= ms + 2, "{} then {ms}", millis());
        }));
        assert_eq!(MOMENT.get(), None, "no moment outlives its turn");
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_count_from_the_polls_moment() {
        let started = now();
        let waiting = polling(|| timeout(Duration::from_secs(2), std::future::pending::<()>()));
        assert!(waiting.await.is_err());
        assert_eq!(now() - started, Duration::from_secs(2));
    }
}
