//! Idle server connections kept for reuse, one pool per event-loop thread.
//!
//! A connection that may be shared returns here as soon as its response is done, whether or
//! not its client stays connected (an idle kept-alive client holds no server connection);
//! the client's next request usually takes it back, the most recently used coming first.
//!
//! A connection lives on the thread that created it (each thread has its own reactor), so the
//! pool is thread-local: taking and returning a connection is a plain map operation, with no
//! lock and no cross-thread traffic. Each server's list is bounded by its `pool-max-conn`
//! (applied per thread), and connections idle for longer than `pool-purge-delay` are dropped
//! when met. A connection the server closed or wrote to while idle is never reused. After
//! each change the thread publishes its counts for `show servers conn`
//! (`sluice_runtime::idle`).

use sluice_net::stream::Stream;
use std::cell::RefCell;
use std::collections::HashMap;
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

/// A connection waiting in the pool.
#[derive(Debug)]
pub struct IdleConn {
    /// The connection.
    pub stream: Stream,
    /// Whether it already carried requests of more than one client connection
    /// (`http-reuse aggressive` only takes those for first requests).
    pub reused: bool,
    since: Instant,
}

thread_local! {
    static POOLS: RefCell<HashMap<ServerKey, Vec<IdleConn>>> = RefCell::new(HashMap::new());
}

/// Takes a usable idle connection to `key`, the most recently used first (its TCP state is
/// the freshest). Connections older than `purge_after` are dropped on the way, and so is a
/// candidate the server closed or wrote to while it was idle. Only candidates are probed
/// (one system call each): probing the whole list would cost a call per idle connection on
/// every request. With `only_reused`, only connections already shared are taken.
pub fn take(key: ServerKey, purge_after: Duration, only_reused: bool) -> Option<IdleConn> {
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let list = pools.get_mut(&key)?;
        let now = Instant::now();
        list.retain(|c| now.duration_since(c.since) < purge_after);
        // Only the candidate handed out is probed (one system call), not the whole list.
        let taken = loop {
            let Some(index) = list.iter().rposition(|c| !only_reused || c.reused) else {
                break None;
            };
            let conn = list.remove(index);
            if conn.stream.is_idle_usable() {
                break Some(conn);
            }
        };
        publish(key, list);
        taken
    })
}

/// Tells `show servers conn` how many idle connections this thread keeps for `key`.
fn publish(key: ServerKey, list: &[IdleConn]) {
    let reused = list.iter().filter(|c| c.reused).count();
    sluice_runtime::idle::publish((key.backend, key.server), (list.len() - reused, reused));
}

/// Returns a connection to the pool, unless the server's list already holds `max` of them.
pub fn put(key: ServerKey, stream: Stream, reused: bool, max: Option<u32>) {
    POOLS.with(|pools| {
        let mut pools = pools.borrow_mut();
        let list = pools.entry(key).or_default();
        if max.is_some_and(|m| list.len() >= m as usize) {
            return;
        }
        list.push(IdleConn {
            stream,
            reused,
            since: Instant::now(),
        });
        publish(key, list);
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

    #[tokio::test]
    async fn returns_live_connections_and_respects_the_limit() {
        let (a, _peer_a) = connected_pair().await;
        let (b, _peer_b) = connected_pair().await;
        put(KEY, a, false, Some(1));
        put(KEY, b, false, Some(1));
        assert!(take(KEY, Duration::from_secs(5), false).is_some());
        assert!(take(KEY, Duration::from_secs(5), false).is_none());
    }

    #[tokio::test]
    async fn closed_connections_are_not_reused() {
        let (a, peer) = connected_pair().await;
        drop(peer);
        // Wait until the FIN has arrived: the connection reads as closed.
        let Stream::Tcp(tcp) = &a else { unreachable!() };
        tcp.readable().await.unwrap();
        put(KEY, a, false, None);
        assert!(take(KEY, Duration::from_secs(5), false).is_none());
    }

    #[tokio::test]
    async fn connections_the_server_wrote_to_are_not_reused() {
        let (a, peer) = connected_pair().await;
        peer.try_write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .unwrap();
        let Stream::Tcp(tcp) = &a else { unreachable!() };
        tcp.readable().await.unwrap();
        put(KEY, a, false, None);
        assert!(take(KEY, Duration::from_secs(5), false).is_none());
    }

    #[tokio::test]
    async fn a_drained_connection_is_reused_after_its_response() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut a, mut peer) = connected_pair().await;
        peer.write_all(b"response").await.unwrap();
        // The response read whole (a short read): nothing more is known to be pending.
        let mut buf = [0u8; 64];
        assert_eq!(a.read(&mut buf).await.unwrap(), 8);
        put(KEY, a, false, None);
        let taken = take(KEY, Duration::from_secs(5), false).unwrap();
        // And it still works.
        let mut stream = taken.stream;
        stream.write_all(b"next").await.unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"next");
    }

    #[tokio::test]
    async fn aggressive_takes_only_reused_connections() {
        let (a, _peer) = connected_pair().await;
        put(KEY, a, false, None);
        assert!(take(KEY, Duration::from_secs(5), true).is_none());
        assert!(take(KEY, Duration::from_secs(5), false).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn old_connections_are_purged() {
        let (a, _peer) = connected_pair().await;
        put(KEY, a, false, None);
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(take(KEY, Duration::from_secs(5), false).is_none());
    }
}
