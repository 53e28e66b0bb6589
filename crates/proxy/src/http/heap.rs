//! When an event-loop thread asks the C allocator to give free pages back to the system.
//!
//! Two kinds of memory are let go of in bulk: data buffers the thread's pool no longer needs
//! (mapped apart from the heap, see `sluice_net::fd::map_buffers_apart`), and the request
//! state a session boxes while a request is in flight (several KiB, freed when its connection
//! goes idle). The second kind is what grows the heap when clients keep arriving and staying:
//! each new connection's long-lived objects are carved out of the block the previous request
//! freed, the next request's state no longer fits in what is left, and the heap grows by a
//! block per connection, mostly free but resident. A trim releases the free pages inside
//! those blocks. Under a steady load nothing of the sort happens (freed blocks are reused by
//! the next requests, and a trim would only make them fault again), so the thread trims only
//! when its connections grew in number while request state was freed, or when its buffer
//! pool let go of many buffers.

use std::cell::Cell;

/// Bytes freed in one period after which a trim is worth its walk over the allocator's heap.
pub const TRIM_AFTER_BYTES: usize = 256 << 10;

/// New live sessions in a period (over the fewest seen since the last trim) that make freed
/// request state worth a trim: the heap grows only while connections accumulate.
const GROWTH_SESSIONS: usize = 64;

#[derive(Debug, Default)]
struct Tracker {
    /// Sessions alive on the thread now.
    live: usize,
    /// The fewest sessions alive since the last trim.
    low: usize,
    /// Request state freed since the last period.
    state_freed: usize,
}

impl Tracker {
    /// Whether the period that just ended calls for a trim, given the buffer bytes the pool
    /// let go of; starts the next period.
    fn period_ended(&mut self, buffers_freed: usize) -> bool {
        let grown = self.live.saturating_sub(self.low) >= GROWTH_SESSIONS;
        let trim =
            buffers_freed >= TRIM_AFTER_BYTES || (grown && self.state_freed >= TRIM_AFTER_BYTES);
        self.state_freed = 0;
        if trim {
            self.low = self.live;
        }
        trim
    }
}

thread_local! {
    static TRACKER: Cell<Tracker> = Cell::new(Tracker::default());
}

fn with<R>(f: impl FnOnce(&mut Tracker) -> R) -> R {
    TRACKER.with(|cell| {
        let mut tracker = cell.take();
        let out = f(&mut tracker);
        cell.set(tracker);
        out
    })
}

/// A session alive on this thread, counted from its creation to its drop (whichever way the
/// session ends). Holds nothing: it adds no byte to the session's state.
#[derive(Debug)]
pub struct LiveSession(());

impl LiveSession {
    /// Counts a session starting on this thread.
    pub fn start() -> LiveSession {
        with(|t| t.live += 1);
        LiveSession(())
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        with(|t| {
            t.live = t.live.saturating_sub(1);
            t.low = t.low.min(t.live);
        });
    }
}

/// A session let go of `bytes` of request state.
pub(crate) fn state_freed(bytes: usize) {
    with(|t| t.state_freed = t.state_freed.saturating_add(bytes));
}

/// Ends the thread's period: trims the allocator's heap if the period calls for it.
pub(crate) fn period_ended(buffers_freed: usize) {
    if with(|t| t.period_ended(buffers_freed)) {
        sluice_net::fd::release_free_memory();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_load_never_trims() {
        let mut t = Tracker {
            live: 500,
            low: 500,
            ..Tracker::default()
        };
        for _ in 0..10 {
            t.state_freed = 100 << 20;
            assert!(!t.period_ended(0));
        }
    }

    #[test]
    fn connections_that_accumulate_while_state_is_freed_trim() {
        let mut t = Tracker {
            live: 300,
            state_freed: 2 << 20,
            ..Tracker::default()
        };
        assert!(t.period_ended(0));
        // The next trim needs as many new connections again.
        t.live = 330;
        t.state_freed = 2 << 20;
        assert!(!t.period_ended(0));
        t.live = 364;
        t.state_freed = 2 << 20;
        assert!(t.period_ended(0));
        // Growth without freed state (connections that never made a request) does not.
        t.live = 1000;
        assert!(!t.period_ended(0));
    }

    #[test]
    fn growth_counts_from_the_fewest_connections_seen() {
        let mut t = Tracker {
            live: 100,
            low: 100,
            ..Tracker::default()
        };
        t.live = 40;
        t.low = t.low.min(t.live);
        t.live = 110;
        t.state_freed = TRIM_AFTER_BYTES;
        assert!(t.period_ended(0));
    }

    #[test]
    fn a_buffer_pool_that_let_go_of_many_buffers_trims() {
        let mut t = Tracker::default();
        assert!(t.period_ended(TRIM_AFTER_BYTES));
        assert!(!t.period_ended(TRIM_AFTER_BYTES - 1));
    }

    #[test]
    fn live_sessions_are_counted_until_dropped() {
        let before = with(|t| t.live);
        let a = LiveSession::start();
        let b = LiveSession::start();
        assert_eq!(with(|t| t.live), before + 2);
        drop(a);
        drop(b);
        assert_eq!(with(|t| t.live), before);
        assert_eq!(std::mem::size_of::<LiveSession>(), 0);
    }
}
