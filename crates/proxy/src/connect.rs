//! Connecting to a server, with the retries of configuration.txt §4.2 "retries": up to
//! `retries` more attempts on the same server after a failure, each after a pause of
//! min(`timeout connect`, 1 s) so that a restarting server is not hammered. Shared by the TCP
//! and HTTP data paths.
//!
//! A `send-proxy`/`send-proxy-v2` server gets its PROXY protocol header here, right after the
//! connection is established and before any data, so neither data path can forget it; failing
//! to write it counts as a failed attempt.

use sluice_config::proxy::SendProxy;
use sluice_net::listen::Endpoints;
use sluice_net::proxy_io::{self, Version};
use sluice_net::stream::{Stream, StreamOptions};
use sluice_runtime::proxy::{Backend, Server};
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
}

/// Connects to `server` for the client of `endpoints` (the retries are counted on the
/// backend and the server too). The port the client connected to may decide the server's
/// port; the addresses go into the PROXY header if the server wants one.
pub async fn connect_with_retries(
    backend: &Backend,
    server: &Server,
    endpoints: &Endpoints,
) -> Connection {
    // `retry-on` without `conn-failure`: a failed connection is not retried.
    let retries = if backend.plan.retry_on.conn_failure {
        backend.plan.retries
    } else {
        0
    };
    connect_attempts(backend, server, endpoints, 0..=retries).await
}

/// Makes the attempts numbered `attempts` (0 is the first attempt, the others are retries,
/// each after the pause) on `server`: `option redispatch` splits one request's attempts
/// between servers. `retries` in the result is the number of the last attempt made.
pub async fn connect_attempts(
    backend: &Backend,
    server: &Server,
    endpoints: &Endpoints,
    attempts: std::ops::RangeInclusive<u32>,
) -> Connection {
    let last = *attempts.end();
    let dst_port = endpoints.local.map(|a| a.port());
    let Some(target) = server.target(dst_port) else {
        return Connection {
            stream: None,
            retries: 0,
        };
    };
    let connect_timeout = backend.plan.timeouts.connect;
    let opts = StreamOptions {
        keepalive: backend.plan.srvtcpka,
    };
    for attempt in attempts {
        if attempt > 0 {
            backend.retries.incr();
            server.retries.incr();
            let pause = connect_timeout.map_or(MAX_RETRY_PAUSE, |t| t.min(MAX_RETRY_PAUSE));
            tokio::time::sleep(pause).await;
        }
        let Ok(mut stream) = Stream::connect(&target, connect_timeout, opts).await else {
            continue;
        };
        if let Some(version) = server.conf.send_proxy() {
            let version = match version {
                SendProxy::V1 => Version::V1,
                SendProxy::V2 => Version::V2,
            };
            if proxy_io::write_header(&mut stream, version, endpoints, connect_timeout)
                .await
                .is_err()
            {
                continue;
            }
        }
        return Connection {
            stream: Some(stream),
            retries: attempt,
        };
    }
    Connection {
        stream: None,
        retries: last,
    }
}
