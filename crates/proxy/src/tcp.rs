//! A `mode tcp` session: choose a server, connect (with retries, [`crate::connect`]), relay
//! until done. When no server is usable or every attempt failed, the client connection is
//! closed at once and the failure counted on the backend (`econ`). A `switch-mode http` rule,
//! or a `mode http` backend chosen by the rules, hands the connection to the HTTP session
//! instead ([`serve`] returns the bytes inspected so far).

use crate::connect::connect_redispatching;
use crate::forward::{self, Direction, End, Finish, IdleTimeouts};
use crate::http::buffer::InBuf;
use crate::http::rules::Scope;
use crate::inspect::{Inspection, ResponseInspection, inspect, inspect_response};
use crate::live_bytes::LiveBytes;
use crate::report::report;
use crate::stream_context::StreamView;
use crate::vars::Inspected;
use sluice_config::proxy::{Mode, SpliceMode};
use sluice_net::splice::Pipe;
use sluice_net::stream::Stream;
use sluice_net::stream::Target;
use sluice_runtime::clock;
use sluice_runtime::counters::SessionMark;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Unserved};
use sluice_runtime::record::{Cause, Counts, Phase, ServerEnds, StreamRecord, Termination, Timers};
use sluice_sample::rdp::{RdpCookie, msts_address, rdp_cookie};
use std::cell::Cell;

/// The server whose address the connection's RDP cookie names (`persist rdp-cookie`): a
/// terminal server that redirects a client writes where to come back in an `msts` cookie.
/// When that server cannot take the session, the balancing chooses.
fn persisted_rdp_server(backend: &Backend, inspected: &[u8]) -> Option<usize> {
    let name = backend.plan.persistence.rdp_cookie.as_deref()?;
    let RdpCookie::Found(value) = rdp_cookie(inspected, Some(name)) else {
        return None;
    };
    let wanted = std::net::SocketAddr::V4(msts_address(value)?);
    backend
        .servers
        .iter()
        .find(|s| matches!(s.target(None), Some(Target::Inet(at)) if at == wanted))
        .map(|s| s.index)
}

/// Serves one client connection of a TCP frontend whose traffic goes to `backend`, and
/// reports it to the process's stream log.
/// Returns the inspected bytes when `tcp-request content switch-mode http` hands the
/// connection over to the HTTP session.
pub async fn serve(scope: &Scope<'_>, client: &mut Stream) -> Option<InBuf> {
    let start = clock::now_std();
    let started_at = clock::wall_now();
    let (process, frontend, endpoints, vars) =
        (scope.process, scope.frontend, *scope.endpoints, scope.vars);
    // `unique-id-format`: the stream's id, made before any rule or log reads it, as the HTTP
    // session makes one per request.
    if let Some(fmt) = &frontend.plan.log.unique_id_format {
        let mut id = Vec::with_capacity(64);
        let view = StreamView {
            started_at: Some(started_at),
            ..StreamView::new(process, frontend, endpoints, vars)
        };
        fmt.render(&view, &mut id);
        vars.set_unique_id(id);
    }
    // Client bytes read by content inspection; they go to the server first.
    let mut inspected = InBuf::new(process.global.bufsize() as usize);
    let backend = match inspect(scope, client, &mut inspected).await {
        // An HTTP backend upgrades the connection, as `switch-mode http` does (the implicit
        // upgrade of configuration.txt §4 "HTTP upgrade"): the HTTP session takes it over.
        Inspection::Forward(backend) if backend.plan.mode == Mode::Http => {
            scope.vars.set_inspected(Inspected::FrontendAndBackend);
            return Some(inspected);
        }
        Inspection::Forward(backend) => backend,
        // The HTTP session takes the connection over, inspected bytes first.
        Inspection::SwitchHttp => {
            scope.vars.set_inspected(Inspected::Frontend);
            return Some(inspected);
        }
        // Counted where it was decided (`inspect`). What the rules read is the frontend's
        // traffic, and a `listen` section's, as HAProxy counts it.
        Inspection::Reject | Inspection::Dropped => {
            let read = inspected.len() as u64;
            frontend.traffic.bytes_in.add(read);
            if let Some(listener) = scope.vars.listener() {
                listener.traffic.bytes_in.add(read);
            }
            if let Some(own) = frontend
                .backend
                .as_deref()
                .filter(|b| b.plan.id.uid == frontend.plan.id.uid)
            {
                own.traffic.bytes_in.add(read);
            }
            return None;
        }
        Inspection::NoBackend => {
            frontend.failed.incr();
            return None;
        }
    };
    let backend_session = SessionMark::open(&backend.traffic);
    let mut record = StreamRecord {
        start: started_at,
        client: endpoints.client,
        frontend: frontend.name(),
        backend: Some(backend.name()),
        server: None,
        timers: Timers::default(),
        // HAProxy's `%ST` for a TCP stream, which has no HTTP status.
        status: Some(0),
        bytes_to_client: 0,
        bytes_from_client: 0,
        termination: Termination::NORMAL,
        retries: 0,
        request_line: None,
        response_version: None,
        counts: Counts::default(),
        captures: None,
        early: false,
        server_ends: ServerEnds::default(),
        http: false,
        reused: false,
        compression: None,
    };
    // `balance source` and `balance hash EXPR` (over the client's address and the inspected
    // bytes) have a key in TCP mode; the HTTP algorithms fall back to round robin.
    let source;
    let (hash_view, hash_sample, hash_key);
    let key = match backend.algorithm() {
        sluice_balance::Algorithm::Source => {
            source = endpoints.client.map(|a| sluice_balance::source_key(a.ip()));
            source.as_ref().map(|k| k.as_bytes())
        }
        sluice_balance::Algorithm::Hash(_) => {
            hash_view = StreamView {
                backend: Some(backend),
                payload: Some(inspected.filled()),
                ..StreamView::new(process, frontend, endpoints, vars)
            };
            hash_sample = backend
                .plan
                .hash_expr
                .as_ref()
                .and_then(|e| e.eval(&hash_view));
            hash_key = hash_sample.as_ref().map(|s| s.to_binary());
            hash_key.as_deref()
        }
        // `balance rdp-cookie`: without the cookie, round robin, as in HAProxy.
        // An empty value is none, as in HAProxy.
        sluice_balance::Algorithm::RdpCookie(name) => {
            match rdp_cookie(inspected.filled(), Some(name)) {
                RdpCookie::Found(value) if !value.is_empty() => Some(value),
                _ => None,
            }
        }
        _ => None,
    };
    let queued_at = clock::now_std();
    let stick_view = || StreamView {
        backend: Some(backend),
        payload: Some(inspected.filled()),
        ..StreamView::new(process, frontend, endpoints, vars)
    };
    let has_stick_rules = !backend.plan.rules.stick_rules.is_empty();
    // `stick match|on`: a table may name the server; when it cannot take the session, the
    // balancing chooses.
    let stuck = if has_stick_rules {
        crate::stick_rules::matched_server(&stick_view(), backend)
    } else {
        None
    };
    // `persist rdp-cookie`: the server a redirecting terminal server named, before the rest;
    // with `option persist`, even down (configuration.txt `persist rdp-cookie`).
    let persisted = persisted_rdp_server(backend, inspected.filled());
    let force = persisted.is_some() && backend.plan.persistence.persist;
    let priority = vars.priority();
    let acquire = async {
        match persisted.or(stuck) {
            Some(index) => match backend.acquire_server_at(index, priority).await {
                Err(Unserved::NoServer) if force => {
                    backend.lease_server_forced(index).ok_or(Unserved::NoServer)
                }
                Err(Unserved::QueueFull | Unserved::NoServer) => {
                    backend.acquire_server(key, priority).await
                }
                other => other,
            },
            None => backend.acquire_server(key, priority).await,
        }
    };
    // `option abortonclose`: a client that leaves while its session waits in a queue, or
    // for the server connection, ends it there (`CQ`, `CC`).
    let abort_on_close = backend.plan.http.abort_on_close;
    let picked = if abort_on_close {
        tokio::select! {
            biased;
            picked = acquire => Some(picked),
            () = crate::connect::client_closed(client) => None,
        }
    } else {
        Some(acquire.await)
    };
    let stick_stores = if has_stick_rules && matches!(picked, Some(Ok(_))) {
        crate::stick_rules::request_stores(&stick_view(), backend)
    } else {
        crate::stick_rules::PendingStores::default()
    };
    record.timers.queue = Some(clock::since(queued_at));
    match picked {
        None => {
            record.termination = Termination {
                cause: Cause::ClientAbort,
                phase: Phase::Queue,
            };
        }
        Some(Err(unserved)) => {
            backend.failed_connections.incr();
            // configuration.txt §8.5: "sQ" for a queue timeout, "SC" when no server was usable.
            record.termination = match unserved {
                Unserved::QueueTimeout => Termination {
                    cause: Cause::ServerTimeout,
                    phase: Phase::Queue,
                },
                _ => Termination {
                    cause: Cause::ServerAbort,
                    phase: Phase::Connect,
                },
            };
        }
        Some(Ok(mut lease)) => 'connected: {
            // Logged even if the client leaves before the connection is made.
            record.server = Some(lease.server().name());
            let connecting = clock::now_std();
            // `option redispatch` may move the session to another server (at once, unless
            // persistence chose this one).
            let persistent = persisted.or(stuck) == Some(lease.index());
            // A session of the server from its first attempt, as HAProxy counts them (and
            // of each server a redispatch moves it to).
            let mut _server_session = SessionMark::open(&lease.server().traffic);
            let connect = connect_redispatching(
                backend,
                &mut lease,
                (&endpoints, vars),
                (true, persistent),
                crate::report::logs_server_ends(frontend),
            );
            let connected = if abort_on_close {
                tokio::select! {
                    biased;
                    connected = connect => Some(connected),
                    () = crate::connect::client_closed(client) => None,
                }
            } else {
                Some(connect.await)
            };
            let Some((connection, moved)) = connected else {
                record.termination = Termination {
                    cause: Cause::ClientAbort,
                    phase: Phase::Connect,
                };
                break 'connected;
            };
            let server = lease.server();
            // `on-marked-down shutdown-sessions` and the like end the relay at once; listening
            // from now on, so that a shutdown during the inspection is not missed.
            let mut killed = server.health.kill_signal();
            if moved {
                _server_session = SessionMark::open(&server.traffic);
            }
            record.server = Some(server.name());
            record.retries = connection.retries;
            match connection.stream {
                None => {
                    backend.failed_connections.incr();
                    server.failed_connections.incr();
                    let client_dst = vars.addresses().unwrap_or(endpoints).local;
                    record.server_ends = crate::report::attempted_server_ends(
                        frontend,
                        server,
                        client_dst,
                        connection.failed_from,
                    );
                    record.termination = Termination {
                        cause: Cause::ServerAbort,
                        phase: Phase::Connect,
                    };
                }
                Some(mut upstream) => {
                    crate::stick_rules::commit(&stick_stores, &stick_view(), server);
                    record.timers.connect = Some(clock::since(connecting));
                    record.server_ends = crate::report::server_ends(frontend, &upstream);
                    // `option logasap`: logged now that the server connection is established.
                    if frontend.logger.as_ref().is_some_and(|l| l.conf.logasap) {
                        let mut early = StreamRecord {
                            early: true,
                            ..record
                        };
                        early.timers.total = clock::since(start);
                        log_session(scope, backend, &mut early, inspected.filled());
                        record.early = true;
                    }
                    let early = inspected.filled();
                    let server_limit = backend.plan.timeouts.server;
                    if !early.is_empty()
                        && !forward::write_within(&mut upstream, early, server_limit).await
                    {
                        backend.failed_connections.incr();
                        record.termination = Termination {
                            cause: Cause::ServerAbort,
                            phase: Phase::Connect,
                        };
                    } else {
                        // `tcp-response content` rules see the server's first bytes; they
                        // reach the client before the relay starts.
                        let mut answer = InBuf::new(process.global.bufsize() as usize);
                        let (verdict, relayed) = inspect_response(
                            scope,
                            (backend, server),
                            client,
                            &mut upstream,
                            &mut answer,
                        )
                        .await;
                        let early_len = early.len() as u64 + relayed;
                        let inspected = answer.filled();
                        if verdict == ResponseInspection::ServerStalled {
                            record.termination = Termination {
                                cause: Cause::ServerTimeout,
                                phase: Phase::Data,
                            };
                            record.bytes_from_client = early_len;
                        } else if matches!(
                            verdict,
                            ResponseInspection::Reject | ResponseInspection::Dropped
                        ) {
                            // configuration.txt §8.5: closed by the proxy while the server's
                            // data was being checked ("PD").
                            record.termination = Termination {
                                cause: Cause::Proxy,
                                phase: Phase::Data,
                            };
                            record.bytes_from_client = early_len;
                        } else if !inspected.is_empty()
                            && !forward::write_within(
                                client,
                                inspected,
                                frontend.plan.timeouts.client,
                            )
                            .await
                        {
                            record.termination = Termination {
                                cause: Cause::ClientAbort,
                                phase: Phase::Data,
                            };
                            sluice_runtime::proxy::count_abort(backend, server, record.termination);
                        } else {
                            let timeouts = idle_timeouts(frontend, backend);
                            let ways = directions(process, frontend, backend);
                            let traffic = [
                                Some(&frontend.traffic),
                                vars.listener().map(|l| &l.traffic),
                                Some(&backend.traffic),
                                Some(&server.traffic),
                            ];
                            let counted = Cell::new((0, 0));
                            let live = frontend
                                .plan
                                .contstats
                                .then(|| LiveBytes::new(traffic, &vars.trackers, &counted));
                            let progress = forward::Progress::new(live.as_ref());
                            let relay = forward::forward_streams(
                                client,
                                &mut upstream,
                                timeouts,
                                ways,
                                &progress,
                            );
                            // `biased`: the kill signal is checked on every wake-up
                            // anyway; a fixed order spares a random draw per poll.
                            let outcome = tokio::select! {
                                biased;
                                outcome = relay => Some(outcome),
                                () = killed.wait() => None,
                            };
                            // A killed session's bytes are what moved until then.
                            let (relayed_up, relayed_down) = progress.moved();
                            let up = relayed_up + early_len;
                            let down = relayed_down + inspected.len() as u64;
                            // What `option contstats` counted on the way is not counted
                            // again.
                            let (live_up, live_down) = counted.get();
                            let rest = (up - live_up, down - live_down);
                            for traffic in traffic.into_iter().flatten() {
                                traffic.bytes_in.add(rest.0);
                                traffic.bytes_out.add(rest.1);
                            }
                            vars.trackers.bytes(rest.0, rest.1);
                            record.bytes_to_client = down;
                            record.bytes_from_client = up;
                            record.termination = match &outcome {
                                None => Termination {
                                    cause: Cause::Killed,
                                    phase: Phase::Data,
                                },
                                Some(outcome) => termination_of(&outcome.finish),
                            };
                            if outcome.is_some() {
                                sluice_runtime::proxy::count_abort(
                                    backend,
                                    server,
                                    record.termination,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    record.timers.total = clock::since(start);
    // The log shows the counts after the session left the backend, as HAProxy's does.
    drop(backend_session);
    // An early record was logged at the connection (`option logasap`).
    if !record.early {
        log_session(scope, backend, &mut record, inspected.filled());
    }
    None
}

/// Writes the session's log line (and the `-d` debug line).
fn log_session(
    scope: &Scope<'_>,
    backend: &Backend,
    record: &mut StreamRecord<'_>,
    payload: &[u8],
) {
    let server = record
        .server
        .and_then(|name| backend.server_named(name))
        .map(|(_, s)| s);
    // The averages of `show stat` cover the sessions a server took.
    if let Some(server) = server {
        backend.stats.note_times(&record.timers);
        server.stats.note_times(&record.timers);
    }
    let view = StreamView {
        backend: Some(backend),
        server,
        payload: Some(payload),
        ..StreamView::new(scope.process, scope.frontend, *scope.endpoints, scope.vars)
    };
    // `tcp-request content capture` values, for `%hr` and `%hrl`.
    let captures = scope.vars.captures();
    let mut logged = StreamRecord {
        captures: Some(&*captures),
        ..*record
    };
    report(
        scope.process,
        scope.frontend,
        Some(backend),
        server,
        &mut logged,
        false,
        view,
    );
}

/// How each direction moves its bytes: spliced when the frontend's or backend's `option
/// splice-request|response` asks for it and a pipe is available, spliced once it streams
/// fast under `option splice-auto` (HAProxy's heuristic: on loopback or for small exchanges
/// copying is cheaper), copied through a buffer otherwise or under `nosplice`.
fn directions(process: &Process, frontend: &Frontend, backend: &Backend) -> (Direction, Direction) {
    let global = &process.global;
    let options = frontend.plan.splice.or(backend.plan.splice);
    // `tune.bufsize`, as HAProxy's channels use.
    let size = global.bufsize() as usize;
    let direction = |mode: SpliceMode| match mode {
        _ if global.nosplice => Direction::Copy(size),
        SpliceMode::Always => Pipe::new(global.pipesize, &process.pipes)
            .map_or(Direction::Copy(size), Direction::Splice),
        SpliceMode::Auto => Direction::SpliceWhenStreaming {
            size,
            pipesize: global.pipesize,
            budget: std::sync::Arc::clone(&process.pipes),
        },
        SpliceMode::Never => Direction::Copy(size),
    };
    (
        direction(options.request_mode()),
        direction(options.response_mode()),
    )
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
