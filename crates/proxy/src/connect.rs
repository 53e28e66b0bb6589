//! Connecting to a server, with the retries of configuration.txt §4.2 "retries": up to
//! `retries` more attempts on the same server after a failure, each after a pause of
//! min(`timeout connect`, 1 s) so that a restarting server is not hammered. Shared by the TCP
//! and HTTP data paths.

use sluice_net::stream::{Stream, StreamOptions};
use sluice_runtime::proxy::{Backend, Server};
use std::time::Duration;

/// The longest pause between two connection attempts.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Connects to `server` for a client that connected to port `dst_port`; `None` once every
/// attempt failed (the retries are counted on the backend and the server).
pub async fn connect_with_retries(
    backend: &Backend,
    server: &Server,
    dst_port: Option<u16>,
) -> Option<Stream> {
    let target = server.target(dst_port)?;
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
        if let Ok(stream) = Stream::connect(&target, connect_timeout, opts).await {
            return Some(stream);
        }
    }
    None
}
