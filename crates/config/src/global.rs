//! The `global` section's keywords (configuration.txt §3), parsed into [`GlobalConf`].
//!
//! `global` may appear several times; every occurrence updates the same [`GlobalConf`], later
//! lines overriding earlier ones as in HAProxy. Keywords Sluice does not implement are
//! rejected as "not supported" so a green `sluice -c` can be trusted.

use crate::addr::{self, ListenAddr};
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::logging::{self, LogTarget};
use crate::preprocess::Line;
use sluice_http::encode::HeaderCase;
use std::time::Duration;

/// Who a process or socket file belongs to: a name to look up or a numeric id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A user or group name, looked up in the system databases at start-up.
    Name(String),
    /// A numeric uid or gid.
    Id(u32),
}

/// The access level of a stats socket (management.txt §9.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CliLevel {
    /// Read-only commands that reveal nothing sensitive.
    User,
    /// Read-only commands plus a few harmless changes.
    Operator,
    /// Every command.
    Admin,
}

impl StatsSocketConf {
    /// Its address as HAProxy names a CLI socket (`show cli sockets`, `HAPROXY_CLI`):
    /// `unix@PATH`, `abns@NAME`, `ipv4@IP:PORT`, `ipv6@[IP]:PORT`, `fd@N`.
    pub fn address_text(&self) -> String {
        use crate::addr::{Family, Host};
        use std::net::IpAddr;
        match &self.addr {
            ListenAddr::Unix(path) => format!("unix@{path}"),
            ListenAddr::Abstract(name) => name.to_string(),
            ListenAddr::Fd(fd) => format!("fd@{fd}"),
            ListenAddr::Inet { host, ports, .. } => {
                let port = ports.start();
                match host {
                    Host::Ip(IpAddr::V4(ip)) => format!("ipv4@{ip}:{port}"),
                    Host::Ip(IpAddr::V6(ip)) => format!("ipv6@[{ip}]:{port}"),
                    Host::Any(Family::V6) => format!("ipv6@[::]:{port}"),
                    Host::Any(_) => format!("ipv4@0.0.0.0:{port}"),
                    Host::Name(name) => format!("ipv4@{name}:{port}"),
                }
            }
        }
    }
}

/// One `stats socket` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSocketConf {
    /// Where it was declared.
    pub span: Span,
    /// The address: a unix path, `fd@N` or an inet address.
    pub addr: ListenAddr,
    /// Access level (`level`), `operator` unless set.
    pub level: CliLevel,
    /// Permissions of a unix socket file (`mode 600`).
    pub mode: Option<u32>,
    /// Owner of a unix socket file.
    pub uid: Option<Owner>,
    /// Group of a unix socket file.
    pub gid: Option<Owner>,
    /// `expose-fd listeners`: a new process started with `-x` may take the listening sockets
    /// through it (`_getsocks`).
    pub expose_listeners: bool,
}

/// `close-spread-time`: how a soft stop ends kept-alive client connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseSpread {
    /// Over this window: the idle ones close at moments spread over it, and an answer sent
    /// during it ends its connection with a chance that grows from none to certain.
    Window(Duration),
    /// `infinite`: not at all; they end at their own timeouts.
    Infinite,
}

/// Everything the `global` sections say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalConf {
    /// `maxconn`: process-wide concurrent connection limit.
    pub maxconn: Option<u32>,
    /// `nbthread`: number of event-loop threads.
    pub nbthread: Option<u32>,
    /// `daemon`: detach into the background.
    pub daemon: bool,
    /// `master-worker`: run as a master process supervising workers (as `-W`).
    pub master_worker: bool,
    /// `expose-experimental-directives`: allows HAProxy's experimental keywords
    /// (`normalize-uri`).
    pub expose_experimental: bool,
    /// `pidfile`: where to write the pid.
    pub pidfile: Option<String>,
    /// `user`/`uid`: identity to switch to after binding.
    pub user: Option<Owner>,
    /// `group`/`gid`: group to switch to after binding.
    pub group: Option<Owner>,
    /// `chroot`: directory to jail into after binding.
    pub chroot: Option<String>,
    /// `ulimit-n`: file-descriptor limit to set.
    pub ulimit_n: Option<u64>,
    /// `fd-hard-limit`: the most file descriptors the process gives itself when neither
    /// `ulimit-n` nor `maxconn` says how many (HAProxy's 1048576 without it).
    pub fd_hard_limit: Option<u64>,
    /// `stats socket` lines, in order.
    pub stats_sockets: Vec<StatsSocketConf>,
    /// `stats timeout`: idle time after which a CLI connection is closed.
    pub stats_timeout: Option<Duration>,
    /// `stats maxconn`: concurrent CLI connections allowed.
    pub stats_maxconn: Option<u32>,
    /// `hard-stop-after`: how long a soft stop may take at most.
    pub hard_stop_after: Option<Duration>,
    /// `server-state-file`: the global state file (`load-server-state-from-file global`).
    pub server_state_file: Option<String>,
    /// `server-state-base`: the directory of relative state file names.
    pub server_state_base: Option<String>,
    /// `grace`: how long after SIGUSR1 the listeners keep accepting, `stopping` already
    /// true, before the soft stop proper.
    pub grace: Option<Duration>,
    /// `close-spread-time`: how a soft stop ends kept-alive client connections (unset:
    /// the idle ones at once, the others after their next answer).
    pub close_spread_time: Option<CloseSpread>,
    /// `quiet`: no start-up messages.
    pub quiet: bool,
    /// `zero-warning`: warnings are fatal.
    pub zero_warning: bool,
    /// `node`: this process's name in `show info`.
    pub node: Option<String>,
    /// `log-send-hostname [name]`: the host name the log headers carry (`Some(None)`: the
    /// system's).
    pub log_send_hostname: Option<Option<String>>,
    /// `description`: free text shown by `show info`.
    pub description: Option<String>,
    /// `tune.bufsize`: size of each I/O buffer.
    pub bufsize: Option<u32>,
    /// `tune.maxrewrite`: part of a buffer kept free for header rewrites.
    pub maxrewrite: Option<u32>,
    /// `tune.http.maxhdr`: the most lines (start line included) a received head may have.
    pub http_maxhdr: Option<u16>,
    /// `tune.http.logurilen`: how much of the request line logs keep.
    pub http_logurilen: Option<u32>,
    /// `mworker-max-reloads`: an old worker still running after more reloads than this is
    /// stopped (SIGTERM).
    pub mworker_max_reloads: Option<u32>,
    /// `tune.http.cookielen`: the longest cookie `capture cookie` keeps, whatever its `len`.
    pub http_cookielen: Option<u32>,
    /// `tune.maxaccept`: connections a listener accepts in a row before other work runs;
    /// -1 for no limit.
    pub maxaccept: Option<i64>,
    /// `tune.maxpollevents`: events an event loop takes from one poll.
    pub maxpollevents: Option<u32>,
    /// `unix-bind prefix`: put before the path of every unix socket a `bind` line declares.
    pub unix_bind_prefix: Option<String>,
    /// `unix-bind mode`: the permissions of those sockets when their `bind` line sets none.
    pub unix_bind_mode: Option<u32>,
    /// `cpu-map` lines, in order (`crate::cpu_map::cpus_of` says what they give a thread).
    pub cpu_maps: Vec<crate::cpu_map::CpuMap>,
    /// `tune.rcvbuf.client`, `tune.sndbuf.client`: the kernel buffers of client connections.
    pub client_buffers: SocketBuffers,
    /// `tune.rcvbuf.server`, `tune.sndbuf.server`: the kernel buffers of server connections.
    pub server_buffers: SocketBuffers,
    /// `log` targets of the `global` section (used by proxies with `log global`).
    pub logs: Vec<LogTarget>,
    /// `log-tag`: the syslog tag (the program's name by default).
    pub log_tag: Option<String>,
    /// `tune.pipesize`: size of the kernel pipes used by splicing.
    pub pipesize: Option<usize>,
    /// `maxpipes`: pipes the process may hold at once.
    pub maxpipes: Option<usize>,
    /// `maxconnrate`: accepted connections per second, process-wide (`set rate-limit
    /// connections global` changes it).
    pub maxconnrate: Option<u32>,
    /// `maxsessrate`: new sessions per second, process-wide (`set rate-limit sessions
    /// global`).
    pub maxsessrate: Option<u32>,
    /// `nosplice`: never use `splice(2)`, whatever the proxies say.
    pub nosplice: bool,
    /// `busy-polling`: the event loops never sleep in the poller.
    pub busy_polling: bool,
    /// `h1-accept-payload-with-any-method`: an HTTP/1.0 GET, HEAD or DELETE request may have
    /// a body (HAProxy refuses it with 413 by default: old servers ignore its framing).
    pub h1_any_method_payload: bool,
    /// `no-memory-trimming`: the event loops never ask the C allocator to return its free
    /// pages (`malloc_trim`), whose scan of a fragmented heap may hold a loop for long.
    pub no_memory_trimming: bool,
    /// `pp2-never-send-local`: health checks to a `send-proxy-v2` server send a PROXY command
    /// with their own addresses, as HAProxy did before 2.2, instead of a LOCAL command.
    pub pp2_never_send_local: bool,
    /// `noreuseport` (or `-dR`): listening sockets are bound without `SO_REUSEPORT`, so the
    /// event loops share one socket per address and a process replacing this one (`-sf`)
    /// must have it stop listening first (SIGTTOU) to bind the address.
    pub noreuseport: bool,
    /// `no strict-limits`: start even when the descriptor limit cannot be raised to what
    /// `maxconn` or `ulimit-n` asks (strict, the default, refuses to start).
    pub lax_limits: bool,
    /// `spread-checks`: random jitter added to check intervals, in percent (0 to 50).
    pub spread_checks: Option<u32>,
    /// `max-spread-checks`: the longest time over which the first checks are spread.
    pub max_spread_checks: Option<Duration>,
    /// `maxcomprate`: kilobytes per second the compressors may take in (0: no limit).
    pub maxcomprate: Option<u32>,
    /// `maxcompcpuusage`: the CPU percentage above which compression backs off (100: none).
    pub maxcompcpuusage: Option<u32>,
    /// `maxzlibmem`: megabytes the deflate states may use (0: no limit).
    pub maxzlibmem: Option<u32>,
    /// `tune.comp.maxlevel`: the compression level, 1 (fastest, the default) to 9.
    pub comp_maxlevel: Option<u32>,
    /// `external-check [preserve-env]`: backends may check their servers with programs;
    /// `Some(true)` when these keep the process's environment.
    pub external_check: Option<bool>,
    /// `set-dumpable`: core dumps as large as the hard limits allow, even after a change of
    /// user.
    pub set_dumpable: bool,
    /// `insecure-fork-wanted`: the running process may create processes (HAProxy, and
    /// Sluice, forbid it once every thread started).
    pub insecure_fork: bool,
    /// `insecure-setuid-wanted`: programs the process would run may gain privileges (HAProxy,
    /// and Sluice, set `no_new_privs`).
    pub insecure_setuid: bool,
    /// `h1-case-adjust` lines: field names written with another case to HTTP/1 peers of
    /// proxies that ask for it (`option h1-case-adjust-bogus-client|server`).
    pub header_case: HeaderCase,
    /// `h1-case-adjust-file` (the last one counts), with the line naming it: read once the
    /// whole configuration is, its entries added to [`GlobalConf::header_case`].
    pub header_case_file: Option<(String, Span)>,
}

/// HAProxy's default `tune.bufsize`.
pub const DEFAULT_BUFSIZE: u32 = 16384;
/// HAProxy's default `tune.maxrewrite`.
pub const DEFAULT_MAXREWRITE: u32 = 1024;
/// HAProxy's default `tune.http.maxhdr`.
pub const DEFAULT_HTTP_MAXHDR: u16 = 101;
/// HAProxy's default `tune.http.cookielen`.
const DEFAULT_COOKIELEN: u32 = 63;

/// HAProxy's default `tune.http.logurilen`.
const DEFAULT_LOGURILEN: u32 = 1024;

/// HAProxy's default `tune.maxaccept`.
pub const DEFAULT_MAXACCEPT: u32 = 4;
/// Sluice's default `tune.maxpollevents` (HAProxy's is 200 on Linux; its manual says the
/// default is adapted to the system, and that lower values trade bandwidth for latency).
///
/// The events of one poll make one round of the event loop (`sluice_proxy::batch`): every
/// session woken reads, then each sends. With 2,000 busy kept-alive connections, 200 events
/// put 200 sessions' state and buffers between a session's read and its send, more than a
/// core's cache holds: the sends copied cold bytes, and the round ran past tokio's budget of
/// 61 task polls per turn, so the next poll's sessions read before this one's sent, and the
/// rounds merged. With 16: 38-40k requests/s against 33-35k (HAProxy: 38k with either), and
/// the same rates as 200 with 50 or 500 connections (BENCHMARKS.md, twenty-eighth session).
pub const DEFAULT_MAXPOLLEVENTS: u32 = 16;

impl GlobalConf {
    /// How many connections a listener accepts in a row before letting other work run;
    /// `None` for no limit (`tune.maxaccept -1`). 0 counts as 1, as in HAProxy.
    pub fn maxaccept(&self) -> Option<u32> {
        match self.maxaccept {
            None => Some(DEFAULT_MAXACCEPT),
            Some(-1) => None,
            Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX).max(1)),
        }
    }

    /// The buffer size in force.
    pub fn bufsize(&self) -> u32 {
        self.bufsize.unwrap_or(DEFAULT_BUFSIZE)
    }

    /// The most lines a received HTTP head may have, start line included
    /// (`tune.http.maxhdr`).
    pub fn http_maxhdr(&self) -> u16 {
        self.http_maxhdr.unwrap_or(DEFAULT_HTTP_MAXHDR)
    }

    /// The events an event loop takes from one poll (`tune.maxpollevents`).
    pub fn maxpollevents(&self) -> u32 {
        self.maxpollevents.unwrap_or(DEFAULT_MAXPOLLEVENTS)
    }

    /// The request line as logs show it: its first `tune.http.logurilen` bytes (1024 by
    /// default), as HAProxy 2.6 keeps it, whatever the log's format.
    pub fn logged_request_line<'l>(&self, line: &'l [u8]) -> &'l [u8] {
        &line[..line.len().min(self.logged_request_line_len())]
    }

    /// The longest cookie a capture keeps (`tune.http.cookielen`, 63 by default as in
    /// HAProxy): a `capture cookie ... len` above it is cut to it.
    pub fn http_cookielen(&self) -> usize {
        self.http_cookielen.unwrap_or(DEFAULT_COOKIELEN) as usize
    }

    /// How many bytes of a request line logs keep (`tune.http.logurilen`).
    pub fn logged_request_line_len(&self) -> usize {
        self.http_logurilen.unwrap_or(DEFAULT_LOGURILEN) as usize
    }

    /// The rewrite reserve in force (never more than half a buffer, as HAProxy enforces).
    pub fn maxrewrite(&self) -> u32 {
        self.maxrewrite
            .unwrap_or(DEFAULT_MAXREWRITE)
            .min(self.bufsize() / 2)
    }
}

/// The kernel's receive and send buffer sizes for one side's connections (SO_RCVBUF,
/// SO_SNDBUF), where the configuration forces them; the system's otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketBuffers {
    /// Receive buffer, bytes.
    pub receive: Option<u32>,
    /// Send buffer, bytes.
    pub send: Option<u32>,
}

/// `unix-bind [prefix P] [mode M]`: defaults for the unix sockets of `bind` lines (not the
/// `stats socket`, as in HAProxy). The owner settings (`user`, `uid`, `group`, `gid`) are not
/// supported, as on `bind` lines.
fn parse_unix_bind(conf: &mut GlobalConf, d: &Directive<'_>, diags: &mut Diagnostics) {
    let mut i = 1;
    while let Some(word) = d.words.get(i) {
        let value = d.words.get(i + 1).map(String::as_str);
        match (word.as_str(), value) {
            ("prefix", Some(prefix)) => conf.unix_bind_prefix = Some(prefix.to_owned()),
            ("mode", Some(mode)) => match u32::from_str_radix(mode, 8) {
                Ok(mode) if mode <= 0o7777 => conf.unix_bind_mode = Some(mode),
                _ => {
                    diags.push(d.alert(format!("invalid mode '{mode}' (an octal number)")));
                    return;
                }
            },
            ("user" | "uid" | "group" | "gid", _) => {
                diags.push(d.alert(format!("'{word}' is not supported by Sluice")));
                return;
            }
            ("prefix" | "mode", None) => {
                diags.push(d.alert(format!("'{word}' expects a value")));
                return;
            }
            (other, _) => {
                diags.push(d.alert(format!(
                    "unknown option '{other}' (expects 'prefix' or 'mode')"
                )));
                return;
            }
        }
        i += 2;
    }
}

/// What the TLS defaults of the `global` section are told.
const NO_TLS: &str =
    "has no effect: Sluice does not terminate TLS ('ssl' on bind and server lines is refused)";

/// The warning of the HTTP client's settings, which nothing in Sluice would use.
const NO_HTTP_CLIENT: &str = "has no effect: Sluice has no HTTP client (HAProxy's serves Lua scripts and the CLI's \
     'httpclient' command)";

/// A keyword taking one of `values`, which has no effect here: `warning` says why.
fn choice(d: &Directive<'_>, values: &[&str], warning: &str, diags: &mut Diagnostics) {
    let expected = values
        .iter()
        .map(|v| format!("'{v}'"))
        .collect::<Vec<_>>()
        .join(" or ");
    match d.word(1, &expected, diags) {
        Some(value) if values.contains(&value) && d.no_more_than(2, diags) => {
            diags.push(d.warning(warning));
        }
        Some(value) if values.contains(&value) => {}
        Some(other) => diags.push(d.alert(format!("expects {expected}, not '{other}'"))),
        None => {}
    }
}

/// The warning of the HTTP/2 tunables, which a Sluice speaking HTTP/1 only cannot use.
const NO_H2: &str = "has no effect: Sluice speaks HTTP/1 only (an HTTP/2 preface is refused)";

/// Checks the words of `ssl-default-bind-options` / `ssl-default-server-options`: the
/// options configuration.txt lists for them, `ssl-min-ver` and `ssl-max-ver` with a version.
fn tls_options(d: &Directive<'_>, diags: &mut Diagnostics) -> bool {
    const VERSIONS: [&str; 5] = ["SSLv3", "TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"];
    const FLAGS: [&str; 13] = [
        "no-sslv3",
        "no-tlsv10",
        "no-tlsv11",
        "no-tlsv12",
        "no-tlsv13",
        "force-sslv3",
        "force-tlsv10",
        "force-tlsv11",
        "force-tlsv12",
        "force-tlsv13",
        "no-tls-tickets",
        "prefer-client-ciphers",
        "allow-0rtt",
    ];
    let words = &d.words[1..];
    if words.is_empty() {
        diags.push(d.alert("expects at least one option"));
        return false;
    }
    let mut i = 0;
    while let Some(word) = words.get(i) {
        match word.as_str() {
            "ssl-min-ver" | "ssl-max-ver" => {
                let version = words.get(i + 1).map(String::as_str);
                if !version.is_some_and(|v| VERSIONS.contains(&v)) {
                    diags.push(d.alert(format!(
                        "'{word}' expects one of {}, not '{}'",
                        VERSIONS.join(", "),
                        version.unwrap_or("")
                    )));
                    return false;
                }
                i += 2;
            }
            flag if FLAGS.contains(&flag) => i += 1,
            other => {
                diags.push(d.alert(format!("unknown option '{other}'")));
                return false;
            }
        }
    }
    true
}

/// Applies one line of a `global` section to `conf`.
pub fn parse_global_line(conf: &mut GlobalConf, line: &Line, diags: &mut Diagnostics) {
    let Some(first) = line.words.first() else {
        return;
    };
    let d = Directive::new(line, 1);
    match first.as_str() {
        "maxconn" => {
            if let Some(n) = d.integer(1, "a connection count", 1, u32::MAX as u64, diags) {
                conf.maxconn = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "unix-bind" => parse_unix_bind(conf, &d, diags),
        "h1-case-adjust" => {
            if let Some(from) = d.word(1, "<from> and <to>", diags)
                && let Some(to) = d.word(2, "<to>", diags)
                && d.no_more_than(3, diags)
                && let Err(message) = conf.header_case.add(from, to)
            {
                diags.push(d.alert(message));
            }
        }
        "h1-case-adjust-file" => {
            if let Some(path) = d.word(1, "a file name", diags)
                && d.no_more_than(2, diags)
            {
                conf.header_case_file = Some((path.to_owned(), line.span.clone()));
            }
        }
        "cpu-map" => match crate::cpu_map::parse(&line.words[1..]) {
            Ok(Some(map)) => conf.cpu_maps.push(map),
            Ok(None) => diags.push(
                d.warning("names no thread of thread group 1, the only one Sluice runs: ignored"),
            ),
            Err(message) => diags.push(d.alert(message)),
        },
        "nbthread" => {
            if let Some(n) = d.integer(1, "a thread count", 1, 4096, diags) {
                conf.nbthread = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        // Sluice runs its threads as one group, which is what `thread-groups 1` asks.
        "thread-groups" => match line.words.get(1).map(String::as_str) {
            Some("1") => {
                d.no_more_than(2, diags);
            }
            Some(n) if n.parse::<u32>().is_ok_and(|n| (2..=16).contains(&n)) => diags.push(
                Diagnostic::not_supported(&line.span, "thread-groups above 1".to_owned()),
            ),
            _ => diags.push(d.alert("expects a number of thread groups from 1 to 16")),
        },
        "daemon" => {
            conf.daemon = d.no_more_than(1, diags);
        }
        "master-worker" => match line.words.get(1).map(String::as_str) {
            None => conf.master_worker = true,
            Some("no-exit-on-failure") => diags.push(Diagnostic::not_supported(
                &line.span,
                "master-worker no-exit-on-failure",
            )),
            Some(_) => {
                d.no_more_than(1, diags);
            }
        },
        "expose-experimental-directives" => {
            conf.expose_experimental = d.no_more_than(1, diags);
        }
        "quiet" => {
            conf.quiet = d.no_more_than(1, diags);
        }
        "zero-warning" => {
            conf.zero_warning = d.no_more_than(1, diags);
        }
        "pidfile" => {
            conf.pidfile = d.word(1, "a file name", diags).map(str::to_owned);
            d.no_more_than(2, diags);
        }
        // TLS defaults, as Debian's stock haproxy.cfg sets them. They configure only `ssl`
        // binds and servers, which Sluice refuses, so they cannot change anything here: they
        // are checked and said to have no effect, rather than refused, so that a
        // configuration without TLS passes as it does with HAProxy.
        "ca-base"
        | "crt-base"
        | "ssl-default-bind-ciphers"
        | "ssl-default-bind-ciphersuites"
        | "ssl-default-server-ciphers"
        | "ssl-default-server-ciphersuites"
        | "ssl-default-bind-curves"
        | "ssl-provider-path" => {
            if d.word(1, "an argument", diags).is_some() && d.no_more_than(2, diags) {
                diags.push(d.warning(NO_TLS));
            }
        }
        "ssl-default-bind-options" | "ssl-default-server-options" => {
            if tls_options(&d, diags) {
                diags.push(d.warning(NO_TLS));
            }
        }
        // More TLS settings of the global section (certificates, caches, handshakes): the
        // same reasoning, checked for their argument's form.
        "ssl-dh-param-file" | "issuers-chain-path" => {
            if d.word(1, "a path", diags).is_some() && d.no_more_than(2, diags) {
                diags.push(d.warning(NO_TLS));
            }
        }
        "ssl-server-verify" => choice(&d, &["none", "required"], NO_TLS, diags),
        "tune.ssl.default-dh-param"
        | "tune.ssl.cachesize"
        | "tune.ssl.maxrecord"
        | "tune.ssl.ssl-ctx-cache-size"
        | "tune.ssl.capture-buffer-size"
        | "tune.ssl.capture-cipherlist-size" => {
            if d.integer(1, "a number", 0, u32::MAX as u64, diags)
                .is_some()
                && d.no_more_than(2, diags)
            {
                diags.push(d.warning(NO_TLS));
            }
        }
        // HTTP/2 settings: like the TLS ones, they configure what Sluice does not do, so
        // they are checked and said to have no effect.
        "tune.h2.header-table-size"
        | "tune.h2.initial-window-size"
        | "tune.h2.max-concurrent-streams"
        | "tune.h2.max-frame-size" => {
            if d.integer(1, "a number", 0, u32::MAX as u64, diags)
                .is_some()
                && d.no_more_than(2, diags)
            {
                diags.push(d.warning(NO_H2));
            }
        }
        // Pollers HAProxy may use and these lines forbid: Sluice never uses them (it polls
        // with epoll), so what they ask holds. `noepoll` stays "not supported": Sluice has
        // no other poller to fall back to.
        "nopoll" | "nokqueue" | "noevports" => {
            if d.no_more_than(1, diags) {
                diags.push(d.warning("has no effect: Sluice polls with epoll only"));
            }
        }
        // The size of HAProxy's cache of pattern lookups: Sluice keeps none (each lookup is
        // made), so its size changes nothing but memory HAProxy would use.
        "tune.pattern.cache-size" => {
            if d.integer(1, "a number of entries", 0, u32::MAX as u64, diags)
                .is_some()
                && d.no_more_than(2, diags)
            {
                diags.push(d.warning("has no effect: Sluice keeps no cache of pattern lookups"));
            }
        }
        // HAProxy sizes some sends, and chooses to splice, by how long a stream was idle;
        // Sluice's sends and splicing do not look at it.
        "tune.idletimer" => {
            if let Some(delay) = d.timeout(1, diags)
                && d.no_more_than(2, diags)
            {
                if delay > std::time::Duration::from_millis(65_535) {
                    diags.push(d.alert("expects a time between 0 and 65535 ms"));
                } else {
                    diags.push(d.warning(
                        "has no effect: Sluice does not size its sends by how long a stream was idle",
                    ));
                }
            }
        }
        "tune.ssl.lifetime" => {
            if d.timeout(1, diags).is_some() && d.no_more_than(2, diags) {
                diags.push(d.warning(NO_TLS));
            }
        }
        "ssl-load-extra-files" => {
            const PARTS: [&str; 7] = ["none", "all", "bundle", "sctl", "ocsp", "issuer", "key"];
            match line.words[1..]
                .iter()
                .find(|w| !PARTS.contains(&w.as_str()))
            {
                _ if line.words.len() < 2 => {
                    diags.push(d.alert(format!("expects one or more of {}", PARTS.join(", "))))
                }
                Some(other) => diags.push(d.alert(format!(
                    "expects one or more of {}, not '{other}'",
                    PARTS.join(", ")
                ))),
                None => diags.push(d.warning(NO_TLS)),
            }
        }
        // HAProxy's HTTP client serves its Lua scripts and the CLI's `httpclient` command;
        // Sluice has neither, so nothing would use these settings.
        "httpclient.ssl.verify" => choice(&d, &["none", "required"], NO_HTTP_CLIENT, diags),
        "httpclient.resolvers.prefer" => choice(&d, &["ipv4", "ipv6"], NO_HTTP_CLIENT, diags),
        // HAProxy loads the file at start-up, so a missing one is an error there too.
        "httpclient.ssl.ca-file" => {
            if let Some(path) = d.word(1, "a file name", diags)
                && d.no_more_than(2, diags)
            {
                match std::fs::metadata(path) {
                    Ok(meta) if meta.is_file() => diags.push(d.warning(NO_HTTP_CLIENT)),
                    _ => diags.push(d.alert(format!("cannot read the CA file '{path}'"))),
                }
            }
        }
        "tune.ssl.force-private-cache"
        | "ssl-mode-async"
        | "ssl-skip-self-issued-ca"
        | "ssl-load-extra-del-ext" => {
            if d.no_more_than(1, diags) {
                diags.push(d.warning(NO_TLS));
            }
        }
        "chroot" => {
            conf.chroot = d.word(1, "a directory", diags).map(str::to_owned);
            d.no_more_than(2, diags);
        }
        "user" | "group" | "uid" | "gid" => {
            let numeric = matches!(first.as_str(), "uid" | "gid");
            let owner = if numeric {
                d.integer(1, "a numeric id", 0, u32::MAX as u64, diags)
                    .map(|n| Owner::Id(n as u32))
            } else {
                d.word(1, "a name", diags)
                    .map(|s| Owner::Name(s.to_owned()))
            };
            if owner.is_some() {
                if matches!(first.as_str(), "user" | "uid") {
                    conf.user = owner;
                } else {
                    conf.group = owner;
                }
            }
            d.no_more_than(2, diags);
        }
        "ulimit-n" => {
            conf.ulimit_n = d.integer(1, "a file descriptor count", 1, u32::MAX as u64, diags);
            d.no_more_than(2, diags);
        }
        "fd-hard-limit" => {
            conf.fd_hard_limit = d.integer(1, "a file descriptor count", 1, u32::MAX as u64, diags);
            d.no_more_than(2, diags);
        }
        "hard-stop-after" => {
            conf.hard_stop_after = d.timeout(1, diags);
            d.no_more_than(2, diags);
        }
        "server-state-file" | "server-state-base" => {
            let value = d.word(1, "a path", diags).map(str::to_owned);
            if line.words[0] == "server-state-file" {
                conf.server_state_file = value;
            } else {
                conf.server_state_base = value;
            }
            d.no_more_than(2, diags);
        }
        "grace" => {
            conf.grace = d.timeout(1, diags);
            d.no_more_than(2, diags);
        }
        "close-spread-time" => {
            conf.close_spread_time = if d.word(1, "a time value", diags) == Some("infinite") {
                Some(CloseSpread::Infinite)
            } else {
                d.timeout(1, diags).map(CloseSpread::Window)
            };
            d.no_more_than(2, diags);
        }
        // Applied as the lines are read (`crate::environment`): only checked here.
        "setenv" | "presetenv" => {
            if d.word(2, "a name and a value", diags).is_some() {
                d.no_more_than(3, diags);
            }
        }
        "unsetenv" => {
            d.word(1, "at least one variable name", diags);
        }
        "resetenv" => {}
        "log-send-hostname" => {
            conf.log_send_hostname = Some(line.words.get(1).cloned());
            d.no_more_than(2, diags);
        }
        "node" => {
            conf.node = d.word(1, "a name", diags).map(str::to_owned);
            d.no_more_than(2, diags);
        }
        "description" => {
            if line.words.len() < 2 {
                diags.push(d.alert("expects a text"));
            } else {
                conf.description = Some(line.words[1..].join(" "));
            }
        }
        "stats" => parse_stats(conf, line, diags),
        "log" => logging::parse_global_log_line(&mut conf.logs, line, diags),
        "tune.pipesize" => {
            if let Some(n) = d.integer(1, "a pipe size in bytes", 4096, 1 << 30, diags) {
                conf.pipesize = Some(n as usize);
            }
        }
        "maxpipes" => {
            if let Some(n) = d.integer(1, "a number of pipes", 0, u64::from(u32::MAX), diags) {
                conf.maxpipes = Some(n as usize);
            }
        }
        "maxconnrate" | "maxsessrate" => {
            if let Some(n) = d.integer(1, "a rate per second", 0, u64::from(u32::MAX), diags) {
                if first == "maxconnrate" {
                    conf.maxconnrate = Some(n as u32);
                } else {
                    conf.maxsessrate = Some(n as u32);
                }
            }
            d.no_more_than(2, diags);
        }
        "nosplice" => {
            if d.no_more_than(1, diags) {
                conf.nosplice = true;
            }
        }
        "busy-polling" => {
            if d.no_more_than(1, diags) {
                conf.busy_polling = true;
            }
        }
        "noreuseport" => {
            if d.no_more_than(1, diags) {
                conf.noreuseport = true;
            }
        }
        "h1-accept-payload-with-any-method" => {
            if d.no_more_than(1, diags) {
                conf.h1_any_method_payload = true;
            }
        }
        // Read before the sections, where it takes effect (`crate::default_path`).
        "default-path" => {}
        "no-memory-trimming" => {
            if d.no_more_than(1, diags) {
                conf.no_memory_trimming = true;
            }
        }
        "pp2-never-send-local" => {
            if d.no_more_than(1, diags) {
                conf.pp2_never_send_local = true;
            }
        }
        "strict-limits" => {
            if d.no_more_than(1, diags) {
                conf.lax_limits = false;
            }
        }
        "maxcomprate" | "maxzlibmem" => {
            let what = if first == "maxcomprate" {
                "a rate in kB/s"
            } else {
                "a size in megabytes"
            };
            if let Some(n) = d.integer(1, what, 0, u64::from(u32::MAX >> 10), diags)
                && d.no_more_than(2, diags)
            {
                let slot = if first == "maxcomprate" {
                    &mut conf.maxcomprate
                } else {
                    &mut conf.maxzlibmem
                };
                *slot = Some(n as u32);
            }
        }
        "maxcompcpuusage" => {
            if let Some(n) = d.integer(1, "a percentage", 0, 100, diags)
                && d.no_more_than(2, diags)
            {
                conf.maxcompcpuusage = Some(n as u32);
            }
        }
        "tune.comp.maxlevel" => {
            if let Some(n) = d.integer(1, "a compression level", 1, 9, diags)
                && d.no_more_than(2, diags)
            {
                conf.comp_maxlevel = Some(n as u32);
            }
        }
        "external-check" => match line.words.get(1).map(String::as_str) {
            None => conf.external_check = Some(false),
            Some("preserve-env") if d.no_more_than(2, diags) => conf.external_check = Some(true),
            Some("preserve-env") => {}
            Some(other) => diags.push(d.alert(format!("expects 'preserve-env', not '{other}'"))),
        },
        "max-spread-checks" => {
            if let Some(time) = d.timeout(1, diags)
                && d.no_more_than(2, diags)
            {
                conf.max_spread_checks = Some(time);
            }
        }
        "set-dumpable" => match line.words.get(1).map(String::as_str) {
            None | Some("on") => conf.set_dumpable = true,
            Some("off") => conf.set_dumpable = false,
            Some("libs") => diags.push(Diagnostic::not_supported(&line.span, "set-dumpable libs")),
            Some(other) => {
                diags.push(d.alert(format!("expects 'on', 'off' or 'libs', not '{other}'")))
            }
        },
        "insecure-fork-wanted" | "insecure-setuid-wanted" => {
            if d.no_more_than(1, diags) {
                *insecure_flag(conf, first) = true;
            }
        }
        // The global keywords that take a `no` prefix, among those Sluice knows.
        "no" if line.words.get(1).is_some_and(|w| {
            matches!(
                w.as_str(),
                "set-dumpable" | "insecure-fork-wanted" | "insecure-setuid-wanted"
            )
        }) =>
        {
            if d.no_more_than(2, diags) {
                match line.words[1].as_str() {
                    "set-dumpable" => conf.set_dumpable = false,
                    other => *insecure_flag(conf, other) = false,
                }
            }
        }
        "no" if line.words.get(1).is_some_and(|w| w == "busy-polling") => {
            if d.no_more_than(2, diags) {
                conf.busy_polling = false;
            }
        }
        "no" if line.words.get(1).is_some_and(|w| w == "strict-limits") => {
            if d.no_more_than(2, diags) {
                conf.lax_limits = true;
            }
        }
        "log-tag" => {
            if let Some(tag) = d.word(1, "a tag", diags)
                && d.no_more_than(2, diags)
            {
                conf.log_tag = Some(tag.to_owned());
            }
        }
        "tune.bufsize" => {
            // Below 1 KiB no request head fits; above 1 GiB is a typo.
            if let Some(n) = d.integer(1, "a buffer size in bytes", 1024, 1 << 30, diags) {
                conf.bufsize = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "mworker-max-reloads" => {
            let n = d.integer(1, "a number of reloads", 0, u32::MAX as u64, diags);
            if let Some(n) = n {
                conf.mworker_max_reloads = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "tune.http.cookielen" => {
            if let Some(n) = d.integer(1, "a length", 0, i32::MAX as u64, diags) {
                conf.http_cookielen = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "tune.http.logurilen" => {
            if let Some(n) = d.integer(1, "a length", 1, i32::MAX as u64, diags) {
                conf.http_logurilen = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "tune.http.maxhdr" => {
            if let Some(n) = d.integer(1, "a number of header lines", 1, 32767, diags) {
                conf.http_maxhdr = Some(n as u16);
            }
            d.no_more_than(2, diags);
        }
        "tune.rcvbuf.client" | "tune.sndbuf.client" | "tune.rcvbuf.server"
        | "tune.sndbuf.server" => {
            // 0 leaves the kernel's size, as by default.
            let size = d.integer(1, "a size in bytes", 0, i32::MAX as u64, diags);
            if let Some(size) = size.map(|n| (n > 0).then_some(n as u32)) {
                let buffers = if first.ends_with("client") {
                    &mut conf.client_buffers
                } else {
                    &mut conf.server_buffers
                };
                if first.starts_with("tune.rcvbuf") {
                    buffers.receive = size;
                } else {
                    buffers.send = size;
                }
            }
            d.no_more_than(2, diags);
        }
        "tune.maxaccept" => {
            if let Some(word) = d.word(1, "a number of connections", diags) {
                match word.parse::<i64>() {
                    Ok(n) if n == -1 || (0..=i64::from(i32::MAX)).contains(&n) => {
                        conf.maxaccept = Some(n);
                    }
                    _ => diags.push(d.alert(format!(
                        "expects a number of connections (or -1 for no limit), not '{word}'"
                    ))),
                }
            }
            d.no_more_than(2, diags);
        }
        "tune.maxpollevents" => {
            if let Some(n) = d.integer(1, "a number of events", 1, 1_000_000, diags) {
                conf.maxpollevents = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "tune.maxrewrite" => {
            if let Some(n) = d.integer(1, "a size in bytes", 0, 1 << 29, diags) {
                conf.maxrewrite = Some(n as u32);
            }
            d.no_more_than(2, diags);
        }
        "spread-checks" => {
            conf.spread_checks = d.integer(1, "a percentage", 0, 50, diags).map(|n| n as u32);
            d.no_more_than(2, diags);
        }
        "nbproc" => diags.push(
            d.alert("removed from HAProxy in 2.5 and not supported by Sluice; use 'nbthread'"),
        ),
        other => diags.push(Diagnostic::not_supported(&line.span, other)),
    }
}

/// The flag of `insecure-fork-wanted` or `insecure-setuid-wanted`.
fn insecure_flag<'c>(conf: &'c mut GlobalConf, keyword: &str) -> &'c mut bool {
    if keyword == "insecure-fork-wanted" {
        &mut conf.insecure_fork
    } else {
        &mut conf.insecure_setuid
    }
}

fn parse_stats(conf: &mut GlobalConf, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 2);
    match line.words.get(1).map(String::as_str) {
        Some("socket") => {
            if let Some(socket) = parse_stats_socket(&d, diags) {
                conf.stats_sockets.push(socket);
            }
        }
        Some("timeout") => {
            conf.stats_timeout = d.timeout(2, diags);
            d.no_more_than(3, diags);
        }
        Some("maxconn") => {
            if let Some(n) = d.integer(2, "a connection count", 1, u32::MAX as u64, diags) {
                conf.stats_maxconn = Some(n as u32);
            }
            d.no_more_than(3, diags);
        }
        Some(_) => diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone())),
        None => diags.push(d.alert("expects 'socket', 'timeout' or 'maxconn'")),
    }
}

fn parse_stats_socket(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<StatsSocketConf> {
    let text = d.word(2, "an address", diags)?;
    let addrs = match addr::parse_listen_addrs(text) {
        Ok(addrs) => addrs,
        Err(err) => {
            diags.push(d.alert(format!("invalid address '{text}': {err}")));
            return None;
        }
    };
    let Ok([addr]) = <[ListenAddr; 1]>::try_from(addrs) else {
        diags.push(d.alert(format!("expects exactly one address, not '{text}'")));
        return None;
    };
    let mut socket = StatsSocketConf {
        span: d.span.clone(),
        addr,
        level: CliLevel::Operator,
        mode: None,
        uid: None,
        gid: None,
        expose_listeners: false,
    };
    let mut ok = true;
    let mut i = 3;
    while i < d.words.len() {
        let option = d.words[i].as_str();
        let value = d.words.get(i + 1).map(String::as_str);
        let Some(value) = value else {
            diags.push(d.alert(format!("option '{option}' expects a value")));
            return None;
        };
        match option {
            "level" => match value {
                "user" => socket.level = CliLevel::User,
                "operator" => socket.level = CliLevel::Operator,
                "admin" => socket.level = CliLevel::Admin,
                _ => {
                    diags.push(d.alert(format!(
                        "'level' expects 'user', 'operator' or 'admin', not '{value}'"
                    )));
                    ok = false;
                }
            },
            "mode" => match u32::from_str_radix(value, 8) {
                Ok(mode) if mode <= 0o7777 => socket.mode = Some(mode),
                _ => {
                    diags.push(d.alert(format!("'mode' expects an octal mode, not '{value}'")));
                    ok = false;
                }
            },
            "uid" | "gid" => match value.parse::<u32>() {
                Ok(id) if option == "uid" => socket.uid = Some(Owner::Id(id)),
                Ok(id) => socket.gid = Some(Owner::Id(id)),
                Err(_) => {
                    diags.push(d.alert(format!("'{option}' expects a number, not '{value}'")));
                    ok = false;
                }
            },
            "expose-fd" if value == "listeners" => socket.expose_listeners = true,
            "expose-fd" => {
                diags.push(d.alert(format!("'expose-fd' expects 'listeners', not '{value}'")));
                ok = false;
            }
            "user" => socket.uid = Some(Owner::Name(value.to_owned())),
            "group" => socket.gid = Some(Owner::Name(value.to_owned())),
            _ => {
                diags.push(Diagnostic::not_supported(
                    d.span,
                    format!("stats socket {option}"),
                ));
                ok = false;
            }
        }
        i += 2;
    }
    ok.then_some(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_defaults_hold_until_configured_values_win() {
        let mut conf = GlobalConf::default();
        // HAProxy's, but for `tune.maxpollevents` (see DEFAULT_MAXPOLLEVENTS).
        assert_eq!(
            (conf.bufsize(), conf.maxrewrite(), conf.maxpollevents()),
            (16384, 1024, 16)
        );
        conf.bufsize = Some(1024);
        conf.maxpollevents = Some(7);
        // The rewrite reserve never exceeds half a buffer.
        assert_eq!(
            (conf.bufsize(), conf.maxrewrite(), conf.maxpollevents()),
            (1024, 512, 7)
        );
        assert_eq!(conf.http_maxhdr(), 101);
        conf.http_maxhdr = Some(8);
        assert_eq!(conf.http_maxhdr(), 8);
    }
}
