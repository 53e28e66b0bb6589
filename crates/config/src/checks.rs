//! Health-check keywords (configuration.txt §5.2 server options `check`, `inter`, `rise`, `fall`,
//! `agent-*`, `track`...; §4.2 `option httpchk`, `option tcp-check`, `http-check *`,
//! `tcp-check *`), parsed into [`ServerChecks`] (per server) and [`ProxyChecks`] (per backend).
//!
//! The proxy parser hands every check keyword to this module through a few small entry points
//! ([`parse_server_option`], [`parse_check_option`], [`parse_rule_line`]) so the checks live in
//! one place. Everything here is data: the check engine (`sluice-check`) turns it into tasks.
//! Patterns given as regular expressions are compiled once here so that a bad one is an alert
//! with its file and line, never a start-up surprise. Options of these keywords that Sluice does
//! not implement (`ssl`, `send-proxy`, `on-success`, log-format strings...) are refused as "not
//! supported", never ignored.

use crate::addr::{ServerAddr, ServerPort};
use crate::canned;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::directive::Directive;
use crate::preprocess::Line;
use crate::sections::SectionKind;
use std::net::IpAddr;
use std::time::Duration;

/// `inter` when not set (configuration.txt §5.2 "inter": 2000 ms).
pub const DEFAULT_INTER: Duration = Duration::from_secs(2);
/// `rise` when not set.
pub const DEFAULT_RISE: u32 = 2;
/// `fall` when not set.
pub const DEFAULT_FALL: u32 = 3;

/// A `track [<backend>/]<server>` target, with the indexes the plan resolved it to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    /// The tracked server's backend; `None` means the tracking server's own backend.
    pub backend: Option<String>,
    /// The tracked server's name.
    pub server: String,
    /// (backend index, server index) in the plan, once resolved.
    pub resolved: Option<(usize, usize)>,
}

/// A server's check settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerChecks {
    /// `check`: run the backend's health check on this server.
    pub check: bool,
    /// `inter`: time between two checks while the server is stably up.
    pub inter: Option<Duration>,
    /// `fastinter`: time between checks while the server is changing state.
    pub fastinter: Option<Duration>,
    /// `downinter`: time between checks while the server is down.
    pub downinter: Option<Duration>,
    /// `rise`: consecutive successes to declare a down server up.
    pub rise: Option<u32>,
    /// `fall`: consecutive failures to declare an up server down.
    pub fall: Option<u32>,
    /// `port`: the port checks connect to instead of the server's.
    pub port: Option<u16>,
    /// `addr`: the address checks connect to instead of the server's.
    pub addr: Option<IpAddr>,
    /// `agent-check`: also ask an agent for the server's state.
    pub agent: bool,
    /// `agent-port`.
    pub agent_port: Option<u16>,
    /// `agent-inter` (2 s by default).
    pub agent_inter: Option<Duration>,
    /// `agent-send`: a string sent to the agent after connecting.
    pub agent_send: Option<Vec<u8>>,
    /// `agent-addr`.
    pub agent_addr: Option<IpAddr>,
    /// `track`: take the state of another server instead of checking.
    pub track: Option<Track>,
    /// `observe`: the traffic's errors count against the server.
    pub observe: Option<Observe>,
    /// `error-limit`: consecutive observed failures that trigger `on-error` (10 by default).
    pub error_limit: Option<u32>,
    /// `on-error`: what the limit triggers.
    pub on_error: OnError,
    /// `init-addr`: how a host name is turned into an address at start-up (empty: `last,libc`).
    pub init_addr: Vec<InitAddr>,
    /// `check-send-proxy`: health-check connections start with a PROXY protocol v1 line.
    pub send_proxy: bool,
    /// `on-marked-down shutdown-sessions`: end the server's sessions when it goes down.
    pub shutdown_on_down: bool,
    /// `on-marked-up shutdown-backup-sessions`: end the backup servers' sessions when this
    /// server comes up.
    pub shutdown_backups_on_up: bool,
}

impl ServerChecks {
    /// The interval between checks of a stable server.
    pub fn inter(&self) -> Duration {
        self.inter.unwrap_or(DEFAULT_INTER)
    }

    /// The interval while the state is changing (`inter` unless set).
    pub fn fastinter(&self) -> Duration {
        self.fastinter.unwrap_or_else(|| self.inter())
    }

    /// The interval while down (`inter` unless set).
    pub fn downinter(&self) -> Duration {
        self.downinter.unwrap_or_else(|| self.inter())
    }

    /// Successes needed to go up.
    pub fn rise(&self) -> u32 {
        self.rise.unwrap_or(DEFAULT_RISE)
    }

    /// Failures needed to go down.
    pub fn fall(&self) -> u32 {
        self.fall.unwrap_or(DEFAULT_FALL)
    }

    /// Consecutive observed failures that trigger `on-error`.
    pub fn error_limit(&self) -> u32 {
        self.error_limit.unwrap_or(10)
    }

    /// The interval between agent checks.
    pub fn agent_inter(&self) -> Duration {
        self.agent_inter.unwrap_or(DEFAULT_INTER)
    }
}

/// One method of `init-addr`, tried in order until one gives an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAddr {
    /// The address in the server state file: Sluice has none, so this never succeeds.
    Last,
    /// The system resolver.
    Libc,
    /// Start without an address, in maintenance.
    None,
    /// This address.
    Ip(IpAddr),
}

/// What `observe` watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observe {
    /// Connection failures.
    Layer4,
    /// Connection failures and HTTP responses (5xx but 501 and 505, invalid, timed out).
    Layer7,
}

/// `on-error`: what `error-limit` consecutive observed failures do (every action also checks
/// again at `fastinter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// Only check again sooner.
    Fastinter,
    /// Count a failed check (the default).
    #[default]
    FailCheck,
    /// Leave the server one failed check from down, and check at `fastinter`.
    SuddenDeath,
    /// Mark the server down at once.
    MarkDown,
}

/// Which health check a backend's servers get.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckMode {
    /// A TCP connection is opened and closed (the default).
    #[default]
    Connect,
    /// `option tcp-check`: the backend's `tcp-check` rules.
    TcpCheck,
    /// `option httpchk [<method>] [<uri>] [<version>]`: an HTTP request, then the
    /// `http-check` rules.
    Http(HttpRequestLine),
    /// `option external-check`: a program (`external-check command`) says.
    External,
}

/// The request line of `option httpchk` (`OPTIONS / HTTP/1.0` by default, as in HAProxy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequestLine {
    /// Method.
    pub method: String,
    /// URI.
    pub uri: String,
    /// Version (sent as written, so the old `HTTP/1.1\r\nHost:\ x` form still works).
    pub version: String,
}

impl Default for HttpRequestLine {
    fn default() -> Self {
        HttpRequestLine {
            method: "OPTIONS".into(),
            uri: "/".into(),
            version: "HTTP/1.0".into(),
        }
    }
}

/// How a header name or value is compared in `http-check expect hdr|fhdr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextMethod {
    /// Exact match (`-m str`, the default).
    Str,
    /// Prefix (`-m beg`).
    Beg,
    /// Suffix (`-m end`).
    End,
    /// Substring (`-m sub`).
    Sub,
    /// Regular expression (`-m reg`).
    Reg,
}

/// A text and how to match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextMatch {
    /// Comparison.
    pub method: TextMethod,
    /// The pattern.
    pub pattern: String,
}

/// What an `expect` rule looks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectKind {
    /// `status <codes>`: the status is one of these ranges (`200,300-399`).
    Status(Vec<(u16, u16)>),
    /// `rstatus <regex>`: the status code's text matches.
    RStatus(String),
    /// `string <text>`: the body (HTTP) or the response (TCP) contains it.
    String(Vec<u8>),
    /// `rstring <regex>`: the body or the response matches.
    RString(String),
    /// `binary <hex>`: the response contains these bytes.
    Binary(Vec<u8>),
    /// `rbinary <regex>`: the response, written in hexadecimal, matches.
    RBinary(String),
    /// `hdr|fhdr name <name> [value <value>]`: a header field exists (with such a value;
    /// `fhdr` compares the whole value, `hdr` each comma-separated element).
    Header {
        /// `fhdr` rather than `hdr`.
        full: bool,
        /// Field name.
        name: TextMatch,
        /// Field value, if one is required.
        value: Option<TextMatch>,
    },
}

/// One `expect` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    /// `!`: the rule passes when the pattern does not match.
    pub negate: bool,
    /// The pattern.
    pub kind: ExpectKind,
}

/// `tcp-check connect` / `http-check connect`: where the next step connects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectRule {
    /// `port`: instead of the check port.
    pub port: Option<u16>,
    /// `addr`: instead of the check address.
    pub addr: Option<IpAddr>,
    /// `send-proxy`: start with a PROXY protocol v1 line.
    pub send_proxy: bool,
}

/// `http-check send`: parts of the request replacing `option httpchk`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpSend {
    /// `meth`.
    pub method: Option<String>,
    /// `uri`.
    pub uri: Option<String>,
    /// `ver`.
    pub version: Option<String>,
    /// `hdr <name> <value>`, in order.
    pub headers: Vec<(String, String)>,
    /// `body`.
    pub body: Option<String>,
}

/// One step of a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckRule {
    /// Open a connection.
    Connect(ConnectRule),
    /// `tcp-check send` / `send-binary`: raw bytes.
    Send(Vec<u8>),
    /// `http-check send`: the HTTP request.
    HttpSend(HttpSend),
    /// Read and compare.
    Expect(Expect),
    /// `comment`: a note shown in reports (no effect on the check).
    Comment(String),
    /// Read and judge a protocol's answer (the ready-made checks, [`crate::canned`]).
    Protocol(Reply),
}

/// An answer the ready-made checks know how to judge, with HAProxy's verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An SMTP reply line: 2xx passes, other codes fail with their code and text.
    Smtp,
    /// A Redis reply line: `+PONG` passes.
    RedisPong,
    /// A PostgreSQL Authentication request (`R`) passes, an ErrorResponse fails.
    PgsqlStartup,
    /// A MySQL handshake (protocol 10) passes, an error packet fails with its code.
    MysqlHandshake,
    /// A MySQL OK packet passes, an error packet fails with its code.
    MysqlOk,
    /// An LDAPv3 BindResponse with resultCode 0 passes.
    LdapBind,
    /// A TLS handshake record passes.
    SslHello,
}

/// A backend's check settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyChecks {
    /// Which check runs.
    pub mode: CheckMode,
    /// `tcp-check` rules.
    pub tcp_rules: Vec<CheckRule>,
    /// `http-check` rules.
    pub http_rules: Vec<CheckRule>,
    /// `http-check disable-on-404`: a 404 answer drains the server instead of failing it.
    pub disable_on_404: bool,
    /// `http-check send-state`: tell the server its state in a header.
    pub send_state: bool,
    /// `option log-health-checks`: every check result that moves a server's health is
    /// reported, not only the changes of state.
    pub log_health_checks: bool,
    /// `external-check command`: the program `option external-check` runs.
    pub external_command: Option<String>,
    /// `external-check path`: its `PATH` (empty by default).
    pub external_path: Option<String>,
    /// The rules came from a `defaults` section: a proxy's own first rule replaces them.
    tcp_inherited: bool,
    http_inherited: bool,
}

/// What [`parse_server_option`] made of a word.
pub(crate) enum ServerOption {
    /// Not a check keyword.
    Unknown,
    /// A check keyword; this many following words were its arguments.
    Consumed(usize),
    /// A check keyword with a bad argument (the diagnostic is pushed).
    Failed,
}

/// Parses the server option at `d.words[i]` if it is a check keyword.
pub(crate) fn parse_server_option(
    c: &mut ServerChecks,
    d: &Directive<'_>,
    i: usize,
    diags: &mut Diagnostics,
) -> ServerOption {
    use ServerOption::{Consumed, Failed};
    let Some(word) = d.words.get(i) else {
        return ServerOption::Unknown;
    };
    let time = |diags: &mut Diagnostics| {
        let t = d.timeout(i + 1, diags)?;
        if t.is_zero() {
            diags.push(d.alert(format!("'{word}' expects a positive time")));
            return None;
        }
        Some(t)
    };
    let result = match word.as_str() {
        "check" => {
            c.check = true;
            Some(0)
        }
        "no-check" => {
            c.check = false;
            Some(0)
        }
        "agent-check" => {
            c.agent = true;
            Some(0)
        }
        "init-addr" => match d.word(i + 1, "a list of methods", diags) {
            None => None,
            Some(list) => {
                let methods: Option<Vec<InitAddr>> = list
                    .split(',')
                    .map(|m| match m {
                        "last" => Some(InitAddr::Last),
                        "libc" => Some(InitAddr::Libc),
                        "none" => Some(InitAddr::None),
                        ip => ip.parse().ok().map(InitAddr::Ip),
                    })
                    .collect();
                match methods {
                    Some(m) => {
                        c.init_addr = m;
                        Some(1)
                    }
                    None => {
                        diags.push(d.alert(format!(
                            "'init-addr' expects 'last', 'libc', 'none' or IP addresses, comma-separated, not '{list}'"
                        )));
                        None
                    }
                }
            }
        },
        "check-send-proxy" => {
            c.send_proxy = true;
            Some(0)
        }
        "no-agent-check" => {
            c.agent = false;
            Some(0)
        }
        "inter" => time(diags).map(|t| c.inter = Some(t)).map(|_| 1),
        "fastinter" => time(diags).map(|t| c.fastinter = Some(t)).map(|_| 1),
        "downinter" => time(diags).map(|t| c.downinter = Some(t)).map(|_| 1),
        "agent-inter" => time(diags).map(|t| c.agent_inter = Some(t)).map(|_| 1),
        "rise" | "fall" => d
            .integer(i + 1, &format!("a count after '{word}'"), 1, 65535, diags)
            .map(|n| {
                if word == "rise" {
                    c.rise = Some(n as u32);
                } else {
                    c.fall = Some(n as u32);
                }
            })
            .map(|_| 1),
        "port" | "agent-port" => d
            .integer(i + 1, &format!("a port after '{word}'"), 1, 65535, diags)
            .map(|n| {
                if word == "port" {
                    c.port = Some(n as u16);
                } else {
                    c.agent_port = Some(n as u16);
                }
            })
            .map(|_| 1),
        "addr" | "agent-addr" => match d.word(i + 1, "an IP address", diags) {
            None => None,
            Some(text) => match text.parse::<IpAddr>() {
                Ok(ip) if word == "addr" => {
                    c.addr = Some(ip);
                    Some(1)
                }
                Ok(ip) => {
                    c.agent_addr = Some(ip);
                    Some(1)
                }
                Err(_) => {
                    diags.push(d.alert(format!(
                        "'{word}' expects an IP address, not '{text}' (host names are not supported by Sluice here)"
                    )));
                    None
                }
            },
        },
        "observe" => match d.word(i + 1, "'layer4' or 'layer7'", diags) {
            Some("layer4") => {
                c.observe = Some(Observe::Layer4);
                Some(1)
            }
            Some("layer7") => {
                c.observe = Some(Observe::Layer7);
                Some(1)
            }
            Some(other) => {
                diags.push(d.alert(format!(
                    "'observe' expects 'layer4' or 'layer7', not '{other}'"
                )));
                None
            }
            None => None,
        },
        "error-limit" => d
            .integer(i + 1, "a count after 'error-limit'", 1, 65535, diags)
            .map(|n| {
                c.error_limit = Some(n as u32);
                1
            }),
        "on-error" => {
            let action = match d.word(i + 1, "an action after 'on-error'", diags) {
                Some("fastinter") => Some(OnError::Fastinter),
                Some("fail-check") => Some(OnError::FailCheck),
                Some("sudden-death") => Some(OnError::SuddenDeath),
                Some("mark-down") => Some(OnError::MarkDown),
                Some(other) => {
                    diags.push(d.alert(format!(
                        "'on-error' expects 'fastinter', 'fail-check', 'sudden-death' or 'mark-down', not '{other}'"
                    )));
                    None
                }
                None => None,
            };
            action.map(|a| {
                c.on_error = a;
                1
            })
        }
        "on-marked-down" | "on-marked-up" => {
            let (action, slot) = if word == "on-marked-down" {
                ("shutdown-sessions", &mut c.shutdown_on_down)
            } else {
                ("shutdown-backup-sessions", &mut c.shutdown_backups_on_up)
            };
            match d.word(i + 1, &format!("'{action}'"), diags) {
                Some(a) if a == action => {
                    *slot = true;
                    Some(1)
                }
                Some(other) => {
                    diags.push(d.alert(format!("'{word}' expects '{action}', not '{other}'")));
                    None
                }
                None => None,
            }
        }
        "agent-send" => d.word(i + 1, "a string", diags).map(|s| {
            c.agent_send = Some(s.as_bytes().to_vec());
            1
        }),
        "track" => d.word(i + 1, "[<backend>/]<server>", diags).map(|s| {
            let (backend, server) = match s.split_once('/') {
                Some((b, s)) => (Some(b.to_owned()), s.to_owned()),
                None => (None, s.to_owned()),
            };
            c.track = Some(Track {
                backend,
                server,
                resolved: None,
            });
            1
        }),
        _ => return ServerOption::Unknown,
    };
    match result {
        Some(n) => Consumed(n),
        None => Failed,
    }
}

/// Cross-option rules of one server line, checked once all its options are read.
pub(crate) fn validate_server(
    c: &ServerChecks,
    addr: &ServerAddr,
    d: &Directive<'_>,
    diags: &mut Diagnostics,
) -> bool {
    let mut ok = true;
    if let ServerAddr::Unix(_) | ServerAddr::Abstract(_) = addr {
        // A port means nothing on a unix socket: the check would silently go to the socket.
        if c.port.is_some() && c.addr.is_none() {
            diags.push(d.alert("'port' on a unix socket server needs 'addr'"));
            ok = false;
        }
        if c.agent && c.agent_addr.is_none() && c.addr.is_none() {
            diags.push(d.alert("'agent-check' on a unix socket server needs 'agent-addr'"));
            ok = false;
        }
    }
    if c.agent && c.agent_port.is_none() {
        diags.push(d.alert("'agent-check' needs 'agent-port'"));
        ok = false;
    }
    if c.observe.is_some() && !c.check {
        // The observed failures act on the health check: without one they would do nothing.
        diags.push(d.alert("'observe' needs 'check'"));
        ok = false;
    }
    if c.check && c.track.is_some() {
        // As HAProxy: a tracking server takes its state from the tracked one only.
        diags.push(d.alert("unable to enable checks and tracking at the same time"));
        ok = false;
    }
    ok
}

/// The servers of a backend that check an IP address need a port to check: the server's own,
/// its `port`, or, under `option tcp-check` or `option httpchk`, the one of the rules' first
/// step, a `connect ... port N`, every later `connect` giving one too (HAProxy 2.6's rule).
/// A unix socket server is checked on its socket.
pub(crate) fn check_ports(
    checks: &ProxyChecks,
    servers: &[crate::proxy::ServerConf],
    diags: &mut Diagnostics,
) {
    let rules = match checks.mode {
        CheckMode::TcpCheck => checks.tcp_rules.as_slice(),
        CheckMode::Http(_) => checks.http_rules.as_slice(),
        CheckMode::Connect | CheckMode::External => &[],
    };
    let mut steps = rules.iter().filter(|r| !matches!(r, CheckRule::Comment(_)));
    let rules_give_port = matches!(steps.next(), Some(CheckRule::Connect(c)) if c.port.is_some())
        && steps.all(|r| !matches!(r, CheckRule::Connect(c) if c.port.is_none()));
    for server in servers {
        let has_port = match &server.addr {
            ServerAddr::Unix(_) | ServerAddr::Abstract(_) => true,
            ServerAddr::Inet { port, .. } => matches!(port, ServerPort::Fixed(_)),
        };
        if server.checks.check && server.checks.port.is_none() && !has_port && !rules_give_port {
            diags.push(Diagnostic::alert(
                &server.span,
                "server",
                format!(
                    "server '{}': health checks need a port: the server has none (or an \
                     offset), set 'port' or start the check rules with a 'connect port'",
                    server.name
                ),
            ));
        }
    }
}

/// True for the `option` names this module handles.
pub(crate) fn is_check_option(name: &str) -> bool {
    matches!(
        name,
        "httpchk"
            | "tcp-check"
            | "redis-check"
            | "smtpchk"
            | "pgsql-check"
            | "mysql-check"
            | "ldap-check"
            | "ssl-hello-chk"
            | "external-check"
    )
}

/// `external-check command|path <value>`.
pub(crate) fn parse_external_check(c: &mut ProxyChecks, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 2);
    let slot = match line.words.get(1).map(String::as_str) {
        Some("command") => &mut c.external_command,
        Some("path") => &mut c.external_path,
        _ => {
            diags.push(d.alert("expects 'command' or 'path'"));
            return;
        }
    };
    if let Some(value) = d.word(2, "a value", diags)
        && d.no_more_than(3, diags)
    {
        *slot = Some(value.to_owned());
    }
}

/// `option httpchk|tcp-check` or a ready-made check (none of them takes `no`).
pub(crate) fn parse_check_option(c: &mut ProxyChecks, line: &Line, diags: &mut Diagnostics) {
    let d = Directive::new(line, 2);
    let name = line.words[1].as_str();
    let args = &line.words[2..];
    match name {
        "httpchk" => {
            let mut request = HttpRequestLine::default();
            match args {
                [] => {}
                [uri] => request.uri = uri.clone(),
                [method, uri] => {
                    request.method = method.clone();
                    request.uri = uri.clone();
                }
                [method, uri, version] => {
                    request.method = method.clone();
                    request.uri = uri.clone();
                    request.version = version.clone();
                }
                _ => {
                    d.no_more_than(5, diags);
                    return;
                }
            }
            c.mode = CheckMode::Http(request);
        }
        "tcp-check" => {
            if d.no_more_than(2, diags) {
                c.mode = CheckMode::TcpCheck;
            }
        }
        "external-check" => {
            if d.no_more_than(2, diags) {
                c.mode = CheckMode::External;
            }
        }
        _ => {
            if let Some(rules) = canned_rules(&d, name, args, diags) {
                c.mode = CheckMode::TcpCheck;
                c.tcp_rules = rules;
                // Like inherited rules: `tcp-check` lines of the proxy replace them.
                c.tcp_inherited = true;
            }
        }
    }
}

/// The rules of a ready-made check `option NAME ARGS`.
fn canned_rules(
    d: &Directive<'_>,
    name: &str,
    args: &[String],
    diags: &mut Diagnostics,
) -> Option<Vec<CheckRule>> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bad = |diags: &mut Diagnostics, what: &str| {
        diags.push(d.alert(format!("expects {what}")));
        None
    };
    match (name, args.as_slice()) {
        ("redis-check", []) => Some(canned::redis()),
        ("ldap-check", []) => Some(canned::ldap()),
        ("ssl-hello-chk", []) => Some(canned::ssl_hello()),
        ("smtpchk", []) => Some(canned::smtp("HELO", "localhost")),
        // configuration.txt: any other command than EHLO becomes HELO.
        ("smtpchk", [hello, domain]) => Some(canned::smtp(
            if hello.eq_ignore_ascii_case("EHLO") {
                "EHLO"
            } else {
                "HELO"
            },
            domain,
        )),
        ("smtpchk", _) => bad(diags, "nothing, or a hello command and a domain"),
        ("pgsql-check", ["user", user]) => Some(canned::pgsql(user)),
        ("pgsql-check", _) => bad(diags, "'user <username>'"),
        ("mysql-check", []) => Some(canned::mysql(None)),
        ("mysql-check", ["user", user]) | ("mysql-check", ["user", user, "post-41"]) => {
            Some(canned::mysql(Some(user)))
        }
        ("mysql-check", ["user", _, "pre-41"]) => {
            diags.push(Diagnostic::not_supported(
                d.span,
                format!("{} pre-41", d.keyword),
            ));
            None
        }
        ("mysql-check", _) => bad(diags, "nothing, or 'user <username> [post-41]'"),
        _ => {
            d.no_more_than(2, diags);
            None
        }
    }
}

/// One `http-check ...` or `tcp-check ...` line of a section of `kind`.
pub(crate) fn parse_rule_line(
    c: &mut ProxyChecks,
    kind: SectionKind,
    line: &Line,
    diags: &mut Diagnostics,
) {
    let http = line.words[0] == "http-check";
    let d = Directive::new(line, 2);
    let Some(action) = line.words.get(1).map(String::as_str) else {
        diags.push(Directive::new(line, 1).alert("expects an action"));
        return;
    };
    let in_defaults = kind == SectionKind::Defaults;
    // Flags first: they are not rules.
    if http {
        match action {
            "disable-on-404" => {
                c.disable_on_404 = d.no_more_than(2, diags);
                return;
            }
            "send-state" => {
                c.send_state = d.no_more_than(2, diags);
                return;
            }
            _ => {}
        }
    }
    let rule = match action {
        "connect" => parse_connect(&d, diags).map(CheckRule::Connect),
        "comment" => match d.word(2, "a text", diags) {
            Some(text) if d.no_more_than(3, diags) => Some(CheckRule::Comment(text.to_owned())),
            _ => None,
        },
        "expect" => parse_expect(&d, http, diags).map(CheckRule::Expect),
        "send" if http => parse_http_send(&d, diags).map(CheckRule::HttpSend),
        "send" => parse_send_text(&d, diags).map(CheckRule::Send),
        "send-binary" if !http => match d.word(2, "a hexadecimal string", diags) {
            Some(hex) => match decode_hex(hex) {
                Some(bytes) if d.no_more_than(3, diags) => Some(CheckRule::Send(bytes)),
                Some(_) => None,
                None => {
                    diags.push(d.alert(format!("invalid hexadecimal string '{hex}'")));
                    None
                }
            },
            None => None,
        },
        _ => {
            diags.push(Diagnostic::not_supported(&line.span, d.keyword.clone()));
            return;
        }
    };
    let Some(rule) = rule else { return };
    let (rules, inherited) = if http {
        (&mut c.http_rules, &mut c.http_inherited)
    } else {
        (&mut c.tcp_rules, &mut c.tcp_inherited)
    };
    // A proxy's own rules replace the ones of its defaults section instead of adding to them.
    if *inherited && !in_defaults {
        rules.clear();
    }
    *inherited = in_defaults;
    rules.push(rule);
}

fn parse_connect(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<ConnectRule> {
    let mut rule = ConnectRule::default();
    let mut i = 2;
    while let Some(word) = d.words.get(i) {
        match word.as_str() {
            "default" => {}
            "port" => {
                rule.port = Some(d.integer(i + 1, "a port", 1, 65535, diags)? as u16);
                i += 1;
            }
            "addr" => {
                let text = d.word(i + 1, "an IP address", diags)?;
                match text.parse() {
                    Ok(ip) => rule.addr = Some(ip),
                    Err(_) => {
                        diags.push(d.alert(format!("'addr' expects an IP address, not '{text}'")));
                        return None;
                    }
                }
                i += 1;
            }
            "send-proxy" => rule.send_proxy = true,
            // A comment only labels the step in reports.
            "comment" => i += 1,
            other => {
                diags.push(Diagnostic::not_supported(
                    d.span,
                    format!("{} {other}", d.keyword),
                ));
                return None;
            }
        }
        i += 1;
    }
    Some(rule)
}

fn parse_send_text(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<Vec<u8>> {
    let text = d.word(2, "a string", diags)?;
    if let Some(extra) = d.words.get(3) {
        if extra == "comment" && d.words.len() == 5 {
            return Some(text.as_bytes().to_vec());
        }
        diags.push(Diagnostic::not_supported(
            d.span,
            format!("{} {extra}", d.keyword),
        ));
        return None;
    }
    Some(text.as_bytes().to_vec())
}

fn parse_http_send(d: &Directive<'_>, diags: &mut Diagnostics) -> Option<HttpSend> {
    let mut send = HttpSend::default();
    let mut i = 2;
    while let Some(word) = d.words.get(i) {
        let value = |at: usize, what: &str, diags: &mut Diagnostics| {
            let v = d.word(at, what, diags)?;
            // Sluice sends these strings as they are; log-format expressions are not evaluated.
            if v.contains('%') {
                diags.push(Diagnostic::not_supported(
                    d.span,
                    format!("{} {word} with a log-format expression", d.keyword),
                ));
                return None;
            }
            Some(v.to_owned())
        };
        match word.as_str() {
            "meth" => send.method = Some(value(i + 1, "a method", diags)?),
            "uri" => send.uri = Some(value(i + 1, "a URI", diags)?),
            "ver" => send.version = Some(value(i + 1, "a version", diags)?),
            "body" => send.body = Some(value(i + 1, "a body", diags)?),
            "comment" => {
                value(i + 1, "a text", diags)?;
            }
            "hdr" => {
                let name = value(i + 1, "a header name and a value", diags)?;
                let v = value(i + 2, "a header value", diags)?;
                send.headers.push((name, v));
                i += 1;
            }
            other => {
                diags.push(Diagnostic::not_supported(
                    d.span,
                    format!("{} {other}", d.keyword),
                ));
                return None;
            }
        }
        i += 2;
    }
    Some(send)
}

fn parse_expect(d: &Directive<'_>, http: bool, diags: &mut Diagnostics) -> Option<Expect> {
    let mut i = 2;
    let mut negate = false;
    if d.words.get(i).map(String::as_str) == Some("!") {
        negate = true;
        i += 1;
    }
    let what = d.word(i, "a match kind and a pattern", diags)?;
    let kind = match what {
        "status" if http => {
            let text = d.word(i + 1, "status codes", diags)?;
            i += 1;
            match parse_status_list(text) {
                Some(list) => ExpectKind::Status(list),
                None => {
                    diags.push(d.alert(format!(
                        "invalid status list '{text}' (expects codes or ranges like 200,300-399)"
                    )));
                    return None;
                }
            }
        }
        "rstatus" if http => {
            i += 1;
            ExpectKind::RStatus(regex_word(d, i, diags)?)
        }
        "string" => {
            i += 1;
            ExpectKind::String(d.word(i, "a string", diags)?.as_bytes().to_vec())
        }
        "rstring" => {
            i += 1;
            ExpectKind::RString(regex_word(d, i, diags)?)
        }
        "binary" if !http => {
            let hex = d.word(i + 1, "a hexadecimal string", diags)?;
            i += 1;
            match decode_hex(hex) {
                Some(bytes) => ExpectKind::Binary(bytes),
                None => {
                    diags.push(d.alert(format!("invalid hexadecimal string '{hex}'")));
                    return None;
                }
            }
        }
        "rbinary" if !http => {
            i += 1;
            ExpectKind::RBinary(regex_word(d, i, diags)?)
        }
        "hdr" | "fhdr" if http => {
            let (kind, next) = parse_expect_header(d, i + 1, what == "fhdr", diags)?;
            i = next - 1;
            kind
        }
        other => {
            diags.push(Diagnostic::not_supported(
                d.span,
                format!("{} {other}", d.keyword),
            ));
            return None;
        }
    };
    if let Some(extra) = d.words.get(i + 1) {
        diags.push(Diagnostic::not_supported(
            d.span,
            format!("{} {extra}", d.keyword),
        ));
        return None;
    }
    Some(Expect { negate, kind })
}

/// `name [-m meth] <name> [value [-m meth] <value>]` from word `i`; returns the rule and the
/// index of the first word after it.
fn parse_expect_header(
    d: &Directive<'_>,
    mut i: usize,
    full: bool,
    diags: &mut Diagnostics,
) -> Option<(ExpectKind, usize)> {
    let text = |i: &mut usize, label: &str, diags: &mut Diagnostics| -> Option<TextMatch> {
        if d.words.get(*i).map(String::as_str) != Some(label) {
            diags.push(d.alert(format!("expects '{label}' here")));
            return None;
        }
        *i += 1;
        let mut method = TextMethod::Str;
        if d.words.get(*i).map(String::as_str) == Some("-m") {
            let m = d.word(*i + 1, "a match method", diags)?;
            method = match m {
                "str" => TextMethod::Str,
                "beg" => TextMethod::Beg,
                "end" => TextMethod::End,
                "sub" => TextMethod::Sub,
                "reg" => TextMethod::Reg,
                _ => {
                    diags.push(d.alert(format!(
                        "unknown match method '{m}' (expects str, beg, end, sub or reg)"
                    )));
                    return None;
                }
            };
            *i += 2;
        }
        let pattern = if method == TextMethod::Reg {
            regex_word(d, *i, diags)?
        } else {
            d.word(*i, "a pattern", diags)?.to_owned()
        };
        *i += 1;
        Some(TextMatch { method, pattern })
    };
    let name = text(&mut i, "name", diags)?;
    let value = if d.words.get(i).map(String::as_str) == Some("value") {
        Some(text(&mut i, "value", diags)?)
    } else {
        None
    };
    Some((ExpectKind::Header { full, name, value }, i))
}

/// The word at `i`, checked to be a valid regular expression.
fn regex_word(d: &Directive<'_>, i: usize, diags: &mut Diagnostics) -> Option<String> {
    let text = d.word(i, "a regular expression", diags)?;
    match regex::bytes::Regex::new(text) {
        Ok(_) => Some(text.to_owned()),
        Err(err) => {
            // The regex crate's message spans several lines; its last one names the problem.
            let message = err.to_string();
            let reason = message.lines().last().unwrap_or_default();
            let reason = reason.strip_prefix("error: ").unwrap_or(reason);
            diags.push(d.alert(format!("invalid regular expression '{text}': {reason}")));
            None
        }
    }
}

/// `200`, `200-399`, `200,302,500-599`.
pub fn parse_status_list(text: &str) -> Option<Vec<(u16, u16)>> {
    let code = |s: &str| s.parse::<u16>().ok().filter(|c| (100..=999).contains(c));
    text.split(',')
        .map(|part| match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (code(lo)?, code(hi)?);
                (lo <= hi).then_some((lo, hi))
            }
            None => code(part).map(|c| (c, c)),
        })
        .collect()
}

/// Hexadecimal text to bytes (an even number of digits).
pub fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

/// Server options that depend on the proxy's mode: `observe layer7` needs HTTP.
pub(crate) fn check_server_modes(
    http: bool,
    servers: &[crate::proxy::ServerConf],
    diags: &mut Diagnostics,
) {
    for s in servers {
        if !http && s.checks.observe == Some(Observe::Layer7) {
            diags.push(Diagnostic::alert(
                &s.span,
                "server observe",
                "'layer7' can only be used in http proxies",
            ));
        }
    }
}

/// HAProxy warns when a proxy has rules its check mode does not use: they are ignored.
pub(crate) fn warn_unused_rules(
    c: &ProxyChecks,
    name: &str,
    span: &Span,
    keyword: &str,
    diags: &mut Diagnostics,
) {
    let http = matches!(c.mode, CheckMode::Http(_));
    let tcp = c.mode == CheckMode::TcpCheck;
    let mut warn = |kind: &str, option: &str| {
        diags.push(Diagnostic::warning(
            span,
            keyword,
            format!(
                "proxy '{name}' uses {kind} rules without 'option {option}', so the rules are ignored"
            ),
        ));
    };
    if !c.http_rules.is_empty() && !http {
        warn("http-check", "httpchk");
    }
    if !c.tcp_rules.is_empty() && !tcp {
        warn("tcp-check", "tcp-check");
    }
}

/// One `default-server` line, kept as written: its options are applied to every following
/// `server` line of the section (and of the sections inheriting it), before the server's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultServerLine {
    /// Where it was written.
    pub span: Span,
    /// Its words, `default-server` first.
    pub words: Vec<String>,
}

impl DefaultServerLine {
    /// The line back in the parser's form.
    pub(crate) fn line(&self) -> Line {
        Line {
            span: self.span.clone(),
            words: self.words.clone(),
        }
    }
}

/// Where a tracked server must be found: resolves every `track` of `backends` (name, servers)
/// to indexes, and refuses unknown targets and targets that are not checked themselves.
pub fn resolve_tracks(
    backends: &mut [(String, &mut Vec<crate::proxy::ServerConf>)],
    diags: &mut Diagnostics,
) {
    // First the names, so a backend may track a server of one declared later.
    /// A server's name, whether it is checked, whether it tracks.
    type Entry = (String, bool, bool);
    let names: Vec<(String, Vec<Entry>)> = backends
        .iter()
        .map(|(name, servers)| {
            let list = servers
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.checks.check || s.checks.agent,
                        s.checks.track.is_some(),
                    )
                })
                .collect();
            (name.clone(), list)
        })
        .collect();
    for (b, (own, servers)) in backends.iter_mut().enumerate() {
        for server in servers.iter_mut() {
            let Some(track) = server.checks.track.as_mut() else {
                continue;
            };
            let backend_name = track.backend.as_deref().unwrap_or(own.as_str());
            let found = names
                .iter()
                .enumerate()
                .find(|(_, (n, _))| n == backend_name)
                .and_then(|(bi, (_, list))| {
                    list.iter()
                        .position(|(n, _, _)| *n == track.server)
                        .map(|si| (bi, si, list[si].1, list[si].2))
                });
            match found {
                None => diags.push(Diagnostic::alert(
                    &server.span,
                    "server",
                    format!(
                        "unable to find the server '{backend_name}/{}' to track",
                        track.server
                    ),
                )),
                Some((bi, si, _, _)) if bi == b && server.name == track.server => {
                    diags.push(Diagnostic::alert(
                        &server.span,
                        "server",
                        "a server cannot track itself",
                    ));
                    let _ = si;
                }
                Some((_, _, false, false)) => diags.push(Diagnostic::alert(
                    &server.span,
                    "server",
                    format!(
                        "unable to track '{backend_name}/{}': it has no check enabled",
                        track.server
                    ),
                )),
                Some((bi, si, _, _)) => track.resolved = Some((bi, si)),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn line(text: &str) -> Line {
        Line {
            span: Span::new(&Arc::from("t.cfg"), 1),
            words: text.split_whitespace().map(str::to_owned).collect(),
        }
    }

    fn rules(lines: &[&str]) -> (ProxyChecks, Vec<String>) {
        let mut c = ProxyChecks::default();
        let mut diags = Vec::new();
        for l in lines {
            let l = line(l);
            if l.words[0] == "option" {
                parse_check_option(&mut c, &l, &mut diags);
            } else {
                parse_rule_line(&mut c, SectionKind::Backend, &l, &mut diags);
            }
        }
        (c, diags.iter().map(|d| d.to_string()).collect())
    }

    #[test]
    fn httpchk_forms() {
        let (c, d) = rules(&["option httpchk"]);
        assert!(d.is_empty());
        assert_eq!(c.mode, CheckMode::Http(HttpRequestLine::default()));
        let (c, _) = rules(&["option httpchk /health"]);
        let CheckMode::Http(r) = c.mode else { panic!() };
        assert_eq!((r.method.as_str(), r.uri.as_str()), ("OPTIONS", "/health"));
        let (c, _) = rules(&["option httpchk GET /h HTTP/1.1"]);
        let CheckMode::Http(r) = c.mode else { panic!() };
        assert_eq!(
            (r.method.as_str(), r.uri.as_str(), r.version.as_str()),
            ("GET", "/h", "HTTP/1.1")
        );
        let (_, d) = rules(&["option httpchk GET /h HTTP/1.1 extra"]);
        assert_eq!(
            d,
            ["[ALERT] t.cfg:1: option httpchk: unexpected argument 'extra'"]
        );
    }

    #[test]
    fn expect_rules() {
        let (c, d) = rules(&[
            "http-check expect status 200-299,404",
            "http-check expect ! rstatus ^5",
            "http-check expect string ok",
            "http-check expect hdr name -m beg x-Ok value -m reg ^y",
            "http-check expect fhdr name content-type",
        ]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            c.http_rules[0],
            CheckRule::Expect(Expect {
                negate: false,
                kind: ExpectKind::Status(vec![(200, 299), (404, 404)])
            })
        );
        assert!(
            matches!(&c.http_rules[1], CheckRule::Expect(Expect { negate: true, kind: ExpectKind::RStatus(r) }) if r == "^5")
        );
        assert_eq!(
            c.http_rules[3],
            CheckRule::Expect(Expect {
                negate: false,
                kind: ExpectKind::Header {
                    full: false,
                    name: TextMatch {
                        method: TextMethod::Beg,
                        pattern: "x-Ok".into()
                    },
                    value: Some(TextMatch {
                        method: TextMethod::Reg,
                        pattern: "^y".into()
                    })
                }
            })
        );
        assert!(matches!(
            &c.http_rules[4],
            CheckRule::Expect(Expect {
                kind: ExpectKind::Header {
                    full: true,
                    value: None,
                    ..
                },
                ..
            })
        ));
    }

    #[test]
    fn bad_and_unsupported_rules_are_alerts() {
        let (_, d) = rules(&[
            "http-check expect status 2xx",
            "http-check expect rstring (",
            "tcp-check send-lf %[src]",
            "tcp-check expect min-recv 4 string x",
            "http-check expect status 200 on-success x",
            "tcp-check send-binary 0g",
            "http-check send hdr x-a %[src]",
            "tcp-check connect ssl",
        ]);
        assert_eq!(d.len(), 8, "{d:?}");
        assert!(d[0].contains("invalid status list '2xx'"));
        assert!(d[1].contains("invalid regular expression"));
        assert_eq!(
            d[2],
            "[ALERT] t.cfg:1: tcp-check send-lf: not supported by Sluice"
        );
        assert_eq!(
            d[3],
            "[ALERT] t.cfg:1: tcp-check expect min-recv: not supported by Sluice"
        );
        assert_eq!(
            d[4],
            "[ALERT] t.cfg:1: http-check expect on-success: not supported by Sluice"
        );
        assert!(d[5].contains("invalid hexadecimal string '0g'"));
        assert!(d[6].contains("log-format"));
        assert_eq!(
            d[7],
            "[ALERT] t.cfg:1: tcp-check connect ssl: not supported by Sluice"
        );
    }

    #[test]
    fn ready_made_checks() {
        let (c, d) = rules(&["option smtpchk EHLO example.com"]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.mode, CheckMode::TcpCheck);
        assert_eq!(
            c.tcp_rules[1],
            CheckRule::Send(b"EHLO example.com\r\n".to_vec())
        );
        let (c, _) = rules(&["option smtpchk FOO x"]);
        assert_eq!(c.tcp_rules[1], CheckRule::Send(b"HELO x\r\n".to_vec()));
        for ok in [
            "option redis-check",
            "option ldap-check",
            "option ssl-hello-chk",
            "option pgsql-check user hap",
            "option mysql-check",
            "option mysql-check user hap post-41",
        ] {
            let (c, d) = rules(&[ok]);
            assert!(d.is_empty(), "{ok}: {d:?}");
            assert!(!c.tcp_rules.is_empty(), "{ok}");
        }
        let (_, d) = rules(&[
            "option smtpchk HELO",
            "option pgsql-check",
            "option mysql-check user hap pre-41",
            "option ldap-check x",
        ]);
        assert_eq!(
            d,
            [
                "[ALERT] t.cfg:1: option smtpchk: expects nothing, or a hello command and a domain",
                "[ALERT] t.cfg:1: option pgsql-check: expects 'user <username>'",
                "[ALERT] t.cfg:1: option mysql-check pre-41: not supported by Sluice",
                "[ALERT] t.cfg:1: option ldap-check: unexpected argument 'x'",
            ]
        );
    }

    #[test]
    fn tcp_check_rules() {
        let (c, d) = rules(&[
            "option tcp-check",
            "tcp-check connect port 6379",
            "tcp-check send PING",
            "tcp-check send-binary 0a0D",
            "tcp-check expect ! binary ff",
            "tcp-check expect rbinary ^2B",
            "tcp-check comment hello",
        ]);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.mode, CheckMode::TcpCheck);
        assert_eq!(
            c.tcp_rules,
            vec![
                CheckRule::Connect(ConnectRule {
                    port: Some(6379),
                    addr: None,
                    send_proxy: false,
                }),
                CheckRule::Send(b"PING".to_vec()),
                CheckRule::Send(vec![0x0a, 0x0d]),
                CheckRule::Expect(Expect {
                    negate: true,
                    kind: ExpectKind::Binary(vec![0xff])
                }),
                CheckRule::Expect(Expect {
                    negate: false,
                    kind: ExpectKind::RBinary("^2B".into())
                }),
                CheckRule::Comment("hello".into()),
            ]
        );
    }

    #[test]
    fn a_proxy_rule_replaces_inherited_rules() {
        let mut c = ProxyChecks::default();
        let mut diags = Vec::new();
        parse_rule_line(
            &mut c,
            SectionKind::Defaults,
            &line("tcp-check send A"),
            &mut diags,
        );
        let mut proxy = c.clone();
        parse_rule_line(
            &mut proxy,
            SectionKind::Backend,
            &line("tcp-check send B"),
            &mut diags,
        );
        parse_rule_line(
            &mut proxy,
            SectionKind::Backend,
            &line("tcp-check send C"),
            &mut diags,
        );
        assert_eq!(
            proxy.tcp_rules,
            vec![
                CheckRule::Send(b"B".to_vec()),
                CheckRule::Send(b"C".to_vec())
            ]
        );
        assert_eq!(c.tcp_rules, vec![CheckRule::Send(b"A".to_vec())]);
    }

    #[test]
    fn server_options() {
        let l = line(
            "server s 1.2.3.4:80 check inter 50 fastinter 10 rise 3 fall 1 port 81 addr 10.0.0.1 agent-check agent-port 99 agent-send hi track b/x",
        );
        let d = Directive::new(&l, 1);
        let mut c = ServerChecks::default();
        let mut diags = Vec::new();
        let mut i = 3;
        while i < l.words.len() {
            match parse_server_option(&mut c, &d, i, &mut diags) {
                ServerOption::Consumed(n) => i += n + 1,
                _ => panic!("{}", l.words[i]),
            }
        }
        assert!(c.check && c.agent);
        assert_eq!(c.inter(), Duration::from_millis(50));
        assert_eq!(c.fastinter(), Duration::from_millis(10));
        assert_eq!(c.downinter(), Duration::from_millis(50));
        assert_eq!((c.rise(), c.fall()), (3, 1));
        assert_eq!(c.port, Some(81));
        assert_eq!(c.addr, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(c.agent_port, Some(99));
        assert_eq!(c.agent_send.as_deref(), Some(&b"hi"[..]));
        assert_eq!(c.track.as_ref().unwrap().backend.as_deref(), Some("b"));
        let fixed = crate::addr::parse_server_addr("1.2.3.4:80").unwrap();
        assert!(!validate_server(&c, &fixed, &d, &mut diags));
        assert_eq!(
            diags[0].to_string(),
            "[ALERT] t.cfg:1: server: unable to enable checks and tracking at the same time"
        );
    }

    #[test]
    fn status_lists_and_hex() {
        assert_eq!(
            parse_status_list("200,300-399"),
            Some(vec![(200, 200), (300, 399)])
        );
        assert_eq!(parse_status_list("399-300"), None);
        assert_eq!(parse_status_list(""), None);
        assert_eq!(decode_hex("00fF"), Some(vec![0, 255]));
        assert_eq!(decode_hex("abc"), None);
    }
}
