//! Keywords of `defaults`, `frontend`, `backend` and `listen` sections (configuration.txt §4),
//! parsed into [`ProxyConf`].
//!
//! A `defaults` section and a proxy section share one parser: the defaults' [`ProxyConf`] is the
//! starting value of every proxy that inherits it, and the proxy's own lines override it.
//! Each keyword declares the sections it may appear in ([`Allowed`]); a keyword used where it
//! means nothing is an alert when it would change behaviour (`bind` in a backend) and a warning
//! when HAProxy merely ignores it (`timeout client` in a backend).

use crate::addr::{self, ListenAddr, ServerAddr};
use crate::checks::{self, DefaultServerLine, ProxyChecks, ServerChecks, ServerOption};
use crate::cookie::{self, PersistConf};
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::errors::{self, ErrorDirective};
use crate::global::Owner;
use crate::http_options::{self, HttpConf};
use crate::logging::{self, ProxyLogConf};
use crate::preprocess::Line;
use crate::retry::RetryOn;
use crate::rules::{self, ProxyRules};
use crate::sections::SectionKind;
use crate::stats_page;
use crate::units;
use sluice_balance::{Algorithm, HashType};
use sluice_sample::{Expr, MapStore, Stages};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The protocol a proxy speaks (`mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Bytes are relayed as they are (the default).
    Tcp,
    /// Requests are parsed, checked and forwarded one by one (HTTP/1.x).
    Http,
}

/// One `bind` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindConf {
    /// Where it was declared.
    pub span: Span,
    /// Its addresses (a `bind` line may list several, comma-separated).
    pub addrs: Vec<ListenAddr>,
    /// `name`: the listener's name in statistics.
    pub name: Option<String>,
    /// `backlog`: the kernel's pending-connection queue length.
    pub backlog: Option<u32>,
    /// `maxconn`: concurrent connections accepted through this bind line.
    pub maxconn: Option<u32>,
    /// `v4v6`: an IPv6 wildcard also accepts IPv4.
    pub v4v6: bool,
    /// `v6only`: an IPv6 wildcard accepts IPv6 only.
    pub v6only: bool,
    /// `defer-accept`: wake up only when the client has sent data (TCP_DEFER_ACCEPT).
    pub defer_accept: bool,
    /// `tfo`: TCP Fast Open, data in the client's SYN (TCP_FASTOPEN).
    pub tfo: bool,
    /// `mode`: permissions of a unix socket file.
    pub unix_mode: Option<u32>,
    /// `uid` or `user`: the owner of a unix socket file.
    pub unix_owner: Option<Owner>,
    /// `gid` or `group`: the group of a unix socket file.
    pub unix_group: Option<Owner>,
    /// `accept-proxy`: every connection starts with a PROXY protocol header (v1 or v2).
    pub accept_proxy: bool,
    /// `tcp-ut`: TCP_USER_TIMEOUT of the accepted connections.
    pub user_timeout: Option<Duration>,
    /// `mss`: the maximum segment size the accepted connections announce (negative: that
    /// much below the system's).
    pub mss: Option<i32>,
    /// `interface`: the network interface whose packets alone reach the socket.
    pub interface: Option<String>,
    /// `thread`: the event-loop threads that accept its connections (all by default).
    pub threads: Option<crate::cpu_map::ThreadSet>,
}

/// One `server` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConf {
    /// Where it was declared.
    pub span: Span,
    /// The server's name, unique in its backend.
    pub name: String,
    /// Where to connect.
    pub addr: ServerAddr,
    /// `weight`: share of the load, 0 to 256 (default 1).
    pub weight: u32,
    /// `disabled`: starts in maintenance.
    pub disabled: bool,
    /// `backup`: used only when no active server is usable.
    pub backup: bool,
    /// `pool-max-conn`: idle connections kept for reuse; `None` means no limit (HAProxy's -1).
    pub pool_max_conn: Option<u32>,
    /// `pool-low-conn`: idle connections kept beyond the estimated need (0 by default).
    pub pool_low_conn: u32,
    /// `pool-purge-delay`: how often idle connections are trimmed (5 s by default).
    pub pool_purge_delay: Duration,
    /// `max-reuse`: how many times a server connection may be reused after its first
    /// request; `None` means no limit (HAProxy's -1, the default), 0 disables keep-alive.
    pub max_reuse: Option<u32>,
    /// `send-proxy` (cleared by `no-send-proxy`): a PROXY protocol v1 line starts every
    /// connection.
    pub send_proxy_v1: bool,
    /// `send-proxy-v2` (cleared by `no-send-proxy-v2`): a v2 header starts every connection;
    /// it wins over `send-proxy`, as in HAProxy.
    pub send_proxy_v2: bool,
    /// `proxy-v2-options`, and the options `send-proxy-v2-ssl[-cn]` add: the TLVs of the v2
    /// header.
    pub proxy_v2: ProxyV2Options,
    /// `non-stick` (cleared by `stick`): no stick-table entry ever names this server.
    pub non_stick: bool,
    /// `tcp-ut`: TCP_USER_TIMEOUT of the connections to this server.
    pub user_timeout: Option<Duration>,
    /// `maxconn`: concurrent connections (requests in HTTP mode) the server is given; the
    /// others wait in a queue. `None` (or 0) means no limit.
    pub maxconn: Option<u32>,
    /// `minconn`: with `maxconn`, the server's limit follows the backend's load from this
    /// value up to `maxconn` (reached at the backend's `fullconn`). The plan raises `maxconn`
    /// to it when it is larger or `maxconn` is unset, as HAProxy does.
    pub minconn: Option<u32>,
    /// `slowstart`: after coming back up, the server's weight and limit ramp up to the
    /// configured ones over this time (`None`: at once).
    pub slowstart: Option<Duration>,
    /// `source`: the local address (port 0: any) connections to this server are bound to;
    /// overrides the backend's.
    pub source: Option<SocketAddr>,
    /// `redir PREFIX`: in HTTP mode, GET and HEAD requests given to this server are answered
    /// with a 302 to PREFIX followed by the request's path instead of being forwarded.
    pub redir: Option<String>,
    /// `maxqueue`: requests that may wait in this server's own queue; past it, they are
    /// balanced to another server. `None` (or 0) means no limit.
    pub maxqueue: Option<u32>,
    /// `cookie VALUE`: the value naming this server in the backend's persistence cookie;
    /// `None` means no persistence to this server.
    pub cookie: Option<String>,
    /// `id`: the server's number in its backend (`sid`, `srv_id`, the consistent-hash ring's
    /// placement). The plan fills in the free ids of servers without one, so every server of
    /// a [`crate::plan::BackendPlan`] has `Some`.
    pub id: Option<u32>,
    /// Health-check settings (`check`, `inter`, `agent-check`, `track`...).
    pub checks: ServerChecks,
}

/// What a server's PROXY protocol v2 header carries beyond the addresses
/// (`proxy-v2-options`), as a set of flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyV2Options(u8);

impl ProxyV2Options {
    /// `ssl`: the SSL TLV.
    pub const SSL: ProxyV2Options = ProxyV2Options(1);
    /// `cert-cn`: the client certificate's common name, inside the SSL TLV.
    pub const CERT_CN: ProxyV2Options = ProxyV2Options(1 << 1);
    /// `ssl-cipher`, inside the SSL TLV.
    pub const SSL_CIPHER: ProxyV2Options = ProxyV2Options(1 << 2);
    /// `cert-sig`, inside the SSL TLV.
    pub const CERT_SIG: ProxyV2Options = ProxyV2Options(1 << 3);
    /// `cert-key`, inside the SSL TLV.
    pub const CERT_KEY: ProxyV2Options = ProxyV2Options(1 << 4);
    /// `authority`: the host name the client asked for.
    pub const AUTHORITY: ProxyV2Options = ProxyV2Options(1 << 5);
    /// `crc32c`: a checksum of the header.
    pub const CRC32C: ProxyV2Options = ProxyV2Options(1 << 6);
    /// `unique-id`: the stream's unique id.
    pub const UNIQUE_ID: ProxyV2Options = ProxyV2Options(1 << 7);

    /// The option named `name` in a `proxy-v2-options` list.
    fn named(name: &str) -> Option<ProxyV2Options> {
        Some(match name {
            "ssl" => Self::SSL,
            "cert-cn" => Self::CERT_CN,
            "ssl-cipher" => Self::SSL_CIPHER,
            "cert-sig" => Self::CERT_SIG,
            "cert-key" => Self::CERT_KEY,
            "authority" => Self::AUTHORITY,
            "crc32c" => Self::CRC32C,
            "unique-id" => Self::UNIQUE_ID,
            _ => return None,
        })
    }

    /// Whether every option of `other` is set.
    pub fn contains(self, other: ProxyV2Options) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no option is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn insert(&mut self, other: ProxyV2Options) {
        self.0 |= other.0;
    }

    fn remove(&mut self, other: ProxyV2Options) {
        self.0 &= !other.0;
    }
}

/// The PROXY protocol header a server receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendProxy {
    /// The text line.
    V1,
    /// The binary header.
    V2,
}

impl ServerConf {
    /// A server with every option at HAProxy's default.
    fn with_defaults(span: Span, name: String, addr: ServerAddr) -> ServerConf {
        ServerConf {
            span,
            name,
            addr,
            weight: 1,
            disabled: false,
            backup: false,
            pool_max_conn: None,
            pool_low_conn: 0,
            pool_purge_delay: DEFAULT_POOL_PURGE_DELAY,
            max_reuse: None,
            send_proxy_v1: false,
            send_proxy_v2: false,
            proxy_v2: ProxyV2Options::default(),
            non_stick: false,
            user_timeout: None,
            maxconn: None,
            minconn: None,
            slowstart: None,
            source: None,
            redir: None,
            maxqueue: None,
            cookie: None,
            id: None,
            checks: ServerChecks::default(),
        }
    }

    /// The header this server's connections start with, if any. As in HAProxy 2.6, a server
    /// with `proxy-v2-options` but no `send-proxy-v2` gets a v1 line.
    pub fn send_proxy(&self) -> Option<SendProxy> {
        if self.send_proxy_v2 {
            Some(SendProxy::V2)
        } else if self.send_proxy_v1 || !self.proxy_v2.is_empty() {
            Some(SendProxy::V1)
        } else {
            None
        }
    }
}

/// The largest `id` of a proxy or a server: HAProxy keeps them in a signed 32-bit integer.
pub const MAX_ID: u64 = i32::MAX as u64;

/// HAProxy's default `pool-purge-delay`.
pub const DEFAULT_POOL_PURGE_DELAY: Duration = Duration::from_secs(5);

/// The `timeout` keywords Sluice implements; `None` means not set (no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// `timeout connect`: one attempt to connect to a server.
    pub connect: Option<Duration>,
    /// `timeout client`: client-side inactivity.
    pub client: Option<Duration>,
    /// `timeout server`: server-side inactivity.
    pub server: Option<Duration>,
    /// `timeout tunnel`: inactivity once both sides are connected; overrides client and server.
    pub tunnel: Option<Duration>,
    /// `timeout client-fin`: client-side inactivity once the client has half-closed.
    pub client_fin: Option<Duration>,
    /// `timeout server-fin`: server-side inactivity once the server has half-closed.
    pub server_fin: Option<Duration>,
    /// `timeout http-request`: the whole request head must arrive within this time.
    pub http_request: Option<Duration>,
    /// `timeout http-keep-alive`: wait for the next request on a kept-alive connection.
    pub http_keep_alive: Option<Duration>,
    /// `timeout queue`: how long a request may wait for a server slot (`timeout connect`
    /// when unset, as in HAProxy).
    pub queue: Option<Duration>,
    /// `timeout check`: a health check must complete within this time once connected.
    pub check: Option<Duration>,
    /// `timeout tarpit`: how long `http-request tarpit` holds a request (`timeout connect`
    /// when unset in a proxy with servers, as in HAProxy; no delay in a plain frontend).
    pub tarpit: Option<Duration>,
}

/// What a `defaults`, `frontend`, `backend` or `listen` section says. Every field is optional
/// so a proxy can tell "inherited" from "set here".
#[derive(Clone, Debug, Default)]
pub struct ProxyConf {
    /// `mode`, and where it was set.
    pub mode: Option<Mode>,
    /// `bind` lines.
    pub binds: Vec<BindConf>,
    /// `server` lines.
    pub servers: Vec<ServerConf>,
    /// `default_backend` and where it was set.
    pub default_backend: Option<(String, Span)>,
    /// `balance`.
    pub balance: Option<Algorithm>,
    /// `hash-type`.
    pub hash_type: Option<HashType>,
    /// The compiled key of `balance hash EXPR`.
    pub hash_expr: Option<Expr>,
    /// `timeout …`.
    pub timeouts: Timeouts,
    /// `retries`.
    pub retries: Option<u32>,
    /// `max-keep-alive-queue`: `Some(None)` for -1 (no limit).
    pub max_keep_alive_queue: Option<Option<u32>>,
    /// `retry-on`.
    pub retry_on: Option<RetryOn>,
    /// `maxconn` (frontend side).
    pub maxconn: Option<u32>,
    /// `rate-limit sessions`: new sessions accepted per second (frontend side).
    pub session_rate_limit: Option<u32>,
    /// `disabled` (`enabled` undoes it): the proxy does not run.
    pub disabled: Option<bool>,
    /// `load-server-state-from-file`: where the servers' states are read at start-up.
    pub load_server_state: Option<ServerStateFrom>,
    /// `server-state-file-name`: the local state file (none: named after the backend).
    pub server_state_file_name: Option<String>,
    /// `option clitcpka` (or `option tcpka`): SO_KEEPALIVE on client connections.
    pub clitcpka: Option<bool>,
    /// `option srvtcpka` (or `option tcpka`): SO_KEEPALIVE on server connections.
    pub srvtcpka: Option<bool>,
    /// `clitcpka-cnt|idle|intvl`: the keep-alive probes of client connections.
    pub client_probes: KeepaliveProbes,
    /// `srvtcpka-cnt|idle|intvl`: the keep-alive probes of server connections.
    pub server_probes: KeepaliveProbes,
    /// `option nolinger` in a frontend (or `listen`): client connections close with a reset.
    pub client_nolinger: Option<bool>,
    /// `option nolinger` in a backend (or `listen`): server connections close with a reset.
    pub server_nolinger: Option<bool>,
    /// `option tcp-smart-accept`: the first ACK of a client connection waits for data to
    /// carry (on by default in `mode http`).
    pub smart_accept: Option<bool>,
    /// `option contstats` (frontends): byte counters follow long transfers as they go.
    pub contstats: Option<bool>,
    /// `option socket-stats` (frontends): each listening socket has its statistics row.
    pub socket_stats: Option<bool>,
    /// `email-alert from|to|level|mailers|myhostname`.
    pub email_alert: crate::mailers::EmailAlertConf,
    /// `option tcp-smart-connect`: the ACK that ends a server handshake rides on the request.
    pub smart_connect: Option<bool>,
    /// `option allbackups`: all backup servers share the load when no active one is usable.
    pub allbackups: Option<bool>,
    /// `hash-balance-factor`: bounded-load consistent hashing (0 = off).
    pub hash_balance_factor: Option<u32>,
    /// HTTP options.
    pub http: HttpConf,
    /// `errorfile`, `errorloc*` and `errorfiles`, in order.
    pub error_directives: Vec<ErrorDirective>,
    /// ACLs and rules (`acl`, `http-request`, `use_backend`...).
    pub rules: ProxyRules,
    /// Logging (`log`, `option httplog`, `log-format`...).
    pub log: ProxyLogConf,
    /// `option splice-auto`, `splice-request`, `splice-response`.
    pub splice: SpliceOptions,
    /// Persistence: `cookie`, `option persist|redispatch`, `force-persist`, `ignore-persist`.
    pub persistence: PersistConf,
    /// `option httpchk`, `option tcp-check`, `http-check`, `tcp-check`.
    pub checks: ProxyChecks,
    /// `default-server` lines, applied before each following `server` line's own options.
    pub default_servers: Vec<DefaultServerLine>,
    /// `fullconn`: the backend load at which servers with `minconn` reach their `maxconn`
    /// (0: automatic).
    pub fullconn: Option<u32>,
    /// `source`: the local address of connections to the servers.
    pub source: Option<SocketAddr>,
    /// `id`: the proxy's number (never inherited from a `defaults` section).
    pub id: Option<(u32, Span)>,
    /// `description`: a text shown with the proxy on the statistics page (never inherited).
    pub description: Option<String>,
    /// `stick-table`: the section's table (named after the section by the plan).
    pub stick_table: Option<sluice_stick::TableConf>,
    /// `compression algo|type|offload`.
    pub compression: crate::compression::CompressionConf,
}

/// Which directions may be forwarded with `splice(2)` (configuration.txt §4.2
/// `option splice-*`). In `mode tcp` Sluice splices a direction whenever it is allowed
/// (`splice-auto` allows both); in `mode http` it splices bodies of known length, under
/// `splice-auto` only those larger than a buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpliceOptions {
    /// `option splice-auto`.
    pub auto: Option<bool>,
    /// `option splice-request`: client to server.
    pub request: Option<bool>,
    /// `option splice-response`: server to client.
    pub response: Option<bool>,
}

impl SpliceOptions {
    /// These options completed by `other`'s where unset (a frontend's with its backend's).
    pub fn or(self, other: SpliceOptions) -> SpliceOptions {
        SpliceOptions {
            auto: self.auto.or(other.auto),
            request: self.request.or(other.request),
            response: self.response.or(other.response),
        }
    }

    /// How the client-to-server direction may splice.
    pub fn request_mode(self) -> SpliceMode {
        SpliceMode::of(self.request, self.auto)
    }

    /// How the server-to-client direction may splice.
    pub fn response_mode(self) -> SpliceMode {
        SpliceMode::of(self.response, self.auto)
    }
}

/// How one direction may splice: the direction's own option (`splice-request` or
/// `splice-response`, or their `no` forms) decides, else `splice-auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpliceMode {
    /// Copy through a buffer.
    Never,
    /// Splice from the start.
    Always,
    /// Splice where it pays (`splice-auto`), as the data path judges.
    Auto,
}

impl SpliceMode {
    fn of(explicit: Option<bool>, auto: Option<bool>) -> SpliceMode {
        match explicit {
            Some(true) => SpliceMode::Always,
            Some(false) => SpliceMode::Never,
            None if auto == Some(true) => SpliceMode::Auto,
            None => SpliceMode::Never,
        }
    }
}

/// Which sections a keyword is valid in.
#[derive(Clone, Copy)]
pub(crate) struct Allowed {
    pub defaults: bool,
    pub frontend: bool,
    pub backend: bool,
}

/// The TCP keep-alive probes of one side's connections, where the configuration sets them
/// (`clitcpka-*`, `srvtcpka-*`); the system's settings (`tcp_keepalive_*`) apply otherwise.
/// They matter only where SO_KEEPALIVE is on (`option tcpka|clitcpka|srvtcpka`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeepaliveProbes {
    /// `*-cnt`: probes sent without an answer before the connection is dropped
    /// (TCP_KEEPCNT).
    pub count: Option<u32>,
    /// `*-idle`: idle time before the first probe (TCP_KEEPIDLE), whole seconds.
    pub idle: Option<Duration>,
    /// `*-intvl`: time between probes (TCP_KEEPINTVL), whole seconds.
    pub interval: Option<Duration>,
}

impl KeepaliveProbes {
    /// Applies `clitcpka-cnt|idle|intvl VALUE` or its `srvtcpka` twin. Times are in seconds
    /// by default, as the kernel counts them, rounded up to whole seconds. Zero, as in
    /// HAProxy, leaves the system's setting.
    fn parse(&mut self, d: &Directive<'_>, diags: &mut Diagnostics) {
        if d.keyword.ends_with("-cnt") {
            let count = d.integer(1, "a number of probes", 0, i32::MAX as u64, diags);
            if let Some(count) = count {
                self.count = (count > 0).then_some(count as u32);
            }
            return;
        }
        let Some(word) = d.word(1, "a time value", diags) else {
            return;
        };
        // Rounded up to whole seconds, as HAProxy rounds (`500ms` is 1 s).
        let time = match units::parse_time(word, units::TimeUnit::S) {
            Ok(time) => d.duration(time, diags).as_nanos().div_ceil(1_000_000_000),
            Err(err) => {
                diags.push(d.alert(format!("invalid time value '{word}': {err}")));
                return;
            }
        };
        if time > i32::MAX as u128 {
            diags.push(d.alert(format!(
                "timer overflow in '{word}': the maximum is 2147483647 s"
            )));
            return;
        }
        let time = (time > 0).then(|| Duration::from_secs(time as u64));
        if d.keyword.ends_with("-idle") {
            self.idle = time;
        } else {
            self.interval = time;
        }
    }
}

const FRONT: Allowed = Allowed {
    defaults: true,
    frontend: true,
    backend: false,
};
pub(crate) const BACK: Allowed = Allowed {
    defaults: true,
    frontend: false,
    backend: true,
};
const BOTH: Allowed = Allowed {
    defaults: true,
    frontend: true,
    backend: true,
};

/// Checks that a keyword with `allowed` sections may be used in `kind`. A keyword of the
/// other side is ignored with a warning, as HAProxy does; true if it applies here.
pub(crate) fn applies(
    d: &Directive<'_>,
    kind: SectionKind,
    allowed: Allowed,
    diags: &mut Diagnostics,
) -> bool {
    let ok = match kind {
        SectionKind::Defaults => allowed.defaults,
        SectionKind::Frontend => allowed.frontend,
        SectionKind::Backend => allowed.backend,
        SectionKind::Listen => allowed.frontend || allowed.backend,
        SectionKind::Global
        | SectionKind::HttpErrors
        | SectionKind::Userlist
        | SectionKind::Ring
        | SectionKind::Mailers
        | SectionKind::Cache => false,
    };
    if !ok {
        let side = if allowed.frontend {
            "frontend"
        } else {
            "backend"
        };
        diags.push(d.warning(format!(
            "ignored because a '{}' section has no {side} capability",
            kind.keyword()
        )));
    }
    ok
}

/// Rejects a keyword that must only appear in sections of one kind (`bind`, `server`).
fn only_in(
    d: &Directive<'_>,
    kind: SectionKind,
    ok: bool,
    where_: &str,
    diags: &mut Diagnostics,
) -> bool {
    if !ok {
        diags.push(d.alert(format!(
            "not allowed in a '{}' section (only in {where_})",
            kind.keyword()
        )));
    }
    ok
}

/// Applies one line of a `defaults`, `frontend`, `backend` or `listen` section to `conf`.
pub fn parse_proxy_line(
    conf: &mut ProxyConf,
    kind: SectionKind,
    line: &Line,
    maps: &MapStore,
    diags: &mut Diagnostics,
) {
    let Some(first) = line.words.first() else {
        return;
    };
    // `error-log-format` concerns connections a frontend accepts.
    if first == "error-log-format" && !applies(&Directive::new(line, 1), kind, FRONT, diags) {
        return;
    }
    // Pattern references created by this line say where they come from (`show acl`).
    maps.set_place(&line.span.file, line.span.line);
    if rules::parse_rule_line(&mut conf.rules, kind, line, maps, diags)
        || logging::parse_proxy_log_line(&mut conf.log, line, maps, diags)
        || stats_page::parse_stats_line(
            &mut conf.rules.stats_page,
            &mut conf.rules.acls,
            kind,
            line,
            maps,
            diags,
        )
    {
        return;
    }
    if cookie::parse_persist_line(
        &mut conf.persistence,
        &mut conf.rules.acls,
        kind,
        line,
        maps,
        diags,
    ) {
        return;
    }
    if crate::compression::parse_line(&mut conf.compression, kind, line, diags) {
        return;
    }
    if let Some(directive) = errors::parse_error_directive(line, maps, diags) {
        conf.error_directives.extend(directive);
        return;
    }
    let d = Directive::new(line, 1);
    match first.as_str() {
        "mode" => {
            match d.word(1, "'tcp' or 'http'", diags) {
                Some("tcp") => conf.mode = Some(Mode::Tcp),
                Some("http") => conf.mode = Some(Mode::Http),
                Some(other) => diags.push(d.alert(format!("unknown mode '{other}'"))),
                None => {}
            }
            d.no_more_than(2, diags);
        }
        "bind" => {
            if only_in(&d, kind, kind.has_frontend(), "frontend and listen sections", diags)
                && let Some(bind) = parse_bind(&d, diags)
            {
                conf.binds.push(bind);
            }
        }
        "server" => {
            if only_in(&d, kind, kind.has_backend(), "backend and listen sections", diags)
                && let Some(server) = parse_server(&d, &conf.default_servers, diags)
            {
                conf.servers.push(server);
            }
        }
        "stick-table" => {
            if only_in(&d, kind, kind != SectionKind::Defaults, "frontend, backend and listen sections", diags) {
                crate::stick::parse_line(&mut conf.stick_table, "", &d, &line.words, diags);
            }
        }
        "server-template" => {
            if only_in(&d, kind, kind.has_backend(), "backend and listen sections", diags) {
                let servers = parse_server_template(line, &conf.default_servers, diags);
                conf.servers.extend(servers);
            }
        }
        "default-server" => {
            if applies(&d, kind, BACK, diags) && parse_default_server(&d, diags) {
                conf.default_servers.push(DefaultServerLine {
                    span: line.span.clone(),
                    words: line.words.clone(),
                });
            }
        }
        "http-check" | "tcp-check" => {
            if applies(&d, kind, BACK, diags) {
                checks::parse_rule_line(&mut conf.checks, kind, line, diags);
            }
        }
        "default_backend" => {
            if applies(&d, kind, FRONT, diags)
                && let Some(name) = d.word(1, "a backend name", diags)
            {
                conf.default_backend = Some((name.to_owned(), line.span.clone()));
            }
            d.no_more_than(2, diags);
        }
        "balance" => {
            if applies(&d, kind, BACK, diags) {
                let words: Vec<&str> = line.words[1..].iter().map(String::as_str).collect();
                match sluice_balance::parse_balance(&words) {
                    // The key of `balance hash EXPR` is a sample expression evaluated when the
                    // server is chosen.
                    Ok(Algorithm::Hash(text)) => {
                        let expr = Expr::parse(&text, maps)
                            .and_then(|mut e| e.check_stages(Stages::USE_SERVER).map(|()| e));
                        match expr {
                            Ok(expr) => {
                                conf.hash_expr = Some(expr);
                                conf.balance = Some(Algorithm::Hash(text));
                            }
                            Err(message) => diags.push(d.alert(message)),
                        }
                    }
                    Ok(algorithm) => {
                        conf.hash_expr = None;
                        conf.balance = Some(algorithm);
                    }
                    Err(message) => diags.push(d.alert(message)),
                }
            }
        }
        "hash-balance-factor" => {
            if applies(&d, kind, BACK, diags)
                && let Some(n) = d.integer(1, "0 or a percentage above 100", 0, 65535, diags)
            {
                // configuration.txt §4.2: 0 disables it, otherwise more than 100 percent.
                if n != 0 && n <= 100 {
                    diags.push(d.alert(format!("expects 0 or a percentage above 100, not '{n}'")));
                } else {
                    conf.hash_balance_factor = Some(n as u32);
                }
            }
            d.no_more_than(2, diags);
        }
        "hash-type" => {
            if applies(&d, kind, BACK, diags) {
                let words: Vec<&str> = line.words[1..].iter().map(String::as_str).collect();
                match sluice_balance::parse_hash_type(&words) {
                    Ok(hash_type) => conf.hash_type = Some(hash_type),
                    Err(message) => diags.push(d.alert(message)),
                }
            }
        }
        "retry-on" => {
            if applies(&d, kind, BACK, diags) {
                match RetryOn::parse(&line.words[1..]) {
                    Ok(retry_on) => conf.retry_on = Some(retry_on),
                    Err(message) => diags.push(d.alert(message)),
                }
            }
        }
        "source" => {
            // The long forms (`usesrc`, `interface`) are refused whole by `parse_source`.
            if applies(&d, kind, BACK, diags)
                && let Some(addr) = crate::source::parse_source(&d, 1, diags)
            {
                conf.source = Some(addr);
                d.no_more_than(2, diags);
            }
        }
        "fullconn" => {
            if applies(&d, kind, BACK, diags) {
                let what = "a number of connections";
                conf.fullconn = d.integer(1, what, 0, MAX_ID, diags).map(|n| n as u32);
            }
            d.no_more_than(2, diags);
        }
        "max-keep-alive-queue" => {
            if applies(&d, kind, BACK, diags) {
                match d.words.get(1).map(|w| w.parse::<i64>()) {
                    Some(Ok(-1)) => conf.max_keep_alive_queue = Some(None),
                    Some(Ok(n)) if (0..=i64::from(u32::MAX)).contains(&n) => {
                        conf.max_keep_alive_queue = Some(Some(n as u32));
                    }
                    _ => diags.push(d.alert("expects -1 (no limit) or a number of queued requests")),
                }
            }
            d.no_more_than(2, diags);
        }
        "retries" => {
            if applies(&d, kind, BACK, diags) {
                conf.retries = d.integer(1, "a retry count", 0, 100, diags).map(|n| n as u32);
            }
            d.no_more_than(2, diags);
        }
        "clitcpka-cnt" | "clitcpka-idle" | "clitcpka-intvl" => {
            if applies(&d, kind, FRONT, diags) {
                conf.client_probes.parse(&d, diags);
            }
            d.no_more_than(2, diags);
        }
        "srvtcpka-cnt" | "srvtcpka-idle" | "srvtcpka-intvl" => {
            if applies(&d, kind, BACK, diags) {
                conf.server_probes.parse(&d, diags);
            }
            d.no_more_than(2, diags);
        }
        "maxconn" => {
            if applies(&d, kind, FRONT, diags)
                && let Some(n) = d.integer(1, "a connection count", 0, u32::MAX as u64, diags)
            {
                conf.maxconn = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "disabled" | "enabled" => {
            conf.disabled = Some(line.words[0] == "disabled");
            d.no_more_than(1, diags);
        }
        "load-server-state-from-file" => {
            if applies(&d, kind, BACK, diags) {
                match d.word(1, "'global', 'local' or 'none'", diags) {
                    Some("global") => conf.load_server_state = Some(ServerStateFrom::Global),
                    Some("local") => conf.load_server_state = Some(ServerStateFrom::Local),
                    Some("none") => conf.load_server_state = Some(ServerStateFrom::Nowhere),
                    Some(other) => diags.push(d.alert(format!(
                        "expects 'global', 'local' or 'none', not '{other}'"
                    ))),
                    None => {}
                }
            }
            d.no_more_than(2, diags);
        }
        "server-state-file-name" => {
            if applies(&d, kind, BACK, diags) {
                conf.server_state_file_name = match d.words.get(1).map(String::as_str) {
                    None | Some("use-backend-name") => None,
                    Some(name) => Some(name.to_owned()),
                };
            }
            d.no_more_than(2, diags);
        }
        "rate-limit" => {
            if applies(&d, kind, FRONT, diags) {
                match d.word(1, "'sessions'", diags) {
                    Some("sessions") => {
                        conf.session_rate_limit = d
                            .integer(2, "a number of sessions per second", 0, u32::MAX as u64, diags)
                            .map(|n| n as u32);
                    }
                    Some(other) => {
                        diags.push(d.alert(format!("expects 'sessions', not '{other}'")));
                    }
                    None => {}
                }
            }
            d.no_more_than(3, diags);
        }
        "id" => {
            // A number names one proxy: a `defaults` section cannot give it to several.
            if only_in(&d, kind, kind != SectionKind::Defaults, "frontend, backend and listen sections", diags)
                && let Some(n) = d.integer(1, "a positive proxy id", 1, MAX_ID, diags)
            {
                conf.id = Some((n as u32, line.span.clone()));
            }
            d.no_more_than(2, diags);
        }
        "description" => {
            if only_in(&d, kind, kind != SectionKind::Defaults, "frontend, backend and listen sections", diags) {
                if line.words.len() < 2 {
                    diags.push(d.alert("expects a text"));
                } else {
                    conf.description = Some(line.words[1..].join(" "));
                }
            }
        }
        "timeout" => parse_timeout(conf, kind, line, diags),
        "http-reuse" => {
            if applies(&d, kind, BACK, diags) {
                http_options::parse_http_reuse(&mut conf.http, &d, diags);
            }
        }
        "email-alert" => crate::mailers::parse_email_alert(&mut conf.email_alert, line, diags),
        "external-check" => {
            if applies(&d, kind, BACK, diags) {
                checks::parse_external_check(&mut conf.checks, line, diags);
            }
        }
        "http-send-name-header" => {
            if applies(&d, kind, BACK, diags) {
                http_options::parse_send_name_header(&mut conf.http, &d, diags);
            }
        }
        "option" => parse_option(conf, kind, line, 0, true, diags),
        "no" if line.words.get(1).map(String::as_str) == Some("option") => {
            parse_option(conf, kind, line, 1, false, diags)
        }
        // HAProxy 2.6 reads it with a warning and no effect: there is one process.
        "bind-process" => {
            match line.words[1..]
                .iter()
                .find(|set| !matches!(set.as_str(), "1" | "1-1" | "all" | "odd" | "even"))
            {
                Some(set) => diags.push(d.alert(format!(
                    "'{set}' is not a process set: there is one process (1, all, odd or even)"
                ))),
                None => diags.push(d.warning(
                    "has no effect: there is one process (deprecated, HAProxy 2.7 removed it)",
                )),
            }
        }
        "contimeout" | "clitimeout" | "srvtimeout" => diags.push(d.alert(
            "removed from HAProxy in 2.1 and not supported by Sluice; use 'timeout connect|client|server'",
        )),
        other => match removed_rule_keyword(other) {
            Some(replacement) => diags.push(d.alert(format!(
                "removed from HAProxy in 2.1 and not supported by Sluice; {replacement}"
            ))),
            None => diags.push(Diagnostic::not_supported(&line.span, other)),
        },
    }
}

/// The regex-based rule keywords of HAProxy 1.x, removed in 2.1, and what replaces each.
fn removed_rule_keyword(keyword: &str) -> Option<&'static str> {
    Some(match keyword {
        "reqadd" => "use 'http-request add-header'",
        "reqdel" | "reqidel" => "use 'http-request del-header'",
        "reqrep" => {
            "use 'http-request replace-path', 'http-request replace-uri' or 'http-request replace-header'"
        }
        "reqirep" => "use 'http-request replace-header'",
        "reqallow" | "reqiallow" => "use 'http-request allow'",
        "reqdeny" | "reqideny" | "block" => "use 'http-request deny'",
        "reqtarpit" | "reqitarpit" => "use 'http-request tarpit'",
        "reqpass" | "reqipass" => "nothing replaces it: 'http-request' rules go on by default",
        "reqsetbe" | "reqisetbe" => "use 'use_backend' with a condition",
        "rspadd" => "use 'http-response add-header'",
        "rspdel" | "rspidel" => "use 'http-response del-header'",
        "rsprep" | "rspirep" => "use 'http-response replace-header'",
        "rspdeny" | "rspideny" => "use 'http-response deny'",
        _ => return None,
    })
}

fn parse_timeout(conf: &mut ProxyConf, kind: SectionKind, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 2);
    let Some(which) = line.words.get(1) else {
        diags.push(d.alert("expects a timeout name"));
        return;
    };
    let t = &mut conf.timeouts;
    let (slot, allowed) = match which.as_str() {
        "connect" => (&mut t.connect, BACK),
        "client" => (&mut t.client, FRONT),
        "server" => (&mut t.server, BACK),
        "tunnel" => (&mut t.tunnel, BACK),
        "client-fin" => (&mut t.client_fin, FRONT),
        "server-fin" => (&mut t.server_fin, BACK),
        "http-request" => (&mut t.http_request, FRONT),
        "http-keep-alive" => (&mut t.http_keep_alive, FRONT),
        "queue" => (&mut t.queue, BACK),
        "check" => (&mut t.check, BACK),
        "tarpit" => (&mut t.tarpit, BOTH),
        _ => {
            diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone()));
            return;
        }
    };
    if applies(&d, kind, allowed, diags)
        && let Some(value) = d.timeout(2, diags)
    {
        *slot = Some(value);
    }
    d.no_more_than(3, diags);
}

/// `option NAME` (`enable`) or `no option NAME` (`!enable`); `skip` is 1 for the `no` form.
fn parse_option(
    conf: &mut ProxyConf,
    kind: SectionKind,
    line: &Line,
    skip: usize,
    enable: bool,
    diags: &mut Diagnostics,
) {
    let d = Directive::new(line, skip + 2);
    let Some(name) = line.words.get(skip + 1) else {
        diags.push(d.alert("expects an option name"));
        return;
    };
    // Only the options marked "(*)" in configuration.txt §4.1 take `no`: those that choose a
    // format, a check or a header (and `tcpka`) are refused negated, as HAProxy refuses them.
    if !enable && !negatable(name) {
        diags.push(d.alert("cannot be disabled with 'no'"));
        return;
    }
    // `option logasap` and `http-ignore-probes` concern a frontend's clients and logs.
    if matches!(name.as_str(), "logasap" | "http-ignore-probes") && !applies(&d, kind, FRONT, diags)
    {
        return;
    }
    if logging::apply_log_option(&mut conf.log, &d, name, skip + 2, enable, diags) {
        return;
    }
    if http_options::is_http_option(name) {
        let (frontend, backend) = match name.as_str() {
            "accept-unsafe-violations-in-http-request"
            | "accept-invalid-http-request"
            | "idle-close-on-response"
            | "h1-case-adjust-bogus-client"
            | "http-use-proxy-header" => (true, false),
            "accept-unsafe-violations-in-http-response"
            | "accept-invalid-http-response"
            | "http-pretend-keepalive"
            | "forwarded"
            | "abortonclose"
            | "prefer-last-server"
            | "checkcache"
            | "h1-case-adjust-bogus-server" => (false, true),
            _ => (true, true),
        };
        let allowed = Allowed {
            defaults: true,
            frontend,
            backend,
        };
        if applies(&d, kind, allowed, diags) {
            http_options::apply_http_option(&mut conf.http, &d, name, skip + 2, enable, diags);
        }
        return;
    }
    if checks::is_check_option(name) {
        if applies(&d, kind, BACK, diags) {
            checks::parse_check_option(&mut conf.checks, line, diags);
        }
        return;
    }
    // Sluice never holds HTTP data back to fill packets (its sockets have TCP_NODELAY, and
    // MSG_MORE only goes with the end of a closing connection), which is what this option
    // asks of HAProxy: accepted, with nothing to change.
    if name == "http-no-delay" {
        let allowed = Allowed {
            defaults: true,
            frontend: true,
            backend: true,
        };
        applies(&d, kind, allowed, diags);
        d.no_more_than(skip + 2, diags);
        return;
    }
    // Sluice serves HTTP/1 only on clear connections: a client's HTTP/2 preface is refused as
    // an HTTP/1 request, which is what this option asks of HAProxy. Its `no` form, the
    // implicit upgrade, is not supported.
    if name == "disable-h2-upgrade" && enable {
        applies(&d, kind, FRONT, diags);
        d.no_more_than(skip + 2, diags);
        return;
    }
    if name == "log-health-checks" {
        if applies(&d, kind, BACK, diags) {
            conf.checks.log_health_checks = enable;
        }
        d.no_more_than(skip + 2, diags);
        return;
    }
    let (front, back) = match name.as_str() {
        "tcpka" | "nolinger" => (true, true),
        "clitcpka" | "tcp-smart-accept" | "contstats" | "socket-stats" => (true, false),
        "srvtcpka" | "tcp-smart-connect" => (false, true),
        "splice-auto" | "splice-request" | "splice-response" => {
            let slot = match name.as_str() {
                "splice-auto" => &mut conf.splice.auto,
                "splice-request" => &mut conf.splice.request,
                _ => &mut conf.splice.response,
            };
            *slot = Some(enable);
            d.no_more_than(skip + 2, diags);
            return;
        }
        "allbackups" => {
            if applies(&d, kind, BACK, diags) {
                conf.allbackups = Some(enable);
            }
            d.no_more_than(skip + 2, diags);
            return;
        }
        _ => {
            diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone()));
            return;
        }
    };
    let allowed = Allowed {
        defaults: true,
        frontend: front,
        backend: back,
    };
    if applies(&d, kind, allowed, diags) {
        match name.as_str() {
            "tcp-smart-accept" => conf.smart_accept = Some(enable),
            "contstats" => conf.contstats = Some(enable),
            "socket-stats" => conf.socket_stats = Some(enable),
            "tcp-smart-connect" => conf.smart_connect = Some(enable),
            "nolinger" => {
                if kind != SectionKind::Backend {
                    conf.client_nolinger = Some(enable);
                }
                if kind != SectionKind::Frontend {
                    conf.server_nolinger = Some(enable);
                }
            }
            _ => {
                if front && kind != SectionKind::Backend {
                    conf.clitcpka = Some(enable);
                }
                if back && kind != SectionKind::Frontend {
                    conf.srvtcpka = Some(enable);
                }
            }
        }
    }
    d.no_more_than(skip + 2, diags);
}

/// Whether `no option NAME` exists (configuration.txt §4.1, the options marked "(*)"). The
/// options answering false pick a log format, a health check or an added header, or are
/// `tcpka`; a name Sluice does not know answers true, so it is reported as not supported.
fn negatable(name: &str) -> bool {
    !matches!(
        name,
        "external-check"
            | "forwardfor"
            | "http-restrict-req-hdr-names"
            | "httpchk"
            | "httplog"
            | "httpslog"
            | "ldap-check"
            | "mysql-check"
            | "originalto"
            | "pgsql-check"
            | "redis-check"
            | "smtpchk"
            | "ssl-hello-chk"
            | "tcp-check"
            | "tcpka"
            | "tcplog"
    )
}

/// `load-server-state-from-file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerStateFrom {
    /// `none`: the configuration alone.
    Nowhere,
    /// `global`: the lines of this backend in the global `server-state-file`.
    Global,
    /// `local`: a file of the backend's own (`server-state-file-name`).
    Local,
}

/// Parses `bind ADDR[,ADDR…] [options]`.
fn parse_bind(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<BindConf> {
    let text = d.word(1, "an address", diags)?;
    let addrs = match addr::parse_listen_addrs(text) {
        Ok(addrs) => addrs,
        Err(err) => {
            diags.push(d.alert(format!("invalid address '{text}': {err}")));
            return None;
        }
    };
    let mut bind = BindConf {
        span: d.span.clone(),
        addrs,
        name: None,
        backlog: None,
        maxconn: None,
        v4v6: false,
        v6only: false,
        defer_accept: false,
        tfo: false,
        unix_mode: None,
        unix_owner: None,
        unix_group: None,
        accept_proxy: false,
        user_timeout: None,
        mss: None,
        interface: None,
        threads: None,
    };
    let mut ok = true;
    let mut i = 2;
    while i < d.words.len() {
        let option = d.words[i].as_str();
        let value = d.words.get(i + 1).map(String::as_str);
        let mut takes_value = true;
        let mut bad_value = |what: &str| {
            diags.push(d.alert(format!(
                "option '{option}' expects {what}, not '{}'",
                value.unwrap_or("nothing")
            )));
        };
        match option {
            "name" => match value {
                Some(v) => bind.name = Some(v.to_owned()),
                None => {
                    bad_value("a name");
                    ok = false;
                }
            },
            "backlog" | "maxconn" => match value.and_then(|v| v.parse::<u32>().ok()) {
                Some(n) if option == "backlog" && n > 0 => bind.backlog = Some(n),
                Some(n) if option == "maxconn" => bind.maxconn = Some(n),
                _ => {
                    bad_value("a positive number");
                    ok = false;
                }
            },
            "mode" => match value.and_then(|v| u32::from_str_radix(v, 8).ok()) {
                Some(m) if m <= 0o7777 => bind.unix_mode = Some(m),
                _ => {
                    bad_value("an octal mode");
                    ok = false;
                }
            },
            "uid" | "gid" => match value.and_then(|v| v.parse::<u32>().ok()) {
                Some(id) if option == "uid" => bind.unix_owner = Some(Owner::Id(id)),
                Some(id) => bind.unix_group = Some(Owner::Id(id)),
                None => {
                    bad_value("a number");
                    ok = false;
                }
            },
            // Names are looked up when the socket is bound, as for `stats socket`.
            "user" | "group" => match value {
                Some(name) if option == "user" => bind.unix_owner = Some(Owner::Name(name.into())),
                Some(name) => bind.unix_group = Some(Owner::Name(name.into())),
                None => {
                    bad_value("a name");
                    ok = false;
                }
            },
            "tcp-ut" => match value.map(units::parse_timeout) {
                Some(Ok(delay)) => bind.user_timeout = Some(d.duration(delay, diags)),
                _ => {
                    bad_value("a time value");
                    ok = false;
                }
            },
            "mss" => match value.and_then(|v| v.parse::<i32>().ok()) {
                Some(mss) if mss != 0 && (-65535..=65535).contains(&mss) => bind.mss = Some(mss),
                _ => {
                    bad_value("a segment size from 1 to 65535, or a reduction from -1 to -65535");
                    ok = false;
                }
            },
            "interface" => match value {
                Some(name) if !name.is_empty() && name.len() < 16 => {
                    bind.interface = Some(name.to_owned());
                }
                _ => {
                    bad_value("a network interface name");
                    ok = false;
                }
            },
            "thread" => match value.map(crate::cpu_map::ThreadSet::parse) {
                Some(Ok(set)) => bind.threads = Some(set),
                Some(Err(err)) => {
                    diags.push(d.alert(format!("option 'thread': {err}")));
                    ok = false;
                }
                None => {
                    bad_value("a thread set");
                    ok = false;
                }
            },
            // HAProxy 2.6 still reads it, deprecated: there is one process, so `1` (`all`,
            // `odd`) is every thread and `1/<set>` is `thread <set>`.
            "process" => match value {
                Some("1" | "all" | "odd") => diags.push(d.warning(format!(
                    "'process {}' on 'bind' lines is deprecated (HAProxy 2.7 removed it)",
                    value.unwrap_or_default()
                ))),
                Some(v) if v.starts_with("1/") => match crate::cpu_map::ThreadSet::parse(v) {
                    Ok(set) => {
                        diags.push(d.warning(format!(
                            "'process {v}' on 'bind' lines is deprecated (HAProxy 2.7 removed it); use 'thread {}' instead",
                            &v[2..]
                        )));
                        bind.threads = Some(set);
                    }
                    Err(err) => {
                        diags.push(d.alert(format!("option 'process': {err}")));
                        ok = false;
                    }
                },
                _ => {
                    bad_value("1, all or odd (one process), or 1/<thread set>");
                    ok = false;
                }
            },
            "v4v6" | "v6only" | "defer-accept" | "accept-proxy" | "tfo" => {
                takes_value = false;
                match option {
                    "v4v6" => bind.v4v6 = true,
                    "v6only" => bind.v6only = true,
                    "accept-proxy" => bind.accept_proxy = true,
                    "tfo" => bind.tfo = true,
                    _ => bind.defer_accept = true,
                }
            }
            _ => {
                diags.push(Diagnostic::not_supported(d.span, format!("bind {option}")));
                return None;
            }
        }
        i += if takes_value { 2 } else { 1 };
    }
    if bind.v4v6 && bind.v6only {
        diags.push(d.alert("'v4v6' and 'v6only' are mutually exclusive"));
        ok = false;
    }
    ok.then_some(bind)
}

fn parse_server(
    d: &Directive<'_>,
    defaults: &[DefaultServerLine],
    diags: &mut Diagnostics,
) -> Option<ServerConf> {
    let name = d.word(1, "a server name and an address", diags)?;
    let text = d.word(2, "an address", diags)?;
    let addr = match addr::parse_server_addr(text) {
        Ok(addr) => addr,
        Err(err) => {
            diags.push(d.alert(format!(
                "invalid address '{text}' for server '{name}': {err}"
            )));
            return None;
        }
    };
    let mut server = ServerConf::with_defaults(d.span.clone(), name.to_owned(), addr);
    for default in defaults {
        // Already reported when the `default-server` line was read.
        let line = default.line();
        let _ = server_options(&mut server, &Directive::new(&line, 1), 1, &mut Vec::new());
    }
    server_options(&mut server, d, 3, diags)?;
    checks::validate_server(&server.checks, &server.addr, d, diags).then_some(server)
}

/// A server added at run time (`add server B/NAME ADDR [options]` on the stats socket):
/// `words` are NAME, ADDR and the options, read like a `server` line without `default-server`
/// (management.txt "add server"). What a dynamic server cannot have is refused: `cookie` (as
/// in HAProxy), and health checks, agents and `track`, which Sluice starts only with the
/// configuration. The `id` is left for the backend to complete.
pub fn parse_dynamic_server(words: &[String]) -> Result<ServerConf, String> {
    if words.len() < 2 {
        return Err("'server' expects <name> and <addr>[:<port>] as arguments.".to_owned());
    }
    let line = Line {
        span: Span::new(&Arc::from("stats socket"), 0),
        words: std::iter::once("server".to_owned())
            .chain(words.iter().cloned())
            .collect(),
    };
    let mut diags = Diagnostics::new();
    let parsed = parse_server(&Directive::new(&line, 1), &[], &mut diags);
    let Some(mut server) = parsed.filter(|_| diags.is_empty()) else {
        let message = diags
            .into_iter()
            .map(|d| d.message)
            .next()
            .unwrap_or_else(|| "invalid server line".to_owned());
        return Err(format!("{message}."));
    };
    // HAProxy refuses these two for dynamic servers, with this message.
    let not_dynamic = [
        (server.cookie.is_some(), "cookie"),
        (server.max_reuse.is_some(), "max-reuse"),
    ];
    if let Some((_, keyword)) = not_dynamic.iter().find(|(set, _)| *set) {
        return Err(format!(
            "'{keyword}' option is not accepted for dynamic server"
        ));
    }
    let c = &server.checks;
    let refused = [
        (c.check, "check"),
        (c.agent, "agent-check"),
        (c.track.is_some(), "track"),
        (c.observe.is_some(), "observe"),
    ];
    if let Some((_, keyword)) = refused.iter().find(|(set, _)| *set) {
        return Err(format!(
            "'{keyword}' is not supported by Sluice for dynamic servers"
        ));
    }
    // HAProxy's reading of `minconn`, as for configured servers.
    if let Some(min) = server.minconn
        && min > server.maxconn.unwrap_or(0)
    {
        server.maxconn = Some(min);
    }
    Ok(server)
}

/// The most servers one `server-template` line may declare: a typo in the count must not
/// exhaust memory.
pub const MAX_TEMPLATE_SERVERS: u32 = 65536;

/// `server-template PREFIX NUM|FIRST-LAST ADDR[:PORT] [options]`: the servers PREFIX<n> for n
/// in 1..=NUM (or FIRST..=LAST), all with the same address and options. The line is parsed
/// once, as its first server, so a mistake is reported once; an `id` goes to the first server
/// only, the others taking free ids, as in HAProxy.
fn parse_server_template(
    line: &Line,
    defaults: &[DefaultServerLine],
    diags: &mut Diagnostics,
) -> Vec<ServerConf> {
    let d = Directive::new(line, 1);
    let Some(prefix) = d.word(1, "a name prefix, a number or range and an address", diags) else {
        return Vec::new();
    };
    let Some(count) = d.word(2, "a number or a range of numbers", diags) else {
        return Vec::new();
    };
    let range = match count.split_once('-') {
        Some((low, high)) => low.parse::<u32>().ok().zip(high.parse::<u32>().ok()),
        None => count.parse::<u32>().ok().map(|n| (1, n)),
    };
    let Some((low, high)) = range.filter(|&(low, high)| low >= 1 && low <= high) else {
        diags.push(d.alert(format!(
            "expects a number or a range FIRST-LAST of positive numbers, not '{count}'"
        )));
        return Vec::new();
    };
    if high - low >= MAX_TEMPLATE_SERVERS {
        diags.push(d.alert(format!(
            "declares {} servers; Sluice accepts at most {MAX_TEMPLATE_SERVERS} per template",
            u64::from(high - low) + 1
        )));
        return Vec::new();
    }
    if line.words.get(4).map(String::as_str) == Some("from") {
        diags.push(Diagnostic::not_supported(
            &line.span,
            "server-template from",
        ));
        return Vec::new();
    }
    let mut words = vec![line.words[0].clone(), format!("{prefix}{low}")];
    words.extend(line.words.iter().skip(3).cloned());
    let first_line = Line {
        span: line.span.clone(),
        words,
    };
    let Some(first) = parse_server(&Directive::new(&first_line, 1), defaults, diags) else {
        return Vec::new();
    };
    (low..=high)
        .map(|n| ServerConf {
            name: format!("{prefix}{n}"),
            id: if n == low { first.id } else { None },
            ..first.clone()
        })
        .collect()
}

/// `default-server [options]`: checked now against a placeholder server.
fn parse_default_server(d: &Directive<'_>, diags: &mut Diagnostics) -> bool {
    let mut scratch = ServerConf::with_defaults(
        d.span.clone(),
        String::new(),
        ServerAddr::Unix(String::new()),
    );
    server_options(&mut scratch, d, 1, diags).is_some()
}

/// Applies the server options of `d` from word `first` on.
fn server_options(
    server: &mut ServerConf,
    d: &Directive<'_>,
    first: usize,
    diags: &mut Diagnostics,
) -> Option<()> {
    let mut i = first;
    while i < d.words.len() {
        match d.words[i].as_str() {
            "weight" => {
                server.weight = d.integer(i + 1, "a weight", 0, 256, diags)? as u32;
                i += 1;
            }
            "maxconn" | "maxqueue" | "minconn" => {
                let what = "a number of connections";
                let n = d.integer(i + 1, what, 0, u64::from(u32::MAX), diags)? as u32;
                let slot = match d.words[i].as_str() {
                    "maxconn" => &mut server.maxconn,
                    "minconn" => &mut server.minconn,
                    _ => &mut server.maxqueue,
                };
                *slot = (n > 0).then_some(n);
                i += 1;
            }
            "pool-max-conn" | "max-reuse" => {
                let keyword = d.words[i].as_str();
                let what = if keyword == "max-reuse" {
                    "a number of reuses"
                } else {
                    "a connection count"
                };
                let word = d.word(i + 1, what, diags)?;
                let limit = match word.parse::<i64>() {
                    Ok(-1) => None,
                    Ok(n) if (0..=i64::from(u32::MAX)).contains(&n) => Some(n as u32),
                    _ => {
                        diags.push(
                            d.alert(format!("'{keyword}' expects -1 or {what}, not '{word}'")),
                        );
                        return None;
                    }
                };
                if keyword == "max-reuse" {
                    server.max_reuse = limit;
                } else {
                    server.pool_max_conn = limit;
                }
                i += 1;
            }
            "pool-low-conn" => {
                let max = u64::from(u32::MAX);
                server.pool_low_conn =
                    d.integer(i + 1, "a connection count", 0, max, diags)? as u32;
                i += 1;
            }
            "slowstart" => {
                let t = d.timeout(i + 1, diags)?;
                server.slowstart = (!t.is_zero()).then_some(t);
                i += 1;
            }
            "source" => {
                server.source = Some(crate::source::parse_source(d, i + 1, diags)?);
                i += 1;
            }
            "redir" => {
                let prefix = d.word(i + 1, "a location prefix", diags)?;
                server.redir = Some(prefix.to_owned());
                i += 1;
            }
            "pool-purge-delay" => {
                server.pool_purge_delay = d.timeout(i + 1, diags)?;
                i += 1;
            }
            "disabled" => server.disabled = true,
            "enabled" => server.disabled = false,
            "backup" => server.backup = true,
            "send-proxy" => server.send_proxy_v1 = true,
            "no-send-proxy" => server.send_proxy_v1 = false,
            "send-proxy-v2" => server.send_proxy_v2 = true,
            "no-send-proxy-v2" => server.send_proxy_v2 = false,
            "non-stick" => server.non_stick = true,
            "tcp-ut" => {
                server.user_timeout = Some(d.timeout(i + 1, diags)?);
                i += 1;
            }
            "stick" => server.non_stick = false,
            "send-proxy-v2-ssl" | "send-proxy-v2-ssl-cn" => {
                server.send_proxy_v2 = true;
                server.proxy_v2.insert(ProxyV2Options::SSL);
                if d.words[i] == "send-proxy-v2-ssl-cn" {
                    server.proxy_v2.insert(ProxyV2Options::CERT_CN);
                }
            }
            // As in HAProxy 2.6: the version and the SSL options go, the others stay (and,
            // with no `send-proxy-v2` left, make a v1 line).
            "no-send-proxy-v2-ssl" | "no-send-proxy-v2-ssl-cn" => {
                server.send_proxy_v2 = false;
                server.proxy_v2.remove(ProxyV2Options::SSL);
                if d.words[i] == "no-send-proxy-v2-ssl-cn" {
                    server.proxy_v2.remove(ProxyV2Options::CERT_CN);
                }
            }
            "proxy-v2-options" => {
                let what = "a list of PROXY protocol v2 options after 'proxy-v2-options'";
                let list = d.word(i + 1, what, diags)?;
                for name in list.split(',') {
                    let Some(option) = ProxyV2Options::named(name) else {
                        diags.push(d.alert(format!(
                            "'proxy-v2-options': unknown option '{name}' (expected ssl, cert-cn, ssl-cipher, cert-sig, cert-key, authority, crc32c or unique-id)"
                        )));
                        return None;
                    };
                    server.proxy_v2.insert(option);
                }
                i += 1;
            }
            "cookie" => {
                server.cookie = Some(cookie::server_cookie(d, i + 1, diags)?);
                i += 1;
            }
            "id" => {
                // One number per server: HAProxy refuses it on `default-server` lines too.
                if d.words[0] == "default-server" {
                    diags.push(d.alert("'id' is not allowed on a 'default-server' line"));
                    return None;
                }
                server.id =
                    Some(d.integer(i + 1, "a positive server id", 1, MAX_ID, diags)? as u32);
                i += 1;
            }
            // Settings of the DNS resolution `resolvers` sections run, which Sluice does not
            // have: a server's name is resolved at start-up (`init-addr`), and HAProxy 2.6
            // does the same without `resolvers`, whatever these say.
            "resolve-prefer" | "resolve-opts" | "resolve-net" => {
                let option = d.words[i].as_str();
                let value = d.word(i + 1, &format!("a value after '{option}'"), diags)?;
                let (valid, expected) = match option {
                    "resolve-prefer" => (matches!(value, "ipv4" | "ipv6"), "'ipv4' or 'ipv6'"),
                    "resolve-opts" => (
                        value.split(',').all(|o| {
                            matches!(o, "allow-dup-ip" | "ignore-weight" | "prevent-dup-ip")
                        }),
                        "allow-dup-ip, ignore-weight or prevent-dup-ip, comma-separated",
                    ),
                    _ => (
                        value.split(',').all(|n| n.parse::<ipnet::IpNet>().is_ok()),
                        "networks, comma-separated",
                    ),
                };
                if !valid {
                    diags.push(d.alert(format!("'{option}' expects {expected}, not '{value}'")));
                    return None;
                }
                diags.push(d.warning(format!(
                    "'{option}' has no effect without 'resolvers' (not supported by Sluice): the \
                     server's name is resolved once, at start-up, as HAProxy does without them"
                )));
                i += 1;
            }
            other => match checks::parse_server_option(&mut server.checks, d, i, diags) {
                ServerOption::Consumed(extra) => i += extra,
                ServerOption::Failed => return None,
                ServerOption::Unknown => {
                    diags.push(Diagnostic::not_supported(
                        d.span,
                        format!("{} {other}", d.words[0]),
                    ));
                    return None;
                }
            },
        }
        i += 1;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direction_s_own_option_wins_over_splice_auto() {
        let auto = SpliceOptions {
            auto: Some(true),
            request: Some(false),
            response: None,
        };
        assert_eq!(auto.request_mode(), SpliceMode::Never);
        assert_eq!(auto.response_mode(), SpliceMode::Auto);
        let explicit = SpliceOptions {
            auto: None,
            request: None,
            response: Some(true),
        };
        assert_eq!(explicit.request_mode(), SpliceMode::Never);
        assert_eq!(explicit.response_mode(), SpliceMode::Always);
        assert_eq!(SpliceOptions::default().request_mode(), SpliceMode::Never);
    }
}
