//! End-to-end logging: lines reach a UDP syslog receiver in the configured format
//! (`log-format` with fetches and aliases, the minimal "Connect from" line), streams without
//! data are skipped with `option dontlognull`, normal ones with `option dontlog-normal`,
//! `option log-separate-errors` with a level bound sends only failed streams to an error-only
//! target, and an upgraded connection is logged when its tunnel ends, with the request it
//! started from.
//!
//! The receiver is a UDP socket of the test; ordering (a skipped stream first, a logged one
//! second) proves what was not sent without waiting for silence.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{
    HTTP_DEFAULTS, UPGRADE, http_backend, ok_backend, open_tunnel, upgrading_backend,
};
use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, sluice,
};
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};

/// A syslog receiver: the UDP socket and its address.
fn receiver() -> (UdpSocket, SocketAddr) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(GENEROUS)).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

fn next_line(socket: &UdpSocket) -> String {
    let mut buf = [0u8; 4096];
    let n = socket
        .recv(&mut buf)
        .expect("a log line within the time limit");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn start(config: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let text = config.replace("{bind}", &format!("bind {}", fd_bind(&listener)));
    (sluice(&text).inherit(listener).start(), addr)
}

fn get(addr: SocketAddr, path: &str) {
    let mut s = connect(addr);
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    read_to_close(&mut s, GENEROUS);
}

#[test]
fn log_format_renders_fetches_and_aliases_in_raw_format() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0
    log-format \"%ci %ST %[var(txn.path)] %ts %{{+Q}}r %b/%s\"
    http-request set-var(txn.path) path
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    get(addr, "/some/path?q=1");
    assert_eq!(
        next_line(&syslog),
        "127.0.0.1 200 /some/path -- \"GET /some/path?q=1 HTTP/1.1\" app/s1\n"
    );
}

#[test]
fn minimal_logging_reports_each_connection() {
    let echo = Backend::echo();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{TCP_DEFAULTS}
global
    log {log_addr} format short local0
    log-tag edge
frontend f
    {{bind}}
    log global
    default_backend b
backend b
    server s {}
",
        echo.addr()
    );
    let (_p, addr) = start(&config);
    let s = connect(addr);
    let local = s.local_addr().unwrap();
    assert_eq!(
        next_line(&syslog),
        format!("<6>Connect from {local} to {addr} (f/TCP)\n")
    );
}

#[test]
fn dontlognull_skips_silent_connections_and_tags_lines() {
    let echo = Backend::echo();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{TCP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local3
    log-tag edge
    option tcplog
    option dontlognull
    default_backend b
backend b
    server s {}
",
        echo.addr()
    );
    let (_p, addr) = start(&config);
    // A connection that sends nothing: not logged.
    let mut silent = connect(addr);
    silent.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut silent, GENEROUS);
    let mut talker = connect(addr);
    talker.write_all(b"ping").unwrap();
    talker.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut talker, GENEROUS);
    let line = next_line(&syslog);
    // local3 (19) * 8 + info (6) = 158, the tag, then the line of the talking connection.
    assert!(line.starts_with("<158>"), "{line}");
    assert!(line.contains(" edge["), "{line}");
    assert!(line.contains(" f b/s "), "{line}");
    assert!(
        line.contains(" 4 --"),
        "the silent connection was not logged: {line}"
    );
}

#[test]
fn separate_errors_reach_an_error_only_target() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0 err
    option httplog
    option log-separate-errors
    http-request deny if {{ path /forbidden }}
    http-request return status 503 if {{ path /broken }}
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    get(addr, "/fine");
    get(addr, "/broken");
    let line = next_line(&syslog);
    assert!(line.contains(" 503 "), "only the error is sent: {line}");
    assert!(line.contains("\"GET /broken HTTP/1.1\""), "{line}");
}

#[test]
fn unique_ids_reach_the_server_the_rules_and_the_log() {
    let (backend, seen) = ok_backend();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0
    unique-id-format %[req.hdr(x-req)]-%[path]
    unique-id-header X-Unique-ID
    log-format \"id=%ID\"
    http-request set-header X-Seen-Id %[unique-id]
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"GET /a HTTP/1.1\r\nHost: h\r\nX-Req: r1\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_to_close(&mut s, GENEROUS);
    assert_eq!(next_line(&syslog), "id=r1-/a\n");
    let got = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.header("x-unique-id").as_deref(), Some("r1-/a"));
    assert_eq!(got.header("x-seen-id").as_deref(), Some("r1-/a"));
}

#[test]
fn logasap_logs_an_http_exchange_once_the_response_head_is_sent() {
    // The server sends its head and half of the body, then waits for the test's word: the
    // line must arrive while the body is still incomplete.
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let backend = Backend::start(move |mut s| {
        let mut buf = [0u8; 4096];
        let _ = std::io::Read::read(&mut s, &mut buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
        let _ = release_rx.lock().unwrap().recv();
        let _ = s.write_all(b"world");
    });
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0
    option httplog
    option logasap
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"GET /big HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let line = next_line(&syslog);
    // `TR/Tw/Tc/Tr/+Ta status +bytes`: only what was sent so far is counted, since the
    // server holds the rest of the body.
    let fields: Vec<&str> = line.split(' ').collect();
    assert!(fields[4].contains("/+"), "{line}");
    assert_eq!(fields[5], "200", "{line}");
    assert!(fields[6].starts_with('+'), "{line}");
    assert!(line.ends_with("\"GET /big HTTP/1.1\"\n"), "{line}");
    release_tx.send(()).unwrap();
    let body = read_to_close(&mut s, GENEROUS);
    assert!(body.data().ends_with(b"helloworld"));
    // The end of the exchange logs nothing more: the next line is the next request's.
    release_tx.send(()).unwrap();
    get(addr, "/second");
    let line = next_line(&syslog);
    assert!(line.contains("\"GET /second HTTP/1.1\""), "{line}");
}

#[test]
fn logasap_logs_tcp_sessions_at_connect_and_marks_custom_format_numbers() {
    let echo = Backend::echo();
    let (syslog, log_addr) = receiver();
    let (l1, a1) = frontend();
    let (l2, a2) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}
frontend f
    bind {}
    log {log_addr} format raw local0
    option tcplog
    option logasap
    default_backend b
frontend g
    bind {}
    log {log_addr} format raw local0
    log-format \"%Tt %B %U %Tc\"
    option logasap
    default_backend b
backend b
    server s {}
",
        fd_bind(&l1),
        fd_bind(&l2),
        echo.addr()
    );
    let _p = sluice(&config).inherit(l1).inherit(l2).start();
    // The sessions stay open: each line comes from the established connection alone.
    let mut s = connect(a1);
    let line = next_line(&syslog);
    assert!(line.contains(" f b/s "), "{line}");
    assert!(line.contains("/+"), "total time so far: {line}");
    assert!(line.contains(" +0 --"), "no bytes yet: {line}");
    s.write_all(b"ping").unwrap();
    assert_eq!(common::read_n(&mut s, 4), b"ping");
    let _t = connect(a2);
    let line = next_line(&syslog);
    let fields: Vec<&str> = line.trim_end().split(' ').collect();
    assert!(fields[0].starts_with('+'), "%Tt so far: {line}");
    assert_eq!(fields[1], "+0", "%B so far: {line}");
    assert_eq!(fields[2], "0", "%U has no mark: {line}");
    assert!(!fields[3].starts_with('+'), "%Tc is final: {line}");
}

#[test]
fn failed_proxy_headers_are_logged_in_the_short_line_or_the_error_format() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    let (l1, a1) = frontend();
    let (l2, a2) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    bind {} accept-proxy name b1
    log {log_addr} format raw local0
    option httplog
    option dontlognull
    default_backend app
frontend g
    bind {} accept-proxy
    log {log_addr} format raw local0
    error-log-format \"ERR %ci %ft %[fc_err] %[fc_err_str] %ts %ST\"
    default_backend app
backend app
    server s1 {}
",
        fd_bind(&l1),
        fd_bind(&l2),
        backend.addr()
    );
    let _p = sluice(&config).inherit(l1).inherit(l2).start();
    // A probe that sends nothing: skipped under dontlognull (the next line is the garbage).
    let mut probe = connect(a1);
    probe.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut probe, GENEROUS);
    let mut s = connect(a1);
    let local = s.local_addr().unwrap();
    s.write_all(b"GARBAGE HERE\r\n\r\n").unwrap();
    read_to_close(&mut s, GENEROUS);
    let line = next_line(&syslog);
    let (prefix, rest) = line.split_once(" [").unwrap();
    assert_eq!(prefix, local.to_string());
    assert!(
        rest.ends_with(
            "] www/b1: Received something which does not look like a PROXY protocol header\n"
        ),
        "{line}"
    );
    let mut s = connect(a2);
    s.write_all(b"PROXY TCP4 1.2.3.4").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut s, GENEROUS);
    assert_eq!(
        next_line(&syslog),
        "ERR 127.0.0.1 g 14 Truncated PROXY protocol header received PR 0\n"
    );
    // As in HAProxy 2.6, streams keep their own format: the error format is only for
    // connections that never became one (here the minimal line of a good header).
    let mut s = connect(a2);
    s.write_all(b"PROXY TCP4 1.2.3.4 5.6.7.8 1000 80\r\n")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut s, GENEROUS);
    assert_eq!(
        next_line(&syslog),
        "Connect from 1.2.3.4:1000 to 5.6.7.8:80 (g/HTTP)\n"
    );
}

#[test]
fn ring_sections_keep_events_for_show_events() {
    let (backend, _) = ok_backend();
    let config = format!(
        "{HTTP_DEFAULTS}
ring events
    description \"traffic events\"
    format short
    maxlen 60
frontend www
    {{bind}}
    log ring@events local0
    log-format \"%ci %ST %{{+Q}}r\"
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (p, addr) = start(&config);
    let listing = p.cli("show events");
    assert!(
        listing.contains("    events     : type=buffer, 0 dropped, traffic events\n"),
        "{listing}"
    );
    // A follower of the (empty) ring gets every event, whether it was stored before its
    // command ran or after.
    let mut follower = std::os::unix::net::UnixStream::connect(p.stats_path()).unwrap();
    follower.set_read_timeout(Some(GENEROUS)).unwrap();
    follower.write_all(b"show events events -w\n").unwrap();
    let mut reader = std::io::BufReader::new(follower.try_clone().unwrap());
    get(addr, "/first");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    assert_eq!(line, "<6>127.0.0.1 200 \"GET /first HTTP/1.1\"\n");
    get(
        addr,
        "/a-long-path-that-the-ring-maxlen-cuts-off-somewhere-in-the-middle",
    );
    line.clear();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    // maxlen 60 includes the header and the line end the writer adds.
    assert_eq!(line.len(), 60, "{line:?}");
    // Any key stops the follower; the CLI closes.
    follower.write_all(b"\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    assert_eq!(rest, "");
    let dump = p.cli("show events events");
    assert!(
        dump.starts_with(
            "<6>127.0.0.1 200 \"GET /first HTTP/1.1\"\n<6>127.0.0.1 200 \"GET /a-long"
        ),
        "{dump}"
    );
    assert!(dump.ends_with("\n\n"), "{dump:?}");
    // `-n` without `-w`: only events to come, so nothing.
    assert_eq!(p.cli("show events events -n"), "\n");
    assert_eq!(
        p.cli("show events nope"),
        "No such event sink. Use 'show events' to see them.\n\n"
    );
    let info = p.cli("show info");
    assert_eq!(common::info_field(&info, "DroppedLogs"), Some("0"));
}

/// As HAProxy 2.6 answers and logs them: a client that closes before its request head is
/// whole, even without a byte, gets a 400 logged `CR--` with `<BADREQ>`; a first request that
/// does not come within `timeout http-request` gets a 408 logged `cR--`. The log counts none
/// of the page's bytes, as HAProxy's does (`400 0`). With `option dontlognull`, the connections
/// that sent nothing are answered but not logged.
#[test]
fn requests_that_never_came_are_answered_and_logged_like_haproxy() {
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{}
    timeout http-request 300ms
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    default_backend b
frontend quiet
    {{bind}}
    log {log_addr} local0
    option httplog
    option dontlognull
    default_backend b
backend b
    server s 127.0.0.1:1
",
        common::http::HTTP_DEFAULTS
    );
    let (f_listener, f) = frontend();
    let (quiet_listener, quiet) = frontend();
    let text = config
        .replacen("{bind}", &format!("bind {}", fd_bind(&f_listener)), 1)
        .replacen("{bind}", &format!("bind {}", fd_bind(&quiet_listener)), 1);
    let _p = sluice(&text)
        .inherit(f_listener)
        .inherit(quiet_listener)
        .start();
    let answer_to = |addr, sent: &[u8], shut: bool| {
        let mut s = connect(addr);
        s.write_all(sent).unwrap();
        if shut {
            s.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let closed = read_to_close(&mut s, GENEROUS);
        String::from_utf8_lossy(closed.data()).into_owned()
    };
    let lines: Vec<String> = [
        (b"".as_slice(), true, "HTTP/1.1 400 ", " 400 0 - - CR-- "),
        (b"GET / HT", true, "HTTP/1.1 400 ", " 400 0 - - CR-- "),
        (b"", false, "HTTP/1.1 408 ", " 408 0 - - cR-- "),
    ]
    .into_iter()
    .map(|(sent, shut, answer, logged)| {
        let got = answer_to(f, sent, shut);
        assert!(got.starts_with(answer), "{sent:?}: {got}");
        let line = next_line(&syslog);
        assert!(line.contains(" f f/<NOSRV> -1/-1/-1/-1/"), "{line}");
        assert!(line.contains(logged), "{sent:?}: {line}");
        assert!(line.trim_end().ends_with("\"<BADREQ>\""), "{line}");
        line
    })
    .collect();
    assert_eq!(lines.len(), 3);
    // Under dontlognull, the silent ones are answered but only the one that spoke is logged.
    assert!(answer_to(quiet, b"", true).starts_with("HTTP/1.1 400 "));
    assert!(answer_to(quiet, b"", false).starts_with("HTTP/1.1 408 "));
    assert!(answer_to(quiet, b"GET / HT", true).starts_with("HTTP/1.1 400 "));
    let line = next_line(&syslog);
    assert!(line.contains(" quiet quiet/<NOSRV> "), "{line}");
    assert!(line.contains(" 400 0 - - CR-- "), "{line}");
}

/// `option dontlognull` skips connections that sent nothing, not requests the proxy answered
/// itself: HAProxy logs a denied request with it on.
#[test]
fn dontlognull_still_logs_the_requests_the_proxy_answers() {
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{}
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    option dontlognull
    http-request deny if {{ path /deny }}
    http-request return status 200 if {{ path /return }}
",
        common::http::HTTP_DEFAULTS
    );
    let (_p, addr) = start(&config);
    for (path, logged) in [("/deny", " 403 "), ("/return", " 200 ")] {
        get(addr, path);
        let line = next_line(&syslog);
        assert!(line.contains(logged), "{path}: {line}");
        assert!(line.contains(&format!("\"GET {path} HTTP/1.1\"")), "{line}");
    }
}

/// The proxy's own answer to a server-side failure is counted in the log line's bytes, as
/// HAProxy counts it: a 503 when the server refuses the connection (`SC--`), a 502 when its
/// response is invalid (`PH--`).
#[test]
fn server_failures_are_logged_with_the_bytes_of_their_answer() {
    let bad = common::http::answering(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    );
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
    retries 0
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    use_backend bad if {{ path /bad }}
    default_backend dead
backend dead
    server d {}
backend bad
    server b {}
",
        common::refused_addr(),
        bad.addr()
    );
    let (_p, addr) = start(&config);
    for (path, status, state) in [("/dead", 503, "SC--"), ("/bad", 502, "PH--")] {
        let mut s = connect(addr);
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let Closed::Eof(answer) = read_to_close(&mut s, GENEROUS) else {
            panic!("{path}: the connection stayed open");
        };
        assert!(answer.starts_with(format!("HTTP/1.1 {status} ").as_bytes()));
        let line = next_line(&syslog);
        let logged = format!(" {status} {} - - {state} ", answer.len());
        assert!(line.contains(&logged), "{path}: {logged:?} in {line}");
    }
}

/// `log-format-sd` fills the structured data of the RFC 5424 targets' lines, rendered per
/// stream; targets in other formats do not get it.
#[test]
fn log_format_sd_fills_the_structured_data_of_rfc5424_lines() {
    let (backend, _) = ok_backend();
    let (rfc5424, rfc5424_addr) = receiver();
    let (bsd, bsd_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {rfc5424_addr} format rfc5424 local0
    log {bsd_addr} format rfc3164 local0
    log-tag edge
    log-format \"%ST %HP\"
    log-format-sd [req@1\\ status=\\\"%ST\\\"\\ path=\\\"%HP\\\"]
    default_backend b
backend b
    server s {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    get(addr, "/sd");
    let line = next_line(&rfc5424);
    assert!(
        line.starts_with("<134>1 ") && line.contains(" - edge "),
        "{line}"
    );
    assert!(
        line.ends_with(" - [req@1 status=\"200\" path=\"/sd\"] 200 /sd\n"),
        "{line}"
    );
    let line = next_line(&bsd);
    assert!(line.ends_with("]: 200 /sd\n"), "{line}");
    assert!(!line.contains("req@1"), "{line}");
}

/// `log-send-hostname NAME` puts that name in the host field of the headers that have one,
/// and makes the default format `rfc3164` (an explicit `format local` still has no host
/// name), as HAProxy 2.6 writes them.
#[test]
fn log_send_hostname_names_the_host_in_the_headers() {
    let (backend, _) = ok_backend();
    let (rfc5424, rfc5424_addr) = receiver();
    let (local, local_addr) = receiver();
    let (explicit, explicit_addr) = receiver();
    let config = format!(
        "global
    log-send-hostname edge7
{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {rfc5424_addr} format rfc5424 local0
    log {local_addr} local0
    log {explicit_addr} format local local0
    log-tag px
    log-format \"%ST\"
    default_backend b
backend b
    server s {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    get(addr, "/");
    let line = next_line(&rfc5424);
    assert!(
        line.starts_with("<134>1 ") && line.contains(" edge7 px ") && line.ends_with(" - - 200\n"),
        "{line}"
    );
    let line = next_line(&local);
    assert!(
        line.starts_with("<134>") && line.contains(" edge7 px["),
        "{line}"
    );
    let line = next_line(&explicit);
    assert!(
        line.starts_with("<134>") && !line.contains("edge7"),
        "{line}"
    );
}

/// `tune.http.logurilen` bounds the request line logs keep, and the parts read from it: a
/// line cut before its version reads as HTTP/0.9, as in HAProxy 2.6.
#[test]
fn logs_keep_tune_http_logurilen_bytes_of_the_request_line() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "global
    tune.http.logurilen 30
{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} format raw local0
    log-format \"%{{+Q}}r|%HU|%HV\"
    default_backend b
backend b
    server s {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    get(addr, "/0123456789/0123456789/0123456789");
    assert_eq!(
        next_line(&syslog),
        "\"GET /0123456789/0123456789/012\"|/0123456789/0123456789/012|HTTP/0.9\n"
    );
    get(addr, "/short");
    assert_eq!(
        next_line(&syslog),
        "\"GET /short HTTP/1.1\"|/short|HTTP/1.1\n"
    );
}

/// `option dontlog-normal` logs only the streams that went wrong: a normal exchange and an
/// answer of the proxy's own (`L`) are skipped, a 5xx and a client that leaves mid-request
/// are logged.
#[test]
fn dontlog_normal_logs_only_the_errors() {
    let (server, _) = http_backend(|req| match req.request_line().split(' ').nth(1) {
        Some("/fail") => "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n".to_owned(),
        _ => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned(),
    });
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    option dontlog-normal
    http-request return status 200 content-type text/plain string hi if {{ path /local }}
    default_backend b
backend b
    server s {}
",
        server.addr()
    );
    let (_p, addr) = start(&config);
    // Ordered: a skipped stream, then a logged one, proves the first was never sent.
    get(addr, "/ok");
    get(addr, "/local");
    get(addr, "/fail");
    let line = next_line(&syslog);
    assert!(
        line.contains(" 500 ") && line.contains("\"GET /fail HTTP/1.1\""),
        "{line}"
    );
    get(addr, "/ok");
    let mut cut = connect(addr);
    cut.write_all(b"GET /cut HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    drop(cut);
    let line = next_line(&syslog);
    assert!(line.contains("\"GET /cut HTTP/1.1\""), "{line}");
    assert!(!line.contains(" ---- "), "{line}");
}

/// A response the proxy refuses or answers in the server's place is logged as HAProxy logs
/// it, with no response time: `PH--` for `http-response deny` and for `option checkcache`,
/// `LH--` for `http-response return`. `checkcache` answers 502 (as HAProxy's manual says; 2.6
/// itself sends its 200 page), closes the connection and logs an alert.
#[test]
fn responses_answered_by_the_proxy_are_logged_as_its_doing() {
    let (server, _) = http_backend(|req| {
        let fields = match req.request_line().split(' ').nth(1) {
            Some("/deny") => "X-Deny: 1\r\n",
            Some("/return") => "X-Return: 1\r\n",
            Some("/drop") => "X-Drop: 1\r\n",
            _ => "Set-Cookie: id=1\r\nCache-Control: max-age=60\r\n",
        };
        format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 6\r\n\r\nsecret")
    });
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    http-response deny if {{ res.hdr(x-deny) -m found }}
    http-response return status 203 content-type text/plain string hi if {{ res.hdr(x-return) -m found }}
    http-response silent-drop if {{ res.hdr(x-drop) -m found }}
    default_backend b
backend b
    option checkcache
    server s {}
",
        server.addr()
    );
    let (_p, addr) = start(&config);
    for (path, status, state) in [
        ("/deny", 502, "PH--"),
        ("/return", 203, "LH--"),
        ("/cached", 502, "PH--"),
    ] {
        let mut s = connect(addr);
        // The client asks to close, so the answer is all that comes (a kept-alive client
        // keeps its connection after such an answer: `response_answers_keep_alive.vtc`).
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let Closed::Eof(answer) = read_to_close(&mut s, GENEROUS) else {
            panic!("{path}: the connection stayed open");
        };
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with(&format!("HTTP/1.1 {status} ")), "{text}");
        assert!(!text.contains("secret") && !text.contains("id=1"), "{text}");
        if path == "/cached" {
            let alert = next_line(&syslog);
            // local0 (16) at severity alert (1).
            assert!(alert.starts_with("<129>"), "{alert}");
            assert!(
                alert.ends_with(
                    "Blocking cacheable cookie in response from instance b, server s.\n"
                ),
                "{alert}"
            );
        }
        let line = next_line(&syslog);
        let logged = format!(" {status} {} - - {state} ", answer.len());
        assert!(line.contains(&logged), "{path}: {logged:?} in {line}");
        assert!(line.contains("/-1/"), "{path}: no response time in {line}");
    }
    // `http-response silent-drop`: no answer, a reset; the server's status, nothing sent,
    // `PR--` (HAProxy marks the drop as made in the request phase).
    let mut s = connect(addr);
    write!(s, "GET /drop HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    let seen = read_to_close(&mut s, GENEROUS);
    assert!(
        matches!(&seen, Closed::Reset(d) if d.is_empty()),
        "{seen:?}"
    );
    let line = next_line(&syslog);
    assert!(line.contains(" 200 0 - - PR-- "), "{line}");
    assert!(line.contains("/-1/"), "no response time in {line}");
}

/// `http-response wait-for-body` that waits in vain answers 504, logged as a server timeout
/// while the body was awaited (`sD--`), without a response time; the server is not retried.
#[test]
fn a_response_body_that_never_comes_is_a_504() {
    let stalled = Backend::start(|mut s| {
        let mut buf = [0u8; 4096];
        let _ = std::io::Read::read(&mut s, &mut buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        std::thread::sleep(std::time::Duration::from_secs(3));
    });
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    default_backend b
backend b
    retry-on all-retryable-errors
    http-response wait-for-body time 300ms
    server s {}
",
        stalled.addr()
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut s, GENEROUS);
    let text = String::from_utf8_lossy(answer.data());
    assert!(text.starts_with("HTTP/1.1 504 "), "{text}");
    let line = next_line(&syslog);
    assert!(line.contains(" 504 ") && line.contains(" sD-- "), "{line}");
    assert!(line.contains("/-1/"), "no response time in {line}");
    assert_eq!(stalled.accepted(), 1, "the request was sent again");
}

/// A response cut short by its server (`SD--`) is logged with the bytes the client got, its
/// head and what came of its body, not 0.
#[test]
fn a_response_cut_short_counts_what_the_client_got() {
    let cut = common::http::answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local0
    option httplog
    default_backend b
backend b
    server s {}
",
        cut.addr()
    );
    let (p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    let got = read_to_close(&mut s, GENEROUS);
    assert!(got.data().ends_with(b"\r\n\r\nabc"));
    let line = next_line(&syslog);
    assert!(
        line.contains(&format!(" 200 {} - - SD-- ", got.data().len())),
        "{line}"
    );
    // A server abort (`srv_abrt`, the 51st field) on the server and its backend, as HAProxy
    // counts it; no client abort.
    let stat = p.cli("show stat");
    for prefix in ["b,s,", "b,BACKEND,"] {
        let row = stat.lines().find(|l| l.starts_with(prefix)).unwrap();
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!((fields[49], fields[50]), ("0", "1"), "{row}");
    }
}

#[test]
fn record_fetches_read_what_their_aliases_print() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    // Each pair: a fetch of the record and the alias it stands for (configuration.txt
    // §8.2.6's "sample fetch alternative" column).
    let pairs = [
        ("txn.status", "ST"),
        ("txn.sess_term_state", "ts"),
        ("req.bytes_in", "U"),
        ("bytes_in", "U"),
        ("res.bytes_in", "B"),
        ("txn.conn_retries", "rc"),
        ("bc_be_queue", "bq"),
        ("bc_srv_queue", "sq"),
        ("txn.id32", "rt"),
        ("pid", "pid"),
        ("act_conn", "ac"),
        ("accept_date", "Ts"),
        ("res.timer.hdr", "Tr"),
        ("req.timer.hdr", "TR"),
        ("req.timer.tq", "Tq"),
        ("req.timer.idle", "Ti"),
        ("req.timer.queue", "Tw"),
        ("bc.timer.connect", "Tc"),
        ("res.timer.data", "Td"),
        ("txn.timer.total", "Ta"),
        ("txn.timer.user", "Tu"),
        ("fc.timer.total", "Tt"),
        ("fc.timer.handshake", "Th"),
    ];
    let format: Vec<String> = pairs
        .iter()
        .map(|(fetch, alias)| format!("%[{fetch}]=%{alias}"))
        .collect();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0
    log-format \"{} %[txn.redispatched] %[accept_date(ms),div(1000)]=%Ts\"
    http-response set-header x-live %[pid]/%[act_conn]/%[uptime]
    default_backend app
backend app
    server s1 {}
",
        format.join(" "),
        backend.addr()
    );
    let (p, addr) = start(&config);
    let mut s = connect(addr);
    s.write_all(b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut s, GENEROUS);
    let answer = String::from_utf8_lossy(answer.data()).into_owned();
    // Rules see the process's facts live: its pid, this one connection, its uptime.
    let live = format!("x-live: {}/1/", p.pid());
    assert!(answer.contains(&live), "{answer}");
    let line = next_line(&syslog);
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!(words.len(), pairs.len() + 2, "{line}");
    for (word, (fetch, alias)) in words.iter().zip(pairs) {
        let (fetched, printed) = word.split_once('=').unwrap();
        assert_eq!(fetched, printed, "{fetch} against %{alias} in {line}");
    }
    // Read back, the fetches are numbers as the aliases print them.
    assert!(line.starts_with("200=200 --=-- "), "{line}");
    assert_eq!(words[pairs.len()], "0", "not redispatched: {line}");
    let (ms, ts) = words[pairs.len() + 1].split_once('=').unwrap();
    assert_eq!(ms, ts, "accept_date(ms) is the same second: {line}");
}

#[test]
fn record_fetches_are_refused_where_no_record_exists() {
    let dir = common::TempDir::new();
    let cfg = dir.write(
        "c.cfg",
        &format!(
            "{HTTP_DEFAULTS}
frontend www
    bind 127.0.0.1:0
    http-request set-var(txn.t) res.timer.hdr
    default_backend app
backend app
    server s1 127.0.0.1:9
"
        ),
    );
    let out = common::run(&["-c", "-f", cfg.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("c.cfg:")
            && err.contains("'res.timer.hdr' extracts information from 'log record'"),
        "{err}"
    );
}

#[test]
fn bc_reused_tells_a_kept_server_connection_from_a_new_one() {
    let (backend, _) = ok_backend();
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend www
    {{bind}}
    log {log_addr} format raw local0
    log-format \"%HP %[bc_reused] %[res.comp] %[res.comp_algo]\"
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    // Two requests on one client connection: the second goes over the server connection the
    // first opened.
    let mut s = connect(addr);
    s.write_all(b"GET /first HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let first = common::read_n(
        &mut s,
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".len(),
    );
    assert!(first.ends_with(b"\r\n\r\nok"), "{first:?}");
    s.write_all(b"GET /second HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_to_close(&mut s, GENEROUS);
    // Nothing compressed: false, and no algorithm.
    assert_eq!(next_line(&syslog), "/first 0 0 -\n");
    assert_eq!(next_line(&syslog), "/second 1 0 -\n");
}

/// `set-var-fmt` in `tcp-response content` rules: the variable holds the format rendered over
/// the server's first bytes, and the log line reads it.
#[test]
fn tcp_response_rules_set_variables_from_formats() {
    let banner = Backend::start(|mut s| {
        let _ = s.write_all(b"220 ready\r\n");
        let mut buf = [0u8; 64];
        while matches!(std::io::Read::read(&mut s, &mut buf), Ok(n) if n > 0) {}
    });
    let (syslog, log_addr) = receiver();
    let config = format!(
        "{TCP_DEFAULTS}
frontend f
    {{bind}}
    log {log_addr} local0
    log-format \"banner=%[var(sess.banner)]\"
    default_backend b
backend b
    tcp-response inspect-delay 5s
    tcp-response content set-var-fmt(sess.banner) \"%[res.len]-%[res.payload(0,3)]\" if {{ res.len ge 11 }}
    server s {}
",
        banner.addr()
    );
    let (_p, addr) = start(&config);
    let mut s = connect(addr);
    let mut greeting = [0u8; 11];
    std::io::Read::read_exact(&mut s, &mut greeting).unwrap();
    assert_eq!(&greeting, b"220 ready\r\n");
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(&mut s, GENEROUS);
    let line = next_line(&syslog);
    assert!(line.ends_with("banner=11-220\n"), "{line}");
}

#[test]
fn an_upgraded_connection_is_logged_when_its_tunnel_ends() {
    let backend = upgrading_backend();
    let (syslog, log_addr) = receiver();
    // The format reads the request's head (a header, the request line) long after the
    // request's own state is gone: the tunnel keeps them for its line.
    let config = format!(
        "{HTTP_DEFAULTS}    timeout tunnel 30s
frontend www
    {{bind}}
    log {log_addr} format raw local0
    log-format \"%ST %{{+Q}}r %[req.hdr(upgrade)] %U\"
    default_backend app
backend app
    server s1 {}
",
        backend.addr()
    );
    let (_p, addr) = start(&config);
    let client = open_tunnel(addr);
    // The line is written when the tunnel ends, with every byte the client sent through it.
    drop(client);
    assert_eq!(
        next_line(&syslog),
        format!("101 \"GET /ws HTTP/1.1\" websocket {}\n", UPGRADE.len() + 4)
    );
}
