//! The `mode http` data path: one client connection carries requests one after the other
//! (keep-alive, pipelining), each forwarded to a server chosen per request.
//!
//! [`session::serve`] runs the client side: it reads and parses each request head within
//! `timeout http-request`, answers bad requests itself (400, 408, 414, 431, 501, 505) and hands
//! good ones to [`exchange`], which gets a server connection (the session's own, the thread's
//! idle [`pool`], or a new one), sends the re-encoded head, streams the body both ways with
//! [`body`], and says whether both connections may carry another request. Heads are parsed and
//! re-encoded by the pure `sluice_http` codec; nothing here buffers a whole body.

pub mod body;
pub mod buffer;
pub(crate) mod cache;
mod cacheability;
mod compress;
pub mod exchange;
mod forwarded;
mod invalid;
pub mod normalize;
pub mod persist;
pub mod pool;
mod redir;
pub mod rewrite;
pub mod rules;
pub mod scratch;
pub mod session;
pub mod settings;
pub mod stats_page;
mod vary;

/// Connections parked since the last look after which the allocator is asked to return its
/// free pages: each left about a kilobyte of its task's memory free, scattered among blocks
/// still in use.
const PARKS_BEFORE_TRIM: usize = 64;

/// Bytes of buffers, or of the allocator's cached blocks, let go of by one trim after which
/// the allocator is asked to return its free pages to the system (that walks its heaps: not
/// worth it for a few buffers).
const TRIM_AFTER_BYTES: usize = 256 << 10;

/// Whether the allocator is asked to return its free pages after an upkeep round that let
/// `buffers` bytes of buffers go, and `cached` bytes of the allocator's cached blocks (some
/// back to the C allocator: the task cells of connections parked since, 10,000 of which leave
/// about 5 MiB there), and saw `parked` connections parked: never under
/// `no-memory-trimming` (`trim` false), whose scan of a fragmented heap may hold the loop.
fn trim_now(trim: bool, (buffers, cached): (usize, usize), parked: usize) -> bool {
    trim && (buffers >= TRIM_AFTER_BYTES
        || cached >= TRIM_AFTER_BYTES
        || parked >= PARKS_BEFORE_TRIM)
}

/// How often the upkeep runs ([`upkeep`]); its trims of the thread's caches run every
/// [`buffer::TRIM_PERIOD`].
const UPKEEP_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);

/// Runs for the life of an event-loop thread, never returning: every [`UPKEEP_PERIOD`],
/// lets go of the idle server connections the thread's traffic no longer needs
/// ([`pool::purge_due`]), has the allocator return the memory that parked connections' tasks
/// left free (unless `no-memory-trimming`: `trim` false), and samples how busy the loop was
/// (`show info`'s `Idle_pct`, `sluice_runtime::load`); every [`buffer::TRIM_PERIOD`], lets go
/// of the input buffers, the allocator's cached blocks, the spare head buffers and span lists
/// that went unused since the last time ([`buffer::trim_idle_buffers`],
/// [`scratch::trim_spares`]), and of the allocator's free pages if that freed a lot.
/// The period timer also keeps a timer always standing within the next quarter second:
/// tokio wakes its own poller (an eventfd write, then one more event to read) whenever a
/// timer is set earlier than every other, which, between connections that leave no wait
/// behind, the thread's timer task (`sluice_runtime::timers`) would do for the first
/// timeout of every new connection.
pub async fn upkeep(trim: bool) -> ! {
    let mut period = tokio::time::interval(UPKEEP_PERIOD);
    period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_trim = tokio::time::Instant::now();
    loop {
        let now = period.tick().await;
        let mut freed = (0, 0);
        if now.duration_since(last_trim) >= buffer::TRIM_PERIOD {
            last_trim = now;
            // The allocator's cache, then the pool's, whose surplus goes to the system at
            // once (`sluice_heap::freeing_at_once`).
            let cached = sluice_heap::trim_thread_cache();
            freed = (buffer::trim_idle_buffers(), cached);
            scratch::trim_spares();
            sluice_http::head::trim_spare_span_lists();
        }
        pool::purge_due();
        sluice_runtime::load::sample_this_loop();
        let parked = crate::park::parked_since_last_look();
        if trim_now(trim, freed, parked) {
            sluice_heap::release_free_memory();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_memory_trimming_never_trims() {
        assert!(trim_now(true, (TRIM_AFTER_BYTES, 0), 0));
        assert!(!trim_now(true, (TRIM_AFTER_BYTES - 1, 0), 0));
        assert!(trim_now(true, (0, 0), PARKS_BEFORE_TRIM));
        assert!(!trim_now(true, (0, 0), PARKS_BEFORE_TRIM - 1));
        assert!(!trim_now(false, (TRIM_AFTER_BYTES, 0), PARKS_BEFORE_TRIM));
    }

    #[test]
    fn blocks_the_allocator_cache_let_go_of_are_trimmed_too() {
        // Parked connections' task cells leave the cache a trim period after they parked,
        // when no buffer may be left to free: their pages are returned all the same.
        assert!(trim_now(true, (0, TRIM_AFTER_BYTES), 0));
        assert!(!trim_now(true, (0, TRIM_AFTER_BYTES - 1), 0));
        assert!(!trim_now(false, (0, TRIM_AFTER_BYTES), 0));
    }
}
