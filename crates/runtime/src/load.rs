//! How busy each event loop is, for `show info`'s `Idle_pct`.
//!
//! Each event-loop thread samples its own tokio runtime from its upkeep task
//! ([`sample_this_loop`], a few times a second): the share of the last period its loop spent
//! outside the poller (tokio's busy duration, which grows while tasks run and stops while the
//! loop waits for events). The figure goes to an atomic of the thread's own, registered once
//! in a process-wide list, so the CLI reads it without touching another thread's runtime.
//! HAProxy's `Idle_pct` is likewise the share of time its threads spent waiting in the
//! poller. (tokio's task counts would not give `Tasks`: the sessions are tasks of each
//! loop's `LocalSet`, which tokio does not count.)

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One event loop's last figures.
#[derive(Debug)]
struct LoopLoad {
    /// Percent of the last periods spent waiting for events, smoothed.
    idle_pct: AtomicU32,
}

/// Every event loop's figures.
static LOOPS: Mutex<Vec<Arc<LoopLoad>>> = Mutex::new(Vec::new());

/// What a thread keeps between two samples: its figures and the busy time and moment of the
/// last sample.
struct Sampler {
    load: Arc<LoopLoad>,
    last: Option<(Duration, Instant)>,
}

thread_local! {
    static SAMPLER: RefCell<Option<Sampler>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The list only holds shared counters: a panic cannot leave it inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Samples the event loop of the calling thread (which must run inside its tokio runtime),
/// registering it on first use.
pub fn sample_this_loop() {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let metrics = handle.metrics();
    let now = Instant::now();
    // A loop is a single-threaded runtime: its one worker is the loop.
    let busy = metrics.worker_total_busy_duration(0);
    SAMPLER.with(|sampler| {
        let mut sampler = sampler.borrow_mut();
        let sampler = sampler.get_or_insert_with(|| {
            let load = Arc::new(LoopLoad {
                idle_pct: AtomicU32::new(100),
            });
            lock(&LOOPS).push(Arc::clone(&load));
            Sampler { load, last: None }
        });
        if let Some((last_busy, last_at)) = sampler.last {
            let idle = idle_percent(busy.saturating_sub(last_busy), now - last_at);
            let before = sampler.load.idle_pct.load(Ordering::Relaxed);
            sampler
                .load
                .idle_pct
                .store(smoothed(before, idle), Ordering::Relaxed);
        }
        sampler.last = Some((busy, now));
    });
}

/// The percentage of `period` not spent `busy`.
fn idle_percent(busy: Duration, period: Duration) -> u32 {
    if period.is_zero() {
        return 100;
    }
    let busy_share = (busy.as_secs_f64() / period.as_secs_f64()).min(1.0);
    ((1.0 - busy_share) * 100.0).round() as u32
}

/// A moving average over about four samples, so one burst does not swing the figure.
fn smoothed(before: u32, now: u32) -> u32 {
    (before * 3 + now + 2) / 4
}

/// The mean idle percentage of the process's event loops (100 before any sample).
pub fn idle_percent_of_loops() -> u32 {
    let loops = lock(&LOOPS);
    if loops.is_empty() {
        return 100;
    }
    let sum: u32 = loops
        .iter()
        .map(|l| l.idle_pct.load(Ordering::Relaxed))
        .sum();
    sum / loops.len() as u32
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn idle_is_what_the_period_left_over() {
        let ms = Duration::from_millis;
        assert_eq!(idle_percent(ms(0), ms(250)), 100);
        assert_eq!(idle_percent(ms(50), ms(250)), 80);
        assert_eq!(idle_percent(ms(250), ms(250)), 0);
        // Busy time measured a little past the period's end is all of it.
        assert_eq!(idle_percent(ms(260), ms(250)), 0);
        assert_eq!(idle_percent(ms(10), ms(0)), 100);
    }

    #[test]
    fn the_average_moves_a_quarter_of_the_way() {
        assert_eq!(smoothed(100, 100), 100);
        assert_eq!(smoothed(100, 0), 75);
        assert_eq!(smoothed(0, 100), 25);
        assert_eq!(smoothed(80, 80), 80);
    }

    #[test]
    fn a_busy_loop_is_less_idle() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            sample_this_loop();
            // Busy, then a short wait for a timer: tokio adds the busy time up when its
            // loop waits.
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            sample_this_loop();
        });
        let idle = SAMPLER
            .with(|s| {
                s.borrow()
                    .as_ref()
                    .map(|s| s.load.idle_pct.load(Ordering::Relaxed))
            })
            .unwrap();
        // One mostly busy sample moves the average from 100 towards 0, by a quarter of
        // the way at most.
        assert!((75..100).contains(&idle), "{idle}");
        assert!(idle_percent_of_loops() <= 100);
    }
}
