//! A `mode tcp` session: choose a server, connect (with retries, [`crate::connect`]), relay
//! until done. When no server is usable or every attempt failed, the client connection is
//! closed at once and the failure counted on the backend (`econ`).

use crate::connect::connect_with_retries;
use crate::forward::{self, IdleTimeouts};
use sluice_net::listen::Endpoints;
use sluice_net::stream::Stream;
use sluice_runtime::counters::SessionMark;
use sluice_runtime::proxy::{Backend, Frontend};

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
