//! The process's compression budget (configuration.txt `maxcomprate`, `maxcompcpuusage`,
//! `maxzlibmem`, `tune.comp.maxlevel`) and the figures it is measured against.
//!
//! Compressing costs CPU and, for each response compressed with deflate, a state of about
//! 256 kB. HAProxy bounds both: a response starts compressed only while the process takes in
//! less than `maxcomprate` per second, leaves more idle time than `maxcompcpuusage` allows,
//! and has room for one more state under `maxzlibmem`; while it compresses, the level goes
//! down one step each time a limit is exceeded and back up to `tune.comp.maxlevel` when not.
//! The data path (the proxy crate's `http::compress`) asks [`CompressionBudget`]; `show info`
//! reads its rates and limit, and `set rate-limit http-compression global` changes the rate
//! limit.

use crate::freq::Rate;
use std::sync::atomic::{AtomicU64, Ordering};

/// HAProxy's default `tune.comp.maxlevel`: the fastest level.
pub const DEFAULT_MAX_LEVEL: u32 = 1;

/// The memory of one deflate state with zlib's default window and memory level, as HAProxy
/// reckons it against `maxzlibmem`: the window, its chains, the hash heads and the pending
/// symbols.
pub const DEFLATE_STATE_BYTES: u64 = (1 << (15 + 2)) + (1 << (8 + 9));

/// What compression may use, and what it uses.
#[derive(Debug)]
pub struct CompressionBudget {
    /// `maxcomprate`, in bytes per second (0: no limit); `set rate-limit http-compression
    /// global` changes it.
    rate_limit: AtomicU64,
    /// The least idle percentage of the event loops under which no response starts
    /// compressed (100 minus `maxcompcpuusage`; 0: no limit).
    min_idle: u32,
    /// `maxzlibmem` as a number of deflate states (`None`: no limit).
    max_states: Option<u64>,
    /// `tune.comp.maxlevel`: the level a compression starts at and goes back up to.
    pub max_level: u32,
    /// Bytes per second fed to the compressors and coming out of them (`CompressBpsIn`,
    /// `CompressBpsOut` in `show info`), counted as they pass.
    pub rates: [Rate; 2],
}

impl Default for CompressionBudget {
    fn default() -> Self {
        CompressionBudget::new(None, None, None, None)
    }
}

impl CompressionBudget {
    /// The budget of `maxcomprate` (kB/s), `maxcompcpuusage` (percent), `maxzlibmem` (MB)
    /// and `tune.comp.maxlevel`.
    pub fn new(
        rate_kbps: Option<u32>,
        cpu_percent: Option<u32>,
        memory_mb: Option<u32>,
        max_level: Option<u32>,
    ) -> Self {
        CompressionBudget {
            rate_limit: AtomicU64::new(u64::from(rate_kbps.unwrap_or(0)) * 1024),
            min_idle: 100 - cpu_percent.unwrap_or(100).min(100),
            max_states: memory_mb
                .filter(|&mb| mb > 0)
                .map(|mb| (u64::from(mb) << 20) / DEFLATE_STATE_BYTES),
            max_level: max_level.unwrap_or(DEFAULT_MAX_LEVEL),
            rates: Default::default(),
        }
    }

    /// The rate limit in bytes per second (0: none; `CompressBpsRateLim` in `show info`).
    pub fn rate_limit(&self) -> u64 {
        self.rate_limit.load(Ordering::Relaxed)
    }

    /// Sets the rate limit, in kilobytes per second (0: none).
    pub fn set_rate_limit_kbps(&self, kbps: u32) {
        self.rate_limit
            .store(u64::from(kbps) * 1024, Ordering::Relaxed);
    }

    /// Whether the rate or CPU limit is exceeded now, with the event loops `idle_pct` idle.
    pub fn exceeded(&self, idle_pct: u32) -> bool {
        let limit = self.rate_limit();
        (limit > 0 && u64::from(self.rates[0].get()) > limit) || idle_pct < self.min_idle
    }

    /// Whether a rate or CPU limit is set at all (otherwise levels never change).
    pub fn limits_level(&self) -> bool {
        self.rate_limit() > 0 || self.min_idle > 0
    }

    /// Whether one more deflate state fits beside the `states` alive.
    pub fn has_room_for_state(&self, states: u64) -> bool {
        self.max_states.is_none_or(|max| states < max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_haproxys_units() {
        let budget = CompressionBudget::new(Some(100), Some(70), Some(1), Some(5));
        assert_eq!(budget.rate_limit(), 102_400);
        assert_eq!(budget.max_level, 5);
        assert!(budget.limits_level());
        // 1 MB holds four states of 256 kB.
        assert!(budget.has_room_for_state(3));
        assert!(!budget.has_room_for_state(4));
        // Less than 30% idle is more than 70% of the CPU used.
        assert!(budget.exceeded(29));
        assert!(!budget.exceeded(30));
        budget.rates[0].add(200_000);
        assert!(budget.exceeded(100), "the rate is over 100 kB/s");
        budget.set_rate_limit_kbps(0);
        assert!(!budget.exceeded(100));

        let unlimited = CompressionBudget::default();
        assert!(!unlimited.limits_level());
        assert!(unlimited.has_room_for_state(u64::MAX - 1));
        assert!(!unlimited.exceeded(0));
        assert_eq!(unlimited.max_level, 1);
    }
}
