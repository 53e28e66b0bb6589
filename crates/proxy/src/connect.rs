//! Connecting to a server, with the retries of configuration.txt §4.2 "retries": up to
//! `retries` more attempts on the same server after a failure, each after a pause of
//! min(`timeout connect`, 1 s) so that a restarting server is not hammered. Shared by the TCP
//! and HTTP data paths.

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

/// Connects to `server` for a client that connected to port `dst_port` (the retries are
/// counted on the backend and the server too).
pub async fn connect_with_retries(
    backend: &Backend,
    server: &Server,
    dst_port: Option<u16>,
) -> Connection {
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
    for attempt in 0..=backend.plan.retries {
        if attempt > 0 {
            backend.retries.incr();
            server.retries.incr();
            let pause = connect_timeout.map_or(MAX_RETRY_PAUSE, |t| t.min(MAX_RETRY_PAUSE));
            tokio::time::sleep(pause).await;
        }
        let result = Stream::connect(&target, connect_timeout, opts).await;
        // `observe layer4`: the health checks learn of every attempt.
        server.health.observe_connect(result.is_ok());
        if let Ok(stream) = result {
            return Connection {
                stream: Some(stream),
                retries: attempt,
            };
        }
    }
    Connection {
        stream: None,
        retries: backend.plan.retries,
    }
}
