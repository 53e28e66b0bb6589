//! Idle server connections kept for reuse, one pool per event-loop thread, holding only as
//! many as the traffic needs, as HAProxy's pools do (configuration.txt "pool-purge-delay",
//! "pool-low-conn"; management.txt "show servers conn").
//!
//! A connection that may be shared is offered back as soon as its response is done, whether
//! or not its client stays connected (an idle kept-alive client holds no server connection);
//! the client's next request usually takes it back, the most recently used coming first. Per
//! server, the thread counts the connections carrying a request ([`InUse`] tokens, so an
//! error path can never leak one), the most in use since the last purge, and an estimate of
//! the connections needed. An offered connection is kept only if the thread's list for its
//! server is empty or holds only never-reused ones while this one was reused, or if the
//! connections in use plus the idle ones stay within the estimate plus `pool-low-conn` (and
//! `pool-max-conn`, applied per thread, is not reached, and `pool-purge-delay` is not 0);
//! otherwise it closes at once. So clients that come one after the other leave one idle
//! connection per thread behind, not one each (HAProxy, counting per server across its
//! threads, leaves one). Every `pool-purge-delay` the thread's standing timer ([`purge_due`])
//! closes half (rounded up) of the connections beyond what the last period needed, oldest
//! idle first, and lets the estimate follow the traffic down. A connection the server closed
//! or wrote to while idle is never reused.
//!
//! A connection lives on the thread that created it (each thread has its own reactor), so the
//! pool and its counts are thread-local: taking and returning a connection is a plain map
//! operation, with no lock and no cross-thread traffic. The counts reach `show servers conn`
//! through atomics of the thread's own (`sluice_runtime::idle`).

use rustc_hash::FxHashMap;
use sluice_config::proxy::ServerConf;
use sluice_net::stream::Stream;
use sluice_runtime::idle::{Figures, Published};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::time::Duration;
use tokio::time::Instant;

/// Identifies a server across the process: its backend's uid and its id in the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServerKey {
    /// The backend's uid.
    pub backend: u32,
    /// The server's id in its backend (`show servers conn`).
    pub server: u32,
    /// The server's location (`Location::pool_id`): unique in the process, and renewed when
    /// `set server addr` moves the server, so an idle connection is only reused for the
    /// address it was made to.
    pub location: u64,
}

/// A server's pool settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `pool-max-conn`: idle connections kept at most on each thread; `None` for no limit.
    pub max_conn: Option<u32>,
    /// `pool-low-conn`: idle connections kept beyond the estimated need.
    pub low_conn: u32,
    /// `pool-purge-delay`: the period of the purges; zero keeps no idle connection.
    pub purge_delay: Duration,
}

impl Limits {
    /// The settings of `server`.
    pub fn of(server: &ServerConf) -> Limits {
        Limits {
            max_conn: server.pool_max_conn,
            low_conn: server.pool_low_conn,
            purge_delay: server.pool_purge_delay,
        }
    }
}

/// How many connections to a server the thread's traffic uses (HAProxy's `used_cur`,
/// `used_max` and `need_est`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Usage {
    /// Connections carrying a request now.
    used: u32,
    /// The most carrying requests at once since the last purge.
    used_max: u32,
    /// The estimate of the connections needed.
    need_est: u32,
}

impl Usage {
    /// One more connection carries a request: the maximum and the estimate cover it.
    fn taken(self) -> Usage {
        let used = self.used.saturating_add(1);
        Usage {
            used,
            used_max: self.used_max.max(used),
            need_est: self.need_est.max(used),
        }
    }

    /// One connection less carries a request.
    fn returned(self) -> Usage {
        Usage {
            used: self.used.saturating_sub(1),
            ..self
        }
    }
}

/// A thread's idle connections to a server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IdleCount {
    /// All of them.
    total: u32,
    /// Those that already served more than one request (HAProxy's "safe" ones).
    reused: u32,
}

/// Whether a connection whose response is done stays idle, `usage` still counting it in
/// use: never when purges are off or `pool-max-conn` is reached; always as the thread's
/// first idle connection to the server, or as its first reused one when only never-reused
/// ones wait (a connection known to be reusable is worth having); otherwise only while the
/// connections in use and idle stay within the estimated need plus `pool-low-conn`.
fn admits(usage: Usage, idle: IdleCount, reused: bool, limits: &Limits) -> bool {
    if limits.purge_delay.is_zero() || limits.max_conn.is_some_and(|max| idle.total >= max) {
        return false;
    }
    let first_of_its_kind = idle.reused == 0 && (reused || idle.total == 0);
    let wanted = usage
        .used
        .max(usage.need_est)
        .saturating_add(limits.low_conn);
    first_of_its_kind || usage.used.saturating_add(idle.total) <= wanted
}

/// One purge of a server's `idle` connections: how many to close (half the excess over
/// what the last period needed, rounded up), and the usage the next period starts with
/// (the estimate moves halfway to the last period's maximum, never below it).
fn purge(usage: Usage, idle: u32) -> (u32, Usage) {
    let needed = usage.used_max.max(usage.need_est);
    let excess = usage.used.saturating_add(idle).saturating_sub(needed);
    let close = excess.div_ceil(2).min(idle);
    let next = Usage {
        used: usage.used,
        used_max: usage.used,
        need_est: usage.need_est.midpoint(usage.used_max).max(usage.used_max),
    };
    (close, next)
}

/// A connection waiting in the pool.
#[derive(Debug)]
struct IdleConn {
    stream: Stream,
    /// How many requests it carried (for `max-reuse`).
    served: u32,
}

impl IdleConn {
    /// Whether it already served more than one request (`http-reuse aggressive` only takes
    /// those for first requests).
    fn reused(&self) -> bool {
        self.served > 1
    }
}

/// A thread's connections to one server: the idle ones, oldest first, and the usage.
struct ServerPool {
    idle: Vec<IdleConn>,
    /// How many of `idle` are reused.
    idle_reused: u32,
    usage: Usage,
    purge_delay: Duration,
    next_purge: Instant,
    published: Published,
}

impl ServerPool {
    fn new(key: ServerKey, purge_delay: Duration) -> ServerPool {
        ServerPool {
            idle: Vec::new(),
            idle_reused: 0,
            usage: Usage::default(),
            purge_delay,
            next_purge: Instant::now() + purge_delay,
            published: Published::new((key.backend, key.server)),
        }
    }

    fn idle_count(&self) -> IdleCount {
        IdleCount {
            total: u32::try_from(self.idle.len()).unwrap_or(u32::MAX),
            reused: self.idle_reused,
        }
    }

    fn push(&mut self, conn: IdleConn) {
        self.idle_reused += u32::from(conn.reused());
        self.idle.push(conn);
    }

    fn remove(&mut self, index: usize) -> IdleConn {
        let conn = self.idle.remove(index);
        self.idle_reused -= u32::from(conn.reused());
        conn
    }

    /// Closes the idle connections the last period did not need and starts the next one.
    fn purge(&mut self, now: Instant) {
        let (close, next) = purge(self.usage, self.idle_count().total);
        for conn in self.idle.drain(..close as usize) {
            self.idle_reused -= u32::from(conn.reused());
        }
        self.usage = next;
        self.next_purge = now + self.purge_delay;
        self.publish();
    }

    /// Nothing idle, nothing in use, nothing remembered: the entry may go.
    fn is_unused(&self) -> bool {
        self.idle.is_empty() && self.usage == Usage::default()
    }

    /// Tells `show servers conn` the current figures.
    fn publish(&self) {
        let idle = self.idle_count();
        self.published.set(Figures {
            used_cur: self.usage.used,
            used_max: self.usage.used_max,
            need_est: self.usage.need_est,
            idle_unsafe: idle.total - idle.reused,
            idle_safe: idle.reused,
        });
    }
}

thread_local! {
    // Looked up several times per request (taking, counting in use, returning): a fast
    // non-keyed hash (the keys are the process's own numbers, not chosen by clients).
    static POOLS: RefCell<FxHashMap<ServerKey, ServerPool>> = RefCell::new(FxHashMap::default());
}

/// A connection to a server carrying a request, counted in use on this thread until the
/// token is dropped (the connection closes) or handed to [`put`] with the connection.
#[derive(Debug)]
#[must_use]
pub struct InUse {
    key: ServerKey,
    /// The count lives in this thread's pools: the token must stay on the thread.
    _thread_bound: PhantomData<*const ()>,
}

impl InUse {
    fn new(key: ServerKey) -> InUse {
        InUse {
            key,
            _thread_bound: PhantomData,
        }
    }

    /// The server, without the release on drop: the caller accounts for the return.
    fn into_key(self) -> ServerKey {
        let key = self.key;
        std::mem::forget(self);
        key
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        // The pools go away with their thread, and the counts with them.
        let _ = POOLS.try_with(|pools| {
            if let Some(pool) = pools.borrow_mut().get_mut(&self.key) {
                pool.usage = pool.usage.returned();
                pool.publish();
            }
        });
    }
}

/// The thread's entry for `key`, made on first use.
fn server_pool<'p>(
    pools: &'p mut FxHashMap<ServerKey, ServerPool>,
    key: ServerKey,
    limits: &Limits,
) -> &'p mut ServerPool {
    pools
        .entry(key)
        .or_insert_with(|| ServerPool::new(key, limits.purge_delay))
}

/// Counts a connection to `key` that was not taken from the pool (a new one, or one kept
/// by its session) as carrying a request.
pub fn in_use(key: ServerKey, limits: &Limits) -> InUse {
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let pool = server_pool(&mut pools, key, limits);
        pool.usage = pool.usage.taken();
        pool.publish();
    });
    InUse::new(key)
}

/// Takes a usable idle connection to `key`, the most recently used first (its TCP state is
/// the freshest), now counted in use. A candidate the server closed or wrote to while it
/// was idle is dropped on the way. Only candidates are probed (one system call each):
/// probing the whole list would cost a call per idle connection on every request. With
/// `only_reused`, only connections already shared are taken. Also gives how many requests
/// the connection carried.
pub fn take(key: ServerKey, only_reused: bool) -> Option<(Stream, u32, InUse)> {
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let pool = pools.get_mut(&key)?;
        let taken = loop {
            let Some(index) = pool.idle.iter().rposition(|c| !only_reused || c.reused()) else {
                break None;
            };
            let conn = pool.remove(index);
            if conn.stream.is_idle_usable() {
                break Some((conn.stream, conn.served));
            }
        };
        if taken.is_some() {
            pool.usage = pool.usage.taken();
        }
        pool.publish();
        taken.map(|(stream, served)| (stream, served, InUse::new(key)))
    })
}

/// Offers a connection whose response is done back to the pool: it stays idle if the
/// server's traffic needs it (`admits`), else it closes now. `served` is how many requests
/// it carried, this one included.
pub fn put(in_use: InUse, stream: Stream, served: u32, limits: &Limits) {
    let key = in_use.into_key();
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let pool = server_pool(&mut pools, key, limits);
        let conn = IdleConn { stream, served };
        if admits(pool.usage, pool.idle_count(), conn.reused(), limits) {
            pool.push(conn);
        }
        pool.usage = pool.usage.returned();
        pool.publish();
    });
}

/// Runs the purges that are due on this thread's pools (called by the thread's standing
/// timer), and forgets servers it no longer has anything to count for.
pub fn purge_due() {
    let now = Instant::now();
    POOLS.with(|pools| {
        pools.borrow_mut().retain(|_, pool| {
            if pool.next_purge <= now {
                pool.purge(now);
            }
            !pool.is_unused()
        });
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn connected_pair() -> (Stream, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (Stream::Tcp(client), server)
    }

    const KEY: ServerKey = ServerKey {
        backend: 1,
        server: 1,
        location: 1,
    };

    const LIMITS: Limits = Limits {
        max_conn: None,
        low_conn: 0,
        purge_delay: Duration::from_secs(5),
    };

    fn usage(used: u32, used_max: u32, need_est: u32) -> Usage {
        Usage {
            used,
            used_max,
            need_est,
        }
    }

    fn idle(total: u32, reused: u32) -> IdleCount {
        IdleCount { total, reused }
    }

    /// This thread's usage and idle connections for `key`.
    fn state_of(key: ServerKey) -> Option<(Usage, IdleCount)> {
        POOLS.with(|pools| {
            pools
                .borrow()
                .get(&key)
                .map(|pool| (pool.usage, pool.idle_count()))
        })
    }

    /// A connection of `key` that carried a request, offered back to the pool.
    async fn serve_one(key: ServerKey, served: u32) -> tokio::net::TcpStream {
        let (stream, peer) = connected_pair().await;
        put(in_use(key, &LIMITS), stream, served, &LIMITS);
        peer
    }

    #[test]
    fn the_first_idle_connection_of_a_thread_is_always_kept() {
        // Even beyond the estimate: a thread with none would have to connect again.
        assert!(admits(usage(3, 3, 0), idle(0, 0), false, &LIMITS));
        assert!(admits(usage(1, 1, 1), idle(0, 0), true, &LIMITS));
    }

    #[test]
    fn a_reused_connection_is_kept_while_only_never_reused_ones_wait() {
        let over_need = usage(1, 1, 1);
        assert!(admits(over_need, idle(3, 0), true, &LIMITS));
        assert!(!admits(over_need, idle(3, 0), false, &LIMITS));
        assert!(!admits(over_need, idle(3, 1), true, &LIMITS));
    }

    #[test]
    fn beyond_the_first_connections_are_kept_within_the_estimated_need() {
        // used + idle <= max(used, need_est) + pool-low-conn, `used` counting this one.
        assert!(admits(usage(2, 4, 4), idle(2, 1), false, &LIMITS));
        assert!(!admits(usage(2, 4, 4), idle(3, 1), false, &LIMITS));
        let low = Limits {
            low_conn: 1,
            ..LIMITS
        };
        assert!(admits(usage(2, 4, 4), idle(3, 1), false, &low));
        assert!(!admits(usage(2, 4, 4), idle(4, 1), false, &low));
    }

    #[test]
    fn nothing_is_kept_without_purges_or_beyond_pool_max_conn() {
        let no_purge = Limits {
            purge_delay: Duration::ZERO,
            ..LIMITS
        };
        assert!(!admits(usage(1, 1, 1), idle(0, 0), false, &no_purge));
        let max_two = Limits {
            max_conn: Some(2),
            ..LIMITS
        };
        assert!(admits(usage(9, 9, 12), idle(1, 1), false, &max_two));
        assert!(!admits(usage(9, 9, 12), idle(2, 1), false, &max_two));
        let max_zero = Limits {
            max_conn: Some(0),
            ..LIMITS
        };
        assert!(!admits(usage(1, 1, 1), idle(0, 0), false, &max_zero));
    }

    #[test]
    fn a_purge_closes_half_the_excess_rounded_up() {
        // 0 in use + 5 idle - max(used_max 1, need_est 2) = 3 too many: 2 close.
        assert_eq!(purge(usage(0, 1, 2), 5), (2, usage(0, 0, 1)));
        // 2 in use + 4 idle - 4 = 2 too many: 1 closes; the estimate goes halfway to the
        // maximum, never below it, and the maximum restarts from the connections in use.
        assert_eq!(purge(usage(2, 4, 4), 4), (1, usage(2, 2, 4)));
        assert_eq!(purge(usage(2, 6, 3), 0), (0, usage(2, 2, 6)));
        // Within the need: nothing closes.
        assert_eq!(purge(usage(1, 3, 2), 2), (0, usage(1, 1, 3)));
    }

    #[tokio::test]
    async fn returns_live_connections_and_respects_the_limit() {
        let limit_one = Limits {
            max_conn: Some(1),
            ..LIMITS
        };
        let (a, _peer_a) = connected_pair().await;
        let (b, _peer_b) = connected_pair().await;
        // Both in use at once: the estimate alone would keep both.
        let (in_use_a, in_use_b) = (in_use(KEY, &limit_one), in_use(KEY, &limit_one));
        put(in_use_a, a, 1, &limit_one);
        put(in_use_b, b, 1, &limit_one);
        assert!(take(KEY, false).is_some());
        assert!(take(KEY, false).is_none());
    }

    #[tokio::test]
    async fn closed_connections_are_not_reused() {
        let (a, peer) = connected_pair().await;
        drop(peer);
        // Wait until the FIN has arrived: the connection reads as closed.
        let Stream::Tcp(tcp) = &a else { unreachable!() };
        tcp.readable().await.unwrap();
        put(in_use(KEY, &LIMITS), a, 1, &LIMITS);
        assert!(take(KEY, false).is_none());
        assert_eq!(state_of(KEY), Some((usage(0, 1, 1), idle(0, 0))));
    }

    #[tokio::test]
    async fn connections_the_server_wrote_to_are_not_reused() {
        let (a, peer) = connected_pair().await;
        peer.try_write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .unwrap();
        let Stream::Tcp(tcp) = &a else { unreachable!() };
        tcp.readable().await.unwrap();
        put(in_use(KEY, &LIMITS), a, 1, &LIMITS);
        assert!(take(KEY, false).is_none());
    }

    #[tokio::test]
    async fn a_drained_connection_is_reused_after_its_response() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut a, mut peer) = connected_pair().await;
        peer.write_all(b"response").await.unwrap();
        // The response read whole (a short read): nothing more is known to be pending.
        let mut buf = [0u8; 64];
        assert_eq!(a.read(&mut buf).await.unwrap(), 8);
        put(in_use(KEY, &LIMITS), a, 1, &LIMITS);
        let (mut stream, served, _in_use) = take(KEY, false).unwrap();
        assert_eq!(served, 1);
        // And it still works.
        stream.write_all(b"next").await.unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"next");
    }

    #[tokio::test]
    async fn aggressive_takes_only_reused_connections() {
        let _peer = serve_one(KEY, 1).await;
        assert!(take(KEY, true).is_none());
        assert!(take(KEY, false).is_some());
    }

    #[tokio::test]
    async fn clients_one_after_the_other_leave_one_idle_connection() {
        // `http-reuse safe`: each client's single request goes over a new connection.
        let mut peers = Vec::new();
        for _ in 0..10 {
            peers.push(serve_one(KEY, 1).await);
        }
        assert_eq!(state_of(KEY), Some((usage(0, 1, 1), idle(1, 0))));
    }

    #[tokio::test]
    async fn concurrent_requests_keep_their_connections_for_the_next_ones() {
        let mut connections = Vec::new();
        for _ in 0..3 {
            let (stream, peer) = connected_pair().await;
            connections.push((stream, peer, in_use(KEY, &LIMITS)));
        }
        let mut peers = Vec::new();
        for (stream, peer, token) in connections {
            put(token, stream, 1, &LIMITS);
            peers.push(peer);
        }
        assert_eq!(state_of(KEY), Some((usage(0, 3, 3), idle(3, 0))));
        // The next round takes them all back, and returns them all.
        let taken: Vec<_> = (0..3).map(|_| take(KEY, false).unwrap()).collect();
        assert_eq!(state_of(KEY), Some((usage(3, 3, 3), idle(0, 0))));
        for (stream, _, token) in taken {
            put(token, stream, 2, &LIMITS);
        }
        assert_eq!(state_of(KEY), Some((usage(0, 3, 3), idle(3, 3))));
    }

    #[tokio::test]
    async fn a_connection_dropped_in_use_is_no_longer_counted() {
        let _peer = serve_one(KEY, 1).await;
        let taken = take(KEY, false).unwrap();
        let fresh = in_use(KEY, &LIMITS);
        assert_eq!(state_of(KEY), Some((usage(2, 2, 2), idle(0, 0))));
        // Error paths drop the connection with its token.
        drop(taken);
        drop(fresh);
        assert_eq!(state_of(KEY), Some((usage(0, 2, 2), idle(0, 0))));
    }

    #[tokio::test(start_paused = true)]
    async fn old_connections_are_purged() {
        let _peers = [serve_one(KEY, 1).await, serve_one(KEY, 1).await];
        assert_eq!(state_of(KEY), Some((usage(0, 1, 1), idle(1, 0))));
        // The first purge finds the one connection the traffic needed; the estimate then
        // decays, and the third purge closes it. The entry goes once nothing is left.
        tokio::time::advance(LIMITS.purge_delay).await;
        purge_due();
        assert_eq!(state_of(KEY), Some((usage(0, 0, 1), idle(1, 0))));
        tokio::time::advance(LIMITS.purge_delay).await;
        purge_due();
        assert_eq!(state_of(KEY), Some((usage(0, 0, 0), idle(1, 0))));
        tokio::time::advance(LIMITS.purge_delay).await;
        purge_due();
        assert_eq!(state_of(KEY), None);
    }

    #[tokio::test(start_paused = true)]
    async fn purges_wait_for_the_purge_delay() {
        let _peer = serve_one(KEY, 1).await;
        tokio::time::advance(LIMITS.purge_delay / 2).await;
        purge_due();
        assert_eq!(state_of(KEY), Some((usage(0, 1, 1), idle(1, 0))));
    }
}
