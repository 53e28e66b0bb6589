//! Health checks end to end, with short intervals (`inter 50`) and every wait a `wait_until` on
//! something observable (a transition message on stderr, or where traffic goes): a refusing
//! server goes down and traffic avoids it, then comes back after `rise` successes; `option
//! httpchk` with `http-check expect status`; `tcp-check send/expect`; a hanging check cut by
//! `timeout check`; agent `drain`, `ready`, `down` and `NN%`; `track`; backup takeover; a
//! backend without any usable server answers 503 at once; the messages' exact form.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close,
    refused_addr, wait_until,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a transition may take to show: many check intervals on a loaded machine.
const TRANSITION: Duration = Duration::from_secs(10);

/// The answer of one TCP connection to a frontend whose servers send their name.
fn name_of(addr: SocketAddr) -> String {
    let mut c = connect(addr);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(d) => String::from_utf8(d).unwrap(),
        other => panic!("connection not served: {other:?}"),
    }
}

fn names(addr: SocketAddr, n: usize) -> Vec<String> {
    (0..n).map(|_| name_of(addr)).collect()
}

/// Waits until the process's stderr contains `text`; returns the whole stderr.
fn wait_for_message(proxy: &common::Sluice, text: &str) -> String {
    let mut seen = String::new();
    let found = wait_until(TRANSITION, || {
        seen = proxy.stderr();
        seen.contains(text)
    });
    assert!(
        found,
        "no '{text}' on stderr within {TRANSITION:?}:\n{seen}"
    );
    seen
}

/// Reads an HTTP request head from `s`; returns it.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// An HTTP server answering every request with `status reason` and `body`, then closing;
/// records the request lines it saw.
fn http_server(
    status: u16,
    reason: &'static str,
    body: &'static str,
) -> (Backend, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let backend = Backend::start(move |mut s| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        log.lock()
            .unwrap()
            .push(head.lines().next().unwrap_or_default().to_owned());
        let _ = write!(
            s,
            "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    (backend, seen)
}

/// One HTTP/1.1 request through the proxy: the status and the body.
fn get(addr: SocketAddr) -> (u16, String) {
    let mut c = connect(addr);
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let data = read_to_close(&mut c, GENEROUS);
    let text = String::from_utf8_lossy(data.data()).into_owned();
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

const HTTP_DEFAULTS: &str = "\
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
";

#[test]
fn a_refusing_server_goes_down_then_comes_back_after_rise() {
    let one = Backend::named("one");
    let late = refused_addr();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} check inter 50 rise 2 fall 2\n    server s2 {late} check inter 50 rise 2 fall 2\n",
        fd_bind(&fe),
        one.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/s2 is DOWN");
    // The exact form, as HAProxy 2.6 prints it (the duration may vary).
    let line = stderr
        .lines()
        .find(|l| l.contains("Server app/s2 is DOWN"))
        .unwrap();
    let prefix = format!(
        "[WARNING]  ({}) : Server app/s2 is DOWN, reason: Layer4 connection problem, info: \"Connection refused\", check duration: ",
        proxy.pid()
    );
    assert!(line.starts_with(&prefix), "{line}");
    assert!(
        line.ends_with(
            "ms. 1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        ),
        "{line}"
    );
    assert_eq!(names(addr, 4), ["one"; 4]);

    // The server appears: two good checks later it takes its share again.
    let listener = TcpListener::bind(late).expect("rebind the server port");
    let _two = Backend::serve(listener, |mut s| {
        let _ = s.write_all(b"two");
    });
    let stderr = wait_for_message(&proxy, "Server app/s2 is UP");
    let up = stderr
        .lines()
        .find(|l| l.contains("Server app/s2 is UP"))
        .unwrap();
    assert!(
        up.contains(", reason: Layer4 check passed, check duration: ")
            && up.ends_with(
                "ms. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."
            ),
        "{up}"
    );
    let mut got = names(addr, 4);
    got.sort();
    assert_eq!(got, ["one", "one", "two", "two"]);
}

#[test]
fn httpchk_expect_status_takes_a_failing_server_out() {
    let (good, good_seen) = http_server(200, "OK", "good");
    let (bad, _) = http_server(500, "Internal Server Error", "bad");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    option httpchk GET /health\n    http-check expect status 200\n    server good {} check inter 50\n    server bad {} check inter 50\n",
        fd_bind(&fe),
        good.addr(),
        bad.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/bad is DOWN");
    assert!(
        stderr.contains("Server app/bad is DOWN, reason: Layer7 wrong status, code: 500, info: \"Internal Server Error\", check duration: "),
        "{stderr}"
    );
    assert!(
        !stderr.contains("has no server available"),
        "one server is still up: {stderr}"
    );
    for _ in 0..4 {
        assert_eq!(get(addr), (200, "good".to_owned()));
    }
    assert!(
        good_seen
            .lock()
            .unwrap()
            .iter()
            .any(|l| l == "GET /health HTTP/1.0"),
        "the check request is 'GET /health HTTP/1.0'"
    );
    assert!(!stderr.contains("Server app/good is DOWN"), "{stderr}");
}

#[test]
fn a_backend_without_usable_server_answers_503_at_once() {
    let dead = refused_addr();
    let (fe, addr) = frontend();
    // A long connect timeout and retries would be visible if the proxy still tried the server.
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 3s\n    timeout client 30s\n    timeout server 30s\n    retries 3\n\
         backend be\n    server s1 {dead} check inter 50\n\
         frontend fe\n    bind {}\n    default_backend be\n",
        fd_bind(&fe),
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "has no server available!");
    assert!(
        stderr.contains(&format!(
            "[ALERT]    ({}) : backend 'be' has no server available!",
            proxy.pid()
        )),
        "{stderr}"
    );
    let started = Instant::now();
    assert_eq!(get(addr).0, 503);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

/// A server answering `reply` to the first thing it receives, then closing unless `hang`.
fn line_server(reply: &'static str, hang: bool) -> Backend {
    Backend::start(move |mut s| {
        let mut buf = [0u8; 256];
        if matches!(s.read(&mut buf), Ok(n) if n > 0)
            && s.write_all(reply.as_bytes()).is_ok()
            && hang
        {
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        }
    })
}

#[test]
fn tcp_check_send_and_expect() {
    let pong = line_server("+PONG\r\n", true);
    let err = line_server("-ERR\r\n", false);
    let hang = line_server("-ERR\r\n", true);
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}    timeout check 200ms\nlisten app\n    bind {}\n    option tcp-check\n    tcp-check send PING\\r\\n\n    tcp-check expect string +PONG\n    server pong {} check inter 50\n    server err {} check inter 50\n    server hang {} check inter 50\n",
        fd_bind(&fe),
        pong.addr(),
        err.addr(),
        hang.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/err is DOWN");
    assert!(
        stderr.contains("Server app/err is DOWN, reason: Layer7 invalid response, info: \"TCPCHK did not match content '+PONG' at step 2\", check duration: "),
        "{stderr}"
    );
    // A server that answers something else and waits: HAProxy waits too, until the timeout.
    let stderr = wait_for_message(&proxy, "Server app/hang is DOWN");
    assert!(
        stderr.contains("Server app/hang is DOWN, reason: Layer7 timeout, info: \" at step 2 of tcp-check (expect string '+PONG')\", check duration: "),
        "{stderr}"
    );
    assert!(!stderr.contains("Server app/pong is DOWN"), "{stderr}");
}

#[test]
fn timeout_check_cuts_a_hanging_check() {
    let silent = Backend::silent();
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}    timeout check 100ms\nlisten app\n    bind {}\n    option httpchk\n    server s1 {} check inter 5s\n",
        fd_bind(&fe),
        silent.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/s1 is DOWN");
    let duration: u64 = stderr
        .split("reason: Layer7 timeout, check duration: ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no Layer7 timeout with a duration: {stderr}"));
    // Cut after 100ms, long before `inter` (5s).
    assert!((100..5000).contains(&duration), "{duration}ms");
}

/// An agent answering the current contents of `word` to each connection.
fn agent(word: Arc<Mutex<String>>) -> Backend {
    Backend::start(move |mut s| {
        let text = word.lock().unwrap().clone();
        let _ = s.write_all(format!("{text}\n").as_bytes());
    })
}

#[test]
fn agent_words_drain_ready_down_and_weight() {
    let one = Backend::named("one");
    let two = Backend::named("two");
    let word = Arc::new(Mutex::new("drain".to_owned()));
    let agent = agent(Arc::clone(&word));
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} weight 2 agent-check agent-port {} agent-inter 50\n    server s2 {} weight 2\n",
        fd_bind(&fe),
        one.addr(),
        agent.addr().port(),
        two.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/s1 enters drain state.");
    assert!(
        stderr.contains("Server app/s1 enters drain state. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."),
        "{stderr}"
    );
    assert_eq!(names(addr, 4), ["two"; 4]);

    *word.lock().unwrap() = "ready".to_owned();
    wait_for_message(&proxy, "Server app/s1 is UP (leaving forced drain).");
    let mut got = names(addr, 4);
    got.sort();
    assert_eq!(got, ["one", "one", "two", "two"]);

    // 50% of weight 2 is 1 against 2: one connection in three for s1.
    *word.lock().unwrap() = "50%".to_owned();
    assert!(
        wait_until(TRANSITION, || {
            let got = names(addr, 6);
            got.iter().filter(|n| *n == "one").count() == 2
        }),
        "the agent's 50% never took effect"
    );

    *word.lock().unwrap() = "down".to_owned();
    let stderr = wait_for_message(&proxy, "Server app/s1 is DOWN");
    assert!(
        stderr.contains("Server app/s1 is DOWN, reason: Layer7 wrong status, code: 0, info: \"via agent : down\", check duration: "),
        "{stderr}"
    );
    assert_eq!(names(addr, 3), ["two"; 3]);

    *word.lock().unwrap() = "up".to_owned();
    let stderr = wait_for_message(&proxy, "Server app/s1 is UP, reason");
    assert!(
        stderr.contains("Server app/s1 is UP, reason: Layer7 check passed, code: 0, info: \"via agent : up\", check duration: "),
        "{stderr}"
    );
}

#[test]
fn a_tracking_server_follows_its_target_and_backups_take_over() {
    let one = Backend::named("one");
    let spare = Backend::named("spare");
    let dead = refused_addr();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nbackend checked\n    server s1 {dead} check inter 50\n\
         listen app\n    bind {}\n    server t1 {} track checked/s1\n    server b1 {} backup\n",
        fd_bind(&fe),
        one.addr(),
        spare.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/t1 is DOWN via checked/s1.");
    assert!(
        stderr.contains("Server app/t1 is DOWN via checked/s1. 0 active and 1 backup servers left. Running on backup. 0 sessions active, 0 requeued, 0 remaining in queue."),
        "{stderr}"
    );
    assert_eq!(names(addr, 3), ["spare"; 3]);
}

/// An SMTP-like server: `banner`, then `reply` to each line.
fn smtp_server(banner: &'static str, reply: &'static str) -> Backend {
    Backend::start(move |mut s| {
        if s.write_all(banner.as_bytes()).is_err() {
            return;
        }
        let mut buf = [0u8; 256];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {
            if s.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    })
}

#[test]
fn smtpchk_wants_2xx_answers() {
    let good = smtp_server("220 mail ready\r\n", "250 hello\r\n");
    let refusing = smtp_server("554 go away\r\n", "554 no\r\n");
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    option smtpchk EHLO example.com\n    server good {} check inter 50\n    server refusing {} check inter 50\n",
        fd_bind(&fe),
        good.addr(),
        refusing.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/refusing is DOWN");
    assert!(stderr.contains("Layer7"), "{stderr}");
    assert!(!stderr.contains("Server app/good is DOWN"), "{stderr}");
}

/// An echo session through `addr`: connected, and proven to reach the server.
fn echo_session(addr: SocketAddr) -> TcpStream {
    let mut c = connect(addr);
    c.write_all(b"ping").unwrap();
    assert_eq!(common::read_n(&mut c, 4), b"ping");
    c
}

#[test]
fn on_marked_down_shutdown_sessions_ends_the_servers_sessions() {
    let echo = Backend::echo();
    // The checks go to a port of their own, so the test decides when they fail.
    let health = Backend::start(|_| {});
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} check port {} inter 50 fall 1 on-marked-down shutdown-sessions\n",
        fd_bind(&fe),
        echo.addr(),
        health.addr().port()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let mut session = echo_session(addr);
    drop(health);
    wait_for_message(&proxy, "Server app/s1 is DOWN");
    assert!(
        read_to_close(&mut session, GENEROUS).is_closed(),
        "the session outlived its server's fall"
    );
}

#[test]
fn on_marked_up_shutdown_backup_sessions_ends_the_backups_sessions() {
    let echo = Backend::echo();
    let spare = Backend::echo();
    let health_addr = refused_addr();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} check port {} inter 50 rise 1 on-marked-up shutdown-backup-sessions\n    server b1 {} backup\n",
        fd_bind(&fe),
        echo.addr(),
        health_addr.port(),
        spare.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    wait_for_message(&proxy, "Server app/s1 is DOWN");
    let mut session = echo_session(addr);
    let before = spare.accepted();
    assert_eq!(before, 1, "the session goes to the backup");
    let listener = TcpListener::bind(health_addr).expect("rebind the health port");
    let _health = Backend::serve(listener, |_| {});
    wait_for_message(&proxy, "Server app/s1 is UP");
    assert!(
        read_to_close(&mut session, GENEROUS).is_closed(),
        "the backup session outlived the active server's return"
    );
}

#[test]
fn observe_layer4_marks_a_failing_server_down() {
    let two = Backend::named("two");
    let health = Backend::start(|_| {});
    let dead = refused_addr();
    let (fe, addr) = frontend();
    // The checks (every 10s, to a port that answers) would keep s1 up: only the traffic's
    // connection failures can take it down.
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n    retries 0\n\
         listen app\n    bind {}\n    server s1 {dead} check port {} inter 10s observe layer4 error-limit 2 on-error mark-down\n    server s2 {}\n",
        fd_bind(&fe),
        health.addr().port(),
        two.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    // Round robin sends every other connection to s1, which fails.
    let mut stderr = String::new();
    let down = wait_until(TRANSITION, || {
        let mut c = connect(addr);
        let _ = read_to_close(&mut c, GENEROUS);
        stderr = proxy.stderr();
        stderr.contains("Server app/s1 is DOWN")
    });
    assert!(down, "{stderr}");
    assert!(
        stderr.contains("Server app/s1 is DOWN, reason: Health analyze, info: \"Detected 2 consecutive errors, last one was: L4 unsuccessful connection\". 1 active and 0 backup servers left."),
        "{stderr}"
    );
    assert_eq!(names(addr, 3), ["two"; 3]);
}

#[test]
fn check_send_proxy_starts_checks_with_a_proxy_line() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&seen);
    let server = Backend::start(move |mut s| {
        let mut data = Vec::new();
        let mut buf = [0u8; 256];
        while !data.ends_with(b"PING\r\n") {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => data.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let _ = s.write_all(b"+PONG\r\n");
        log.lock()
            .unwrap()
            .push(String::from_utf8_lossy(&data).into_owned());
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    option tcp-check\n    tcp-check send PING\\r\\n\n    tcp-check expect string +PONG\n    server s1 {} check inter 50 check-send-proxy\n",
        fd_bind(&fe),
        server.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    assert!(wait_until(TRANSITION, || !seen.lock().unwrap().is_empty()));
    let first = seen.lock().unwrap()[0].clone();
    let port = server.addr().port();
    assert!(
        first.starts_with("PROXY TCP4 127.0.0.1 127.0.0.1 ")
            && first.ends_with(&format!(" {port}\r\nPING\r\n")),
        "{first:?}"
    );
    assert!(!proxy.stderr().contains("is DOWN"), "{}", proxy.stderr());
}

#[test]
fn agent_send_is_written_before_the_agent_answers() {
    let one = Backend::named("one");
    let two = Backend::named("two");
    // This agent answers only after reading the expected line: without `agent-send` it would
    // never drain the server.
    let agent = Backend::start(|mut s| {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\n") {
            match s.read(&mut byte) {
                Ok(1) => line.push(byte[0]),
                _ => return,
            }
        }
        if line == b"status?\n" {
            let _ = s.write_all(b"drain\n");
        }
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} agent-check agent-port {} agent-inter 50 agent-send \"status?\\n\"\n    server s2 {}\n",
        fd_bind(&fe),
        one.addr(),
        agent.addr().port(),
        two.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    wait_for_message(&proxy, "Server app/s1 enters drain state.");
}

#[test]
fn send_state_tells_the_server_its_state() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = Arc::clone(&seen);
    let server = Backend::start(move |mut s| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        log.lock().unwrap().push(head);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n    option httpchk\n    http-check send-state\n    server s1 {} check inter 50\n",
        fd_bind(&fe),
        server.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    // The second check sees a stable server.
    assert!(wait_until(TRANSITION, || seen.lock().unwrap().len() >= 2));
    let head = seen.lock().unwrap()[1].clone();
    let state = head
        .lines()
        .find_map(|l| l.strip_prefix("x-haproxy-server-state: "))
        .unwrap_or_else(|| panic!("no state header in {head:?}"));
    let port = server.addr().port();
    assert!(
        state.starts_with(&format!(
            "UP; address=127.0.0.1; port={port}; name=app/s1; node="
        )),
        "{state}"
    );
    assert!(state.ends_with("; weight=1/1; scur=0/0; qcur=0"), "{state}");
}

#[test]
fn init_addr_falls_back_to_an_address_or_to_no_address() {
    let one = Backend::named("one");
    let (fe, addr) = frontend();
    let port = one.addr().port();
    // s1's name does not resolve: `none` starts it without address, in maintenance. s2's name
    // does not resolve either: its fallback address is the test server's.
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 sluice-test.invalid:{port} init-addr last,libc,none\n    server s2 sluice-test.invalid:{port} init-addr libc,127.0.0.1\n",
        fd_bind(&fe),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert_eq!(names(addr, 4), ["one"; 4]);
}

#[test]
fn a_name_that_does_not_resolve_without_init_addr_fallback_is_an_error() {
    let dir = common::TempDir::new();
    let cfg = dir.write(
        "c.cfg",
        &format!("{TCP_DEFAULTS}\nlisten app\n    bind 127.0.0.1:1\n    server s1 sluice-test.invalid:80 init-addr last,libc\n"),
    );
    let out = common::run(&["-c", "-f", cfg.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("app/s1"), "{stderr}");
}

#[test]
fn http_expect_failures_are_reported_as_haproxy_reports_them() {
    let (ok, _) = http_server(200, "OK", "hello");
    let garbage = Backend::start(|mut s| {
        let _ = read_head(&mut s);
        let _ = s.write_all(b"NOT HTTP AT ALL\r\n\r\n");
    });
    let (fe, _addr) = frontend();
    let rules = [
        ("hdr", "http-check expect hdr name x-missing", ok.addr()),
        ("rstatus", "http-check expect rstatus ^5", ok.addr()),
        ("notstring", "http-check expect ! string hello", ok.addr()),
        ("notstatus", "http-check expect ! status 200", ok.addr()),
        ("string", "http-check expect string world", ok.addr()),
        ("garbage", "", garbage.addr()),
    ];
    let mut cfg = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend hdr\n",
        fd_bind(&fe)
    );
    for (name, rule, server) in &rules {
        cfg.push_str(&format!(
            "backend {name}\n    option httpchk\n    {rule}\n    server s1 {server} check inter 50\n"
        ));
    }
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let expected = [
        ("hdr", "Layer7 wrong status, code: 200, info: \"OK\""),
        ("rstatus", "Layer7 wrong status, code: 200, info: \"OK\""),
        (
            "notstring",
            "Layer7 invalid response, info: \"HTTP check matched unwanted content\"",
        ),
        ("notstatus", "Layer7 wrong status, code: 200, info: \"OK\""),
        (
            "string",
            "Layer7 invalid response, info: \"HTTP content check did not match\"",
        ),
        ("garbage", "Layer7 invalid response, check duration"),
    ];
    for (name, reason) in expected {
        let stderr = wait_for_message(&proxy, &format!("Server {name}/s1 is DOWN"));
        assert!(
            stderr.contains(&format!("Server {name}/s1 is DOWN, reason: {reason}")),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn tcp_expect_failures_are_reported_as_haproxy_reports_them() {
    let banner = Backend::start(|mut s| {
        let _ = s.write_all(b"+PONG\r\n");
    });
    let dead = refused_addr();
    let (fe, _addr) = frontend();
    let rules = [
        ("notstring", "tcp-check expect ! string +PONG"),
        ("binary", "tcp-check expect binary 2d45"),
        ("rstring", "tcp-check expect rstring ^-ERR"),
        ("rbinary", "tcp-check expect rbinary ^2D"),
        ("notrstring", "tcp-check expect ! rstring ^\\+PO"),
        (
            "connect",
            &format!("tcp-check connect port {}", dead.port()),
        ),
    ];
    let mut cfg = format!(
        "{TCP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend binary\n",
        fd_bind(&fe)
    );
    for (name, rule) in &rules {
        cfg.push_str(&format!(
            "backend {name}\n    option tcp-check\n    {rule}\n    server s1 {} check inter 50\n",
            banner.addr()
        ));
    }
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let expected = [
        (
            "notstring",
            "Layer7 invalid response, info: \"TCPCHK matched unwanted content '+PONG' at step 1\"",
        ),
        (
            "binary",
            "Layer7 invalid response, info: \"TCPCHK did not match content (binary) at step 1\"",
        ),
        (
            "rstring",
            "Layer7 invalid response, info: \"TCPCHK did not match content (regex) at step 1\"",
        ),
        (
            "rbinary",
            "Layer7 invalid response, info: \"TCPCHK did not match content (binary regex) at step 1\"",
        ),
        (
            "notrstring",
            "Layer7 invalid response, info: \"TCPCHK matched unwanted content (regex) at step 1\"",
        ),
        (
            "connect",
            &format!(
                "Layer4 connection problem, info: \"Connection refused at step 1 of tcp-check (connect port {})\"",
                dead.port()
            ),
        ),
    ];
    for (name, reason) in expected {
        let stderr = wait_for_message(&proxy, &format!("Server {name}/s1 is DOWN"));
        assert!(
            stderr.contains(&format!("Server {name}/s1 is DOWN, reason: {reason}")),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn ready_made_check_failures_are_reported_as_haproxy_reports_them() {
    // Each server reads what the check sends (if anything), then answers `answer` and closes.
    fn answering(read_first: bool, answer: &'static [u8]) -> Backend {
        Backend::start(move |mut s| {
            if read_first {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf);
            }
            let _ = s.write_all(answer);
        })
    }
    let smtp = answering(false, b"554 go away\r\n");
    let http = answering(true, b"HTTP/1.0 400 Bad\r\n\r\n");
    let pg = answering(true, b"E\0\0\0\x13SFATAL\0C28000\0\0");
    let mysql = answering(false, b"\x16\0\0\0\xff\x15\x04#28000Access denied");
    let (fe, _addr) = frontend();
    let checks = [
        ("smtp", "option smtpchk", smtp.addr()),
        ("ssl", "option ssl-hello-chk", http.addr()),
        ("pgsql", "option pgsql-check user hap", pg.addr()),
        ("ldap", "option ldap-check", http.addr()),
        ("mysql", "option mysql-check user hap", mysql.addr()),
        ("redis", "option redis-check", http.addr()),
    ];
    let mut cfg = format!(
        "{TCP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend smtp\n",
        fd_bind(&fe)
    );
    for (name, option, server) in &checks {
        cfg.push_str(&format!(
            "backend {name}\n    {option}\n    server s1 {server} check inter 50\n"
        ));
    }
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let expected = [
        ("smtp", "Layer7 wrong status, code: 554, info: \"go away\""),
        ("ssl", "Layer6 invalid response, check duration"),
        ("pgsql", "Layer7 invalid response, info: \"FATAL\""),
        (
            "ldap",
            "Layer7 invalid response, info: \"Not LDAPv3 protocol\"",
        ),
        (
            "mysql",
            "Layer7 wrong status, code: 1045, info: \"#28000Access denied\"",
        ),
        (
            "redis",
            "Layer7 wrong status, code: 0, info: \"HTTP/1.0 400 Bad\"",
        ),
    ];
    for (name, reason) in expected {
        let stderr = wait_for_message(&proxy, &format!("Server {name}/s1 is DOWN"));
        assert!(
            stderr.contains(&format!("Server {name}/s1 is DOWN, reason: {reason}")),
            "{name}: {stderr}"
        );
    }
}

/// A `listen` section whose s1 (`failing`) is checked every 10 s on a port that answers, so
/// only what `observe layer7 error-limit 2` makes of its answers can take it down; `rules`
/// come before the servers, `others` after s1. The health port's backend must outlive the
/// proxy: it is returned too.
fn observing_proxy(
    rules: &str,
    failing: std::net::SocketAddr,
    others: &str,
) -> (common::Sluice, std::net::SocketAddr, Backend) {
    let health = Backend::start(|_| {});
    let (fe, addr) = frontend();
    let cfg = format!(
        "{HTTP_DEFAULTS}\nlisten app\n    bind {}\n{rules}    server s1 {failing} check port {} inter 10s observe layer7 error-limit 2\n{others}",
        fd_bind(&fe),
        health.addr().port(),
    );
    (common::sluice(&cfg).inherit(fe).start(), addr, health)
}

/// Sends requests until the log says s1 went down (its answers then change: only the log
/// tells when); returns the log.
fn wait_for_observed_down(proxy: &common::Sluice, addr: std::net::SocketAddr) -> String {
    let mut stderr = String::new();
    let down = wait_until(TRANSITION, || {
        let _ = get(addr);
        stderr = proxy.stderr();
        stderr.contains("Server app/s1 is DOWN")
    });
    assert!(down, "{stderr}");
    stderr
}

#[test]
fn observe_layer7_counts_server_errors_against_the_server() {
    let (failing, _) = http_server(500, "Internal Server Error", "oops");
    let (good, _) = http_server(200, "OK", "good");
    // The default on-error (fail-check) takes s1 down.
    let others = format!("    server s2 {}\n", good.addr());
    let (proxy, addr, _health) = observing_proxy("", failing.addr(), &others);
    let stderr = wait_for_observed_down(&proxy, addr);
    assert!(
        stderr.contains("Server app/s1 is DOWN, reason: Health analyze, info: \"Detected 2 consecutive errors, last one was: Wrong http response\". 1 active and 0 backup servers left."),
        "{stderr}"
    );
    for _ in 0..3 {
        assert_eq!(get(addr), (200, "good".to_owned()));
    }
}

#[test]
fn observe_layer7_judges_the_status_the_server_sent_before_the_rules_changed_it() {
    let (failing, _) = http_server(500, "Internal Server Error", "oops");
    // The client sees a 200: the server's 500s count against it all the same, as in HAProxy.
    let (proxy, addr, _health) =
        observing_proxy("    http-response set-status 200\n", failing.addr(), "");
    assert_eq!(get(addr).0, 200);
    let stderr = wait_for_observed_down(&proxy, addr);
    assert!(
        stderr.contains("reason: Health analyze, info: \"Detected 2 consecutive errors, last one was: Wrong http response\""),
        "{stderr}"
    );
}

#[test]
fn on_marked_down_shutdown_sessions_ends_http_exchanges_too() {
    // The server reads the request and never answers: the exchange waits on it.
    let silent = Backend::silent();
    let health = Backend::start(|_| {});
    let (fe, addr) = frontend();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n\
         listen app\n    bind {}\n    server s1 {} check port {} inter 50 fall 1 on-marked-down shutdown-sessions\n",
        fd_bind(&fe),
        silent.addr(),
        health.addr().port()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let mut client = connect(addr);
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    assert!(wait_until(GENEROUS, || silent.accepted() == 1));
    drop(health);
    wait_for_message(&proxy, "Server app/s1 is DOWN");
    assert!(
        read_to_close(&mut client, GENEROUS).is_closed(),
        "the exchange outlived its server's fall"
    );
}

#[test]
fn checks_of_a_send_proxy_server_start_with_the_proxy_line() {
    let (first, _) = first_check_bytes("", "send-proxy", 6);
    assert_eq!(first, b"PROXY ");
}

#[test]
fn log_health_checks_reports_each_result_that_moves_the_health() {
    let refused = refused_addr();
    let (fe, _addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    option log-health-checks\n    \
         server s1 {refused} check inter 50 rise 2 fall 2\n    \
         server s2 {refused} check inter 50 rise 2 fall 2 backup\n",
        fd_bind(&fe)
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Backup Server app/s2 is DOWN.");
    // The check's line says why; the state change, as in HAProxy, then does not.
    let check = stderr
        .lines()
        .find(|l| l.contains("Health check for backup server app/s2 failed"))
        .unwrap();
    assert!(
        check.contains("reason: Layer4 connection problem, info: \"Connection refused\"")
            && check.ends_with("status: 0/2 DOWN."),
        "{check}"
    );
    let down = stderr
        .lines()
        .find(|l| l.contains("Backup Server app/s2 is DOWN"))
        .unwrap();
    assert!(
        down.ends_with(
            "Backup Server app/s2 is DOWN. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        ),
        "{down}"
    );
    // A down server's further failures move nothing: one line per server.
    assert_eq!(
        stderr.matches("Health check for server app/s1").count(),
        1,
        "{stderr}"
    );
}

/// A mailer that speaks enough SMTP to take mails, recording every line it is sent.
fn smtp_mailer() -> (Backend, Arc<Mutex<Vec<String>>>) {
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&lines);
    let backend = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = std::io::BufReader::new(s);
        writer.write_all(b"220 mailer ready\r\n").unwrap();
        let mut in_data = false;
        loop {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                return;
            }
            seen.lock().unwrap().push(line.clone());
            let reply: &[u8] = if in_data {
                if line != ".\r\n" {
                    continue;
                }
                in_data = false;
                b"250 queued\r\n"
            } else if line.starts_with("DATA") {
                in_data = true;
                b"354 go on\r\n"
            } else if line.starts_with("QUIT") {
                let _ = writer.write_all(b"221 bye\r\n");
                return;
            } else {
                b"250-mailer\r\n250 OK\r\n"
            };
            writer.write_all(reply).unwrap();
        }
    });
    (backend, lines)
}

/// `email-alert` with a `mailers` section: a server going down (an alert) and, at `level
/// notice`, coming back up (a notice) are each mailed as HAProxy 2.6 mails them.
#[test]
fn email_alerts_mail_server_state_changes_to_the_mailers() {
    let (mailer, lines) = smtp_mailer();
    let late = refused_addr();
    let (fe, _addr) = frontend();
    let cfg = format!(
        "mailers mta\n    mailer smtp1 {}\n    timeout mail 5s\n\
         {TCP_DEFAULTS}\nlisten app\n    bind {}\n\
         \x20   email-alert mailers mta\n    email-alert from lb@example.com\n\
         \x20   email-alert to ops@example.com\n    email-alert myhostname lb1\n\
         \x20   email-alert level notice\n\
         \x20   server s1 {late} check inter 50 rise 1 fall 1\n",
        mailer.addr(),
        fd_bind(&fe),
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let quits = || {
        let lines = lines.lock().unwrap();
        lines.iter().filter(|l| l.as_str() == "QUIT\r\n").count()
    };
    assert!(
        wait_until(TRANSITION, || quits() == 1),
        "{:?}",
        lines.lock().unwrap()
    );
    let listener = TcpListener::bind(late).expect("rebind the server port");
    let _up = Backend::serve(listener, |_| {});
    assert!(
        wait_until(TRANSITION, || quits() == 2),
        "{:?}",
        lines.lock().unwrap()
    );
    let transcript = lines.lock().unwrap().concat();
    let down_line = proxy
        .stderr()
        .lines()
        .find_map(|l| {
            l.split_once(" : Server app/s1 is DOWN")
                .map(|(_, rest)| rest.to_owned())
        })
        .unwrap();
    let down = format!("Server app/s1 is DOWN{}", down_line.trim_end_matches('.'));
    let expected_start = "HELO lb1\r\nMAIL FROM:<lb@example.com>\r\nRCPT TO:<ops@example.com>\r\n\
         DATA\r\nFrom: lb@example.com\r\nTo: ops@example.com\r\nDate: ";
    assert!(transcript.starts_with(expected_start), "{transcript}");
    let mail_end = format!(
        " +0000 (UTC)\r\nSubject: [HAProxy Alert] {down}\r\n\r\n{down}\r\n\r\n.\r\nQUIT\r\nHELO lb1\r\n"
    );
    assert!(transcript.contains(&mail_end), "{transcript}");
    assert!(
        transcript.contains(
            "\r\nSubject: [HAProxy Alert] Server app/s1 is UP, reason: Layer4 check passed"
        ),
        "{transcript}"
    );
    assert!(
        transcript.ends_with(" total in queue\r\n\r\n.\r\nQUIT\r\n"),
        "{transcript}"
    );
}

/// `option external-check`: the program's exit status decides (`PROCOK`, `PROCERR` with the
/// status as code), it gets HAProxy's arguments and variables in a clean environment, and
/// `show stat` shows its status and description.
#[test]
fn external_checks_run_the_program_and_follow_its_exit_status() {
    let builder = common::sluice("");
    let dir = builder.dir();
    let record = dir.join("seen.txt");
    let verdict = dir.join("verdict");
    std::fs::write(&verdict, "3").unwrap();
    let script = dir.write(
        "check.sh",
        &format!(
            "#!/bin/sh\necho \"$* | $HAPROXY_PROXY_NAME $HAPROXY_SERVER_NAME $HAPROXY_SERVER_ID \
             $HAPROXY_SERVER_MAXCONN $HAPROXY_SERVER_PROTO PATH=$PATH HOME=$HOME\" > {}\n\
             read code < {}\nexit $code\n",
            record.display(),
            verdict.display()
        ),
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (fe, listen_addr) = frontend();
    let cfg = format!(
        "global\n    external-check\n    insecure-fork-wanted\n{TCP_DEFAULTS}\n\
         listen app\n    bind {}\n    option external-check\n\
         \x20   external-check command {}\n    external-check path /usr/bin:/bin\n\
         \x20   server s1 192.0.2.1:8080 id 7 maxconn 9 check inter 50 rise 1 fall 1\n",
        fd_bind(&fe),
        script.display(),
    );
    let proxy = builder.config(&cfg).inherit(fe).start();
    let stderr = wait_for_message(&proxy, "Server app/s1 is DOWN");
    assert!(
        stderr.contains(
            "Server app/s1 is DOWN, reason: External check error, code: 3, check duration: "
        ),
        "{stderr}"
    );
    let seen = std::fs::read_to_string(&record).unwrap();
    // The proxy's first listener, as it was bound (an inherited socket here).
    let listen = format!("{} {}", listen_addr.ip(), listen_addr.port());
    assert_eq!(
        seen.trim_end(),
        format!("{listen} 192.0.2.1 8080 | app s1 7 9 tcp PATH=/usr/bin:/bin HOME="),
    );
    std::fs::write(&verdict, "0").unwrap();
    let stderr = wait_for_message(&proxy, "Server app/s1 is UP");
    assert!(
        stderr.contains(
            "Server app/s1 is UP, reason: External check passed, code: 0, check duration: "
        ),
        "{stderr}"
    );
    let stat = proxy.cli("show stat");
    let row = stat.lines().find(|l| l.starts_with("app,s1,")).unwrap();
    assert!(row.contains(",PROCOK,0,"), "{row}");
    assert!(row.contains(",External check passed,"), "{row}");
}

/// `max-spread-checks`: the first checks are spread over at most this long, not over the
/// (here long) check interval. Counted as accepted connections (HAProxy's check connections
/// are reset before the test server can accept them: this one is Sluice's only).
#[test]
fn max_spread_checks_bounds_the_spreading_of_the_first_checks() {
    let servers: Vec<Backend> = (0..4).map(|_| Backend::silent()).collect();
    let (fe, _addr) = frontend();
    let lines: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("    server s{i} {} check inter 60s\n", s.addr()))
        .collect();
    let cfg = format!(
        "global\n    max-spread-checks 200ms\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n{lines}",
        fd_bind(&fe),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    // Spread over the 60 s interval, the last server's first check would come after 45 s.
    assert!(
        wait_until(TRANSITION, || servers.iter().all(|s| s.accepted() >= 1)),
        "{:?}",
        servers.iter().map(Backend::accepted).collect::<Vec<_>>()
    );
}

/// The first `n` bytes of the first check connection a `server ... check` line with
/// `options` makes, under `global` lines.
fn first_check_bytes(global: &str, options: &str, n: usize) -> (Vec<u8>, u16) {
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let server = Backend::start(move |mut s| {
        let mut first = vec![0u8; n];
        if s.read_exact(&mut first).is_ok() {
            record.lock().unwrap().push(first);
        }
    });
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n{global}\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {} {options} check inter 50\n",
        fd_bind(&fe),
        server.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert!(
        wait_until(GENEROUS, || !seen.lock().unwrap().is_empty()),
        "no check arrived"
    );
    let first = seen.lock().unwrap()[0].clone();
    (first, server.addr().port())
}

const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// As HAProxy 2.6 sends them (captured): a LOCAL command, no address, only the TLVs a check
/// can fill (the CRC32C; no authority, no unique id without a client).
#[test]
fn checks_of_a_send_proxy_v2_server_send_a_local_header() {
    let (plain, _) = first_check_bytes("", "send-proxy-v2", 16);
    assert_eq!(plain, [V2_SIGNATURE, &[0x20, 0x00, 0, 0]].concat());
    let (with_tlvs, _) = first_check_bytes(
        "",
        "send-proxy-v2 proxy-v2-options crc32c,unique-id,authority",
        23,
    );
    assert_eq!(
        with_tlvs,
        [
            V2_SIGNATURE,
            &[0x20, 0x00, 0, 7, 0x03, 0, 4, 0xa9, 0xb8, 0x7e, 0x8f]
        ]
        .concat()
    );
}

/// `pp2-never-send-local`: a PROXY command with the check connection's own addresses.
#[test]
fn pp2_never_send_local_sends_the_check_connection_addresses() {
    let (header, port) = first_check_bytes("    pp2-never-send-local", "send-proxy-v2", 28);
    assert_eq!(header[..12], *V2_SIGNATURE);
    // PROXY over TCP/IPv4, 12 bytes of addresses: 127.0.0.1 to 127.0.0.1, then the ports.
    assert_eq!(header[12..20], [0x21, 0x11, 0, 12, 127, 0, 0, 1]);
    assert_eq!(header[20..24], [127, 0, 0, 1]);
    assert_eq!(header[26..28], port.to_be_bytes());
}
