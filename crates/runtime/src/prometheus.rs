//! The Prometheus exporter (`http-request use-service prometheus-exporter`): the statistics in
//! the Prometheus text format (version 0.0.4) with the metric names and labels of HAProxy's
//! exporter (`haproxy_process_*`, `haproxy_frontend_*{proxy}`, `haproxy_backend_*{proxy}`,
//! `haproxy_server_*{proxy,server}`), so existing dashboards and alerts work unchanged.
//!
//! Values are read from the same rows as `show stat` ([`crate::stats`]): each metric names the
//! row field it exports, and an object whose field is empty (Sluice does not measure it, or it
//! does not apply, like `check_code` without a check) has no sample. States are exported as
//! HAProxy does, one sample per possible state with value 1 for the current one.

use crate::process::Process;
use crate::stats::{self, Field, Row, RowKind};
use std::fmt::Write;

/// The content type of the answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// How a metric's samples are made from a row.
#[derive(Clone, Copy)]
enum Value {
    /// The field's number as is.
    Field(Field),
    /// `status`, one sample per state label.
    Status(&'static [&'static str]),
    /// HTTP responses by class (`code` label).
    Responses,
    /// `check_status`, one sample per check status.
    CheckStatus,
    /// `check_duration` in seconds.
    CheckSeconds,
    /// A field in milliseconds, in seconds.
    Seconds(Field),
}

/// One metric of a kind of object.
struct Metric {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: Value,
}

const fn m(name: &'static str, kind: &'static str, help: &'static str, value: Value) -> Metric {
    Metric {
        name,
        kind,
        help,
        value,
    }
}

const GAUGE: &str = "gauge";
const COUNTER: &str = "counter";

const FRONTEND: &[Metric] = &[
    m(
        "current_sessions",
        GAUGE,
        "Sessions open now.",
        Value::Field(Field::scur),
    ),
    m(
        "max_sessions",
        GAUGE,
        "Most sessions open at once.",
        Value::Field(Field::smax),
    ),
    m(
        "current_session_rate",
        GAUGE,
        "New sessions per second over the last second.",
        Value::Field(Field::rate),
    ),
    m(
        "max_session_rate",
        GAUGE,
        "Highest number of new sessions per second.",
        Value::Field(Field::rate_max),
    ),
    m(
        "limit_session_rate",
        GAUGE,
        "Limit on new sessions per second (0: none).",
        Value::Field(Field::rate_lim),
    ),
    m(
        "connections_rate_max",
        GAUGE,
        "Highest number of connections per second.",
        Value::Field(Field::conn_rate_max),
    ),
    m(
        "http_requests_rate_max",
        GAUGE,
        "Highest number of HTTP requests per second.",
        Value::Field(Field::req_rate_max),
    ),
    m(
        "limit_sessions",
        GAUGE,
        "Session limit (maxconn).",
        Value::Field(Field::slim),
    ),
    m(
        "sessions_total",
        COUNTER,
        "Sessions since start.",
        Value::Field(Field::stot),
    ),
    m(
        "bytes_in_total",
        COUNTER,
        "Request bytes received.",
        Value::Field(Field::bin),
    ),
    m(
        "bytes_out_total",
        COUNTER,
        "Response bytes sent.",
        Value::Field(Field::bout),
    ),
    m(
        "requests_denied_total",
        COUNTER,
        "Requests denied by rules.",
        Value::Field(Field::dreq),
    ),
    m(
        "responses_denied_total",
        COUNTER,
        "Responses denied by rules or option checkcache.",
        Value::Field(Field::dresp),
    ),
    m(
        "request_errors_total",
        COUNTER,
        "Invalid requests.",
        Value::Field(Field::ereq),
    ),
    m(
        "intercepted_requests_total",
        COUNTER,
        "Requests the proxy answered itself (redirections, return, auth, services, stats).",
        Value::Field(Field::intercepted),
    ),
    m(
        "status",
        GAUGE,
        "Current state, one sample per state.",
        Value::Status(&["DOWN", "UP"]),
    ),
    m(
        "http_responses_total",
        COUNTER,
        "HTTP responses by status class.",
        Value::Responses,
    ),
    m(
        "http_requests_total",
        COUNTER,
        "HTTP requests processed.",
        Value::Field(Field::req_tot),
    ),
    m(
        "connections_total",
        COUNTER,
        "Connections accepted.",
        Value::Field(Field::conn_tot),
    ),
    m(
        "denied_connections_total",
        COUNTER,
        "Connections refused by tcp-request rules.",
        Value::Field(Field::dcon),
    ),
];

/// Failed rewrites, on frontends, backends and servers.
const REWRITES: &[Metric] = &[
    m(
        "failed_header_rewriting_total",
        COUNTER,
        "Header rewrites that did not fit in the buffer.",
        Value::Field(Field::wrew),
    ),
    m(
        "internal_errors_total",
        COUNTER,
        "Internal errors (a failed rewrite is one).",
        Value::Field(Field::eint),
    ),
];

/// Connections to servers and transfers cut short, on backends and servers.
const TRANSFERS: &[Metric] = &[
    m(
        "connection_attempts_total",
        COUNTER,
        "Connection attempts to servers.",
        Value::Field(Field::connect),
    ),
    m(
        "connection_reuses_total",
        COUNTER,
        "Requests sent over a reused server connection.",
        Value::Field(Field::reuse),
    ),
    m(
        "redispatch_warnings_total",
        COUNTER,
        "Requests moved to another server by option redispatch.",
        Value::Field(Field::wredis),
    ),
    m(
        "client_aborts_total",
        COUNTER,
        "Transfers the client cut short.",
        Value::Field(Field::cli_abrt),
    ),
    m(
        "server_aborts_total",
        COUNTER,
        "Transfers the server cut short.",
        Value::Field(Field::srv_abrt),
    ),
    m(
        "connection_errors_total",
        COUNTER,
        "Connections to servers that failed for good.",
        Value::Field(Field::econ),
    ),
    m(
        "response_errors_total",
        COUNTER,
        "Invalid or missing responses.",
        Value::Field(Field::eresp),
    ),
    m(
        "retry_warnings_total",
        COUNTER,
        "Connection retries.",
        Value::Field(Field::wretr),
    ),
];

const BACKEND: &[Metric] = &[
    m(
        "current_queue",
        GAUGE,
        "Requests waiting for a server.",
        Value::Field(Field::qcur),
    ),
    m(
        "current_sessions",
        GAUGE,
        "Sessions open now.",
        Value::Field(Field::scur),
    ),
    m(
        "max_sessions",
        GAUGE,
        "Most sessions open at once.",
        Value::Field(Field::smax),
    ),
    m(
        "current_session_rate",
        GAUGE,
        "New sessions per second over the last second.",
        Value::Field(Field::rate),
    ),
    m(
        "max_session_rate",
        GAUGE,
        "Highest number of new sessions per second.",
        Value::Field(Field::rate_max),
    ),
    m(
        "queue_time_average_seconds",
        GAUGE,
        "Average time in the queue of the last 512 requests.",
        Value::Seconds(Field::qtime),
    ),
    m(
        "connect_time_average_seconds",
        GAUGE,
        "Average connect time of the last 512 requests.",
        Value::Seconds(Field::ctime),
    ),
    m(
        "response_time_average_seconds",
        GAUGE,
        "Average response time of the last 512 requests.",
        Value::Seconds(Field::rtime),
    ),
    m(
        "total_time_average_seconds",
        GAUGE,
        "Average total time of the last 512 requests.",
        Value::Seconds(Field::ttime),
    ),
    m(
        "max_queue_time_seconds",
        GAUGE,
        "Longest time in the queue.",
        Value::Seconds(Field::qtime_max),
    ),
    m(
        "max_connect_time_seconds",
        GAUGE,
        "Longest connect time.",
        Value::Seconds(Field::ctime_max),
    ),
    m(
        "max_response_time_seconds",
        GAUGE,
        "Longest response time.",
        Value::Seconds(Field::rtime_max),
    ),
    m(
        "max_total_time_seconds",
        GAUGE,
        "Longest total time.",
        Value::Seconds(Field::ttime_max),
    ),
    m(
        "limit_sessions",
        GAUGE,
        "Session limit (fullconn).",
        Value::Field(Field::slim),
    ),
    m(
        "sessions_total",
        COUNTER,
        "Sessions since start.",
        Value::Field(Field::stot),
    ),
    m(
        "bytes_in_total",
        COUNTER,
        "Request bytes received.",
        Value::Field(Field::bin),
    ),
    m(
        "bytes_out_total",
        COUNTER,
        "Response bytes sent.",
        Value::Field(Field::bout),
    ),
    m(
        "responses_denied_total",
        COUNTER,
        "Responses denied by rules or option checkcache.",
        Value::Field(Field::dresp),
    ),
    m(
        "requests_denied_total",
        COUNTER,
        "Requests denied by the backend's rules.",
        Value::Field(Field::dreq),
    ),
    m(
        "status",
        GAUGE,
        "Current state, one sample per state.",
        Value::Status(&["DOWN", "UP"]),
    ),
    m(
        "weight",
        GAUGE,
        "Total weight of the servers in use.",
        Value::Field(Field::weight),
    ),
    m(
        "active_servers",
        GAUGE,
        "Active servers in use.",
        Value::Field(Field::act),
    ),
    m(
        "backup_servers",
        GAUGE,
        "Backup servers in use.",
        Value::Field(Field::bck),
    ),
    m(
        "check_up_down_total",
        COUNTER,
        "Transitions to down.",
        Value::Field(Field::chkdown),
    ),
    m(
        "check_last_change_seconds",
        GAUGE,
        "Seconds since the last state change.",
        Value::Field(Field::lastchg),
    ),
    m(
        "downtime_seconds_total",
        COUNTER,
        "Seconds spent down.",
        Value::Field(Field::downtime),
    ),
    m(
        "loadbalanced_total",
        COUNTER,
        "Servers chosen by load balancing.",
        Value::Field(Field::lbtot),
    ),
    m(
        "http_responses_total",
        COUNTER,
        "HTTP responses by status class.",
        Value::Responses,
    ),
    m(
        "http_requests_total",
        COUNTER,
        "HTTP requests processed.",
        Value::Field(Field::req_tot),
    ),
    m(
        "uweight",
        GAUGE,
        "Total user weight of the servers in use.",
        Value::Field(Field::uweight),
    ),
];

const SERVER: &[Metric] = &[
    m(
        "current_queue",
        GAUGE,
        "Requests waiting for this server.",
        Value::Field(Field::qcur),
    ),
    m(
        "current_sessions",
        GAUGE,
        "Sessions open now.",
        Value::Field(Field::scur),
    ),
    m(
        "max_sessions",
        GAUGE,
        "Most sessions open at once.",
        Value::Field(Field::smax),
    ),
    m(
        "current_session_rate",
        GAUGE,
        "New sessions per second over the last second.",
        Value::Field(Field::rate),
    ),
    m(
        "max_session_rate",
        GAUGE,
        "Highest number of new sessions per second.",
        Value::Field(Field::rate_max),
    ),
    m(
        "queue_time_average_seconds",
        GAUGE,
        "Average time in the queue of the last 512 requests.",
        Value::Seconds(Field::qtime),
    ),
    m(
        "connect_time_average_seconds",
        GAUGE,
        "Average connect time of the last 512 requests.",
        Value::Seconds(Field::ctime),
    ),
    m(
        "response_time_average_seconds",
        GAUGE,
        "Average response time of the last 512 requests.",
        Value::Seconds(Field::rtime),
    ),
    m(
        "total_time_average_seconds",
        GAUGE,
        "Average total time of the last 512 requests.",
        Value::Seconds(Field::ttime),
    ),
    m(
        "max_queue_time_seconds",
        GAUGE,
        "Longest time in the queue.",
        Value::Seconds(Field::qtime_max),
    ),
    m(
        "max_connect_time_seconds",
        GAUGE,
        "Longest connect time.",
        Value::Seconds(Field::ctime_max),
    ),
    m(
        "max_response_time_seconds",
        GAUGE,
        "Longest response time.",
        Value::Seconds(Field::rtime_max),
    ),
    m(
        "max_total_time_seconds",
        GAUGE,
        "Longest total time.",
        Value::Seconds(Field::ttime_max),
    ),
    m(
        "limit_sessions",
        GAUGE,
        "Session limit (maxconn).",
        Value::Field(Field::slim),
    ),
    m(
        "sessions_total",
        COUNTER,
        "Sessions since start.",
        Value::Field(Field::stot),
    ),
    m(
        "bytes_in_total",
        COUNTER,
        "Request bytes received.",
        Value::Field(Field::bin),
    ),
    m(
        "bytes_out_total",
        COUNTER,
        "Response bytes sent.",
        Value::Field(Field::bout),
    ),
    m(
        "responses_denied_total",
        COUNTER,
        "Responses denied by rules or option checkcache.",
        Value::Field(Field::dresp),
    ),
    m(
        "status",
        GAUGE,
        "Current state, one sample per state.",
        Value::Status(&["DOWN", "UP", "MAINT", "DRAIN", "NOLB"]),
    ),
    m(
        "weight",
        GAUGE,
        "Effective weight.",
        Value::Field(Field::weight),
    ),
    m(
        "check_failures_total",
        COUNTER,
        "Failed health checks.",
        Value::Field(Field::chkfail),
    ),
    m(
        "check_up_down_total",
        COUNTER,
        "Transitions to down.",
        Value::Field(Field::chkdown),
    ),
    m(
        "check_last_change_seconds",
        GAUGE,
        "Seconds since the last state change.",
        Value::Field(Field::lastchg),
    ),
    m(
        "downtime_seconds_total",
        COUNTER,
        "Seconds spent down.",
        Value::Field(Field::downtime),
    ),
    m(
        "queue_limit",
        GAUGE,
        "Queue limit (maxqueue).",
        Value::Field(Field::qlimit),
    ),
    m(
        "loadbalanced_total",
        COUNTER,
        "Times chosen by load balancing.",
        Value::Field(Field::lbtot),
    ),
    m(
        "check_status",
        GAUGE,
        "Last health check status, one sample per status.",
        Value::CheckStatus,
    ),
    m(
        "check_code",
        GAUGE,
        "Last health check's layer 7 code.",
        Value::Field(Field::check_code),
    ),
    m(
        "check_duration_seconds",
        GAUGE,
        "Last health check's duration.",
        Value::CheckSeconds,
    ),
    m(
        "http_responses_total",
        COUNTER,
        "HTTP responses by status class.",
        Value::Responses,
    ),
    m(
        "idle_connections_current",
        GAUGE,
        "Idle connections to this server, ready for reuse.",
        Value::Field(Field::srv_icur),
    ),
    m(
        "idle_connections_limit",
        GAUGE,
        "The most idle connections kept for this server (pool-max-conn).",
        Value::Field(Field::src_ilim),
    ),
    m(
        "unsafe_idle_connections_current",
        GAUGE,
        "Idle connections that served only one request.",
        Value::Field(Field::idle_conn_cur),
    ),
    m(
        "safe_idle_connections_current",
        GAUGE,
        "Idle connections that served several requests.",
        Value::Field(Field::safe_conn_cur),
    ),
    m(
        "used_connections_current",
        GAUGE,
        "Connections carrying a request now.",
        Value::Field(Field::used_conn_cur),
    ),
    m(
        "need_connections_current",
        GAUGE,
        "Estimate of the connections the traffic needs.",
        Value::Field(Field::need_conn_est),
    ),
    m(
        "uweight",
        GAUGE,
        "User weight.",
        Value::Field(Field::uweight),
    ),
];

/// The check statuses HAProxy's exporter lists.
const CHECK_STATUSES: &[&str] = &[
    "HANA", "SOCKERR", "L4OK", "L4TOUT", "L4CON", "L6OK", "L6TOUT", "L6RSP", "L7TOUT", "L7RSP",
    "L7OK", "L7OKC", "L7STS", "PROCERR", "PROCTOUT", "PROCOK",
];

/// Escapes a label value (backslash, quote, newline).
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(row: &Row) -> String {
    match row.kind {
        RowKind::Server => format!(
            "proxy=\"{}\",server=\"{}\"",
            label(row.pxname()),
            label(row.svname())
        ),
        _ => format!("proxy=\"{}\"", label(row.pxname())),
    }
}

/// The state label a row's `status` belongs to.
fn state_of(row: &Row) -> &'static str {
    let status = row.get(Field::status);
    match status {
        "MAINT" => "MAINT",
        "DRAIN" => "DRAIN",
        "NOLB" => "NOLB",
        "OPEN" | "no check" => "UP",
        s if s.starts_with("UP") => "UP",
        _ => "DOWN",
    }
}

fn samples(out: &mut String, name: &str, metric: &Metric, row: &Row) {
    let labels = labels(row);
    match metric.value {
        Value::Field(field) => {
            let v = row.get(field);
            if !v.is_empty() {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        }
        Value::Status(states) => {
            let current = state_of(row);
            for state in states {
                let _ = writeln!(
                    out,
                    "{name}{{{labels},state=\"{state}\"}} {}",
                    u8::from(*state == current)
                );
            }
        }
        Value::Responses => {
            const CLASSES: [(&str, Field); 6] = [
                ("1xx", Field::hrsp_1xx),
                ("2xx", Field::hrsp_2xx),
                ("3xx", Field::hrsp_3xx),
                ("4xx", Field::hrsp_4xx),
                ("5xx", Field::hrsp_5xx),
                ("other", Field::hrsp_other),
            ];
            for (code, field) in CLASSES {
                let v = row.get(field);
                if !v.is_empty() {
                    let _ = writeln!(out, "{name}{{{labels},code=\"{code}\"}} {v}");
                }
            }
        }
        Value::CheckStatus => {
            let status = row.get(Field::check_status).trim_start_matches("* ");
            if status.is_empty() {
                return;
            }
            for state in CHECK_STATUSES {
                let _ = writeln!(
                    out,
                    "{name}{{{labels},state=\"{state}\"}} {}",
                    u8::from(*state == status)
                );
            }
        }
        Value::CheckSeconds => seconds(out, name, &labels, row, Field::check_duration),
        Value::Seconds(field) => seconds(out, name, &labels, row, field),
    }
}

/// A sample in seconds from a field in milliseconds.
fn seconds(out: &mut String, name: &str, labels: &str, row: &Row, field: Field) {
    if let Ok(ms) = row.get(field).parse::<u64>() {
        let _ = writeln!(out, "{name}{{{labels}}} {:.6}", ms as f64 / 1000.0);
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn process_metrics(process: &Process, out: &mut String) {
    let uptime = process.started.elapsed().as_secs();
    let start = process
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let listeners: usize = process
        .frontends
        .iter()
        .map(|f| f.plan.binds.iter().map(|b| b.addrs.len()).sum::<usize>())
        .sum();
    let stopping = process.is_stopping();
    let plain: [(&str, &str, &str, u64); 13] = [
        (
            "nbthread",
            GAUGE,
            "Event-loop threads.",
            process.nbthread as u64,
        ),
        ("nbproc", GAUGE, "Processes (always 1).", 1),
        (
            "relative_process_id",
            GAUGE,
            "This process's number (always 1).",
            1,
        ),
        ("uptime_seconds", GAUGE, "Seconds since start.", uptime),
        ("max_fds", GAUGE, "File-descriptor limit.", process.ulimit_n),
        (
            "max_connections",
            GAUGE,
            "Process-wide connection limit now.",
            u64::from(process.runtime_maxconn()),
        ),
        (
            "hard_max_connections",
            GAUGE,
            "Process-wide connection limit at start.",
            u64::from(process.maxconn),
        ),
        (
            "current_connections",
            GAUGE,
            "Connections open now.",
            process.traffic.sessions.get(),
        ),
        (
            "connections_total",
            COUNTER,
            "Connections since start.",
            process.traffic.total_sessions.get(),
        ),
        (
            "max_pipes",
            GAUGE,
            "Kernel pipes splicing may use.",
            process.pipes.max().unwrap_or(0) as u64,
        ),
        (
            "pipes_used_total",
            COUNTER,
            "Kernel pipes in use.",
            process.pipes.used() as u64,
        ),
        ("stopping", GAUGE, "1 while stopping.", u64::from(stopping)),
        ("listeners", GAUGE, "Listening sockets.", listeners as u64),
    ];
    for (name, kind, help, value) in plain {
        let name = format!("haproxy_process_{name}");
        header(out, &name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    header(
        out,
        "haproxy_process_start_time_seconds",
        GAUGE,
        "Start time, in seconds since the epoch.",
    );
    let _ = writeln!(out, "haproxy_process_start_time_seconds {start}");
    header(
        out,
        "haproxy_process_build_info",
        GAUGE,
        "Build information.",
    );
    let _ = writeln!(
        out,
        "haproxy_process_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
}

/// The whole exposition: process metrics, then frontends, backends and servers, each metric
/// with its `# HELP` and `# TYPE` lines followed by all its samples.
pub fn render(process: &Process) -> String {
    let mut out = String::with_capacity(32768);
    process_metrics(process, &mut out);
    let rows = stats::collect(process);
    let lists: [(RowKind, &str, &[&[Metric]]); 3] = [
        (
            RowKind::Frontend,
            "haproxy_frontend_",
            &[FRONTEND, REWRITES],
        ),
        (
            RowKind::Backend,
            "haproxy_backend_",
            &[BACKEND, TRANSFERS, REWRITES],
        ),
        (
            RowKind::Server,
            "haproxy_server_",
            &[SERVER, TRANSFERS, REWRITES],
        ),
    ];
    for (kind, prefix, metrics) in lists {
        for metric in metrics.iter().copied().flatten() {
            let name = format!("{prefix}{}", metric.name);
            let mut body = String::new();
            for row in rows.iter().filter(|r| r.kind == kind) {
                samples(&mut body, &name, metric, row);
            }
            if !body.is_empty() {
                header(&mut out, &name, metric.kind, metric.help);
                out.push_str(&body);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
