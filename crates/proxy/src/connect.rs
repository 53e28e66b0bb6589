//! Connecting to a server, with the retries of configuration.txt §4.2 "retries": up to
//! `retries` more attempts on the same server after a failure, each after a pause of
//! min(`timeout connect`, 1 s) so that a restarting server is not hammered. Shared by the TCP
//! and HTTP data paths.
//!
//! A `source` address (the server's, else the backend's) is bound before connecting.
//! A `send-proxy`/`send-proxy-v2` server gets its PROXY protocol header here, right after the
//! connection is established and before any data, so neither data path can forget it; failing
//! to write it counts as a failed attempt. The TLVs of `proxy-v2-options` come from the
//! session: its unique id, and the authority a client's own PROXY header announced.

use crate::vars::Vars;
use sluice_config::proxy::{ProxyV2Options, SendProxy};
use sluice_net::listen::Endpoints;
use sluice_net::proxy_io::{self, Version};
use sluice_net::proxy_protocol::SentTlvs;
use sluice_net::stream::{Stream, StreamOptions};
use sluice_runtime::proxy::{Backend, Server, ServerLease};
use std::net::SocketAddr;
use std::time::Duration;

/// The longest pause between two connection attempts.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The result of connecting: the stream if an attempt succeeded, and how many retries it took
/// (the `%rc` of the log line).
#[derive(Debug)]
pub struct Connection {
    /// The connected stream, `None` once every attempt failed.
    pub stream: Option<Stream>,
    /// Attempts made after the first one.
    pub retries: u32,
    /// The own address of the last failed attempt's socket, when the caller asked for it:
    /// what a log line prints of a connection that could not be made (`%bi`, `%bp`).
    pub failed_from: Option<SocketAddr>,
}

/// How the first of a run of attempts starts, when it is not the request's first attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// After the pause, counted as a retry (`wretr`).
    Retry,
    /// At once, on a server `option redispatch` moved the request to: a redispatch
    /// (`wredis`, counted by the caller), not a retry.
    Moved,
    /// At once, on the same server, which `option redispatch` chose again (map-based
    /// hashing) while the backend has other servers up: a retry, as HAProxy counts it.
    /// With no other server up, or none that could take the request, HAProxy pauses as
    /// before any retry on the same server ([`Start::Retry`]).
    Repicked,
}

/// Makes the attempts numbered `attempts` (0 is the first attempt, the others are retries,
/// after the pause unless `start` says the first of them is made at once) on `server`:
/// `option redispatch` splits one request's attempts between servers. `retries` in the
/// result is the number of the last attempt made. With `note_local_end`, a failed attempt's
/// own address is kept.
async fn connect_attempts(
    backend: &Backend,
    server: &Server,
    (endpoints, vars): (&Endpoints, &Vars),
    (attempts, start): (std::ops::RangeInclusive<u32>, Start),
    note_local_end: bool,
) -> Connection {
    let last = *attempts.end();
    let Some(target) = server.target(endpoints.local) else {
        return Connection {
            stream: None,
            retries: 0,
            failed_from: None,
        };
    };
    let connect_timeout = backend.plan.timeouts.connect;
    let opts = StreamOptions {
        keepalive: backend.plan.srvtcpka.then_some(backend.plan.server_probes),
        // `source`: the server's own, else the backend's.
        source: server.conf.source.or(backend.plan.source),
        delayed_ack: backend.plan.smart_connect,
        nolinger: backend.plan.nolinger,
        buffers: backend.plan.server_buffers,
        user_timeout: server.conf.user_timeout,
        note_local_end,
    };
    let mut failed_from = None;
    let first = *attempts.start();
    for attempt in attempts {
        // A redispatch's attempt is made at once (`start`); the other attempts after the
        // first are retries (`wretr`), each after a pause, as HAProxy makes them.
        let start = if attempt == first {
            start
        } else {
            Start::Retry
        };
        if attempt > 0 && start != Start::Moved {
            backend.retries.incr();
            server.retries.incr();
            server.traffic.count_attempt();
        }
        if attempt > 0 && start == Start::Retry {
            let pause = connect_timeout.map_or(MAX_RETRY_PAUSE, |t| t.min(MAX_RETRY_PAUSE));
            tokio::time::sleep(pause).await;
        }
        backend.stats.connects.incr();
        server.stats.connects.incr();
        let result = Stream::connect(&target, connect_timeout, opts).await;
        // `observe layer4`: the health checks learn of every attempt.
        server.health.observe_connect(result.is_ok());
        let mut stream = match result {
            Ok(stream) => stream,
            Err(failure) => {
                failed_from = failure.local;
                continue;
            }
        };
        if let Some(version) = server.conf.send_proxy() {
            let (version, options) = match version {
                SendProxy::V1 => (Version::V1, ProxyV2Options::default()),
                SendProxy::V2 => (Version::V2, server.conf.proxy_v2),
            };
            // Read only for the options that want them: most servers want none.
            let unique_id = options
                .contains(ProxyV2Options::UNIQUE_ID)
                .then(|| vars.unique_id().unwrap_or_default());
            let authority = options
                .contains(ProxyV2Options::AUTHORITY)
                .then(|| vars.received_tlvs().and_then(|t| t.authority.clone()))
                .flatten();
            let tlvs = SentTlvs {
                crc32c: options.contains(ProxyV2Options::CRC32C),
                authority: authority.as_deref(),
                unique_id: unique_id.as_deref(),
                ssl: options.contains(ProxyV2Options::SSL),
            };
            let header = (endpoints, &tlvs);
            if proxy_io::write_header(&mut stream, version, header, connect_timeout)
                .await
                .is_err()
            {
                failed_from = note_local_end
                    .then(|| sluice_net::stream::local_end(&stream))
                    .flatten();
                continue;
            }
        }
        return Connection {
            stream: Some(stream),
            retries: attempt,
            failed_from: None,
        };
    }
    Connection {
        stream: None,
        retries: last,
        failed_from,
    }
}

/// Whether `option redispatch` with `interval` sends retry number `retry` (from 1) of
/// `retries` to another server: every `interval`th retry when it is positive, the
/// `-interval`th retry before the last one when it is negative (configuration.txt §4.2).
fn redispatches(retry: u32, retries: u32, interval: i32) -> bool {
    match interval {
        0 => false,
        p if p > 0 => retry.is_multiple_of(p.unsigned_abs()),
        n => i64::from(retry) == i64::from(retries) + 1 + i64::from(n),
    }
}

/// Connects to the leased server with the backend's retries; under `option redispatch`
/// (when `may_redispatch`, i.e. no `force-persist`), the retries it names go to another
/// server, which then replaces the lease. Also says whether the lease moved.
///
/// As in HAProxy, a server the balancing chose (not `persistent`: no cookie, `use-server`
/// or stick table named it) is left at its first failure when the algorithm would choose
/// any server (not a hash) and another can take the request. Map-based hashing chooses the
/// same server again while it serves, and consistent hashing the next one on the ring, as
/// HAProxy's re-run of the hash does. A redispatch's attempt is made at once while another
/// server is up. A failed attempt counts only once the retries are spent (`econ`, by the
/// caller); each attempt on the same server is a retry (`wretr`), each move a redispatch
/// (`wredis`, on the backend and the server left). With `note_local_end`, the result keeps
/// the own address of a failed attempt's socket, for a log line that prints it.
pub async fn connect_redispatching<'b>(
    backend: &'b Backend,
    lease: &mut ServerLease<'b>,
    (endpoints, vars): (&Endpoints, &Vars),
    (may_redispatch, persistent): (bool, bool),
    note_local_end: bool,
) -> (Connection, bool) {
    // `retry-on` without `conn-failure`: a failed connection is not retried.
    let retries = if backend.plan.retry_on.conn_failure {
        backend.plan.retries
    } else {
        0
    };
    let interval = match backend.plan.persistence.redispatch {
        Some(interval) if may_redispatch => interval,
        _ => 0,
    };
    let mut first = 0;
    let mut moved = false;
    let mut start = Start::Retry;
    loop {
        let at_once = interval != 0
            && !persistent
            && !backend.algorithm().is_deterministic()
            && backend.usable_servers() > 1;
        let switch = (first + 1..=retries).find(|&r| at_once || redispatches(r, retries, interval));
        let last = switch.map_or(retries, |r| r - 1);
        let range = (first..=last, start);
        let connection = connect_attempts(
            backend,
            lease.server(),
            (endpoints, vars),
            range,
            note_local_end,
        )
        .await;
        let Some(next) = switch.filter(|_| connection.stream.is_none()) else {
            return (connection, moved);
        };
        let rehashed = backend.rehashes_to(lease);
        let other = if rehashed {
            None
        } else {
            backend.pick_other_server(lease)
        };
        start = match other {
            Some(other) if other.index() != lease.index() => {
                backend.stats.redispatches.incr();
                lease.server().stats.redispatches.incr();
                *lease = other;
                moved = true;
                Start::Moved
            }
            // The hash chose the same server again while others are up: a retry at once.
            _ if rehashed && backend.usable_servers() > 1 => Start::Repicked,
            // No other server could take the request (down, or full): a retry after the
            // pause.
            _ => Start::Retry,
        };
        first = next;
    }
}

/// Completes when the client has ended its side (or its connection failed) while its
/// request or session waits for a server (`option abortonclose`); never if it sends more
/// instead (a body, a next request), which stays in the socket for later.
pub(crate) async fn client_closed(client: &Stream) {
    let mut probe = [0u8; 1];
    match client.peek(&mut probe).await {
        Ok(0) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redispatch_intervals() {
        let on = |retries, interval| {
            (1..=retries)
                .filter(|&r| redispatches(r, retries, interval))
                .collect::<Vec<u32>>()
        };
        assert_eq!(on(3, -1), [3]);
        assert_eq!(on(3, -2), [2]);
        assert_eq!(on(3, -5), Vec::<u32>::new());
        assert_eq!(on(6, 2), [2, 4, 6]);
        assert_eq!(on(3, 1), [1, 2, 3]);
        assert_eq!(on(3, 0), Vec::<u32>::new());
    }
}
