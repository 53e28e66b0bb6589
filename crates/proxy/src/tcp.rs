//! A `mode tcp` session: choose a server, connect (with retries, [`crate::connect`]), relay
//! until done. When no server is usable or every attempt failed, the client connection is
//! closed at once and the failure counted on the backend (`econ`).

use crate::connect::connect_with_retries;
use crate::forward::{self, End, Finish, IdleTimeouts};
use sluice_net::listen::Endpoints;
use sluice_net::stream::Stream;
use sluice_runtime::counters::SessionMark;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend};
use sluice_runtime::record::{Cause, Phase, StreamRecord, Termination, Timers};
use std::time::{Duration, Instant, SystemTime};

/// Serves one client connection of a TCP frontend whose traffic goes to `backend`, and
/// reports it to the process's stream log.
pub async fn serve(
    process: &Process,
    frontend: &Frontend,
    backend: &Backend,
    mut client: Stream,
    endpoints: Endpoints,
) {
    let start = Instant::now();
    let started_at = SystemTime::now();
    let _backend_session = SessionMark::open(&backend.traffic);
    let mut record = StreamRecord {
        start: started_at,
        client: endpoints.client,
        frontend: frontend.name(),
        backend: Some(backend.name()),
        server: None,
        timers: Timers::default(),
        status: None,
        bytes_to_client: 0,
        bytes_from_client: 0,
        termination: Termination::NORMAL,
        retries: 0,
        request_line: None,
    };
    record.timers.queue = Some(Duration::ZERO);
    // Only `balance source` has a key in TCP mode; the HTTP algorithms fall back to round robin.
    let source;
    let key = match backend.algorithm() {
        sluice_balance::Algorithm::Source => {
            source = endpoints.client.map(|a| sluice_balance::source_key(a.ip()));
            source.as_ref().map(|k| k.as_bytes())
        }
        _ => None,
    };
    match backend.pick_server(key) {
        None => {
            backend.failed_connections.incr();
            record.termination = Termination {
                cause: Cause::ServerAbort,
                phase: Phase::Connect,
            };
        }
        Some(lease) => {
            let server = lease.server();
            let _server_session = SessionMark::open(&server.traffic);
            record.server = Some(server.name());
            let dst_port = endpoints.local.map(|a| a.port());
            let connecting = Instant::now();
            let connection = connect_with_retries(backend, server, dst_port).await;
            record.retries = connection.retries;
            match connection.stream {
                None => {
                    backend.failed_connections.incr();
                    server.failed_connections.incr();
                    record.termination = Termination {
                        cause: Cause::ServerAbort,
                        phase: Phase::Connect,
                    };
                }
                Some(mut upstream) => {
                    record.timers.connect = Some(connecting.elapsed());
                    let timeouts = idle_timeouts(frontend, backend);
                    let relay = forward::forward(
                        &mut client,
                        &mut upstream,
                        timeouts,
                        forward::DEFAULT_BUFFER_SIZE,
                    );
                    // `on-marked-down shutdown-sessions` and the like end the relay at once.
                    let mut killed = server.health.kill_signal();
                    let outcome = tokio::select! {
                        outcome = relay => outcome,
                        () = killed.wait() => {
                            record.termination = Termination {
                                cause: Cause::Killed,
                                phase: Phase::Data,
                            };
                            record.timers.total = start.elapsed();
                            if let Some(log) = &process.stream_log {
                                log.tcp(&record);
                            }
                            return;
                        }
                    };
                    for traffic in [&frontend.traffic, &backend.traffic, &server.traffic] {
                        traffic.bytes_in.add(outcome.client_to_server);
                        traffic.bytes_out.add(outcome.server_to_client);
                    }
                    record.bytes_to_client = outcome.server_to_client;
                    record.bytes_from_client = outcome.client_to_server;
                    record.termination = termination_of(&outcome.finish);
                }
            }
        }
    }
    record.timers.total = start.elapsed();
    if let Some(log) = &process.stream_log {
        log.tcp(&record);
    }
}

/// The termination state of a forwarded session (configuration.txt §8.5).
fn termination_of(finish: &Finish) -> Termination {
    let cause = match finish {
        Finish::Closed => return Termination::NORMAL,
        Finish::Timeout(End::Client) => Cause::ClientTimeout,
        Finish::Timeout(End::Server) => Cause::ServerTimeout,
        Finish::Error(End::Client, _) => Cause::ClientAbort,
        Finish::Error(End::Server, _) => Cause::ServerAbort,
    };
    Termination {
        cause,
        phase: Phase::Data,
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
