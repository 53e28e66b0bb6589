//! What the sample engine sees of a stream: the [`Context`] implementation of the data path.
//!
//! Rules, `use_backend` and log formats evaluate their fetches over a [`StreamView`], a set
//! of borrows taken at the moment of evaluation: the client's addresses, the proxies and the
//! server chosen so far, the request and response heads (offsets into the buffers they were
//! parsed from), the session's variables. Building one costs nothing but copying references,
//! so rules can take a fresh view before each step. Live counters (`nbsrv`, `be_conn`,
//! `srv_conn`...) are read from the process's atomics and balancer at the moment a fetch
//! asks.

use crate::track;
use crate::vars::Vars;
use sluice_config::rules::StreamTimeout;
use sluice_http::{RequestHead, ResponseHead};
use sluice_net::listen::Endpoints;
use sluice_runtime::listener::ListenerStats;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server};
use sluice_sample::{
    BackendStat, Context, FrontendStat, LogFacts, LogNumber, ProxyTlv, Sample, ServerStat, StickOp,
    StickSource, TcpMeasure, TimeoutFetch,
};
use sluice_stick::{Data, DataType, Table};
use std::borrow::Cow;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::SystemTime;

/// A stream as the sample engine sees it at one point of its life.
#[derive(Clone, Copy)]
pub struct StreamView<'a> {
    /// The process, for counters of other proxies.
    pub process: &'a Process,
    /// The accepting proxy.
    pub frontend: &'a Frontend,
    /// The backend chosen so far.
    pub backend: Option<&'a Backend>,
    /// The server chosen so far.
    pub server: Option<&'a Server>,
    /// The client's addresses.
    pub endpoints: Endpoints,
    /// The request buffer and its parsed head.
    pub request: Option<(&'a [u8], &'a RequestHead)>,
    /// The response buffer and its parsed head.
    pub response: Option<(&'a [u8], &'a ResponseHead)>,
    /// The session's variables.
    pub vars: &'a Vars,
    /// The client's bytes buffered by content inspection (`mode tcp`).
    pub payload: Option<&'a [u8]>,
    /// The server's bytes buffered by `tcp-response content` inspection (`mode tcp`).
    pub response_payload: Option<&'a [u8]>,
    /// Whether content inspection is over (`WAIT_END`): true except while `tcp-request
    /// content` rules may still wait for data.
    pub inspection_ended: bool,
    /// What the log record says (timers, bytes, termination), when a log line is rendered.
    pub facts: Option<&'a dyn LogFacts>,
    /// The server connection, while response rules run: `bc_src` and `bc_dst` read its
    /// addresses only when a rule asks (a log line has them in `facts`).
    pub server_socket: Option<BorrowedFd<'a>>,
    /// When the stream started, for the date aliases of formats rendered before its log
    /// line (a `unique-id-format`'s `%Ts`).
    pub started_at: Option<SystemTime>,
}

impl<'a> StreamView<'a> {
    /// A view of a stream that has nothing but its client connection yet; its addresses
    /// are `endpoints`, or those a `set-src`/`set-dst` rule gave the transaction.
    pub fn new(
        process: &'a Process,
        frontend: &'a Frontend,
        endpoints: Endpoints,
        vars: &'a Vars,
    ) -> Self {
        StreamView {
            process,
            frontend,
            backend: None,
            server: None,
            endpoints: vars.addresses().unwrap_or(endpoints),
            request: None,
            response: None,
            vars,
            payload: None,
            response_payload: None,
            inspection_ended: true,
            facts: None,
            server_socket: None,
            started_at: None,
        }
    }

    /// The stream's backend: the one chosen, else, in a `listen` section, the section
    /// itself, which is its own backend from its first rule on.
    fn current_backend(&self) -> Option<&'a Backend> {
        self.backend.or_else(|| {
            let own = self.frontend.backend.as_deref()?;
            (own.plan.id.uid == self.frontend.plan.id.uid).then_some(own)
        })
    }

    fn backend_named(&self, name: Option<&str>) -> Option<&'a Backend> {
        match name {
            None => self.current_backend(),
            Some(name) => self
                .process
                .backends
                .iter()
                .find(|b| b.name() == name)
                .map(|b| &**b),
        }
    }
}

impl StreamView<'_> {
    /// The table `name`, or the current proxy's (the backend's once one is chosen and has a
    /// table, else the frontend's).
    fn table(&self, name: Option<&str>) -> Option<&Arc<Table>> {
        let tables = &self.process.tables;
        match name {
            Some(name) => tables.get(name),
            None => self
                .backend
                .and_then(|b| tables.get(b.name()))
                .or_else(|| tables.get(self.frontend.name())),
        }
    }
}

/// Runs a stick-counter operation on an entry tracked by `refs` streams.
fn run_op(d: &mut Data<'_>, refs: u32, op: StickOp) -> Option<Sample<'static>> {
    let int = |v: u64| Sample::Int(i64::try_from(v).unwrap_or(i64::MAX));
    match op {
        StickOp::Get(data) => d.get(data).map(int),
        StickOp::Kilobytes(data) => d.get(data).map(|v| int(v >> 10)),
        StickOp::IncGpc(which) => Some(int(track::inc_gpc(d, which))),
        StickOp::ClrGpc(which) => {
            let (counter, _) = which.types();
            let old = d.get(counter);
            d.set(counter, 0);
            old.map(int)
        }
        StickOp::Trackers => Some(int(u64::from(refs))),
        StickOp::Tracked | StickOp::Present => Some(Sample::Bool(true)),
        StickOp::UpdateConnCnt => {
            d.add(DataType::ConnCnt, 1);
            d.get(DataType::ConnCnt).map(int)
        }
    }
}

/// What an operation answers for a key without an entry: 0 when the table could hold the
/// value.
fn absent(table: &Table, op: StickOp) -> Option<Sample<'static>> {
    let stored = match op {
        StickOp::Get(data) | StickOp::Kilobytes(data) => table.conf().layout.has(data),
        // Increments answer 0 whatever the table stores, as in HAProxy.
        StickOp::IncGpc(_) => true,
        StickOp::ClrGpc(w) => table.conf().layout.has(w.types().0),
        StickOp::UpdateConnCnt => table.conf().layout.has(DataType::ConnCnt),
        StickOp::Trackers => true,
        StickOp::Tracked | StickOp::Present => return Some(Sample::Bool(false)),
    };
    stored.then_some(Sample::Int(0))
}

/// True for operations that change the entry (and create it for `src_*`).
fn writes(op: StickOp) -> bool {
    matches!(
        op,
        StickOp::IncGpc(_) | StickOp::ClrGpc(_) | StickOp::UpdateConnCnt
    )
}

impl<'a> StreamView<'a> {
    /// The frontend and, under `option socket-stats`, the session's listener: where the
    /// session's frontend counts go.
    pub(crate) fn front(&self) -> (&'a Frontend, Option<&'a ListenerStats>) {
        (self.frontend, self.vars.listener())
    }
}

impl Context for StreamView<'_> {
    fn src(&self) -> Option<SocketAddr> {
        self.endpoints.client
    }

    fn dst(&self) -> Option<SocketAddr> {
        self.endpoints.local
    }

    fn connection_src(&self) -> Option<SocketAddr> {
        let original = self.vars.connection_addresses();
        original.map_or(self.endpoints.client, |e| e.client)
    }

    fn connection_dst(&self) -> Option<SocketAddr> {
        let original = self.vars.connection_addresses();
        original.map_or(self.endpoints.local, |e| e.local)
    }

    fn server_connection_src(&self) -> Option<SocketAddr> {
        match self.server_socket {
            Some(socket) => sluice_net::stream::local_end(&socket),
            None => self.facts.and_then(|f| f.backend_source()),
        }
    }

    fn server_connection_made(&self) -> bool {
        self.server_socket.is_some() || self.facts.is_some_and(|f| f.server_connected())
    }

    fn server_connection_dst(&self) -> Option<SocketAddr> {
        match self.server_socket {
            Some(socket) => sluice_net::stream::peer_end(&socket),
            None => self.facts.and_then(|f| f.server_address()),
        }
    }

    fn log_number(&self, which: LogNumber) -> Option<i64> {
        match which {
            LogNumber::Pid => Some(i64::from(std::process::id())),
            LogNumber::RequestCounter => {
                let number = self
                    .vars
                    .stream_number(|| self.process.next_stream_number());
                Some(i64::from(number))
            }
            LogNumber::LogCounter => self.frontend.logger.as_ref().map(|l| l.lines.get() as i64),
            // Live before the log line (`act_conn` in a rule).
            LogNumber::ProcessConnections => self
                .facts
                .and_then(|f| f.number(which))
                .or(Some(self.process.traffic.sessions.get() as i64)),
            _ => self.facts.and_then(|f| f.number(which)),
        }
    }

    fn uptime_seconds(&self) -> Option<i64> {
        Some(self.process.started.elapsed().as_secs() as i64)
    }

    fn stream_start(&self) -> Option<SystemTime> {
        self.facts.and_then(|f| f.accept_date()).or(self.started_at)
    }

    fn frontend_name(&self) -> &str {
        self.frontend.name()
    }

    fn backend_name(&self) -> Option<&str> {
        self.backend.map(Backend::name)
    }

    fn server_name(&self) -> Option<&str> {
        self.server.map(Server::name)
    }

    fn frontend_id(&self) -> Option<i64> {
        Some(i64::from(self.frontend.plan.id.uid))
    }

    fn first_request(&self) -> Option<bool> {
        self.request.map(|_| self.vars.first_request())
    }

    fn timeout_ms(&self, which: TimeoutFetch) -> Option<i64> {
        let ms = |time: Option<std::time::Duration>| {
            time.map_or(0, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
        };
        let front = &self.frontend.plan.timeouts;
        match which {
            TimeoutFetch::FrontendClient | TimeoutFetch::CurrentClient => {
                return Some(ms(front.client));
            }
            // The tarpit's as `http-request tarpit` applies it (`tarpit_delay`).
            TimeoutFetch::FrontendTarpit => {
                let servers = self.frontend.plan.id.kind.has_backend();
                return Some(ms(front.tarpit.or(front.connect.filter(|_| servers))));
            }
            TimeoutFetch::CurrentTarpit if self.backend.is_none() => {
                return self.timeout_ms(TimeoutFetch::FrontendTarpit);
            }
            _ => {}
        }
        let backend = self.current_backend()?;
        let own = &backend.plan.timeouts;
        let set = |which| self.vars.timeout(which, backend.plan.id.uid);
        Some(ms(match which {
            TimeoutFetch::BackendServer => own.server,
            TimeoutFetch::BackendTunnel => own.tunnel,
            TimeoutFetch::CurrentServer => set(StreamTimeout::Server).or(own.server),
            TimeoutFetch::CurrentTunnel => set(StreamTimeout::Tunnel).or(own.tunnel),
            TimeoutFetch::BackendConnect | TimeoutFetch::CurrentConnect => own.connect,
            TimeoutFetch::BackendQueue | TimeoutFetch::CurrentQueue => backend.queue_timeout(),
            TimeoutFetch::BackendTarpit | TimeoutFetch::CurrentTarpit => own.tarpit.or(own.connect),
            // The frontend's, answered above.
            TimeoutFetch::FrontendClient
            | TimeoutFetch::CurrentClient
            | TimeoutFetch::FrontendTarpit => None,
        }))
    }

    fn max_retries(&self) -> Option<i64> {
        self.current_backend().map(|b| i64::from(b.plan.retries))
    }

    fn socket_id(&self) -> Option<i64> {
        Some(i64::from(self.vars.socket_id())).filter(|&id| id > 0)
    }

    fn client_tcp(&self, which: TcpMeasure) -> Option<i64> {
        let measures = sluice_net::fd::tcp_measures(self.vars.client_socket()?).ok()?;
        Some(i64::from(match which {
            TcpMeasure::RttMicros => measures.rtt_us,
            TcpMeasure::RttVarMicros => measures.rttvar_us,
            TcpMeasure::Unacked => measures.unacked,
            TcpMeasure::Sacked => measures.sacked,
            TcpMeasure::Retransmitted => measures.retrans,
            TcpMeasure::ForwardAcked => measures.fackets,
            TcpMeasure::Lost => measures.lost,
            TcpMeasure::Reordering => measures.reordering,
        }))
    }

    fn socket_connections(&self) -> Option<i64> {
        let open = self.frontend.socket_connections(self.vars.socket_id())?;
        Some(open.get() as i64)
    }

    fn socket_name(&self) -> Option<&str> {
        let index = usize::try_from(self.vars.socket_id())
            .ok()?
            .checked_sub(1)?;
        let bind = sluice_runtime::listener::sockets_of(&self.frontend.plan).nth(index)?;
        bind.name.as_deref()
    }

    fn frontend_default_backend(&self) -> Option<&str> {
        // A `listen` section without `default_backend` is its own backend, not a default.
        let own = self.frontend.plan.id.uid;
        (self.frontend.backend.as_deref())
            .filter(|b| b.plan.id.uid != own)
            .map(Backend::name)
    }

    fn backend_id(&self) -> Option<i64> {
        self.backend.map(|b| i64::from(b.plan.id.uid))
    }

    fn server_id(&self) -> Option<i64> {
        self.server.map(|s| i64::from(s.id))
    }

    fn request(&self) -> Option<(&[u8], &RequestHead)> {
        self.request
    }

    fn response(&self) -> Option<(&[u8], &ResponseHead)> {
        self.response
    }

    fn env(&self, name: &str) -> Option<String> {
        self.process.env_var(name)
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn random(&self) -> u64 {
        sluice_runtime::proxy::next_random()
    }

    fn stopping(&self) -> bool {
        self.process.is_stopping()
    }

    fn thread(&self) -> usize {
        sluice_runtime::process::event_loop_index()
    }

    fn var(&self, name: &str) -> Option<Sample<'_>> {
        self.vars.get(name)
    }

    fn proxy_credentials(&self) -> bool {
        // HAProxy's test: a target that is neither origin form nor `*` goes to a proxy.
        self.frontend.plan.http.use_proxy_header
            && self.request.is_some_and(|(buf, head)| {
                !matches!(head.target_bytes(buf).first(), Some(b'/' | b'*'))
            })
    }

    fn request_buffered(&self) -> Option<usize> {
        self.payload.map(<[u8]>::len)
    }

    fn request_payload(&self) -> Option<&[u8]> {
        self.payload
    }

    fn request_body(&self) -> Option<Cow<'_, [u8]>> {
        let (buf, head) = self.request?;
        let framing = sluice_http::framing::request_framing(buf, head).ok()?;
        Some(crate::http::body::buffered(buf, head.head_len, framing).0)
    }

    fn logged_request_line_len(&self) -> usize {
        self.process.global.logged_request_line_len()
    }

    fn response_body(&self) -> Option<Cow<'_, [u8]>> {
        let (buf, head) = self.response?;
        // The request's method is not needed here: the body of a response to HEAD is empty.
        let framing = sluice_http::framing::response_framing(buf, head, false, false).ok()?;
        Some(crate::http::body::buffered(buf, head.head_len, framing).0)
    }

    fn unique_id(&self) -> Option<Sample<'_>> {
        self.vars.unique_id().map(Sample::owned_str)
    }

    fn last_rule(&self) -> Option<(std::sync::Arc<str>, u32)> {
        self.vars.last_rule()
    }

    fn queue_priority(&self) -> (i64, i64) {
        let priority = self.vars.priority();
        (i64::from(priority.class), i64::from(priority.offset_ms))
    }

    fn received_proxy(&self) -> bool {
        self.vars.received_proxy()
    }

    fn cache_used(&self) -> Option<&str> {
        let index = self.vars.cache_served()?;
        Some(self.process.caches.get(index)?.conf.name.as_str())
    }

    fn received_proxy_tlv(&self, tlv: ProxyTlv) -> Option<&[u8]> {
        let tlvs = self.vars.received_tlvs()?;
        match tlv {
            ProxyTlv::Authority => tlvs.authority.as_deref(),
            ProxyTlv::UniqueId => tlvs.unique_id.as_deref(),
        }
    }

    fn response_payload(&self) -> Option<&[u8]> {
        self.response_payload
    }

    fn log_facts(&self) -> Option<&dyn LogFacts> {
        self.facts
    }

    fn captured(&self, response: bool, index: usize) -> Option<Vec<u8>> {
        self.vars
            .captures()
            .get(response, index)
            .map(<[u8]>::to_vec)
    }

    fn set_var(&self, name: &str, value: Sample<'_>) {
        self.vars.set(name, value);
    }

    fn inspection_ended(&self) -> bool {
        self.inspection_ended
    }

    fn stick(
        &self,
        source: StickSource,
        table: Option<&str>,
        op: StickOp,
    ) -> Option<Sample<'static>> {
        let now = self.process.tables.now_ms();
        match source {
            StickSource::Counter(n) => {
                let tracked = self
                    .vars
                    .trackers
                    .with(n, |own, entry, key, _| match table {
                        None => own
                            .peek(entry, now, |d, refs| run_op(d, refs, op))
                            .flatten(),
                        Some(name) => {
                            let other = self.process.tables.get(name)?;
                            let found = if writes(op) {
                                other.upsert(key, now, |d, refs| run_op(d, refs, op))
                            } else {
                                other.lookup(key, now, false, |d, refs| run_op(d, refs, op))
                            };
                            found.unwrap_or_else(|| absent(other, op))
                        }
                    });
                match tracked {
                    Some(answer) => answer,
                    None if op == StickOp::Tracked => Some(Sample::Bool(false)),
                    None => None,
                }
            }
            StickSource::Src => {
                if op == StickOp::Tracked {
                    return None;
                }
                let table = self.table(table)?;
                let key = track::sample_key(table.conf().key, &Sample::Ip(self.src()?.ip()))?;
                let found = if writes(op) {
                    table.upsert(&key, now, |d, refs| run_op(d, refs, op))
                } else {
                    table.lookup(&key, now, false, |d, refs| run_op(d, refs, op))
                };
                found.unwrap_or_else(|| absent(table, op))
            }
        }
    }

    fn table_lookup(&self, table: Option<&str>, key: &Sample<'_>, op: StickOp) -> Option<i64> {
        let table = self.table(table)?;
        let key = track::sample_key(table.conf().key, key)?;
        let now = self.process.tables.now_ms();
        let found = table
            .lookup(&key, now, false, |d, refs| run_op(d, refs, op))
            .unwrap_or_else(|| absent(table, op))?;
        match found {
            Sample::Int(n) => Some(n),
            Sample::Bool(b) => Some(i64::from(b)),
            _ => None,
        }
    }

    fn table_usage(&self, table: Option<&str>, free: bool) -> Option<i64> {
        let table = self.table(table)?;
        let used = table.used(self.process.tables.now_ms());
        let n = if free {
            table.conf().size.saturating_sub(used)
        } else {
            used
        };
        i64::try_from(n).ok()
    }

    fn hostname(&self) -> Option<&str> {
        Some(sluice_runtime::logging::hostname())
    }

    fn frontend_stat(&self, frontend: Option<&str>, stat: FrontendStat) -> Option<i64> {
        let frontend = match frontend {
            None => self.frontend,
            Some(name) => self.process.frontends.iter().find(|f| f.name() == name)?,
        };
        Some(match stat {
            FrontendStat::Connections => frontend.traffic.sessions.get() as i64,
            FrontendStat::SessionRate => i64::from(frontend.traffic.session_rate.get()),
            FrontendStat::RequestRate => i64::from(frontend.stats.request_rate.get()),
        })
    }

    fn backend_stat(&self, backend: Option<&str>, stat: BackendStat) -> Option<i64> {
        let backend = self.backend_named(backend)?;
        Some(match stat {
            BackendStat::UsableServers => backend.usable_servers() as i64,
            BackendStat::Connections => backend.traffic.sessions.get() as i64,
            BackendStat::Queued => backend.queued() as i64,
            BackendStat::FreeSlots => backend.free_slots(),
            BackendStat::FreeConnections => backend.free_connections(),
            BackendStat::SessionRate => backend.traffic.session_rate.get() as i64,
            BackendStat::QueuePerServer => {
                let queued = backend.queued() as i64;
                match backend.usable_servers() as i64 {
                    0 => 2 * queued,
                    servers => (queued + servers - 1) / servers,
                }
            }
        })
    }

    fn server_stat(&self, backend: Option<&str>, server: &str, stat: ServerStat) -> Option<i64> {
        let backend = self.backend_named(backend)?;
        let (index, server) = backend.server_named(server)?;
        Some(match stat {
            ServerStat::Connections => server.traffic.sessions.get() as i64,
            ServerStat::FreeConnections => backend.server_free_connections(index),
            ServerStat::Queued => backend.server_queued(index) as i64,
            ServerStat::Up => i64::from(backend.is_server_usable(index)),
            ServerStat::SessionRate => server.traffic.session_rate.get() as i64,
            ServerStat::Weight => i64::from(sluice_runtime::stats::server_weight(
                server,
                &server.health.get(),
            )),
            ServerStat::InitialWeight => i64::from(server.conf.weight),
            ServerStat::UserWeight => i64::from(server.stats.weight()),
        })
    }
}
