//! A `mode tcp` session: choose a server, connect (with retries), relay until done.
//!
//! Connection failures follow configuration.txt §4.2 "retries": up to `retries` more attempts
//! on the same server, each after a pause of min(`timeout connect`, 1 s) so a restarting server
//! is not hammered. When no server is usable or every attempt failed, the client connection is
//! closed at once and the failure counted on the backend (`econ`).

use crate::forward::{self, IdleTimeouts};
use sluice_net::listen::Endpoints;
use sluice_net::stream::{Stream, StreamOptions};
use sluice_runtime::counters::SessionMark;
use sluice_runtime::proxy::{Backend, Frontend, Server};
use std::time::Duration;

/// The longest pause between two connection attempts.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Serves one client connection of a TCP frontend whose traffic goes to `backend`.
pub async fn serve(
    frontend: &Frontend,
    backend: &Backend,
    mut client: Stream,
    endpoints: Endpoints,
) {
    let _backend_session = SessionMark::open(&backend.traffic);
    let Some(server) = backend.pick_server() else {
        backend.failed_connections.incr();
        return;
    };
    let _server_session = SessionMark::open(&server.traffic);
    let dst_port = endpoints.local.map(|a| a.port());
    let Some(mut upstream) = connect_with_retries(backend, server, dst_port).await else {
        backend.failed_connections.incr();
        server.failed_connections.incr();
        return;
    };
    let timeouts = idle_timeouts(frontend, backend);
    let outcome = forward::forward(
        &mut client,
        &mut upstream,
        timeouts,
        forward::DEFAULT_BUFFER_SIZE,
    )
    .await;
    for traffic in [&frontend.traffic, &backend.traffic, &server.traffic] {
        traffic.bytes_in.add(outcome.client_to_server);
        traffic.bytes_out.add(outcome.server_to_client);
    }
}

/// `timeout tunnel` replaces both `timeout client` and `timeout server` once a TCP session is
/// established; the `-fin` variants still apply to half-closed connections.
fn idle_timeouts(frontend: &Frontend, backend: &Backend) -> IdleTimeouts {
    let f = &frontend.plan.timeouts;
    let b = &backend.plan.timeouts;
    let tunnel = b.tunnel;
    IdleTimeouts {
        client: tunnel.or(f.client),
        server: tunnel.or(b.server),
        client_fin: f.client_fin,
        server_fin: b.server_fin,
    }
}

async fn connect_with_retries(
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
