//! The network side of one check: connect, send, read, and judge what came back.
//!
//! A backend's check configuration is compiled once into a [`Program`] (a list of steps with
//! the implicit ones HAProxy adds: a first `connect`, the `option httpchk` request, the default
//! "2xx or 3xx" expectation). [`run`] executes it against one server and returns an
//! [`Outcome`]. Every wait is bounded: the connection by [`Limits::connect`], everything after it
//! by [`Limits::rest`]; reads stop at [`MAX_RESPONSE`] bytes, so a server can neither hang a check
//! nor make it buffer without end. Connections are closed with a reset (linger 0), as HAProxy
//! closes its check connections, so a thousand checked servers do not fill the TIME_WAIT table.

use crate::expect::{self, HttpResponse, Pattern, Rule};
use crate::reply::{self, Verdict};
use crate::status::{Outcome, Status};
use sluice_config::addr::AbstractName;
use sluice_config::checks::{
    CheckMode, CheckRule, ConnectRule, HttpRequestLine, ProxyChecks, Reply,
};
use sluice_config::proxy::SendProxy;
use sluice_net::proxy_protocol::{self, SentTlvs};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::{Instant, timeout, timeout_at};

/// How much of a response a check reads at most (HAProxy's default buffer size).
pub const MAX_RESPONSE: usize = 16384;

/// Where a check connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A TCP address.
    Inet(SocketAddr),
    /// A unix socket.
    Unix(PathBuf),
    /// A unix socket in the abstract namespace.
    Abstract(AbstractName),
}

impl Endpoint {
    /// This endpoint with a `connect` rule's port and address applied.
    fn with(&self, rule: &ConnectRule) -> Endpoint {
        match self {
            Endpoint::Inet(sa) => {
                let ip: IpAddr = rule.addr.unwrap_or(sa.ip());
                Endpoint::Inet(SocketAddr::new(ip, rule.port.unwrap_or(sa.port())))
            }
            Endpoint::Unix(_) | Endpoint::Abstract(_) => match (rule.addr, rule.port) {
                (Some(ip), Some(port)) => Endpoint::Inet(SocketAddr::new(ip, port)),
                _ => self.clone(),
            },
        }
    }
}

/// Time limits of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// For each connection attempt.
    pub connect: Duration,
    /// For everything after the first connection.
    pub rest: Duration,
    /// `source`: the local address TCP check connections are bound to, as the server's own.
    pub source: Option<SocketAddr>,
}

/// One compiled step.
#[derive(Clone, Debug)]
pub enum Step {
    /// Open a (new) connection.
    Connect(ConnectRule),
    /// Send raw bytes (tcp-check).
    Send(Vec<u8>),
    /// Send an HTTP request; `needs_body`: a following expect looks at the body.
    HttpSend {
        /// The head without its final empty line.
        head: Vec<u8>,
        /// The body.
        body: Vec<u8>,
        /// Read the whole body of the response.
        needs_body: bool,
    },
    /// Read and compare (tcp-check).
    Expect(Rule),
    /// Read and judge a protocol's answer (ready-made checks).
    Protocol(Reply),
    /// Compare the HTTP response; `None` is the default "2xx or 3xx".
    HttpExpect(Option<Rule>),
}

/// A backend's check, ready to run on any of its servers.
#[derive(Clone, Debug)]
pub struct Program {
    /// Steps with their rule numbers (0 for implicit steps) as messages show them.
    pub steps: Vec<(u32, Step)>,
    /// HTTP rather than tcp-check (or plain connect).
    pub http: bool,
    /// `http-check disable-on-404`.
    pub disable_on_404: bool,
    /// `http-check send-state`.
    pub send_state: bool,
    /// `option external-check`: the program to run instead of the steps.
    pub external: Option<crate::external::External>,
}

impl Program {
    /// The port of the first step when it is a `connect ... port N`: where a server without
    /// a port of its own is checked (the configuration refuses such a server otherwise).
    pub fn first_connect_port(&self) -> Option<u16> {
        match self.steps.first() {
            Some((_, Step::Connect(rule))) => rule.port,
            _ => None,
        }
    }

    /// Compiles a backend's check configuration.
    pub fn compile(c: &ProxyChecks) -> Program {
        let mut steps = Vec::new();
        let implicit_connect = |rules: &[CheckRule]| {
            !matches!(
                rules.iter().find(|r| !matches!(r, CheckRule::Comment(_))),
                Some(CheckRule::Connect(_))
            )
        };
        match &c.mode {
            CheckMode::Connect => {
                steps.push((0, Step::Connect(ConnectRule::default())));
            }
            CheckMode::TcpCheck => {
                if implicit_connect(&c.tcp_rules) {
                    steps.push((0, Step::Connect(ConnectRule::default())));
                }
                let mut n = 0;
                for rule in &c.tcp_rules {
                    let step = match rule {
                        CheckRule::Comment(_) | CheckRule::HttpSend(_) => continue,
                        CheckRule::Connect(r) => Step::Connect(r.clone()),
                        CheckRule::Send(b) => Step::Send(b.clone()),
                        CheckRule::Expect(e) => Step::Expect(Rule::compile(e)),
                        CheckRule::Protocol(r) => Step::Protocol(*r),
                    };
                    n += 1;
                    steps.push((n, step));
                }
            }
            // No steps: the program is the check.
            CheckMode::External => {}
            CheckMode::Http(line) => {
                if implicit_connect(&c.http_rules) {
                    steps.push((0, Step::Connect(ConnectRule::default())));
                }
                let has_send = c
                    .http_rules
                    .iter()
                    .any(|r| matches!(r, CheckRule::HttpSend(_)));
                if !has_send {
                    steps.push((0, http_send(line, &Default::default())));
                }
                let mut n = 0;
                for rule in &c.http_rules {
                    let step = match rule {
                        CheckRule::Comment(_) | CheckRule::Send(_) | CheckRule::Protocol(_) => {
                            continue;
                        }
                        CheckRule::Connect(r) => Step::Connect(r.clone()),
                        CheckRule::HttpSend(s) => http_send(line, s),
                        CheckRule::Expect(e) => Step::HttpExpect(Some(Rule::compile(e))),
                    };
                    n += 1;
                    steps.push((n, step));
                }
                if !steps.iter().any(|(_, s)| matches!(s, Step::HttpExpect(_))) {
                    steps.push((0, Step::HttpExpect(None)));
                }
                // Each request reads the body only if an expect of its exchange needs it.
                let mut needs = false;
                for (_, step) in steps.iter_mut().rev() {
                    match step {
                        Step::HttpExpect(Some(r)) if r.needs_body() => needs = true,
                        Step::HttpSend { needs_body, .. } => {
                            *needs_body = needs;
                            needs = false;
                        }
                        _ => {}
                    }
                }
            }
        }
        Program {
            steps,
            http: matches!(c.mode, CheckMode::Http(_)),
            disable_on_404: c.disable_on_404,
            send_state: c.send_state,
            external: (c.mode == CheckMode::External)
                .then(|| c.external_command.clone())
                .flatten()
                .map(|command| crate::external::External {
                    command,
                    path: c.external_path.clone().unwrap_or_default(),
                }),
        }
    }

    /// Whether the program only connects (a "Layer4" check).
    fn connect_only(&self) -> bool {
        self.steps
            .iter()
            .all(|(_, s)| matches!(s, Step::Connect(_)))
    }
}

fn http_send(line: &HttpRequestLine, s: &sluice_config::checks::HttpSend) -> Step {
    let mut head = Vec::new();
    let method = s.method.as_deref().unwrap_or(&line.method);
    let uri = s.uri.as_deref().unwrap_or(&line.uri);
    let version = s.version.as_deref().unwrap_or(&line.version);
    head.extend_from_slice(format!("{method} {uri} {version}\r\n").as_bytes());
    for (name, value) in &s.headers {
        // HAProxy sends header names in lower case.
        head.extend_from_slice(format!("{}: {value}\r\n", name.to_ascii_lowercase()).as_bytes());
    }
    let body = s.body.clone().unwrap_or_default().into_bytes();
    if !body.is_empty() {
        head.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    Step::HttpSend {
        head,
        body,
        needs_body: false,
    }
}

/// A check connection.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf).await,
            Conn::Unix(s) => s.read(buf).await,
        }
    }

    async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(data).await,
            Conn::Unix(s) => s.write_all(data).await,
        }
    }
}

/// The PROXY protocol header of a server's check connections (configuration.txt §5.2
/// `check-send-proxy`, `send-proxy-v2`, `proxy-v2-options`; §3.1 `pp2-never-send-local`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckProxy {
    /// Every connection starts with it (`check-send-proxy`, or the server's `send-proxy*`
    /// when the checks go to its own address); otherwise only a `tcp-check connect
    /// send-proxy` does.
    pub always: bool,
    /// The server's version (v1 for a server that sends none).
    pub version: SendProxy,
    /// `proxy-v2-options crc32c` and `ssl`: the TLVs a check's v2 header carries. A check
    /// has no client: no authority, no unique id.
    pub crc32c: bool,
    /// See `crc32c`.
    pub ssl: bool,
    /// A v2 header is a LOCAL command without addresses, as HAProxy sends it since 2.2,
    /// unless `pp2-never-send-local` asks for a PROXY command with the connection's own.
    pub local: bool,
}

/// The PROXY protocol header a check connection starts with: a v1 line with its own
/// addresses, or a v2 header, as HAProxy sends them.
fn proxy_header(c: &Conn, proxy: &CheckProxy) -> Vec<u8> {
    let (local, peer) = match c {
        Conn::Tcp(s) => (s.local_addr().ok(), s.peer_addr().ok()),
        Conn::Unix(_) => (None, None),
    };
    let mut header = Vec::with_capacity(64);
    match proxy.version {
        SendProxy::V1 => proxy_protocol::encode_v1(local, peer, &mut header),
        SendProxy::V2 => {
            let tlvs = SentTlvs {
                crc32c: proxy.crc32c,
                ssl: proxy.ssl,
                ..SentTlvs::NONE
            };
            let (source, destination) = if proxy.local {
                (None, None)
            } else {
                (local, peer)
            };
            proxy_protocol::encode_v2(source, destination, &tlvs, &mut header);
        }
    }
    header
}

/// The text of an I/O error without Rust's " (os error N)" suffix, as HAProxy shows strerror.
pub fn error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

async fn connect(ep: &Endpoint, limits: Limits) -> Result<Conn, Outcome> {
    let attempt = async {
        match ep {
            Endpoint::Inet(sa) => {
                let s = match limits.source {
                    // A check to another family (`addr`) cannot use the source: as HAProxy
                    // would fail to bind, the check fails.
                    Some(from) => {
                        let socket = if sa.is_ipv4() {
                            tokio::net::TcpSocket::new_v4()?
                        } else {
                            tokio::net::TcpSocket::new_v6()?
                        };
                        socket.set_reuseaddr(true)?;
                        socket.bind(from)?;
                        socket.connect(*sa).await?
                    }
                    None => TcpStream::connect(sa).await?,
                };
                // Closing with a reset: no TIME_WAIT left behind by checks. tokio deprecates
                // SO_LINGER because a non-zero linger blocks on close; a zero one never does.
                #[allow(deprecated)]
                let _ = s.set_linger(Some(Duration::ZERO));
                let _ = s.set_nodelay(true);
                Ok(Conn::Tcp(s))
            }
            Endpoint::Unix(path) => UnixStream::connect(path).await.map(Conn::Unix),
            Endpoint::Abstract(name) => sluice_net::stream::connect_abstract(name).map(Conn::Unix),
        }
    };
    match timeout(limits.connect, attempt).await {
        Err(_) => Err(Outcome::new(Status::L4Tout)),
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => {
            let status = match e.kind() {
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotFound
                | io::ErrorKind::AddrNotAvailable => Status::L4Con,
                _ if e.raw_os_error().is_some() => Status::L4Con,
                _ => Status::SockErr,
            };
            Err(Outcome::new(status).info(error_text(&e)))
        }
    }
}

/// Reads once more into `buf`; `Ok(false)` at the end of the stream or when `buf` is full.
async fn read_more(conn: &mut Conn, buf: &mut Vec<u8>, deadline: Instant) -> Result<bool, ()> {
    if buf.len() >= MAX_RESPONSE {
        return Ok(false);
    }
    let mut chunk = [0u8; 4096];
    let room = (MAX_RESPONSE - buf.len()).min(chunk.len());
    match timeout_at(deadline, conn.read(&mut chunk[..room])).await {
        Err(_) => Err(()),
        Ok(Ok(0)) | Ok(Err(_)) => Ok(false),
        Ok(Ok(n)) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(true)
        }
    }
}

/// Runs `program` against `ep`; `state` is the `X-Haproxy-Server-State` value for
/// `send-state`; `proxy` says which PROXY protocol header the connections start with, and
/// whether all do.
pub async fn run(
    program: &Program,
    ep: &Endpoint,
    limits: Limits,
    state: Option<&str>,
    proxy: CheckProxy,
) -> Outcome {
    let mut conn: Option<Conn> = None;
    let mut deadline = Instant::now() + limits.connect + limits.rest;
    let mut buf: Vec<u8> = Vec::new();
    let mut eof = false;
    let mut response: Option<HttpResponse> = None;
    // What a ready-made check's last verdict says on success.
    let mut success: Option<Outcome> = None;
    for (i, (number, step)) in program.steps.iter().enumerate() {
        match step {
            Step::Connect(rule) => {
                let mut c = match connect(&ep.with(rule), limits).await {
                    Ok(c) => c,
                    // An explicit tcp-check step says where it failed, as HAProxy does.
                    Err(mut outcome) if *number > 0 && !program.http => {
                        let port = rule.port.map(|p| format!(" port {p}")).unwrap_or_default();
                        let text = outcome.info.take().unwrap_or_default();
                        outcome.info = Some(format!(
                            "{text} at step {number} of tcp-check (connect{port})"
                        ));
                        return outcome;
                    }
                    Err(outcome) => return outcome,
                };
                deadline = Instant::now() + limits.rest;
                if proxy.always || rule.send_proxy {
                    let header = proxy_header(&c, &proxy);
                    if let Err(outcome) = send(&mut c, &header, deadline).await {
                        return outcome;
                    }
                }
                conn = Some(c);
                buf.clear();
                eof = false;
                response = None;
            }
            Step::Send(data) => {
                let Some(c) = conn.as_mut() else {
                    return Outcome::new(Status::L7Rsp).info("no connection to send on");
                };
                if let Err(outcome) = send(c, data, deadline).await {
                    return outcome;
                }
            }
            Step::HttpSend {
                head,
                body,
                needs_body,
            } => {
                let Some(c) = conn.as_mut() else {
                    return Outcome::new(Status::L7Rsp).info("no connection to send on");
                };
                let mut request = head.clone();
                if program.send_state
                    && let Some(state) = state
                {
                    request.extend_from_slice(
                        format!("x-haproxy-server-state: {state}\r\n").as_bytes(),
                    );
                }
                request.extend_from_slice(b"\r\n");
                request.extend_from_slice(body);
                if let Err(outcome) = send(c, &request, deadline).await {
                    return outcome;
                }
                response = match read_http(c, *needs_body, deadline).await {
                    Ok(r) => Some(r),
                    Err(outcome) => return outcome,
                };
            }
            Step::HttpExpect(rule) => {
                let Some(r) = response.as_ref() else {
                    return Outcome::new(Status::L7Rsp).info("no response to check");
                };
                if let Some(outcome) = judge_http(program, rule.as_ref(), r) {
                    return outcome;
                }
            }
            Step::Protocol(kind) => {
                let Some(c) = conn.as_mut() else {
                    return Outcome::new(Status::L7Rsp).info("no connection to read from");
                };
                loop {
                    match reply::judge(*kind, &buf, eof || buf.len() >= MAX_RESPONSE) {
                        Verdict::Pass(outcome) => {
                            success = Some(outcome);
                            break;
                        }
                        Verdict::Fail(outcome) => return outcome,
                        Verdict::Pending => {}
                    }
                    match read_more(c, &mut buf, deadline).await {
                        Err(()) => return Outcome::new(Status::L7Tout),
                        Ok(more) => eof = !more,
                    }
                }
                if matches!(
                    program.steps.get(i + 1),
                    Some((_, Step::Send(_) | Step::Connect(_)))
                ) {
                    buf.clear();
                }
            }
            Step::Expect(rule) => {
                let Some(c) = conn.as_mut() else {
                    return Outcome::new(Status::L7Rsp).info("no connection to read from");
                };
                loop {
                    let found = expect::match_bytes(&rule.pattern, &buf);
                    if found && !rule.negate {
                        break;
                    }
                    if found {
                        return Outcome::new(Status::L7Rsp).info(format!(
                            "TCPCHK matched unwanted content {} at step {number}",
                            describe(rule)
                        ));
                    }
                    if eof || buf.len() >= MAX_RESPONSE {
                        if rule.negate {
                            break;
                        }
                        return Outcome::new(Status::L7Rsp).info(format!(
                            "TCPCHK did not match content {} at step {number}",
                            describe(rule)
                        ));
                    }
                    match read_more(c, &mut buf, deadline).await {
                        // HAProxy's wording, leading space included.
                        Err(()) => {
                            return Outcome::new(Status::L7Tout).info(format!(
                                " at step {number} of tcp-check (expect {} '{}')",
                                kind_word(rule),
                                rule.source
                            ));
                        }
                        Ok(more) => eof = !more,
                    }
                }
                // A new exchange starts with fresh data.
                if matches!(
                    program.steps.get(i + 1),
                    Some((_, Step::Send(_) | Step::Connect(_)))
                ) {
                    buf.clear();
                }
            }
        }
    }
    if program.connect_only() {
        return Outcome::new(Status::L4Ok);
    }
    // HAProxy reports an HTTP success by its status alone.
    match (response, success) {
        (Some(r), _) => Outcome::new(Status::L7Ok).code(r.status),
        (None, Some(outcome)) => outcome,
        (None, None) => Outcome::new(Status::L7Ok).code(0).info("(tcp-check)"),
    }
}

/// The rule's keyword: `string`, `rstring`, `binary` or `rbinary`.
fn kind_word(rule: &Rule) -> &'static str {
    match rule.pattern {
        Pattern::Bytes(_, expect::Kind::Text) => "string",
        Pattern::Bytes(_, expect::Kind::Binary) => "binary",
        Pattern::Regex(_, expect::Kind::Binary) => "rbinary",
        _ => "rstring",
    }
}

/// How HAProxy names the pattern in its messages: only plain strings are quoted.
fn describe(rule: &Rule) -> String {
    match rule.pattern {
        Pattern::Bytes(_, expect::Kind::Text) => format!("'{}'", rule.source),
        Pattern::Bytes(_, expect::Kind::Binary) => "(binary)".to_owned(),
        Pattern::Regex(_, expect::Kind::Binary) => "(binary regex)".to_owned(),
        _ => "(regex)".to_owned(),
    }
}

async fn send(c: &mut Conn, data: &[u8], deadline: Instant) -> Result<(), Outcome> {
    match timeout_at(deadline, c.write_all(data)).await {
        Err(_) => Err(Outcome::new(Status::L7Tout)),
        Ok(Err(e)) => Err(Outcome::new(Status::L4Con).info(error_text(&e))),
        Ok(Ok(())) => Ok(()),
    }
}

/// The verdict of one HTTP expect rule, `None` when it passes.
fn judge_http(program: &Program, rule: Option<&Rule>, r: &HttpResponse) -> Option<Outcome> {
    if program.disable_on_404 && r.status == 404 {
        return Some(Outcome::new(Status::L7OkC).code(404));
    }
    let wrong_status = || {
        Outcome::new(Status::L7Sts)
            .code(r.status)
            .info(r.reason.clone())
    };
    match rule {
        None => (!(200..400).contains(&r.status)).then(wrong_status),
        Some(rule) if expect::match_http(rule, r) => None,
        // HAProxy's verdicts: status and header rules fail as a wrong status, body rules as an
        // invalid response.
        Some(rule) => Some(match rule.pattern {
            Pattern::Status(_) | Pattern::RStatus(_) | Pattern::Header { .. } => wrong_status(),
            _ if rule.negate => {
                Outcome::new(Status::L7Rsp).info("HTTP check matched unwanted content")
            }
            _ => Outcome::new(Status::L7Rsp).info("HTTP content check did not match"),
        }),
    }
}

/// Reads a response head, then the body when `needs_body` (up to [`MAX_RESPONSE`]).
async fn read_http(
    c: &mut Conn,
    needs_body: bool,
    deadline: Instant,
) -> Result<HttpResponse, Outcome> {
    let mut buf = Vec::new();
    let invalid = || Outcome::new(Status::L7Rsp);
    let (head_len, mut response, framing) = loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut fields);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(n)) => {
                let headers: Vec<(String, String)> = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_owned(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let framing = body_framing(&headers);
                break (
                    n,
                    HttpResponse {
                        status: parsed.code.unwrap_or(0),
                        reason: parsed.reason.unwrap_or_default().to_owned(),
                        headers,
                        body: Vec::new(),
                    },
                    framing,
                );
            }
            Ok(httparse::Status::Partial) => {}
            Err(_) => return Err(invalid()),
        }
        match read_more(c, &mut buf, deadline).await {
            Err(()) => return Err(Outcome::new(Status::L7Tout)),
            Ok(false) => return Err(invalid()),
            Ok(true) => {}
        }
    };
    if needs_body {
        loop {
            let body = buf.get(head_len..).unwrap_or_default();
            let complete = match framing {
                Framing::Length(n) => body.len() as u64 >= n,
                Framing::Chunked => body.ends_with(b"0\r\n\r\n"),
                Framing::Close => false,
            };
            if complete {
                break;
            }
            match read_more(c, &mut buf, deadline).await {
                Err(()) => return Err(Outcome::new(Status::L7Tout)),
                Ok(false) => break,
                Ok(true) => {}
            }
        }
        response.body = buf.get(head_len..).unwrap_or_default().to_vec();
    }
    Ok(response)
}

#[derive(Clone, Copy)]
enum Framing {
    Length(u64),
    Chunked,
    Close,
}

fn body_framing(headers: &[(String, String)]) -> Framing {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_ascii_lowercase())
    };
    if find("transfer-encoding").is_some_and(|v| v.ends_with("chunked")) {
        Framing::Chunked
    } else if let Some(n) = find("content-length").and_then(|v| v.parse().ok()) {
        Framing::Length(n)
    } else {
        Framing::Close
    }
}

/// Asks an agent: connects, sends `send` if any, and reads its first line (up to 1 KiB).
/// `Err` means the agent could not be asked (which never marks a server down by itself).
pub async fn ask_agent(
    ep: &Endpoint,
    send: Option<&[u8]>,
    limits: Limits,
) -> Result<Vec<u8>, Outcome> {
    let mut c = connect(ep, limits).await?;
    let deadline = Instant::now() + limits.rest;
    if let Some(data) = send {
        self::send(&mut c, data, deadline).await?;
    }
    let mut buf = Vec::new();
    while !buf.contains(&b'\n') && buf.len() < 1024 {
        match read_more(&mut c, &mut buf, deadline).await {
            Err(()) => return Err(Outcome::new(Status::L7Tout)),
            Ok(false) => break,
            Ok(true) => {}
        }
    }
    Ok(buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_config::checks::{Expect, ExpectKind, HttpSend};

    #[test]
    fn httpchk_compiles_to_connect_send_default_expect() {
        let mut c = ProxyChecks::default();
        c.mode = CheckMode::Http(HttpRequestLine::default());
        let p = Program::compile(&c);
        assert_eq!(p.steps.len(), 3);
        let Step::HttpSend { head, .. } = &p.steps[1].1 else {
            panic!()
        };
        assert_eq!(head, b"OPTIONS / HTTP/1.0\r\n");
        assert!(matches!(p.steps[2].1, Step::HttpExpect(None)));
    }

    #[test]
    fn http_send_rules_replace_the_request_parts() {
        let mut c = ProxyChecks::default();
        c.mode = CheckMode::Http(HttpRequestLine::default());
        c.http_rules = vec![
            CheckRule::HttpSend(HttpSend {
                method: Some("GET".into()),
                uri: Some("/h".into()),
                headers: vec![("Host".into(), "x".into())],
                body: Some("hi".into()),
                ..Default::default()
            }),
            CheckRule::Expect(Expect {
                negate: false,
                kind: ExpectKind::String(b"ok".to_vec()),
            }),
        ];
        let p = Program::compile(&c);
        let Step::HttpSend {
            head,
            body,
            needs_body,
        } = &p.steps[1].1
        else {
            panic!()
        };
        assert_eq!(
            String::from_utf8_lossy(head),
            "GET /h HTTP/1.0\r\nhost: x\r\ncontent-length: 2\r\n"
        );
        assert_eq!(body, b"hi");
        assert!(needs_body);
        assert_eq!(p.steps.len(), 3);
    }

    #[test]
    fn default_expect_and_disable_on_404() {
        let mut c = ProxyChecks::default();
        c.mode = CheckMode::Http(HttpRequestLine::default());
        let r = |status| HttpResponse {
            status,
            reason: "R".into(),
            ..Default::default()
        };
        let p = Program::compile(&c);
        assert_eq!(judge_http(&p, None, &r(302)), None);
        assert_eq!(
            judge_http(&p, None, &r(404)),
            Some(Outcome::new(Status::L7Sts).code(404).info("R"))
        );
        c.disable_on_404 = true;
        let p = Program::compile(&c);
        assert_eq!(
            judge_http(&p, None, &r(404)),
            Some(Outcome::new(Status::L7OkC).code(404))
        );
    }

    #[test]
    fn errors_read_like_strerror() {
        let e = io::Error::from_raw_os_error(111);
        assert_eq!(error_text(&e), "Connection refused");
    }
}
