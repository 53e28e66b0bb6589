//! Accept rate limits: the process's (`set rate-limit connections|sessions global`,
//! management.txt §9.3) and a frontend's (`rate-limit sessions`).
//!
//! A [`RateLimit`] counts events per second the way HAProxy's frequency counters do: the
//! rate is this second's count plus the previous second's count weighted by the part of
//! the previous second still inside a sliding one-second window. The accept loops ask
//! [`RateLimit::admit`] before each accept and wait the time it returns when the limit is
//! reached, so clients wait in the kernel's queue as with `maxconn`. With no limit set
//! (the default) admitting is one atomic load and nothing is counted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Window {
    /// The start of the current second.
    start: Instant,
    curr: u32,
    prev: u32,
}

/// One events-per-second limit.
#[derive(Debug)]
pub struct RateLimit {
    /// Events per second; 0 for none.
    limit: AtomicU32,
    window: Mutex<Window>,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            limit: AtomicU32::new(0),
            window: Mutex::new(Window {
                start: Instant::now(),
                curr: 0,
                prev: 0,
            }),
        }
    }
}

const SECOND: Duration = Duration::from_secs(1);

impl RateLimit {
    /// The limit in force (0: none).
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Sets the limit (0 removes it).
    pub fn set_limit(&self, limit: u32) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Counts one event at `now` if the rate allows it; otherwise how long to wait before
    /// asking again.
    pub fn admit(&self, now: Instant) -> Result<(), Duration> {
        let limit = self.limit();
        if limit == 0 {
            return Ok(());
        }
        // The window only moves and counts; a panic cannot leave it unusable.
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(w.start);
        if elapsed >= SECOND {
            let seconds = elapsed.as_secs();
            w.prev = if seconds == 1 { w.curr } else { 0 };
            w.curr = 0;
            w.start += Duration::from_secs(seconds);
        }
        let into = now.saturating_duration_since(w.start);
        let left = SECOND.saturating_sub(into);
        // prev × (part of the previous second still in the window), rounded down as
        // HAProxy does: a limit of N admits N per second, not fewer.
        let weighted = u128::from(w.prev) * left.as_nanos() / SECOND.as_nanos();
        let rate = u128::from(w.curr) + weighted;
        if rate < u128::from(limit) {
            w.curr += 1;
            return Ok(());
        }
        if w.curr >= limit || w.prev == 0 {
            return Err(left.max(Duration::from_millis(1)));
        }
        // The weighted part shrinks with time: it leaves room for one more once less than
        // (limit - curr) × 1 s / prev of the second is left.
        let allowed = u128::from(limit - w.curr) * SECOND.as_nanos() / u128::from(w.prev);
        let wait = left.as_nanos().saturating_sub(allowed) + 1;
        Err(
            Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX))
                .max(Duration::from_millis(1)),
        )
    }
}

/// The process's accept limits.
#[derive(Debug, Default)]
pub struct AcceptLimits {
    /// `set rate-limit connections global`.
    pub connections: RateLimit,
    /// `set rate-limit sessions global` (every Sluice connection is a session).
    pub sessions: RateLimit,
}

impl AcceptLimits {
    /// Waits until both rates allow one more connection, and counts it.
    pub async fn admit(&self) {
        for limit in [&self.connections, &self.sessions] {
            limit.wait_turn().await;
        }
    }
}

impl RateLimit {
    /// Waits until the rate allows one more event, and counts it.
    pub async fn wait_turn(&self) {
        while let Err(wait) = self.admit(crate::clock::now_std()) {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rates_slide_over_one_second() {
        let r = RateLimit::default();
        let t0 = Instant::now();
        assert_eq!(r.admit(t0), Ok(()));
        r.set_limit(3);
        for _ in 0..3 {
            assert_eq!(r.admit(t0), Ok(()));
        }
        // Full for the rest of this second.
        let wait = r.admit(t0).unwrap_err();
        assert!(
            wait <= SECOND && wait > Duration::from_millis(900),
            "{wait:?}"
        );
        // Half-way through the next second, half of the previous count still weighs:
        // 3 × 0.5 rounds down to 1, leaving room for two.
        let later = t0 + Duration::from_millis(1500);
        assert_eq!(r.admit(later), Ok(()));
        assert_eq!(r.admit(later), Ok(()));
        // The third once 3 × (time left) drops below 1 s: a sixth of a second later.
        let wait = r.admit(later).unwrap_err();
        assert!(
            wait > Duration::from_millis(160) && wait < Duration::from_millis(168),
            "{wait:?}"
        );
        assert!(r.admit(later + wait - Duration::from_millis(2)).is_err());
        assert_eq!(r.admit(later + wait), Ok(()));
        // Without a limit, anything goes.
        r.set_limit(0);
        assert_eq!(r.admit(later), Ok(()));
        // Just after a full second, the previous one weighs nothing once rounded down.
        let r = RateLimit::default();
        let t1 = Instant::now();
        r.set_limit(1);
        assert_eq!(r.admit(t1), Ok(()));
        assert!(r.admit(t1).is_err());
        assert_eq!(r.admit(t1 + SECOND + Duration::from_millis(1)), Ok(()));
    }
}
