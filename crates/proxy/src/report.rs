//! Reporting a finished stream: the `-d` debug line and the frontend's log line
//! (`option httplog|tcplog`, `log-format`, `error-log-format`), with the connection counts
//! read at the end; and a connection that failed before it became a stream (its error line).
//!
//! A `log-format` is rendered over the same [`StreamView`] the rules use, completed with the
//! record's facts (timers, bytes, termination state), so `%[...]` fetches and `%Tw`-style
//! aliases are both available.

use crate::stream_context::StreamView;
use sluice_config::rules::LogLevelChange;
use sluice_net::proxy_io::HeaderError;
use sluice_net::stream::Target;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server, counts};
use sluice_runtime::record::{
    Cause, Counts, Phase, RecordFacts, ServerEnds, StreamRecord, Termination, Timers,
};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Instant, SystemTime};

/// Reports `record` (an HTTP request when `http`, else a TCP session) to the debug output and
/// the frontend's log. `view` is what log-format fetches see of the stream.
pub fn report(
    process: &Process,
    frontend: &Frontend,
    backend: Option<&Backend>,
    server: Option<&Server>,
    record: &mut StreamRecord<'_>,
    http: bool,
    view: StreamView<'_>,
) {
    if process.stream_log.is_none() && frontend.logger.is_none() {
        return;
    }
    record.counts = counts(process.traffic.sessions.get(), frontend, backend, server);
    if let Some(log) = &process.stream_log {
        if http {
            log.http(record);
        } else {
            log.tcp(record);
        }
    }
    if frontend.logger.is_some() {
        // `set-log-level`: another level for this line, or no line at all.
        let level = match view.vars.log_level() {
            Some(LogLevelChange::Silent) => return,
            Some(LogLevelChange::Level(level)) => Some(level),
            None => None,
        };
        let record: &StreamRecord<'_> = record;
        let facts = RecordFacts::new(record).with_unique_id(view.vars.unique_id());
        let view = StreamView {
            facts: Some(&facts),
            ..view
        };
        frontend.log_stream(record, http, level, &|fmt, out| fmt.render(&view, out));
    }
}

/// The ends of the server connection `connection` for the log line, read (two system calls)
/// only when the frontend's line prints them (`%bi`, `%si`, `bc_src`...).
pub(crate) fn server_ends(frontend: &Frontend, connection: &impl AsFd) -> ServerEnds {
    if !logs_server_ends(frontend) {
        return ServerEnds::default();
    }
    let (local, server) = sluice_net::stream::socket_ends(connection);
    ServerEnds {
        local,
        server,
        connected: true,
    }
}

/// The same for a server connection that could not be made: the address it was tried at, for
/// a client whose connection went to `client_dst`, and the failed socket's own address
/// (`failed_from`, noted when the attempt started), as HAProxy shows them.
pub(crate) fn attempted_server_ends(
    frontend: &Frontend,
    server: &Server,
    client_dst: Option<SocketAddr>,
    failed_from: Option<SocketAddr>,
) -> ServerEnds {
    match server.target(client_dst) {
        Some(Target::Inet(addr)) if logs_server_ends(frontend) => ServerEnds {
            local: failed_from,
            server: Some(addr),
            connected: false,
        },
        _ => ServerEnds::default(),
    }
}

/// Whether the frontend's log line prints the server connection's ends.
pub(crate) fn logs_server_ends(frontend: &Frontend) -> bool {
    frontend.logger.as_ref().is_some_and(|l| l.logs_server_ends)
}

/// Logs a connection whose PROXY protocol header failed (`error-log-format`, or HAProxy's short
/// error line). A client that sent nothing is a probe `option dontlognull` skips.
pub fn report_connection_error(
    view: StreamView<'_>,
    accepted: (SystemTime, Instant),
    bind_name: &str,
    err: &HeaderError,
) {
    let frontend = view.frontend;
    let Some(log) = &frontend.logger else {
        return;
    };
    if log.conf.dont_log_null && err.is_silent() {
        return;
    }
    let error = err.haproxy_error();
    let record = StreamRecord {
        start: accepted.0,
        client: view.endpoints.client,
        frontend: frontend.name(),
        backend: None,
        server: None,
        timers: Timers {
            total: accepted.1.elapsed(),
            ..Timers::default()
        },
        // HAProxy logs `%ST` as 0 when no status was ever set.
        status: Some(0),
        bytes_to_client: 0,
        bytes_from_client: 0,
        // configuration.txt §8.5: "PR", the proxy refused the connection before a request.
        termination: Termination {
            cause: Cause::Proxy,
            phase: Phase::Request,
        },
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
    let facts = RecordFacts::new(&record).with_connection_error(error);
    let view = StreamView {
        facts: Some(&facts),
        ..view
    };
    frontend.log_connection_error(&record, bind_name, error.1, &|fmt, out| {
        fmt.render(&view, out)
    });
}
