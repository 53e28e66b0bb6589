//! End-to-end behaviour of server `maxconn` and the queues (configuration.txt §5.2 `maxconn`,
//! `maxqueue`, §4.2 `timeout queue`): a server never has more requests in progress than its
//! limit, the others wait and are served in arrival order as slots free up, a request that
//! waits longer than `timeout queue` gets a 503, and the `queue` fetch reports the waiting
//! requests; under `option abortonclose` a request (or TCP session) whose client leaves
//! while queued is taken out.
//!
//! The in-test server holds every request until the test releases it, and the test watches
//! the backend's queue through a `return` rule reading `%[queue(be)]`, so each step waits for
//! an observed state instead of sleeping.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, read_message, status_of};
use common::{Backend, GENEROUS, connect, fd_bind, frontend, read_to_close, sluice, wait_until};
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// A server that records each request's path on arrival, then answers only when the test
/// sends a token on the returned channel; it counts requests in progress.
struct GatedServer {
    backend: Backend,
    arrived: Arc<Mutex<Vec<String>>>,
    in_progress: Arc<AtomicUsize>,
    most_in_progress: Arc<AtomicUsize>,
    release: mpsc::Sender<()>,
}

fn gated_server() -> GatedServer {
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let in_progress = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (release, gate) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let (seen, busy, peak) = (
        Arc::clone(&arrived),
        Arc::clone(&in_progress),
        Arc::clone(&most),
    );
    let backend = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        while let Some(req) = read_message(&mut reader) {
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let path = req
                .request_line()
                .split(' ')
                .nth(1)
                .unwrap_or("")
                .to_owned();
            seen.lock().unwrap().push(path.clone());
            gate.lock().unwrap().recv().unwrap();
            busy.fetch_sub(1, Ordering::SeqCst);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{path}",
                path.len()
            );
            if writer.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    GatedServer {
        backend,
        arrived,
        in_progress,
        most_in_progress: most,
        release,
    }
}

/// Starts Sluice: frontend `fe` forwards to backend `be` (one server, `server_options`);
/// frontend `watch` answers `/q` with the number of requests queued in `be`.
fn start(
    server: SocketAddr,
    server_options: &str,
    backend_lines: &str,
) -> (common::Sluice, SocketAddr, SocketAddr) {
    let (fe, fe_addr) = frontend();
    let (watch, watch_addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}
frontend fe
    bind {}
    default_backend be
frontend watch
    bind {}
    http-request return status 200 content-type text/plain lf-string %[queue(be)]
backend be
{backend_lines}
    server s1 {server} {server_options}
",
        fd_bind(&fe),
        fd_bind(&watch)
    );
    let p = sluice(&config).inherit(fe).inherit(watch).start();
    (p, fe_addr, watch_addr)
}

/// The number of requests waiting in `be`'s queues, as the proxy reports it.
fn queued(watch: SocketAddr) -> usize {
    let mut s = connect(watch);
    s.write_all(b"GET /q HTTP/1.1\r\nHost: w\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .rsplit("\r\n\r\n")
        .next()
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or(usize::MAX)
}

/// Sends `GET path` on a new connection, returning the connection to read the answer later.
fn send(addr: SocketAddr, path: &str) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    s
}

fn answer_of(mut s: TcpStream) -> String {
    String::from_utf8_lossy(read_to_close(&mut s, GENEROUS).data()).into_owned()
}

#[test]
fn maxconn_queues_requests_and_serves_them_in_arrival_order() {
    let server = gated_server();
    let (_p, addr, watch) = start(server.backend.addr(), "maxconn 1", "    timeout queue 30s");
    let first = send(addr, "/1");
    assert!(wait_until(GENEROUS, || server
        .arrived
        .lock()
        .unwrap()
        .len()
        == 1));
    let mut waiting = Vec::new();
    for n in 2..=4 {
        waiting.push(send(addr, &format!("/{n}")));
        assert!(
            wait_until(GENEROUS, || queued(watch) == n - 1),
            "request {n} waits in the queue"
        );
    }
    for _ in 0..4 {
        server.release.send(()).unwrap();
    }
    assert!(answer_of(first).ends_with("/1"));
    for (n, s) in (2..=4).zip(waiting) {
        let answer = answer_of(s);
        assert_eq!(status_of(answer.as_bytes()), 200, "{answer}");
        assert!(answer.ends_with(&format!("/{n}")), "{answer}");
    }
    assert_eq!(*server.arrived.lock().unwrap(), ["/1", "/2", "/3", "/4"]);
    assert_eq!(
        server.most_in_progress.load(Ordering::SeqCst),
        1,
        "never more than maxconn"
    );
    assert_eq!(server.in_progress.load(Ordering::SeqCst), 0);
    assert_eq!(queued(watch), 0);
}

#[test]
fn a_request_waiting_longer_than_timeout_queue_gets_503() {
    let server = gated_server();
    let (_p, addr, watch) = start(
        server.backend.addr(),
        "maxconn 1",
        "    timeout queue 200ms",
    );
    let first = send(addr, "/held");
    assert!(wait_until(GENEROUS, || server
        .arrived
        .lock()
        .unwrap()
        .len()
        == 1));
    let late = send(addr, "/late");
    let answer = answer_of(late);
    assert_eq!(status_of(answer.as_bytes()), 503, "{answer}");
    assert_eq!(queued(watch), 0, "the expired request left the queue");
    server.release.send(()).unwrap();
    assert!(answer_of(first).ends_with("/held"));
    assert_eq!(*server.arrived.lock().unwrap(), ["/held"]);
}

#[test]
fn abortonclose_takes_a_queued_request_out_when_its_client_leaves() {
    let server = gated_server();
    let (_p, addr, watch) = start(
        server.backend.addr(),
        "maxconn 1",
        "    timeout queue 30s\n    option abortonclose",
    );
    let first = send(addr, "/1");
    assert!(wait_until(GENEROUS, || server
        .arrived
        .lock()
        .unwrap()
        .len()
        == 1));
    let mut leaving = send(addr, "/2");
    assert!(wait_until(GENEROUS, || queued(watch) == 1));
    // The client ends its side: its request leaves the queue without an answer.
    leaving.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(wait_until(GENEROUS, || queued(watch) == 0), "still queued");
    assert!(
        matches!(read_to_close(&mut leaving, GENEROUS), common::Closed::Eof(d) if d.is_empty())
    );
    // The next one is served once the slot frees; the aborted one never reaches the server.
    let next = send(addr, "/3");
    assert!(wait_until(GENEROUS, || queued(watch) == 1));
    server.release.send(()).unwrap();
    server.release.send(()).unwrap();
    assert!(answer_of(first).ends_with("/1"));
    assert!(answer_of(next).ends_with("/3"));
    assert_eq!(*server.arrived.lock().unwrap(), ["/1", "/3"]);
}

#[test]
fn abortonclose_in_tcp_mode_ends_a_queued_session_whose_client_left() {
    // A server that keeps every connection open and counts them.
    let held = Backend::start(|mut s| {
        let mut sink = [0u8; 64];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    let (fe, addr) = frontend();
    let config = format!(
        "{}\nlisten app\n    bind {}\n    timeout queue 30s\n    option abortonclose\n    \
         server s1 {} maxconn 1\n",
        common::TCP_DEFAULTS,
        fd_bind(&fe),
        held.addr()
    );
    let proxy = sluice(&config).inherit(fe).start();
    // The backend's row: `qcur` is its third field.
    let backend_queue = || {
        let stat = proxy.cli("show stat");
        let row = stat
            .lines()
            .find(|l| l.starts_with("app,BACKEND,"))
            .unwrap_or("");
        row.split(',').nth(2).unwrap_or("").to_owned()
    };
    let first = connect(addr);
    assert!(wait_until(GENEROUS, || held.accepted() == 1));
    let mut leaving = connect(addr);
    assert!(wait_until(GENEROUS, || backend_queue() == "1"));
    leaving.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(
        wait_until(GENEROUS, || backend_queue() == "0"),
        "still queued"
    );
    assert!(
        matches!(read_to_close(&mut leaving, GENEROUS), common::Closed::Eof(d) if d.is_empty())
    );
    drop(first);
    assert_eq!(held.accepted(), 1, "the aborted session reached the server");
}
