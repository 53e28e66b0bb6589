//! The interface between the sample engine and the stream it looks at.
//!
//! The proxy implements [`Context`] for a stream at one point of its life (a request being
//! checked by `http-request` rules, a response by `http-response` rules, a finished stream
//! being logged) and passes it to [`Expr::eval`](crate::Expr::eval) or
//! [`Condition::eval`](crate::Condition::eval). Every fetch reads the outside world through
//! these methods only, which keeps this crate pure: time and randomness come from the
//! context, live counters are answered by the proxy, and tests implement the trait over a
//! parsed request. A method answering `None` makes the fetch that needs it produce no
//! sample (the ACL using it does not match). Read [`Context`] first.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::SystemTime;

use sluice_http::{RequestHead, ResponseHead};

use crate::logformat::LogFacts;
use crate::value::Sample;

/// A counter of a backend, for `nbsrv`, `be_conn`, `queue` and `connslots`
/// (configuration.txt §7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendStat {
    /// `nbsrv`: servers currently usable.
    UsableServers,
    /// `be_conn`: connections currently established on the backend.
    Connections,
    /// `queue`: streams queued in the backend and its servers.
    Queued,
    /// `connslots`: free connection and queue slots (-1 when a limit is unset).
    FreeSlots,
    /// `be_conn_free`: free connection slots of the usable servers, queues left out (-1
    /// when a server has no `maxconn`).
    FreeConnections,
    /// `be_sess_rate`: new sessions over the last second.
    SessionRate,
    /// `avg_queue`: queued streams per usable server, rounded up (twice the queue when no
    /// server is usable).
    QueuePerServer,
}

/// A timeout of the stream's proxies, in milliseconds (0 when unset, as HAProxy reads an
/// unset one), for `fe_client_timeout`, `be_server_timeout`, `be_tunnel_timeout`,
/// `cur_server_timeout` and `cur_tunnel_timeout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutFetch {
    /// The frontend's `timeout client`.
    FrontendClient,
    /// The backend's `timeout server`.
    BackendServer,
    /// The backend's `timeout tunnel`.
    BackendTunnel,
    /// The server timeout in force: a `set-timeout server` of the backend's rules, else the
    /// backend's.
    CurrentServer,
    /// The tunnel timeout in force, likewise.
    CurrentTunnel,
    /// The frontend's `timeout tarpit`.
    FrontendTarpit,
    /// The backend's `timeout connect`.
    BackendConnect,
    /// The backend's `timeout queue` (its `timeout connect` when unset).
    BackendQueue,
    /// The backend's `timeout tarpit` (its `timeout connect` when unset).
    BackendTarpit,
    /// The client timeout in force: the frontend's, which no rule of Sluice changes.
    CurrentClient,
    /// The connect timeout in force: the backend's.
    CurrentConnect,
    /// The queue timeout in force: the backend's.
    CurrentQueue,
    /// The tarpit timeout in force: the backend's once one is chosen, else the frontend's.
    CurrentTarpit,
}

/// A figure the kernel measures of the client's TCP connection (`fc_rtt` and its family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpMeasure {
    /// `fc_rtt`: the smoothed round-trip time, in microseconds.
    RttMicros,
    /// `fc_rttvar`: its variance, in microseconds.
    RttVarMicros,
    /// `fc_unacked`.
    Unacked,
    /// `fc_sacked`.
    Sacked,
    /// `fc_retrans`.
    Retransmitted,
    /// `fc_fackets`.
    ForwardAcked,
    /// `fc_lost`.
    Lost,
    /// `fc_reordering`.
    Reordering,
}

/// A counter of a frontend, for `fe_conn`, `fe_sess_rate` and `fe_req_rate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrontendStat {
    /// `fe_conn`: connections currently established on the frontend.
    Connections,
    /// `fe_sess_rate`: new sessions over the last second.
    SessionRate,
    /// `fe_req_rate`: HTTP requests over the last second.
    RequestRate,
}

/// A counter or state of a server, for `srv_conn`, `srv_queue` and `srv_is_up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerStat {
    /// `srv_conn`: connections currently established on the server.
    Connections,
    /// `srv_conn_free`: the server's free connection slots (-1 without `maxconn`).
    FreeConnections,
    /// `srv_queue`: streams waiting in the server's queue.
    Queued,
    /// `srv_is_up`: 1 if the server is up, 0 otherwise.
    Up,
    /// `srv_sess_rate`: new sessions over the last second.
    SessionRate,
    /// `srv_weight`: the weight in effect (after agent percentages, as `show stat` shows it).
    Weight,
    /// `srv_iweight`: the weight of the configuration.
    InitialWeight,
    /// `srv_uweight`: the weight an operator set (`set weight`), the configuration's before.
    UserWeight,
}

/// Whose stick-table entry a stick-counter fetch reads (configuration.txt §7.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickSource {
    /// The entry the stream tracks with counter N (`sc_*(N)`, `scN_*`).
    Counter(usize),
    /// The entry of the client's address (`src_*`).
    Src,
}

/// What a stick-counter fetch or a `table_*` converter does with the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickOp {
    /// Reads a stored value (a rate at the current time).
    Get(sluice_stick::DataType),
    /// Reads a byte counter in kilobytes (`kbytes_in`, `kbytes_out`).
    Kilobytes(sluice_stick::DataType),
    /// Increments a general-purpose counter (and its rate) and returns the new value.
    IncGpc(sluice_stick::Gpc),
    /// Sets a general-purpose counter to zero and returns the value it had.
    ClrGpc(sluice_stick::Gpc),
    /// The number of streams tracking the entry.
    Trackers,
    /// Whether the stream tracks counter N (boolean; `sc_tracked`).
    Tracked,
    /// Whether the key has an entry (boolean; `in_table`).
    Present,
    /// Increments `conn_cnt` of the client's entry, created if needed, and returns it
    /// (`src_updt_conn_cnt`).
    UpdateConnCnt,
}

/// The TLVs of a client's PROXY protocol header that fetches read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyTlv {
    /// `PP2_TYPE_AUTHORITY`: the host name the original client asked for.
    Authority,
    /// `PP2_TYPE_UNIQUE_ID`: the sender's id of the connection.
    UniqueId,
}

/// What fetches may read about the stream being evaluated.
///
/// The required methods are what every stream has; the provided ones default to "not
/// available" so that a context only implements what its stage can answer.
pub trait Context {
    /// The client's address, `None` for a unix-socket client.
    fn src(&self) -> Option<SocketAddr>;
    /// The address the client connected to.
    fn dst(&self) -> Option<SocketAddr>;
    /// The client connection's own addresses, whatever `set-src` made of the stream's
    /// (`fc_src`, `fc_src_port`).
    fn connection_src(&self) -> Option<SocketAddr> {
        self.src()
    }
    /// See [`Context::connection_src`] (`fc_dst`, `fc_dst_port`).
    fn connection_dst(&self) -> Option<SocketAddr> {
        self.dst()
    }
    /// The server connection's own address (`bc_src`, `%bi`); the default is the log
    /// record's, so only log lines have it.
    fn server_connection_src(&self) -> Option<SocketAddr> {
        self.log_facts().and_then(|f| f.backend_source())
    }
    /// True if the stream has (or had) a server connection (`bc_err`); the default is the
    /// log record's.
    fn server_connection_made(&self) -> bool {
        self.log_facts().is_some_and(|f| f.server_connected())
    }
    /// The server's address, as the server connection reaches it (`bc_dst`, `%si`); the
    /// default is the log record's.
    fn server_connection_dst(&self) -> Option<SocketAddr> {
        self.log_facts().and_then(|f| f.server_address())
    }
    /// A number about the stream for the log-format aliases (`%rt`, `%lc`, `%pid`, the
    /// timers...); the default is the log record's, so only log lines have them.
    fn log_number(&self, which: crate::LogNumber) -> Option<i64> {
        self.log_facts().and_then(|f| f.number(which))
    }
    /// When the stream started (`%t`, `%Ts`... outside a log line, as in a
    /// `unique-id-format`); the default is the log record's accept date.
    fn stream_start(&self) -> Option<SystemTime> {
        self.log_facts().and_then(|f| f.accept_date())
    }
    /// The connection retries of the stream's backend (`be_max_retries`, `cur_max_retries`);
    /// the default is unknown.
    fn max_retries(&self) -> Option<i64> {
        None
    }
    /// The connections open now on the listening socket the stream came through, its own
    /// included (`dst_conn`); the default is unknown.
    fn socket_connections(&self) -> Option<i64> {
        None
    }
    /// A figure the kernel measures of the client connection; `None` for one that is not
    /// TCP, and by default.
    fn client_tcp(&self, _which: TcpMeasure) -> Option<i64> {
        None
    }
    /// How long the process has run, in seconds (`uptime`); the default is unknown.
    fn uptime_seconds(&self) -> Option<i64> {
        None
    }
    /// The configuration file and line of the last final rule the stream matched
    /// (`last_rule_file`, `last_rule_line`); by default none.
    fn last_rule(&self) -> Option<(std::sync::Arc<str>, u32)> {
        None
    }
    /// The frontend's name.
    fn frontend_name(&self) -> &str;
    /// The backend's name once one is chosen.
    fn backend_name(&self) -> Option<&str>;
    /// The server's name once one is chosen.
    fn server_name(&self) -> Option<&str>;
    /// Whether the HTTP request being handled is its connection's first (`http_first_req`);
    /// `None` outside HTTP.
    fn first_request(&self) -> Option<bool> {
        None
    }
    /// A timeout of the stream's proxies in milliseconds; `None` when the proxy it belongs
    /// to is not known yet (no backend chosen).
    fn timeout_ms(&self, _which: TimeoutFetch) -> Option<i64> {
        None
    }
    /// The number of the frontend's listening socket the client came through, from 1
    /// (`so_id`).
    fn socket_id(&self) -> Option<i64> {
        None
    }
    /// That socket's `bind ... name`, if its line has one (`so_name`).
    fn socket_name(&self) -> Option<&str> {
        None
    }
    /// The frontend's default backend, if it has one (`fe_defbe`).
    fn frontend_default_backend(&self) -> Option<&str> {
        None
    }
    /// The frontend's number (`fe_id`), when known.
    fn frontend_id(&self) -> Option<i64> {
        None
    }
    /// The backend's number once one is chosen (`be_id`).
    fn backend_id(&self) -> Option<i64> {
        None
    }
    /// The server's number once one is chosen (`srv_id`).
    fn server_id(&self) -> Option<i64> {
        None
    }
    /// The request buffer and the head parsed from it, when the stream carries HTTP.
    fn request(&self) -> Option<(&[u8], &RequestHead)>;
    /// The response buffer and the head parsed from it, once the response head is in.
    fn response(&self) -> Option<(&[u8], &ResponseHead)>;
    /// The process environment variable `name` (`env()` fetch).
    fn env(&self, name: &str) -> Option<String>;
    /// The current time (`date` fetch).
    fn now(&self) -> SystemTime;
    /// A random number (`rand` fetch); only the low 32 bits are used.
    fn random(&self) -> u64;

    /// Whether the request's credentials are in `Proxy-Authorization` rather than
    /// `Authorization`: a request to a proxy (absolute target) under the frontend's `option
    /// http-use-proxy-header`.
    fn proxy_credentials(&self) -> bool {
        false
    }

    /// The variable `scope.name` (`var()` fetch, and converters taking a variable), `None`
    /// when it is not set or variables are not supported.
    fn var(&self, _name: &str) -> Option<Sample<'_>> {
        None
    }

    /// Stores `value` in variable `name` (`set-var` converter). The default ignores it, for
    /// contexts without variables; an implementation copies what it keeps
    /// ([`Sample::into_owned`]) and uses interior mutability, since fetches only get `&self`.
    fn set_var(&self, _name: &str, _value: Sample<'_>) {}

    /// The stream's unique id (`unique-id-format`), when the frontend generates one.
    fn unique_id(&self) -> Option<Sample<'_>> {
        None
    }

    /// The stream's queue priority class and offset (`prio_class`, `prio_offset`); 0 and 0
    /// unless a rule set them.
    fn queue_priority(&self) -> (i64, i64) {
        (0, 0)
    }

    /// The name of the cache whose stored response this is (`res.cache_hit`,
    /// `res.cache_name`); `None` for a server's response. The default is `None`.
    fn cache_used(&self) -> Option<&str> {
        None
    }

    /// Whether the client connection started with a PROXY protocol header
    /// (`fc_rcvd_proxy`). The default is false.
    fn received_proxy(&self) -> bool {
        false
    }

    /// A TLV of the client's PROXY protocol header (`fc_pp_authority`, `fc_pp_unique_id`),
    /// when it had one.
    fn received_proxy_tlv(&self, _tlv: ProxyTlv) -> Option<&[u8]> {
        None
    }

    /// The system's host name (`hostname`).
    fn hostname(&self) -> Option<&str> {
        None
    }

    /// A counter of frontend `frontend`, or of the stream's frontend when `None`.
    fn frontend_stat(&self, _frontend: Option<&str>, _stat: FrontendStat) -> Option<i64> {
        None
    }

    /// A counter of backend `backend`, or of the stream's backend when `None`.
    fn backend_stat(&self, _backend: Option<&str>, _stat: BackendStat) -> Option<i64> {
        None
    }

    /// A counter of server `server` in backend `backend` (the stream's backend when `None`).
    fn server_stat(&self, _backend: Option<&str>, _server: &str, _stat: ServerStat) -> Option<i64> {
        None
    }

    /// A stick-counter fetch (`sc_*`, `scN_*`, `src_*`) over the entry of `source`, in
    /// `table` (`None`: the tracked entry's table, or the current proxy's for `src_*`). `None`
    /// (the default) when there is no such entry or the table does not store the data.
    fn stick(
        &self,
        _source: StickSource,
        _table: Option<&str>,
        _op: StickOp,
    ) -> Option<Sample<'static>> {
        None
    }

    /// A `table_*` or `in_table` converter: `op` over the entry of `key` in `table` (the
    /// current proxy's when `None`); 0 for a missing entry (a boolean as 0 or 1), `None` when
    /// the table does not exist or store the data (the default).
    fn table_lookup(&self, _table: Option<&str>, _key: &Sample<'_>, _op: StickOp) -> Option<i64> {
        None
    }

    /// `table_avl` (`free` true) or `table_cnt`: free or used entries of `table` (the
    /// current proxy's when `None`).
    fn table_usage(&self, _table: Option<&str>, _free: bool) -> Option<i64> {
        None
    }

    /// Bytes waiting in the request buffer (`req.len`, the `REQ_CONTENT` ACL).
    fn request_buffered(&self) -> Option<usize> {
        None
    }

    /// The bytes received from the client and still buffered, from the start of the stream
    /// (`req.payload`, `req.ssl_sni` and the other TLS hello fetches of `tcp-request
    /// content` rules). `None` when the stage has no such buffer.
    fn request_payload(&self) -> Option<&[u8]> {
        None
    }

    /// The bytes received from the server and still buffered (`res.len`, `res.payload` in
    /// `tcp-response content` rules). `None` when the stage has no such buffer.
    fn response_payload(&self) -> Option<&[u8]> {
        None
    }

    /// The part of the HTTP request body received so far, decoded from its framing
    /// (`req.body`, `req.body_param`...). `None` when there is no body buffer.
    fn request_body(&self) -> Option<Cow<'_, [u8]>> {
        None
    }

    /// The part of the HTTP response body received so far, decoded from its framing
    /// (`res.body`...; `http-response wait-for-body` waits for more). `None` when there is
    /// no response.
    fn response_body(&self) -> Option<Cow<'_, [u8]>> {
        None
    }

    /// How many bytes of the request line logs show (`tune.http.logurilen`): `%r` and the
    /// parts read from it (`%HU`, `%HP`...) come from that much of it, as in HAProxy. The
    /// default is no limit.
    fn logged_request_line_len(&self) -> usize {
        usize::MAX
    }

    /// Whether the content inspection period is over (`wait_end`, the `WAIT_END` ACL). The
    /// default is true: in HTTP rules the head is complete.
    fn inspection_ended(&self) -> bool {
        true
    }

    /// The offset of local time from UTC at `at`, in seconds east of UTC, for local dates
    /// (`ltime`, the log's `%t`). The default is 0: local time is UTC, which keeps the
    /// crate free of time-zone lookups; the proxy answers with the process's zone.
    fn utc_offset(&self, _at: SystemTime) -> i32 {
        0
    }

    /// A copy of capture slot `index` of the transaction, of its response side when
    /// `response` (`capture.req.hdr`, `capture.res.hdr`); `None` when nothing was captured
    /// there (the default: no captures).
    fn captured(&self, _response: bool, _index: usize) -> Option<Vec<u8>> {
        None
    }

    /// What only the proxy knows about a stream being logged (timers, byte counts,
    /// termination state...), for log-format aliases such as `%Tt` or `%ts`. `None` (the
    /// default) makes every such alias print `-`.
    fn log_facts(&self) -> Option<&dyn LogFacts> {
        None
    }

    /// Whether the process is stopping (`stopping`): a soft stop was asked for (its
    /// listeners close at once, or after `grace`) and it waits for its last sessions. The
    /// default is false.
    fn stopping(&self) -> bool {
        false
    }

    /// The position of the thread evaluating the expression among the event-loop threads,
    /// from 0 (`thread`). The default is 0, the only thread of a single-threaded process.
    fn thread(&self) -> usize {
        0
    }
}
