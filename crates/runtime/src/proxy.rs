//! Live frontends, backends and servers.
//!
//! A [`Frontend`] owns its connection limit and counters and points at the [`Backend`] taking
//! its traffic. A [`Backend`] owns its [`Server`]s and the balancing state; choosing a server
//! takes a short lock on that state only (the servers' own state is read from atomics).

use crate::counters::{Counter, Traffic};
use crate::listener::ListenerStats;
use crate::logging::{ProxyLogger, level};
use crate::record::{Counts, StreamRecord};
use sluice_balance::{Algorithm, Balancer, HashMethod, PickInput, ServerState};
use sluice_config::addr::{ServerAddr, ServerPort};
use sluice_config::logging::{LineFormat, ProxyLogConf};
use sluice_config::plan::{BackendPlan, FrontendPlan};
use sluice_config::proxy::ServerConf;
use sluice_net::stream::{self, Target};
use sluice_sample::LogFormat;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// A proxy's accepting side.
#[derive(Debug)]
pub struct Frontend {
    /// `rate-limit sessions`: the accept loops wait their turn under it.
    pub session_rate_limit: crate::rate::RateLimit,
    /// What the configuration said.
    pub plan: FrontendPlan,
    /// The backend taking this frontend's connections, if any.
    pub backend: Option<Arc<Backend>>,
    /// In a TCP frontend: its default backend or a `use_backend` rule may lead to an HTTP
    /// backend, which upgrades the connection to HTTP, so inspection must read the bytes as
    /// a request. It depends on the configuration only, so it is worked out once here and
    /// not per accepted connection.
    pub may_reach_http_backend: bool,
    /// Its response rules or error pages may read the request: a request passing through
    /// keeps a parsed copy for the response side. Worked out once here, not per request.
    pub response_reads_request: bool,
    /// Concurrent connection limit (`maxconn`, which `set maxconn frontend` changes): every
    /// open session holds a slot.
    pub slots: Arc<crate::slots::ConnSlots>,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Connections closed without being forwarded (no backend, no server).
    pub failed: Counter,
    /// Invalid or timed-out requests (`ereq` in `show stat`).
    pub request_errors: Counter,
    /// Connections refused by `tcp-request connection reject` (`dcon`).
    pub denied_connections: Counter,
    /// Sessions refused by `tcp-request session reject` (`dses`).
    pub denied_sessions: Counter,
    /// Requests refused by rules (`dreq`): `http-request deny|tarpit|reject|silent-drop`,
    /// `tcp-request content reject|silent-drop`, and any `silent-drop`.
    pub denied_requests: Counter,
    /// Requests its own rules answered without a server: redirections, `return`, `auth`,
    /// the monitor URI, services, the statistics page (`intercepted`).
    pub intercepted: Counter,
    /// Connections accepted, before any rule or PROXY header (`conn_tot`, `conn_rate`;
    /// `CumConns` in `show info`), as HAProxy counts them apart from sessions.
    pub connections: crate::counters::LoopCounter,
    /// See `connections`.
    pub connection_rate: crate::freq::Rate,
    /// Where this proxy's log lines go, and how they look; `None` without `log` targets.
    pub logger: Option<FrontendLog>,
    /// Statistics-only counters and the `disable frontend` switch.
    pub stats: crate::stats::StatsCounters,
    /// The last invalid request (`show errors`).
    pub invalid_request: crate::errors::Captured,
    /// Its listening sockets' own counters, under `option socket-stats` (else none).
    pub listeners: Vec<Arc<ListenerStats>>,
    /// The connections open now on each of its listening sockets, by number from 1
    /// ([`Frontend::socket_connections`]).
    socket_connections: Box<[crate::counters::Gauge]>,
    /// The address and port its first socket was bound to (an external check's proxy
    /// address), once bound.
    pub first_address: std::sync::OnceLock<(String, Option<u16>)>,
}

/// A frontend's logging: its targets and its line settings.
#[derive(Debug)]
pub struct FrontendLog {
    /// The targets.
    pub out: ProxyLogger,
    /// `option httplog|tcplog`, `log-format`, `option dontlognull`...
    pub conf: ProxyLogConf,
    /// The line prints the server connection's addresses (`%bi`, `%si`, `bc_src`...): each
    /// stream reads them once connected ([`crate::record::ServerEnds`]).
    pub logs_server_ends: bool,
    /// Stream lines sent so far (`%lc`, "frontend_log_counter": a line shows the count
    /// before it).
    pub lines: crate::counters::LoopCounter,
}

impl Frontend {
    /// Logs a finished stream if the frontend logs: the line in the frontend's format
    /// (`custom` renders a `log-format`, which needs the data path's view of the stream), at
    /// `level` when a rule chose one (`set-log-level`).
    pub fn log_stream(
        &self,
        record: &StreamRecord<'_>,
        http: bool,
        level: Option<u8>,
        custom: &dyn Fn(&LogFormat, &mut Vec<u8>),
    ) {
        let Some(log) = &self.logger else {
            return;
        };
        if log.conf.dont_log_null && record.bytes_from_client == 0 {
            return;
        }
        if log.conf.dont_log_normal && !record.is_error() {
            return;
        }
        let written = |write: &dyn Fn(&mut String)| {
            let mut line = String::with_capacity(256);
            write(&mut line);
            line.into_bytes()
        };
        let bytes = match &log.conf.format {
            // Minimal logging happens at the accept (see `log_connection`).
            LineFormat::Minimal => return,
            LineFormat::Tcp => written(&|line| record.write_tcp_line(line)),
            LineFormat::Http | LineFormat::HttpClf | LineFormat::Https(_) if !http => {
                written(&|line| record.write_tcp_line(line))
            }
            LineFormat::Http => written(&|line| record.write_http_line(line)),
            LineFormat::HttpClf => written(&|line| record.write_clf_line(line)),
            LineFormat::Https(fmt) | LineFormat::Custom(fmt) => {
                let mut bytes = Vec::with_capacity(256);
                custom(fmt, &mut bytes);
                bytes
            }
        };
        // `log-format-sd`: the structured data of the targets in RFC 5424 format.
        let structured = log.conf.structured_format.as_ref().map(|fmt| {
            let mut bytes = Vec::with_capacity(128);
            custom(fmt, &mut bytes);
            bytes
        });
        let level = level.unwrap_or_else(|| severity(log, record));
        log.lines.incr();
        log.out.emit_with_data(level, &bytes, structured.as_deref());
    }

    /// Logs a connection that failed before it became a stream (a bad PROXY protocol
    /// header, configuration.txt §8.2.5): with `error-log-format` (`custom` renders it), else
    /// in HAProxy's short line `client:port [date] frontend/bind: message` when the frontend
    /// logs streams in a format of its own (`option httplog|tcplog`, `log-format`).
    pub fn log_connection_error(
        &self,
        record: &StreamRecord<'_>,
        bind_name: &str,
        message: &str,
        custom: &dyn Fn(&LogFormat, &mut Vec<u8>),
    ) {
        let Some(log) = &self.logger else {
            return;
        };
        let level = if log.conf.separate_errors {
            level::ERR
        } else {
            level::INFO
        };
        if let Some(fmt) = &log.conf.error_format {
            let mut bytes = Vec::with_capacity(256);
            custom(fmt, &mut bytes);
            // `log-format-sd` applies to these lines too, as in HAProxy.
            let structured = log.conf.structured_format.as_ref().map(|sd| {
                let mut sd_bytes = Vec::with_capacity(128);
                custom(sd, &mut sd_bytes);
                sd_bytes
            });
            log.out.emit_with_data(level, &bytes, structured.as_deref());
            return;
        }
        if matches!(log.conf.format, LineFormat::Minimal) {
            return;
        }
        let mut line = String::with_capacity(160);
        match record.client {
            Some(addr) => line.push_str(&format!("{}:{}", addr.ip(), addr.port())),
            None => line.push_str("unix:0"),
        }
        line.push_str(" [");
        crate::record::write_date(record.start, &mut line);
        line.push_str(&format!("] {}/{bind_name}: {message}", self.name()));
        log.out.emit(level, line.as_bytes());
    }

    /// An alert about this proxy's traffic (`message`, without a line end): at severity
    /// `alert` in its log, and on standard error unless `quiet`, as HAProxy reports them.
    pub fn log_alert(&self, message: &str, quiet: bool) {
        if !quiet {
            eprintln!("{:<11}({}) : {message}", "[ALERT]", std::process::id());
        }
        if let Some(log) = &self.logger {
            log.out.emit(level::ALERT, message.as_bytes());
        }
    }

    /// HAProxy's minimal log (no `option httplog|tcplog`, no `log-format`): one line when a
    /// connection is accepted.
    pub fn log_connection(&self, client: Option<SocketAddr>, local: Option<SocketAddr>) {
        let Some(log) = &self.logger else {
            return;
        };
        if !matches!(log.conf.format, LineFormat::Minimal) {
            return;
        }
        let show = |a: Option<SocketAddr>| a.map_or("unix:0".to_owned(), |a| a.to_string());
        let mode = match self.plan.mode {
            sluice_config::proxy::Mode::Http => "HTTP",
            sluice_config::proxy::Mode::Tcp => "TCP",
        };
        let line = format!(
            "Connect from {} to {} ({}/{mode})",
            show(client),
            show(local),
            self.name()
        );
        log.out.emit(level::INFO, line.as_bytes());
    }
}

/// `info` for traffic; `err` for failed streams with `option log-separate-errors`.
fn severity(log: &FrontendLog, record: &StreamRecord<'_>) -> u8 {
    if log.conf.separate_errors && record.is_error() {
        level::ERR
    } else {
        level::INFO
    }
}

/// Counts a transfer cut short by the client or the server (`cli_abrt`, `srv_abrt`) on the
/// backend and the server, from how the stream ended, as HAProxy counts them: an abort or a
/// timeout of that side while data was flowing.
pub fn count_abort(backend: &Backend, server: &Server, ended: crate::record::Termination) {
    use crate::record::{Cause, Phase};
    match (ended.cause, ended.phase) {
        (Cause::ClientAbort | Cause::ClientTimeout, Phase::Data) => {
            backend.stats.client_aborts.incr();
            server.stats.client_aborts.incr();
        }
        (Cause::ServerAbort | Cause::ServerTimeout, Phase::Data) => {
            backend.stats.server_aborts.incr();
            server.stats.server_aborts.incr();
        }
        _ => {}
    }
}

/// Counts a rewrite that did not fit (`wrew`), which the proxy answers with a 500 (also
/// `eint`) unless `strict-mode off` had it ignored: on the frontend, on the backend when it
/// is another proxy (a `listen` section counts once, as HAProxy counts), and on the server
/// for a response.
pub fn count_failed_rewrite(
    (frontend, listener): (&Frontend, Option<&ListenerStats>),
    backend: Option<&Backend>,
    server: Option<&Server>,
    internal_error: bool,
) {
    if let Some(listener) = listener {
        listener.failed_rewrites.incr();
        if internal_error {
            listener.internal_errors.incr();
        }
    }
    let backend = backend.filter(|b| b.plan.id.uid != frontend.plan.id.uid);
    let stats = std::iter::once(&frontend.stats)
        .chain(backend.map(|b| &b.stats))
        .chain(server.map(|s| &s.stats));
    for stats in stats {
        stats.failed_rewrites.incr();
        if internal_error {
            stats.internal_errors.incr();
        }
    }
}

/// Counts an answer a backend's own rules made (another proxy than the frontend): a
/// session of the backend, with the bytes of the request and the answer and its status, as
/// HAProxy counts the streams that reached a backend.
pub fn count_backend_answer(backend: &Backend, status: u16, (read, sent): (u64, u64)) {
    let traffic = &backend.traffic;
    traffic.open_session();
    traffic.bytes_in.add(read);
    traffic.bytes_out.add(sent);
    backend.stats.count_response(status);
    traffic.close_session();
}

/// Counts an invalid, late or refused request of the frontend's clients (`ereq`).
pub fn count_request_error((frontend, listener): (&Frontend, Option<&ListenerStats>)) {
    frontend.request_errors.incr();
    if let Some(listener) = listener {
        listener.request_errors.incr();
    }
}

/// Counts a request `http-request` rules refused, or any rules dropped (`dreq`): on the
/// frontend, and on the backend when the refusing rules were the backend's own (another
/// proxy than the frontend), as HAProxy counts it.
pub fn count_denied_request(
    (frontend, listener): (&Frontend, Option<&ListenerStats>),
    backend: Option<&Backend>,
) {
    frontend.denied_requests.incr();
    if let Some(listener) = listener {
        listener.denied_requests.incr();
    }
    if let Some(backend) = backend.filter(|b| b.plan.id.uid != frontend.plan.id.uid) {
        backend.denied_requests.incr();
    }
}

/// Counts a connection dropped on a server's response (`silent-drop` in `http-response` or
/// `tcp-response content`): a denied request (`dreq`) on the frontend and the stream's
/// backend, a `listen` section's included, as HAProxy counts it.
pub fn count_dropped_response(
    (frontend, listener): (&Frontend, Option<&ListenerStats>),
    backend: &Backend,
) {
    frontend.denied_requests.incr();
    if let Some(listener) = listener {
        listener.denied_requests.incr();
    }
    backend.denied_requests.incr();
}

/// Counts a response the proxy refused to pass on (`dresp`): the frontend, the backend and
/// the server each count it, as in HAProxy.
pub fn count_denied_response(
    (frontend, listener): (&Frontend, Option<&ListenerStats>),
    backend: &Backend,
    server: Option<&Server>,
) {
    frontend.stats.denied_responses.incr();
    if let Some(listener) = listener {
        listener.denied_responses.incr();
    }
    backend.stats.denied_responses.incr();
    if let Some(server) = server {
        server.stats.denied_responses.incr();
    }
}

/// The connection and queue counts of a stream's log line, read when it ends.
pub fn counts(
    process_connections: u64,
    frontend: &Frontend,
    backend: Option<&Backend>,
    server: Option<&Server>,
) -> Counts {
    Counts {
        process: process_connections,
        frontend: frontend.traffic.sessions.get(),
        backend: backend.map_or(0, |b| b.traffic.sessions.get()),
        server: server.map_or(0, |s| s.traffic.sessions.get()),
        server_queue: match (backend, server) {
            (Some(b), Some(s)) => b.server_queued(s.index) as u64,
            _ => 0,
        },
        backend_queue: backend.map_or(0, |b| b.queued() as u64),
    }
}

impl Frontend {
    /// The connections open now on the frontend's listening socket number `socket_id` (from
    /// 1, `so_id`), from their accept to their end whatever they became (`dst_conn`); `None`
    /// for a socket it does not have.
    pub fn socket_connections(&self, socket_id: u32) -> Option<&crate::counters::Gauge> {
        let index = usize::try_from(socket_id).ok()?.checked_sub(1)?;
        self.socket_connections.get(index)
    }

    /// A frontend from its plan, limited to `maxconn` concurrent sessions.
    pub fn new(plan: FrontendPlan, backend: Option<Arc<Backend>>, maxconn: u32) -> Self {
        let session_rate_limit = crate::rate::RateLimit::default();
        session_rate_limit.set_limit(plan.session_rate_limit);
        let reads_request = response_reads_request(&plan.rules, &plan.error_pages);
        Frontend {
            session_rate_limit,
            listeners: crate::listener::listeners_of(&plan),
            socket_connections: crate::listener::sockets_of(&plan)
                .map(|_| crate::counters::Gauge::default())
                .collect(),
            first_address: std::sync::OnceLock::new(),
            plan,
            backend,
            may_reach_http_backend: false,
            response_reads_request: reads_request,
            slots: crate::slots::ConnSlots::new(maxconn),
            traffic: Traffic::default(),
            failed: Counter::default(),
            request_errors: Counter::default(),
            denied_connections: Counter::default(),
            denied_sessions: Counter::default(),
            denied_requests: Counter::default(),
            intercepted: Counter::default(),
            connections: crate::counters::LoopCounter::default(),
            connection_rate: crate::freq::Rate::default(),
            logger: None,
            stats: crate::stats::StatsCounters::new(0),
            invalid_request: crate::errors::Captured::default(),
        }
    }

    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.plan.id.name
    }
}

/// A proxy's server side.
#[derive(Debug)]
pub struct Backend {
    /// What the configuration said.
    pub plan: BackendPlan,
    /// Servers, in declaration order, then those added at run time.
    pub servers: crate::server_list::ServerList,
    state: Mutex<Shared>,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Connections that could not be established: every attempt failed, or no server was
    /// usable (`econ` in `show stat`).
    pub failed_connections: Counter,
    /// Extra connection attempts made after failures (`wretr`).
    pub retries: Counter,
    /// Invalid, missing or timed-out responses (`eresp`).
    pub response_errors: Counter,
    /// Requests that waited in a queue longer than `timeout queue`.
    pub queue_timeouts: Counter,
    /// Requests its own `http-request` rules refused (`dreq`; see [`count_denied_request`]).
    pub denied_requests: Counter,
    /// `fullconn` and the servers whose limit follows the load (see [`crate::dynamic`]).
    pub(crate) limits: crate::dynamic::Limits,
    /// Statistics-only counters (responses by class, picks, state changes).
    pub stats: crate::stats::StatsCounters,
    /// The last invalid response (`show errors`).
    pub invalid_response: crate::errors::Captured,
    /// See [`Frontend::response_reads_request`].
    pub response_reads_request: bool,
}

/// True if a proxy's response rules, or an error page built per answer, may read the
/// request.
fn response_reads_request(
    rules: &sluice_config::rules::ProxyRules,
    error_pages: &sluice_config::errors::ErrorPages,
) -> bool {
    rules.response_rules_read_request() || sluice_config::errors::any_formatted(error_pages)
}

/// What server choice changes under the backend's lock: the balancer and the queues.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) balancer: Balancer,
    pub(crate) queues: Queues,
    /// Servers in slowstart.
    pub(crate) warming: crate::dynamic::Warming,
    /// The servers whose limit follows the load (`minconn` below `maxconn`).
    pub(crate) following: Vec<usize>,
}

impl Shared {
    /// Requests waiting in the backend's queue and its servers'.
    pub(crate) fn queued_total(&self) -> usize {
        self.queues.backend.len() + self.queues.servers.iter().map(VecDeque::len).sum::<usize>()
    }
}

/// Where a request waits in a queue (`set-priority-class`, `set-priority-offset`): ordered
/// by class, then by the time it was queued moved by the offset, lower first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueuePriority {
    /// The class, -2047 to 2047.
    pub class: i32,
    /// Milliseconds added to the time the request was queued, -524287 to 524287.
    pub offset_ms: i32,
}

impl QueuePriority {
    /// The range of a class.
    pub const CLASSES: std::ops::RangeInclusive<i64> = -2047..=2047;
    /// The range of an offset, in milliseconds.
    pub const OFFSETS: std::ops::RangeInclusive<i64> = -524_287..=524_287;
}

/// Requests waiting for a server slot (configuration.txt §5.2 `maxconn`, `maxqueue`): one
/// queue for the backend (any server may serve them) and one per server (requests that
/// must go to that server). Each queue is kept in [`QueuePriority`] order (arrival order
/// among equals, by ticket); a freed slot goes to the first waiter among its server's queue
/// and the backend's.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    next_ticket: u64,
    pub(crate) backend: VecDeque<Waiter>,
    pub(crate) servers: Vec<VecDeque<Waiter>>,
}

/// A request waiting in a queue: woken with the index of the server whose slot it received.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Its place: class, due time (ms), ticket.
    order: (i32, i64, u64),
    wake: oneshot::Sender<usize>,
}

/// A server's state for the balancer before any event: configured weight, `disabled`,
/// `backup`, and the limit of an idle backend (`minconn` where the limit follows the load).
pub(crate) fn initial_state(conf: &ServerConf) -> ServerState {
    ServerState {
        weight: conf.weight,
        usable: !conf.disabled,
        backup: conf.backup,
        maxconn: conf.maxconn.map(|max| conf.minconn.unwrap_or(max).min(max)),
    }
}

/// Why no server could be given to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unserved {
    /// No server is usable: answer at once (503).
    NoServer,
    /// The request waited `timeout queue` without getting a slot (503, `sQ` in logs).
    QueueTimeout,
    /// The wanted server's own queue is full (`maxqueue`): balance instead.
    QueueFull,
}

impl Backend {
    /// A backend from its plan and its servers' resolved addresses (`None` for unix servers).
    pub fn new(plan: BackendPlan, resolved: Vec<Option<IpAddr>>) -> Self {
        let servers = plan
            .servers
            .iter()
            .zip(resolved)
            .enumerate()
            .map(|(i, (conf, ip))| Server::new(conf.clone(), i, ip))
            .collect::<Vec<_>>();
        let limits = crate::dynamic::Limits::new(plan.fullconn);
        let following = servers
            .iter()
            .filter(|s| crate::dynamic::follows_load(&s.conf))
            .map(|s| s.index)
            .collect();
        let states: Vec<ServerState> = servers.iter().map(|s| initial_state(&s.conf)).collect();
        let ids: Vec<u32> = servers.iter().map(|s| s.id).collect();
        let balancer = Balancer::new(
            &plan.balance,
            plan.hash_type,
            &states,
            plan.allbackups,
            plan.hash_balance_factor,
        )
        .with_ids(&ids);
        let queues = Queues {
            servers: servers.iter().map(|_| VecDeque::new()).collect(),
            ..Queues::default()
        };
        Backend {
            response_reads_request: response_reads_request(&plan.rules, &plan.error_pages),
            state: Mutex::new(Shared {
                balancer,
                queues,
                warming: crate::dynamic::Warming::new(servers.len()),
                following,
            }),
            limits,
            servers: crate::server_list::ServerList::new(servers),
            plan,
            traffic: Traffic::default(),
            failed_connections: Counter::default(),
            retries: Counter::default(),
            response_errors: Counter::default(),
            queue_timeouts: Counter::default(),
            denied_requests: Counter::default(),
            stats: crate::stats::StatsCounters::new(0),
            invalid_response: crate::errors::Captured::default(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // Every change under this lock leaves the state consistent before anything that could
        // panic, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.plan.id.name
    }

    /// The algorithm choosing servers (the data path extracts its key from the request).
    pub fn algorithm(&self) -> &Algorithm {
        &self.plan.balance
    }

    /// How long a request may wait in a queue: `timeout queue`, else `timeout connect`.
    pub fn queue_timeout(&self) -> Option<Duration> {
        self.plan.timeouts.queue.or(self.plan.timeouts.connect)
    }

    /// The number of servers that can take traffic now (`nbsrv`).
    pub fn usable_servers(&self) -> usize {
        let shared = self.lock();
        (0..self.servers.len())
            .filter(|&i| shared.balancer.state(i).is_some_and(|s| s.usable))
            .count()
    }

    /// Whether choosing again for the request `lease` serves would name its server again:
    /// map-based hashing looks the request's key up in the same table while that server
    /// serves (HAProxy's redispatch re-runs that lookup, which avoids no server). A request
    /// without a key was balanced as by round robin, and is again.
    pub fn rehashes_to(&self, lease: &ServerLease<'_>) -> bool {
        lease.key_hash.is_some()
            && self.plan.hash_type.method == HashMethod::MapBased
            && self.lock().balancer.in_serving_tier(lease.index)
    }

    /// Whether the server at `index` can take traffic now (`srv_is_up`).
    pub fn is_server_usable(&self, index: usize) -> bool {
        self.lock().balancer.state(index).is_some_and(|s| s.usable)
    }

    /// Requests waiting in the backend's queue and its servers' (`queue`).
    pub fn queued(&self) -> usize {
        self.lock().queued_total()
    }

    /// Requests waiting in the queue of the server at `index` (`srv_queue`).
    pub fn server_queued(&self, index: usize) -> usize {
        self.lock()
            .queues
            .servers
            .get(index)
            .map_or(0, VecDeque::len)
    }

    /// Whether a session may keep going to the server at `index` it used last (`option
    /// prefer-last-server`): under `max-keep-alive-queue N`, only while the server has a free
    /// slot or fewer than N requests in its queue, as HAProxy decides.
    pub fn keeps_alive_to(&self, index: usize) -> bool {
        let Some(max) = self.plan.max_keep_alive_queue else {
            return true;
        };
        let shared = self.lock();
        shared.balancer.has_room(index)
            || shared.queues.servers.get(index).map_or(0, VecDeque::len) < max as usize
    }

    /// Free connection slots of the usable servers plus free queue slots, or -1 when a limit is
    /// unset (`connslots`, as HAProxy computes it).
    pub fn free_slots(&self) -> i64 {
        let shared = self.lock();
        let mut free = 0i64;
        for server in &self.servers {
            let i = server.index;
            if !shared.balancer.state(i).is_some_and(|s| s.usable) {
                continue;
            }
            let limit = shared.balancer.state(i).and_then(|s| s.maxconn);
            let (Some(maxconn), Some(maxqueue)) = (limit, server.conf.maxqueue) else {
                return -1;
            };
            let busy = i64::from(shared.balancer.connections(i));
            let waiting = shared.queues.servers.get(i).map_or(0, VecDeque::len) as i64;
            free += (i64::from(maxconn) - busy).max(0) + (i64::from(maxqueue) - waiting).max(0);
        }
        free
    }

    /// Free connection slots of the servers that take traffic, queue slots left out, or -1
    /// when one of them has no limit (`be_conn_free`): the usable active servers, else the
    /// usable backup servers under `option allbackups`, else the first usable backup.
    pub fn free_connections(&self) -> i64 {
        let shared = self.lock();
        let usable = |s: &Server| shared.balancer.state(s.index).is_some_and(|st| st.usable);
        let active_up = self.servers.iter().any(|s| !s.conf.backup && usable(s));
        let first_backup = self
            .servers
            .iter()
            .find(|s| s.conf.backup && usable(s))
            .map(|s| s.index);
        let mut free = 0i64;
        for server in &self.servers {
            let i = server.index;
            let takes_traffic = match (server.conf.backup, active_up) {
                (false, _) => true,
                (true, true) => false,
                (true, false) => self.plan.allbackups || first_backup == Some(i),
            };
            if !usable(server) || !takes_traffic {
                continue;
            }
            let Some(maxconn) = shared.balancer.state(i).and_then(|s| s.maxconn) else {
                return -1;
            };
            free += (i64::from(maxconn) - i64::from(shared.balancer.connections(i))).max(0);
        }
        free
    }

    /// The free connection slots of the server at `index`, or -1 when it has no limit
    /// (`srv_conn_free`).
    pub fn server_free_connections(&self, index: usize) -> i64 {
        let shared = self.lock();
        match shared.balancer.state(index).and_then(|s| s.maxconn) {
            Some(maxconn) => {
                (i64::from(maxconn) - i64::from(shared.balancer.connections(index))).max(0)
            }
            None => -1,
        }
    }

    /// The server named `name` and its index.
    pub fn server_named(&self, name: &str) -> Option<(usize, &Server)> {
        self.servers
            .iter()
            .find(|s| s.name() == name)
            .map(|s| (s.index, s))
    }

    /// Chooses a server for a new connection (a request in HTTP mode) given the algorithm's
    /// `key` (`None` when the algorithm uses none or it is missing: round robin then). When
    /// every usable server is at its `maxconn`, the request waits in the backend's queue, in
    /// `priority` order (arrival order by default), for at most [`Backend::queue_timeout`].
    /// The lease counts the connection on the server until it is dropped, which also hands
    /// the slot to the next waiter.
    pub async fn acquire_server(
        &self,
        key: Option<&[u8]>,
        priority: QueuePriority,
    ) -> Result<ServerLease<'_>, Unserved> {
        crate::streams::note_backend(self.plan.id.uid);
        let waiting = {
            let mut shared = self.lock();
            let input = PickInput {
                key,
                random: next_random(),
                exclude: None,
            };
            if let Some(index) = shared.balancer.pick(&input) {
                self.count_pick(index);
                let mut lease = self.start(&mut shared, index);
                lease.key_hash = key.and_then(|k| shared.balancer.key_hash(k));
                return Ok(lease);
            }
            if !shared.balancer.has_usable_server() {
                return Err(Unserved::NoServer);
            }
            let waiting = shared.queues.enqueue(None, priority);
            self.stats.note_queued(shared.queues.backend.len());
            // A longer queue is more load: a `minconn` server may take it at once.
            self.follow_load(&mut shared);
            waiting
        };
        self.wait(waiting).await
    }

    /// Takes the server at `index` (a `use-server` rule, a persistence cookie) if it is usable;
    /// when it is at its `maxconn` the request waits in that server's own queue, unless the
    /// queue holds `maxqueue` requests already ([`Unserved::QueueFull`]: balance instead).
    pub async fn acquire_server_at(
        &self,
        index: usize,
        priority: QueuePriority,
    ) -> Result<ServerLease<'_>, Unserved> {
        crate::streams::note_backend(self.plan.id.uid);
        let waiting = {
            let mut shared = self.lock();
            let Some(server) = self.servers.get(index) else {
                return Err(Unserved::NoServer);
            };
            if !shared.balancer.state(index).is_some_and(|s| s.usable) {
                return Err(Unserved::NoServer);
            }
            if shared.balancer.has_room(index) {
                return Ok(self.start(&mut shared, index));
            }
            let queued = shared.queues.servers.get(index).map_or(0, VecDeque::len);
            if server
                .conf
                .maxqueue
                .is_some_and(|max| queued >= max as usize)
            {
                return Err(Unserved::QueueFull);
            }
            let waiting = shared.queues.enqueue(Some(index), priority);
            server.stats.note_queued(queued + 1);
            self.follow_load(&mut shared);
            waiting
        };
        self.wait(waiting).await
    }

    /// Takes the server at `index` whatever its state: cookie persistence with `option
    /// persist` or `force-persist` sends requests to a down server on purpose
    /// (configuration.txt §4.2). The lease counts the connection like the others; `maxconn`
    /// does not apply to a forced choice.
    pub fn lease_server_forced(&self, index: usize) -> Option<ServerLease<'_>> {
        self.servers.get(index)?;
        let mut shared = self.lock();
        Some(self.start(&mut shared, index))
    }

    /// Chooses a usable server other than the one `lease` holds (`option redispatch` after
    /// failed connections), without waiting in a queue: by the lease's hash when the
    /// balancing hashed a key (consistent hashing walks on along the ring), else as the
    /// algorithm picks without a key.
    pub fn pick_other_server(&self, lease: &ServerLease<'_>) -> Option<ServerLease<'_>> {
        let exclude = Some(lease.index);
        let mut shared = self.lock();
        let index = match lease.key_hash {
            Some(hash) => shared.balancer.pick_by_hash(hash, exclude)?,
            None => {
                let input = PickInput {
                    key: None,
                    random: next_random(),
                    exclude,
                };
                shared.balancer.pick(&input)?
            }
        };
        self.count_pick(index);
        let mut other = self.start(&mut shared, index);
        other.key_hash = lease.key_hash;
        Some(other)
    }

    fn start(&self, shared: &mut Shared, index: usize) -> ServerLease<'_> {
        shared.balancer.connection_started(index);
        self.follow_load(shared);
        // Leases are made in the task of the stream that asked (queued ones in `wait`).
        crate::streams::note_server(self.plan.id.uid, index);
        ServerLease {
            backend: self,
            index,
            server: &self.servers[index],
            key_hash: None,
        }
    }

    /// Waits for a slot handed over by a finishing connection, or gives up after the queue
    /// timeout. Giving up (or being cancelled: the client left) goes through [`QueueTicket`]'s
    /// drop, which leaves the queue under the backend's lock and returns a slot that was handed
    /// over in the meantime, so no slot is ever lost to a waiter that is gone.
    async fn wait(
        &self,
        (ticket, woken): (u64, oneshot::Receiver<usize>),
    ) -> Result<ServerLease<'_>, Unserved> {
        let mut waiting = QueueTicket {
            backend: self,
            ticket,
            woken: Some(woken),
        };
        let Some(receiver) = waiting.woken.as_mut() else {
            return Err(Unserved::NoServer);
        };
        let outcome = match self.queue_timeout() {
            Some(limit) => tokio::time::timeout(limit, receiver).await.ok(),
            None => Some(receiver.await),
        };
        match outcome {
            Some(Ok(index)) => {
                // Served: the slot was counted for us by the one who handed it over, and the
                // ticket already left its queue.
                waiting.woken = None;
                match self.servers.get(index) {
                    Some(server) => Ok({
                        crate::streams::note_server(self.plan.id.uid, index);
                        ServerLease {
                            backend: self,
                            index,
                            server,
                            key_hash: None,
                        }
                    }),
                    None => Err(Unserved::NoServer),
                }
            }
            _ => {
                drop(waiting);
                self.queue_timeouts.incr();
                Err(Unserved::QueueTimeout)
            }
        }
    }

    /// Ends a connection of `index` and gives its slot to the oldest waiter that may use it.
    fn release(&self, index: usize) {
        let mut shared = self.lock();
        shared.balancer.connection_ended(index);
        self.follow_load(&mut shared);
        self.hand_over(&mut shared, index);
    }

    /// Gives the free slots of server `index` to the oldest waiters that may use them (after a
    /// connection ended, or when the server comes back up). Requests waiting in the server's
    /// own queue were sent to it (persistence, `use-server`) and take it as long as it is
    /// usable; the backend's queue only goes to a server balancing would pick, never to a
    /// draining one or to a backup while an active server is up.
    pub(crate) fn hand_over(&self, shared: &mut Shared, index: usize) {
        while shared.balancer.state(index).is_some_and(|s| s.usable)
            && shared.balancer.has_room(index)
        {
            let balanced = shared.balancer.in_serving_tier(index);
            let Some(waiter) = shared.queues.pop_for(index, balanced) else {
                break;
            };
            // A waiter that gave up has dropped its receiver: try the next one.
            // Not a pick of the balancing (`lbtot`), as in HAProxy.
            if waiter.wake.send(index).is_ok() {
                shared.balancer.connection_started(index);
            }
        }
    }
}

impl Queues {
    /// Adds a waiter to the queue of `server` (or the backend's), at its `priority`'s place.
    fn enqueue(
        &mut self,
        server: Option<usize>,
        priority: QueuePriority,
    ) -> (u64, oneshot::Receiver<usize>) {
        let (wake, woken) = oneshot::channel();
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let queue = match server.and_then(|i| self.servers.get_mut(i)) {
            Some(queue) => queue,
            None => &mut self.backend,
        };
        let due = crate::clock::millis() as i64 + i64::from(priority.offset_ms);
        let order = (priority.class, due, ticket);
        // Most requests have the default priority and go last: the search starts there.
        let at = queue.partition_point(|w| w.order <= order);
        queue.insert(at, Waiter { order, wake });
        (ticket, woken)
    }

    /// The first waiter that server `index` may serve: from its own queue, or the
    /// backend's when `balanced` (the server is one balancing would pick).
    fn pop_for(&mut self, index: usize, balanced: bool) -> Option<Waiter> {
        let own = self
            .servers
            .get(index)
            .and_then(|q| q.front())
            .map(|w| w.order);
        let shared = if balanced {
            self.backend.front().map(|w| w.order)
        } else {
            None
        };
        match (own, shared) {
            (Some(a), Some(b)) if b < a => self.backend.pop_front(),
            (Some(_), _) => self.servers.get_mut(index)?.pop_front(),
            (None, Some(_)) => self.backend.pop_front(),
            (None, None) => None,
        }
    }

    /// Forgets the waiter holding `ticket` (it gave up).
    fn remove(&mut self, ticket: u64) {
        self.backend.retain(|w| w.order.2 != ticket);
        for queue in &mut self.servers {
            queue.retain(|w| w.order.2 != ticket);
        }
    }
}

/// A request's place in a queue while it waits. Dropping it before it was served (timeout,
/// or the waiting task cancelled) removes the ticket under the backend's lock; a slot handed
/// over just before that (the hand-over counted it for us) is released again to the next
/// waiter.
struct QueueTicket<'a> {
    backend: &'a Backend,
    ticket: u64,
    /// `None` once served.
    woken: Option<oneshot::Receiver<usize>>,
}

impl Drop for QueueTicket<'_> {
    fn drop(&mut self) {
        let Some(mut woken) = self.woken.take() else {
            return;
        };
        let backend = self.backend;
        let mut shared = backend.lock();
        shared.queues.remove(self.ticket);
        // Senders hand over only under this lock, so after the removal nothing more arrives.
        if let Ok(index) = woken.try_recv() {
            shared.balancer.connection_ended(index);
            backend.hand_over(&mut shared, index);
        }
        backend.follow_load(&mut shared);
    }
}

/// A server chosen for one connection; dropping it tells the balancer the connection ended
/// and hands the slot to the next queued request.
#[derive(Debug)]
pub struct ServerLease<'a> {
    backend: &'a Backend,
    index: usize,
    server: &'a Server,
    /// The hash the balancing chose the server by, when it hashed a request's key: what
    /// a redispatch looks up again.
    key_hash: Option<u32>,
}

impl<'a> ServerLease<'a> {
    /// The chosen server, for as long as its backend lives.
    pub fn server(&self) -> &'a Server {
        self.server
    }

    /// The server's position in its backend.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl std::ops::Deref for ServerLease<'_> {
    type Target = Server;

    fn deref(&self) -> &Server {
        self.server
    }
}

impl Drop for ServerLease<'_> {
    fn drop(&mut self) {
        self.backend.release(self.index);
    }
}

/// Randomness for `balance random` and the `rand` fetch: a per-thread xorshift seeded from the standard
/// library's randomly keyed hasher (no syscall per pick).
pub fn next_random() -> u64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().build_hasher().finish() | 1,
        );
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x
    })
}

/// One server of a backend.
#[derive(Debug)]
pub struct Server {
    /// What the configuration said.
    pub conf: ServerConf,
    /// The server's `id` (`sid` in `show stat`, `srv_id`): the configured one, or the first
    /// free number from 1.
    pub id: u32,
    /// Position in its backend, from 0.
    pub index: usize,
    /// Where an inet server is now: its resolved address, changed by `set server addr`.
    location: Mutex<Location>,
    /// `location`'s `pool_id`, written under its lock and read without it: every request's
    /// look-up in the thread's pool of idle connections needs it, and a lock is two locked
    /// instructions.
    pool_id: std::sync::atomic::AtomicU64,
    /// Where checks and the agent go, and what the agent is sent: the configuration's,
    /// changed by `set server ... check-addr|check-port|agent-addr|agent-port|agent-send`.
    probes: Mutex<ProbeTargets>,
    /// Removed by `del server`: the slot stays (only a server in maintenance without
    /// connections is removed, so no session holds it) but nothing finds it any more.
    pub(crate) deleted: std::sync::atomic::AtomicBool,
    /// Sessions and bytes.
    pub traffic: Traffic,
    /// Failed connection attempts (`econ`).
    pub failed_connections: Counter,
    /// Retried attempts (`wretr`).
    pub retries: Counter,
    /// Invalid, missing or timed-out responses (`eresp`), counted with its backend's.
    pub response_errors: Counter,
    /// Health: checks, agent, administrative state (see [`crate::health`]).
    pub health: crate::health::ServerHealth,
    /// Statistics-only counters and the run-time weight (`set weight`).
    pub stats: crate::stats::StatsCounters,
}

/// Where an inet server's connections go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The address (`None`: not resolved, the server stays in maintenance).
    pub ip: Option<IpAddr>,
    /// The port, or how it follows the client's (`None` for a unix server).
    pub port: Option<ServerPort>,
    /// Names this location among all the process's servers and locations: idle server
    /// connections are reused only for the location they were made to.
    pub pool_id: u64,
}

/// Where a server's checks and agent connect (`None`: the server's own address or port), and
/// the agent's `agent-send` string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeTargets {
    /// `addr` of the checks.
    pub check_addr: Option<IpAddr>,
    /// `port` of the checks.
    pub check_port: Option<u16>,
    /// `agent-addr`.
    pub agent_addr: Option<IpAddr>,
    /// `agent-port`.
    pub agent_port: Option<u16>,
    /// `agent-send`.
    pub agent_send: Option<Vec<u8>>,
}

/// A fresh [`Location::pool_id`].
fn next_pool_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Server {
    pub(crate) fn new(conf: ServerConf, index: usize, ip: Option<IpAddr>) -> Self {
        let port = match &conf.addr {
            ServerAddr::Inet { port, .. } => Some(*port),
            ServerAddr::Unix(_) | ServerAddr::Abstract(_) => None,
        };
        let pool_id = next_pool_id();
        Server {
            // The plan gives every server an id; a hand-built one numbers by position.
            id: conf.id.unwrap_or(index as u32 + 1),
            index,
            location: Mutex::new(Location { ip, port, pool_id }),
            pool_id: std::sync::atomic::AtomicU64::new(pool_id),
            deleted: std::sync::atomic::AtomicBool::new(false),
            probes: Mutex::new(ProbeTargets {
                check_addr: conf.checks.addr,
                check_port: conf.checks.port,
                agent_addr: conf.checks.agent_addr,
                agent_port: conf.checks.agent_port,
                agent_send: conf.checks.agent_send.clone(),
            }),
            traffic: Traffic::default(),
            failed_connections: Counter::default(),
            retries: Counter::default(),
            response_errors: Counter::default(),
            health: crate::health::ServerHealth::new(conf.disabled),
            stats: crate::stats::StatsCounters::new(conf.weight),
            conf,
        }
    }

    /// The health check's counter: where the last check left it, or `rise` before the first
    /// one, where a checked server starts (up, at the bottom of the up range), as HAProxy
    /// starts it.
    pub fn check_health(&self) -> u32 {
        self.stats.check_health().unwrap_or(self.conf.checks.rise())
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.conf.name
    }

    /// Where to connect for a client whose connection went to `client_dst` (as rules left
    /// it: `set-dst`). A server at `0.0.0.0` or `::` connects to that address
    /// (configuration.txt §5.2 "server": the client's destination, which `set-dst` may
    /// have changed), on the port its own port says.
    pub fn target(&self, client_dst: Option<SocketAddr>) -> Option<Target> {
        match &self.conf.addr {
            ServerAddr::Unix(path) => Some(Target::Unix(path.clone())),
            ServerAddr::Abstract(name) => Some(Target::Abstract(name.clone())),
            ServerAddr::Inet { .. } => {
                let here = self.location();
                let port = stream::server_port(&here.port?, client_dst.map(|a| a.port()))?;
                let ip = match here.ip? {
                    ip if ip.is_unspecified() => client_dst?.ip(),
                    ip => ip,
                };
                Some(Target::Inet(SocketAddr::new(ip, port)))
            }
        }
    }

    /// Where the server is now.
    pub fn location(&self) -> Location {
        *self.location.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves an inet server (`set server addr`): new connections go to `ip` and `port` (the
    /// same port when `None`); idle connections to the old location are not reused. Returns
    /// the location before, or `None` for a unix server.
    pub fn relocate(&self, ip: IpAddr, port: Option<ServerPort>) -> Option<Location> {
        let mut here = self.location.lock().unwrap_or_else(|e| e.into_inner());
        let before = *here;
        here.port?;
        let moved = Location {
            ip: Some(ip),
            port: port.or(before.port),
            pool_id: before.pool_id,
        };
        if moved != before {
            *here = Location {
                pool_id: next_pool_id(),
                ..moved
            };
            self.pool_id
                .store(here.pool_id, std::sync::atomic::Ordering::Relaxed);
        }
        Some(before)
    }

    /// The [`Location::pool_id`] of where the server is now.
    pub fn pool_id(&self) -> u64 {
        self.pool_id.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Where the checks and the agent go now.
    pub fn probes(&self) -> ProbeTargets {
        self.probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes where the checks or the agent go (the CLI's `set server`).
    pub fn set_probes(&self, f: impl FnOnce(&mut ProbeTargets)) {
        f(&mut self.probes.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Whether `del server` removed it.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_config::cond::CondContext;
    use sluice_config::reader::Source;

    /// The first backend of a configuration whose servers need no name resolution.
    fn backend(text: &str) -> Backend {
        let no_env = |_: &str| None;
        let ctx = CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let source = Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        let plan = sluice_config::plan::check(&[source], &ctx).plan.unwrap();
        let bp = plan.backends.into_iter().next().unwrap();
        let resolved = bp.servers.iter().map(|_| None).collect();
        Backend::new(bp, resolved)
    }

    const TWO_SLOTS: &str = "backend b\n timeout queue 10s\n server a 127.0.0.1:1 maxconn 1\n server z 127.0.0.1:2 maxconn 1 maxqueue 1\n";

    /// Starts a task that takes a server (`at`: a given one) and reports its name, then
    /// holds the slot until `release` fires.
    fn waiter(
        b: &Arc<Backend>,
        at: Option<usize>,
        report: tokio::sync::mpsc::UnboundedSender<Result<String, Unserved>>,
        tag: &'static str,
        release: tokio::sync::oneshot::Receiver<()>,
    ) {
        let b = Arc::clone(b);
        tokio::task::spawn_local(async move {
            let taken = match at {
                Some(i) => b.acquire_server_at(i, QueuePriority::default()).await,
                None => b.acquire_server(None, QueuePriority::default()).await,
            };
            match taken {
                Ok(lease) => {
                    report.send(Ok(format!("{tag}{}", lease.name()))).unwrap();
                    let _ = release.await;
                    drop(lease);
                }
                Err(e) => report.send(Err(e)).unwrap(),
            }
        });
    }

    #[tokio::test(start_paused = true)]
    async fn queued_requests_get_freed_slots_in_arrival_order() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let b = Arc::new(backend(TWO_SLOTS));
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let mut releases = Vec::new();
                for tag in ["0:", "1:", "2:", "3:", "4:"] {
                    let (release, hold) = tokio::sync::oneshot::channel();
                    releases.push(release);
                    waiter(&b, None, tx.clone(), tag, hold);
                    tokio::task::yield_now().await;
                }
                let mut served = vec![
                    rx.recv().await.unwrap().unwrap(),
                    rx.recv().await.unwrap().unwrap(),
                ];
                served.sort();
                assert_eq!(
                    served,
                    ["0:a", "1:z"],
                    "maxconn 1 each: both servers serve one"
                );
                assert_eq!(b.queued(), 3);
                assert!(rx.try_recv().is_err(), "the others wait");
                // Freeing a slot wakes the oldest waiter only, which gets that server.
                releases.remove(0).send(()).unwrap();
                assert_eq!(rx.recv().await.unwrap(), Ok("2:a".to_owned()));
                assert_eq!(b.queued(), 2);
                assert!(rx.try_recv().is_err());
            })
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn max_keep_alive_queue_bounds_the_queue_a_kept_server_may_have() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let limited = |n: &str| {
                    let text = format!(
                        "backend b\n timeout queue 10s\n max-keep-alive-queue {n}\n server a 127.0.0.1:1 maxconn 1\n"
                    );
                    Arc::new(backend(&text))
                };
                let (none, one, unlimited) = (limited("0"), limited("1"), limited("-1"));
                for b in [&none, &one, &unlimited] {
                    assert!(b.keeps_alive_to(0), "a free slot");
                }
                let _held: Vec<_> = [&none, &one, &unlimited]
                    .iter()
                    .map(|b| b.lease_server_forced(0).unwrap())
                    .collect();
                // Full, nothing queued yet.
                assert!(!none.keeps_alive_to(0));
                assert!(one.keeps_alive_to(0));
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                let mut holds = Vec::new();
                for b in [&one, &unlimited] {
                    let (release, hold) = tokio::sync::oneshot::channel();
                    holds.push(release);
                    waiter(b, Some(0), tx.clone(), "", hold);
                }
                tokio::task::yield_now().await;
                assert_eq!(one.server_queued(0), 1);
                assert!(!one.keeps_alive_to(0), "one waits already");
                assert!(unlimited.keeps_alive_to(0));
            })
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_too_long_gets_a_queue_timeout() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let b = Arc::new(backend(TWO_SLOTS));
                let _a = b
                    .acquire_server(None, QueuePriority::default())
                    .await
                    .unwrap();
                let _z = b
                    .acquire_server(None, QueuePriority::default())
                    .await
                    .unwrap();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let (_release, hold) = tokio::sync::oneshot::channel();
                waiter(&b, None, tx, "", hold);
                // Paused time jumps to the 10 s queue timeout once every task is idle.
                assert_eq!(rx.recv().await.unwrap(), Err(Unserved::QueueTimeout));
                assert_eq!(b.queued(), 0, "the ticket left the queue");
                assert_eq!(b.queue_timeouts.get(), 1);
            })
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_server_queue_sends_the_request_back_to_balancing() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let b = Arc::new(backend(TWO_SLOTS));
                let z = b
                    .acquire_server_at(1, QueuePriority::default())
                    .await
                    .unwrap();
                assert_eq!(z.name(), "z");
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let (_keep, hold) = tokio::sync::oneshot::channel();
                waiter(&b, Some(1), tx.clone(), "", hold);
                tokio::task::yield_now().await;
                assert_eq!(b.server_queued(1), 1, "maxqueue 1: one may wait for z");
                assert_eq!(
                    b.acquire_server_at(1, QueuePriority::default()).await.err(),
                    Some(Unserved::QueueFull)
                );
                // The server-queued request is served by z when z frees its slot.
                drop(z);
                assert_eq!(rx.recv().await.unwrap(), Ok("z".to_owned()));
                assert_eq!(b.free_slots(), -1, "a server without maxqueue: unlimited");
            })
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn queued_requests_are_served_by_priority_class_then_offset() {
        let b = backend("backend b\n timeout queue 10s\n server a 127.0.0.1:1 maxconn 1\n");
        let first = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        let priority = |class, offset_ms| QueuePriority { class, offset_ms };
        // Queued in this order; served lowest class first, then earliest due time (the
        // time queued plus the offset), arrival order among equals.
        let mut waiting = vec![
            (
                "late class",
                Box::pin(b.acquire_server(None, priority(1, -10_000))),
            ),
            ("plain 1", Box::pin(b.acquire_server(None, priority(0, 0)))),
            ("urgent", Box::pin(b.acquire_server(None, priority(-5, 0)))),
            ("plain 2", Box::pin(b.acquire_server(None, priority(0, 0)))),
            ("ahead", Box::pin(b.acquire_server(None, priority(0, -500)))),
        ];
        for (_, acquire) in &mut waiting {
            queue_up(acquire).await;
        }
        assert_eq!(b.queued(), 5);
        let mut lease = Some(first);
        let mut served = Vec::new();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while !waiting.is_empty() {
            // The freed slot goes to one waiter, which holds it until the next turn.
            drop(lease.take());
            let mut ready = None;
            for (at, (name, acquire)) in waiting.iter_mut().enumerate() {
                if let std::task::Poll::Ready(taken) = acquire.as_mut().poll(&mut cx) {
                    ready = Some((at, *name, taken.unwrap()));
                    break;
                }
            }
            let (at, name, taken) = ready.expect("the freed slot went to a waiter");
            drop(waiting.remove(at));
            served.push(name);
            lease = Some(taken);
        }
        assert_eq!(
            served,
            ["urgent", "ahead", "plain 1", "plain 2", "late class"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_handed_to_a_waiter_that_left_goes_back() {
        let b = backend("backend b\n timeout queue 10s\n server a 127.0.0.1:1 maxconn 1\n");
        let a = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        let mut waiting = Box::pin(b.acquire_server(None, QueuePriority::default()));
        std::future::poll_fn(|cx| {
            assert!(
                waiting.as_mut().poll(cx).is_pending(),
                "a is full: it queues"
            );
            std::task::Poll::Ready(())
        })
        .await;
        assert_eq!(b.queued(), 1);
        // The slot is handed over to the waiter, which leaves before it runs again (its
        // client went away, or its timeout fired at the same moment).
        drop(a);
        assert_eq!(
            b.lock().balancer.connections(0),
            1,
            "counted for the waiter"
        );
        drop(waiting);
        assert_eq!(b.queued(), 0);
        assert_eq!(b.lock().balancer.connections(0), 0, "the slot came back");
        let again = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        assert_eq!(again.name(), "a");
    }

    /// Polls `acquire` once, so that it takes its place in a queue.
    async fn queue_up<F: std::future::Future + Unpin>(acquire: &mut F) {
        std::future::poll_fn(|cx| {
            assert!(std::pin::Pin::new(&mut *acquire).poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
    }

    const WITH_BACKUP: &str = "backend b\n timeout queue 10s\n server a 127.0.0.1:1 maxconn 1\n server k 127.0.0.1:2 maxconn 1 backup\n";

    #[tokio::test(start_paused = true)]
    async fn a_backup_does_not_serve_the_backend_queue_while_an_active_server_is_up() {
        let b = backend(WITH_BACKUP);
        let a = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        let mut waiting = Box::pin(b.acquire_server(None, QueuePriority::default()));
        queue_up(&mut waiting).await;
        // A connection forced onto the backup (persistence) ends: its slot is not for the
        // backend's queue.
        drop(b.lease_server_forced(1).unwrap());
        assert_eq!(b.queued(), 1, "still waiting for the active server");
        drop(a);
        assert_eq!(waiting.await.unwrap().name(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn a_draining_server_does_not_serve_the_backend_queue() {
        let b = backend(
            "backend b\n timeout queue 10s\n server a 127.0.0.1:1 maxconn 1\n server d 127.0.0.1:2 maxconn 1\n",
        );
        let a = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        let d = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        assert_eq!((a.name(), d.name()), ("a", "d"));
        b.servers[1]
            .health
            .update(|h| h.admin = crate::health::Admin::Drain);
        b.apply_health(1);
        let mut waiting = Box::pin(b.acquire_server(None, QueuePriority::default()));
        queue_up(&mut waiting).await;
        drop(d);
        assert_eq!(b.queued(), 1, "a draining server takes no new request");
        drop(a);
        assert_eq!(waiting.await.unwrap().name(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn the_backup_takes_the_queue_when_the_last_active_server_goes_down() {
        let b = backend(WITH_BACKUP);
        let _a = b
            .acquire_server(None, QueuePriority::default())
            .await
            .unwrap();
        let mut waiting = Box::pin(b.acquire_server(None, QueuePriority::default()));
        queue_up(&mut waiting).await;
        b.servers[0].health.update(|h| h.check_up = false);
        b.apply_health(0);
        assert_eq!(waiting.await.unwrap().name(), "k");
    }

    #[tokio::test]
    async fn no_usable_server_is_answered_at_once() {
        let b = backend("backend b\n server a 127.0.0.1:1 disabled\n");
        assert_eq!(
            b.acquire_server(None, QueuePriority::default()).await.err(),
            Some(Unserved::NoServer)
        );
        assert_eq!(b.usable_servers(), 0);
    }
}
