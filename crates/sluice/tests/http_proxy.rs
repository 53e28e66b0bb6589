//! End-to-end HTTP/1.1 behaviour of the real binary: strict parsing and the statuses of bad
//! requests (400, 414, 431, 501, 505, 408), request-smuggling vectors that must never reach a
//! server, keep-alive and connection reuse on both sides, the header options (`forwardfor`,
//! `originalto`, `http-send-name-header`), hop-by-hop removal, HTTP/1.0 clients, chunked and
//! close-delimited bodies, `Expect: 100-continue`, early answers, and invalid responses (502).
//!
//! Backends are small in-test HTTP servers that record what they receive, so each test checks
//! both what the client got and what the server saw.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{
    HTTP_DEFAULTS, Received, http_backend, ok_backend, one_shot, proxy, read_message, status_of,
};
use common::{Backend, Closed, GENEROUS, connect, fd_bind, frontend, read_to_close, sluice};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn smuggling_vectors_are_refused_and_never_reach_the_server() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let cases: &[(&str, u16)] = &[
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nabcde",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\nabcde",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n  b\r\n\r\n",
            400,
        ),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-Bad : a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-Cr: a\rb\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nX-Nul: a\0b\r\n\r\n", 400),
        ("G@T / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nabcde\r\n0\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdeXX0\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ];
    for (raw, want) in cases {
        let got = one_shot(addr, raw.as_bytes());
        assert!(got.is_closed(), "connection left open after {raw:?}");
        assert_eq!(
            status_of(got.data()),
            *want,
            "request {raw:?} got {:?}",
            String::from_utf8_lossy(got.data())
        );
    }
    // Chunked bodies are checked as they stream: the head of those requests may have reached
    // the server, but never a byte past the broken chunk. Every other request was refused
    // before anything was sent.
    let seen = log.lock().unwrap();
    assert!(
        seen.iter().all(|r| r.body.is_empty()),
        "a body reached the server: {seen:?}"
    );
}

#[test]
fn oversized_request_line_and_headers_get_414_and_431() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20_000));
    assert_eq!(status_of(one_shot(addr, long_uri.as_bytes()).data()), 414);
    // The head limit is tune.bufsize - tune.maxrewrite = 15360 bytes.
    let big_headers = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(16_000)
    );
    assert_eq!(
        status_of(one_shot(addr, big_headers.as_bytes()).data()),
        431
    );
    let just_fits = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "c".repeat(15_000)
    );
    assert_eq!(status_of(one_shot(addr, just_fits.as_bytes()).data()), 200);
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "only the head that fits reached the server"
    );
}

#[test]
fn slowloris_is_cut_off_with_408() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    timeout http-request 600ms");
    let mut s = connect(addr);
    let start = Instant::now();
    // One byte every 100 ms keeps `timeout client` happy but never completes the head.
    let mut answer = Vec::new();
    for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
        if s.write_all(&[*byte]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        if start.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    answer.extend_from_slice(read_to_close(&mut s, GENEROUS).data());
    assert_eq!(status_of(&answer), 408);
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn server_connection_is_kept_alive_across_requests() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for i in 0..3 {
        write!(s, "GET /{i} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let resp = read_message(&mut reader).unwrap();
        assert!(resp.head.starts_with("HTTP/1.1 200"), "{}", resp.head);
        assert_eq!(resp.body, b"ok");
    }
    assert_eq!(
        backend.accepted(),
        1,
        "one server connection for three requests"
    );
    let seen = log.lock().unwrap();
    let lines: Vec<&str> = seen.iter().map(Received::request_line).collect();
    assert_eq!(
        lines,
        ["GET /0 HTTP/1.1", "GET /1 HTTP/1.1", "GET /2 HTTP/1.1"]
    );
}

/// An HTTP/1.0 request ends its connection unless it says otherwise: in keep-alive mode the
/// proxy says `Connection: keep-alive` to the server, as HAProxy does, so that a server
/// following HTTP/1.0's rule keeps the connection for the next requests.
#[test]
fn http10_requests_ask_the_server_to_keep_the_connection() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for i in 0..2 {
        write!(s, "GET /{i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
        let resp = read_message(&mut reader).unwrap();
        assert!(resp.head.starts_with("HTTP/1.1 200"), "{}", resp.head);
    }
    let seen = log.lock().unwrap();
    for request in seen.iter() {
        assert!(request.request_line().ends_with(" HTTP/1.0"));
        assert_eq!(request.header("connection").as_deref(), Some("keep-alive"));
    }
    assert_eq!(
        backend.accepted(),
        1,
        "one server connection for both requests"
    );
}

#[test]
fn http_server_close_closes_the_server_side_after_each_response() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    option http-server-close");
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let resp = read_message(&mut reader).unwrap();
        assert!(resp.head.starts_with("HTTP/1.1 200"));
    }
    assert_eq!(backend.accepted(), 2);
    let seen = log.lock().unwrap();
    assert!(
        seen.iter()
            .all(|r| r.header("connection").as_deref() == Some("close"))
    );
}

#[test]
fn httpclose_closes_the_client_after_the_response() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    option httpclose");
    let got = one_shot(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let text = String::from_utf8_lossy(got.data()).to_lowercase();
    // A clean end of stream (FIN), not a reset, right after the answer.
    assert!(matches!(got, Closed::Eof(_)), "{got:?}");
    assert!(
        text.starts_with("http/1.1 200") && text.contains("connection: close"),
        "{text}"
    );
}

#[test]
fn a_client_asking_to_close_gets_the_answer_then_a_clean_end_of_stream() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    // Alone, the request is answered and the connection closed at once. A second request
    // pipelined behind it is not served: the first answer is the only one, and the end is
    // still a FIN after it, not a reset.
    for raw in [
        &b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let got = one_shot(addr, raw);
        assert!(matches!(got, Closed::Eof(_)), "{got:?}");
        let text = String::from_utf8_lossy(got.data()).to_lowercase();
        assert_eq!(text.matches("http/1.1 200").count(), 1, "{text}");
        assert!(text.contains("connection: close"), "{text}");
    }
}

#[test]
fn idle_server_connections_are_shared_by_clients_with_http_reuse_always() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    http-reuse always");
    for _ in 0..3 {
        let mut s = connect(addr);
        let mut reader = BufReader::new(s.try_clone().unwrap());
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert!(
            read_message(&mut reader)
                .unwrap()
                .head
                .starts_with("HTTP/1.1 200")
        );
    }
    // The connections were closed one after the other; each request found the previous
    // server connection idle. (nbthread 1 is not forced: with several threads a client may
    // land on a thread whose pool is empty, so allow one connection per thread.)
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        backend.accepted() <= threads,
        "accepted {}",
        backend.accepted()
    );
}

#[test]
fn safe_reuse_sends_first_requests_over_new_connections() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    http-reuse safe");
    for _ in 0..3 {
        let mut s = connect(addr);
        let mut reader = BufReader::new(s.try_clone().unwrap());
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert!(
            read_message(&mut reader)
                .unwrap()
                .head
                .starts_with("HTTP/1.1 200")
        );
    }
    assert_eq!(backend.accepted(), 3);
}

/// Starts Sluice on one thread (so every client meets the same pool of idle server
/// connections) in front of `backend`, with `http-reuse reuse`.
fn one_thread_proxy(backend: &Backend, reuse: &str) -> (common::Sluice, std::net::SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "global\n    nbthread 1\n{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    http-reuse {reuse}\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    (sluice(&config).inherit(listener).start(), addr)
}

/// A kept-alive client connection: sends a GET and reads its answer.
struct KeptClient(std::net::TcpStream, BufReader<std::net::TcpStream>);

impl KeptClient {
    fn new(addr: std::net::SocketAddr) -> Self {
        let s = connect(addr);
        let reader = BufReader::new(s.try_clone().unwrap());
        KeptClient(s, reader)
    }

    fn get(&mut self, path: &str) {
        write!(self.0, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let answer = read_message(&mut self.1).unwrap();
        assert!(answer.head.starts_with("HTTP/1.1 200"), "{}", answer.head);
    }
}

#[test]
fn a_shareable_server_connection_serves_other_clients_while_its_client_stays_idle() {
    let (backend, log) = ok_backend();
    let (_p, addr) = one_thread_proxy(&backend, "always");
    // `a` stays connected and idle after its answer: its server connection went back to
    // the pool with the response, so `b`'s requests (a first one included, under
    // `always`) and `a`'s next one all use it.
    let mut a = KeptClient::new(addr);
    let mut b = KeptClient::new(addr);
    a.get("/a1");
    b.get("/b1");
    a.get("/a2");
    b.get("/b2");
    assert_eq!(
        backend.accepted(),
        1,
        "one server connection for both clients"
    );
    assert_eq!(log.lock().unwrap().len(), 4);
}

/// An HTTP backend answering `200 OK` on kept-alive connections, with the count of its
/// connections still open.
fn counting_backend() -> (Backend, Arc<AtomicUsize>) {
    let open = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&open);
    let backend = Backend::start(move |s| {
        count.fetch_add(1, Ordering::SeqCst);
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        while read_message(&mut reader).is_some() {
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if writer.write_all(answer).is_err() {
                break;
            }
        }
        count.fetch_sub(1, Ordering::SeqCst);
    });
    (backend, open)
}

#[test]
fn clients_one_after_the_other_leave_one_idle_server_connection_per_thread() {
    const CLIENTS: usize = 50;
    const THREADS: usize = 2;
    let (backend, open) = counting_backend();
    let (listener, addr) = frontend();
    // Purges wait a minute: what stays open is what the pool admitted.
    let config = format!(
        "global\n    nbthread {THREADS}\n{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    http-reuse safe\n    server s1 {} pool-purge-delay 1m\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    // Each client makes one request and stays connected; under `safe`, each first request
    // goes over a new server connection.
    let clients: Vec<KeptClient> = (0..CLIENTS)
        .map(|i| {
            let mut client = KeptClient::new(addr);
            client.get(&format!("/{i}"));
            client
        })
        .collect();
    assert_eq!(backend.accepted(), CLIENTS);
    // One request in use at a time: each thread keeps its first connection (HAProxy, whose
    // pool is shared by its threads, keeps one) and closes the others after their response.
    assert!(
        common::wait_until(GENEROUS, || open.load(Ordering::SeqCst) <= THREADS),
        "{} server connections still open",
        open.load(Ordering::SeqCst)
    );
    // `show servers conn` reports what the threads counted: nothing in use, at most one at a
    // time on each thread, an estimate of as many, and the idle connections the server sees.
    let mut fields = Vec::new();
    let consistent = common::wait_until(GENEROUS, || {
        let answer = proxy.cli("show servers conn px");
        fields = answer
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split(' ')
            .map(str::to_owned)
            .collect();
        fields.get(12).and_then(|idle| idle.parse().ok()) == Some(open.load(Ordering::SeqCst))
    });
    assert!(
        consistent,
        "{fields:?}, {} open",
        open.load(Ordering::SeqCst)
    );
    let idle_cur = fields[12].clone();
    // purge_delay used_cur used_max need_est unsafe_nb safe_nb idle_lim idle_cur
    assert_eq!(
        fields[5..13],
        [
            "60000", "0", &idle_cur, &idle_cur, &idle_cur, "0", "-1", &idle_cur
        ],
        "{fields:?}"
    );
    // `show stat` counts the same connections on the server's row: idle ones available
    // (no `pool-max-conn` limit shown), unsafe and safe ones, in use, the estimate.
    let stat = proxy.cli("show stat");
    let mut lines = stat.lines();
    let header: Vec<&str> = lines.next().unwrap()[2..].split(',').collect();
    let row: Vec<&str> = lines
        .find(|l| l.starts_with("px,s1,"))
        .unwrap()
        .split(',')
        .collect();
    let field = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    let pools = [
        "srv_icur",
        "src_ilim",
        "idle_conn_cur",
        "safe_conn_cur",
        "used_conn_cur",
        "need_conn_est",
    ]
    .map(field);
    assert_eq!(
        pools,
        [&*idle_cur, "", &*idle_cur, "0", "0", &*idle_cur],
        "{row:?}"
    );
    drop(clients);
}

#[test]
fn server_connections_stay_with_their_client_under_http_reuse_never() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = one_thread_proxy(&backend, "never");
    let mut a = KeptClient::new(addr);
    let mut b = KeptClient::new(addr);
    a.get("/a1");
    b.get("/b1");
    // Each client's next request goes over the connection kept for it: no third one.
    a.get("/a2");
    b.get("/b2");
    assert_eq!(backend.accepted(), 2, "one server connection per client");
}

/// An HTTP backend on kept-alive connections whose answers carry, as their body, the number
/// of the request on its connection (1 for a connection's first). Counts the connections
/// that were closed.
fn numbering_backend() -> (Backend, Arc<AtomicUsize>) {
    let closed = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&closed);
    let backend = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        let mut served = 0;
        while read_message(&mut reader).is_some() {
            served += 1;
            let body = served.to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if writer.write_all(answer.as_bytes()).is_err() {
                break;
            }
        }
        count.fetch_add(1, Ordering::SeqCst);
    });
    (backend, closed)
}

/// Five requests on one client connection through a server with `server_options`: the body
/// of each answer, that is the request's number on its server connection, the backend, its
/// count of closed connections, and the proxy, still running.
fn numbers_on_server_connections(
    server_options: &str,
) -> (Vec<String>, Backend, Arc<AtomicUsize>, common::Sluice) {
    let (backend, closed) = numbering_backend();
    let (listener, addr) = frontend();
    let config = format!(
        "global\n    nbthread 1\n{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    http-reuse always\n    \
         server s1 {} {server_options}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let proxy = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let numbers = (0..5)
        .map(|_| {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let answer = read_message(&mut reader).unwrap();
            assert!(answer.head.starts_with("HTTP/1.1 200"), "{}", answer.head);
            String::from_utf8(answer.body).unwrap()
        })
        .collect();
    (numbers, backend, closed, proxy)
}

#[test]
fn max_reuse_bounds_the_requests_a_server_connection_carries() {
    // Without it, one server connection carries them all.
    let (numbers, backend, _, _p) = numbers_on_server_connections("");
    assert_eq!(numbers, ["1", "2", "3", "4", "5"]);
    assert_eq!(backend.accepted(), 1);
    // `max-reuse 1`: a first request and one reuse, then the proxy closes it.
    let (numbers, backend, closed, _p) = numbers_on_server_connections("max-reuse 1");
    assert_eq!(numbers, ["1", "2", "1", "2", "1"]);
    assert_eq!(backend.accepted(), 3);
    let two_closed = || closed.load(Ordering::SeqCst) == 2;
    assert!(
        common::wait_until(GENEROUS, two_closed),
        "the two used-up connections close"
    );
    // `max-reuse 0`: no keep-alive to the server.
    let (numbers, backend, closed, _p) = numbers_on_server_connections("max-reuse 0");
    assert_eq!(numbers, ["1", "1", "1", "1", "1"]);
    assert_eq!(backend.accepted(), 5);
    let all_closed = || closed.load(Ordering::SeqCst) == 5;
    assert!(
        common::wait_until(GENEROUS, all_closed),
        "each closes after its request"
    );
}

#[test]
fn address_headers_and_server_name_are_added() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(
        backend.addr(),
        "    option forwardfor\n    option originalto header X-Dst\n    http-send-name-header X-Server",
    );
    let got = one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.9.9.9\r\nX-Server: forged\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(got.data()), 200);
    let seen = log.lock().unwrap();
    let head = &seen[0].head;
    // The client's own X-Forwarded-For stays, ours comes last (configuration.txt §4.2).
    let xff: Vec<&str> = head
        .lines()
        .filter(|l| l.to_lowercase().starts_with("x-forwarded-for:"))
        .collect();
    assert_eq!(
        xff,
        ["X-Forwarded-For: 10.9.9.9", "X-Forwarded-For: 127.0.0.1"]
    );
    assert_eq!(seen[0].header("x-dst").as_deref(), Some("127.0.0.1"));
    let names: Vec<&str> = head
        .lines()
        .filter(|l| l.to_lowercase().starts_with("x-server:"))
        .collect();
    assert_eq!(names, ["X-Server: s1"]);
}

#[test]
fn forwardfor_except_and_if_none_skip_the_header() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "    option forwardfor except 127.0.0.0/8");
    one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(log.lock().unwrap()[0].header("x-forwarded-for"), None);

    let (backend2, log2) = ok_backend();
    let (_p2, addr2) = proxy(backend2.addr(), "    option forwardfor if-none");
    one_shot(
        addr2,
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\r\nConnection: close\r\n\r\n",
    );
    let head = log2.lock().unwrap()[0].head.clone();
    assert_eq!(
        head.to_lowercase().matches("x-forwarded-for").count(),
        1,
        "{head}"
    );
}

#[test]
fn hop_by_hop_headers_are_not_forwarded() {
    let (backend, log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-Kept: yes\r\n\r\n",
    );
    let seen = log.lock().unwrap();
    let r = &seen[0];
    assert_eq!(r.header("x-secret"), None);
    assert_eq!(r.header("keep-alive"), None);
    assert_eq!(r.header("proxy-connection"), None);
    assert_eq!(r.header("x-kept").as_deref(), Some("yes"));
}

#[test]
fn http10_clients_get_keep_alive_only_when_they_ask() {
    let (backend, _log) = ok_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let plain = one_shot(addr, b"GET / HTTP/1.0\r\n\r\n");
    let text = String::from_utf8_lossy(plain.data()).to_lowercase();
    assert!(
        plain.is_closed() && text.contains("connection: close"),
        "{text}"
    );

    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let resp = read_message(&mut reader).unwrap();
    assert_eq!(resp.header("connection").as_deref(), Some("keep-alive"));
    s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    assert_eq!(read_message(&mut reader).unwrap().body, b"ok");
}

#[test]
fn chunked_response_is_unchunked_for_an_http10_client() {
    let (backend, _log) = http_backend(|_| {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".to_owned()
    });
    let (_p, addr) = proxy(backend.addr(), "");
    let got = one_shot(addr, b"GET / HTTP/1.0\r\n\r\n");
    let text = String::from_utf8_lossy(got.data()).into_owned();
    assert!(got.is_closed());
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(!head.to_lowercase().contains("transfer-encoding"), "{head}");
    assert_eq!(body, "hello world");
}

#[test]
fn close_delimited_response_is_rechunked_for_an_http11_client() {
    let backend = Backend::start(|s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        read_message(&mut reader).unwrap();
        writer
            .write_all(b"HTTP/1.1 200 OK\r\n\r\nuntil the server closes")
            .unwrap();
    });
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let resp = read_message(&mut reader).unwrap();
    assert_eq!(resp.header("transfer-encoding").as_deref(), Some("chunked"));
    assert_eq!(resp.body, b"until the server closes");
    // The client connection stays usable: the body had an end we could mark.
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert!(read_to_close(&mut s, GENEROUS).is_closed());
}

#[test]
fn expect_100_continue_is_relayed() {
    let backend = Backend::start(|s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.to_lowercase().contains("expect: 100-continue"));
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
        let mut body = [0u8; 5];
        reader.read_exact(&mut body).unwrap();
        writer
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",
                    String::from_utf8_lossy(&body)
                )
                .as_bytes(),
            )
            .unwrap();
    });
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    s.write_all(b"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let interim = read_message(&mut reader).unwrap();
    assert!(interim.head.starts_with("HTTP/1.1 100"), "{}", interim.head);
    s.write_all(b"hello").unwrap();
    let fin = read_message(&mut reader).unwrap();
    assert!(fin.head.starts_with("HTTP/1.1 200"));
    assert_eq!(fin.body, b"hello");
}

/// A backend that answers 413 as soon as it has read a request's head, body or not.
fn early_413_backend() -> Backend {
    Backend::start(|s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = BufReader::new(s);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
            line.clear();
        }
        let _ = writer.write_all(
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    })
}

#[test]
fn an_early_answer_is_delivered_and_the_rest_of_the_body_dropped_before_the_next_request() {
    let backend = early_413_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nsome")
        .unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let early = read_message(&mut reader).unwrap();
    assert!(early.head.starts_with("HTTP/1.1 413"), "{}", early.head);
    assert_eq!(early.header("connection"), None, "{}", early.head);
    // The rest of the body, then the next request on the same connection.
    s.write_all(b"thing!GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let next = read_message(&mut reader).unwrap();
    assert!(next.head.starts_with("HTTP/1.1 413"), "{}", next.head);
    assert_eq!(
        next.header("connection").as_deref(),
        Some("close"),
        "{}",
        next.head
    );
}

#[test]
fn an_early_answer_to_a_client_waiting_for_100_continue_closes_its_connection() {
    // The client may never send the body it was not told to send.
    let backend = early_413_backend();
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    s.write_all(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let got = read_to_close(&mut s, GENEROUS);
    assert_eq!(status_of(got.data()), 413);
    assert!(got.is_closed());
}

#[test]
fn invalid_or_missing_responses_become_502() {
    for answer in [
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.1 2000 Weird\r\n\r\n",
        "",
    ] {
        let backend = Backend::start(move |s| {
            let mut writer = s.try_clone().unwrap();
            let mut reader = BufReader::new(s);
            read_message(&mut reader);
            let _ = writer.write_all(answer.as_bytes());
        });
        let (_p, addr) = proxy(backend.addr(), "");
        let got = one_shot(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status_of(got.data()), 502, "server answer {answer:?}");
    }
}

#[test]
fn pipelined_requests_with_bodies_stay_in_order() {
    let (backend, log) = http_backend(|r| {
        let body = String::from_utf8_lossy(&r.body).to_uppercase();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    });
    let (_p, addr) = proxy(backend.addr(), "");
    let mut s = connect(addr);
    s.write_all(
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let got = read_to_close(&mut s, GENEROUS);
    let text = String::from_utf8_lossy(got.data()).into_owned();
    assert_eq!(text.matches("HTTP/1.1 200").count(), 3, "{text}");
    assert!(
        text.contains("\r\n\r\nABC") && text.contains("\r\n\r\nDE"),
        "{text}"
    );
    let seen = log.lock().unwrap();
    let lines: Vec<&str> = seen.iter().map(Received::request_line).collect();
    assert_eq!(
        lines,
        ["POST /a HTTP/1.1", "POST /b HTTP/1.1", "GET /c HTTP/1.1"]
    );
    assert_eq!(
        seen[1].header("transfer-encoding").as_deref(),
        Some("chunked")
    );
}

#[test]
fn no_server_gives_503() {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    server s1 127.0.0.1:9 disabled\n",
        fd_bind(&listener)
    );
    let _p = sluice(&config).inherit(listener).start();
    // Asking to close: after a 503 the connection would otherwise go on.
    let got = one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(got.is_closed());
    assert_eq!(status_of(got.data()), 503);
}

#[test]
fn errorfile_replaces_request_errors_and_dev_null_closes_silently() {
    let (backend, _log) = ok_backend();
    let (listener, addr) = frontend();
    let pages = common::TempDir::new();
    let page = pages.write(
        "400.http",
        "HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\nX-Page: mine\r\nConnection: close\r\n\r\nnope",
    );
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n    timeout http-request 300ms\n    errorfile 400 {}\n    errorfile 408 /dev/null\n    server s1 {}\n",
        fd_bind(&listener),
        page.display(),
        backend.addr()
    );
    let _p = sluice(&config).inherit(listener).start();
    let bad = one_shot(addr, b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n");
    let text = String::from_utf8_lossy(bad.data()).into_owned();
    assert!(
        text.contains("X-Page: mine") && text.ends_with("nope"),
        "{text}"
    );
    // A request that never completes: the 408 page is empty, so the connection just closes.
    let silent = one_shot(addr, b"GET / HTTP/1.1\r\n");
    assert!(silent.is_closed());
    assert!(
        silent.data().is_empty(),
        "{:?}",
        String::from_utf8_lossy(silent.data())
    );
}

/// Many clients' exchanges in progress at once on one event loop: each head write then waits
/// for the loop's round of reads (`sluice_proxy::batch`), and a request body follows its held
/// head. Every answer must still come, on its own connection, in order, and every body reach
/// the server whole.
#[test]
fn concurrent_kept_alive_exchanges_are_each_answered_on_their_connection() {
    // The server answers with the request's target and the digest of its body.
    let (backend, log) = http_backend(|req| {
        let target = req.request_line().split(' ').nth(1).unwrap_or("");
        let sum: u64 = req.body.iter().map(|&b| u64::from(b)).sum();
        let answer = format!("{target} {} {sum}", req.body.len());
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        )
    });
    let (_p, addr) = proxy(backend.addr(), "");
    const CLIENTS: usize = 16;
    const REQUESTS: usize = 40;
    std::thread::scope(|scope| {
        for c in 0..CLIENTS {
            scope.spawn(move || {
                let client = connect(addr);
                let mut reader = BufReader::new(client.try_clone().unwrap());
                for r in 0..REQUESTS {
                    let target = format!("/c{c}/r{r}");
                    // Every other request carries a body, some larger than a buffer.
                    let body: Vec<u8> = (0..(r % 2) * (c * 3000 + r * 7))
                        .map(|i| (i % 251) as u8)
                        .collect();
                    let head = format!(
                        "POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    (&client).write_all(head.as_bytes()).unwrap();
                    (&client).write_all(&body).unwrap();
                    let answer = read_message(&mut reader).expect("an answer for each request");
                    assert_eq!(answer.request_line(), "HTTP/1.1 200 OK");
                    let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
                    assert_eq!(
                        String::from_utf8(answer.body).unwrap(),
                        format!("{target} {} {sum}", body.len())
                    );
                }
            });
        }
    });
    assert_eq!(log.lock().unwrap().len(), CLIENTS * REQUESTS);
}

/// Whether the kernel still holds a TCP socket from local port `local` to remote port
/// `remote` on 127.0.0.1 (in any state), from `/proc/net/tcp`.
fn socket_exists(local: u16, remote: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("0100007F:{local:04X}");
    let remote = format!("0100007F:{remote:04X}");
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        fields.next() == Some(local.as_str()) && fields.next() == Some(remote.as_str())
    })
}

#[test]
fn nolinger_closes_client_connections_with_a_reset() {
    // With an orderly close the proxy's socket lingers (FIN_WAIT2 while the client keeps
    // its side open); with `option nolinger` it is gone as soon as it is closed.
    for (option, lingers) in [("", true), ("    option nolinger\n", false)] {
        let (listener, addr) = frontend();
        let config = format!(
            "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n{option}    \
             http-request return status 200\n",
            fd_bind(&listener)
        );
        let _proxy = sluice(&config).inherit(listener).start();
        let mut c = connect(addr);
        c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        // The end: an end of stream, or the reset.
        let _ = c.read_to_end(&mut answer);
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
        let client_port = c.local_addr().unwrap().port();
        let gone = common::wait_until(Duration::from_secs(2), || {
            !socket_exists(addr.port(), client_port)
        });
        assert_eq!(gone, !lingers, "option nolinger: {}", !lingers);
    }
}

#[test]
fn large_bodies_are_compressed_whole_and_the_connection_goes_on() {
    let text: String = (0..40_000)
        .map(|n| format!("line {n} of the body\n"))
        .collect();
    let body = text.clone();
    let (backend, _log) = http_backend(move |req| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n";
        if req.request_line().contains("/chunked") {
            let mut out = format!("{head}Transfer-Encoding: chunked\r\n\r\n");
            for piece in [&body[..1000], &body[1000..300_000], &body[300_000..]] {
                out += &format!("{:x}\r\n{piece}\r\n", piece.len());
            }
            out + "0\r\n\r\n"
        } else {
            format!("{head}Content-Length: {}\r\n\r\n{body}", body.len())
        }
    });
    let (p, addr) = proxy(backend.addr(), "    compression algo deflate");
    let mut client = connect(addr);
    let mut reader = BufReader::new(client.try_clone().unwrap());
    for path in ["/length", "/chunked", "/length"] {
        client
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: h\r\nAccept-Encoding: deflate\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
        let answer = read_message(&mut reader).unwrap();
        assert_eq!(
            answer.header("content-encoding").as_deref(),
            Some("deflate")
        );
        assert_eq!(
            answer.header("transfer-encoding").as_deref(),
            Some("chunked")
        );
        assert!(answer.body.len() < text.len() / 4, "{path}: compressed");
        let mut plain = String::new();
        flate2::read::ZlibDecoder::new(&answer.body[..])
            .read_to_string(&mut plain)
            .unwrap();
        assert!(plain == text, "{path}: the body came whole");
    }
    // `show info`: bytes per second into the compressor and out of it, counted as they
    // pass, over this second and the last.
    let rates = || {
        let info = p.cli("show info");
        let field = |name| {
            common::info_field(&info, name)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap()
        };
        (field("CompressBpsIn"), field("CompressBpsOut"))
    };
    assert!(common::wait_until(GENEROUS, || rates().0 > 0));
    let (bytes_in, bytes_out) = rates();
    assert!(
        bytes_out > 0 && bytes_out < bytes_in / 4,
        "{bytes_in} {bytes_out}"
    );
}

#[test]
fn a_compressed_answer_streams_each_piece_as_the_server_sends_it() {
    let (go_on, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    let backend = Backend::start(move |s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        read_message(&mut reader).unwrap();
        let mut s = s;
        s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
              b\r\nfirst piece\r\n",
        )
        .unwrap();
        // The rest only once the client has seen the first piece.
        wait.lock().unwrap().recv().unwrap();
        s.write_all(b"6\r\n, more\r\n0\r\n\r\n").unwrap();
    });
    let (_p, addr) = proxy(backend.addr(), "    compression algo gzip");
    let mut client = connect(addr);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    client.set_read_timeout(Some(GENEROUS)).unwrap();
    // Reads until the body's chunks so far decode to the first piece.
    let mut received = Vec::new();
    // Room for the first piece (decompress_vec fills the spare capacity).
    let mut plain = Vec::with_capacity(64);
    let mut chunk = [0u8; 4096];
    while plain != b"first piece" {
        let n = client
            .read(&mut chunk)
            .expect("the first piece came before the rest");
        assert!(n > 0, "closed early");
        received.extend_from_slice(&chunk[..n]);
        common::http::gunzip_prefix(&common::http::whole_chunks(&received), &mut plain);
    }
    go_on.send(()).unwrap();
}

#[test]
fn the_connection_goes_on_after_a_503_or_a_504() {
    // A server that never answers /slow.
    let backend = Backend::start(|s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut s = s;
        while let Some(req) = read_message(&mut reader) {
            match req.request_line() {
                line if line.contains("/slow") => std::thread::sleep(Duration::from_secs(2)),
                _ => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                }
            }
        }
    });
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    timeout server 300ms\n    \
         use_backend empty if {{ path /none }}\n    default_backend be\n\
         backend empty\nbackend be\n    timeout server 300ms\n    server s {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let _p = sluice(&config).inherit(listener).start();
    // As in HAProxy 2.6: the 503 (no server) and the 504 leave the connection to the next
    // request, which is served.
    for (path, status) in [("/none", "503"), ("/slow", "504")] {
        let mut c = connect(addr);
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\nGET /ok HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let all = read_to_close(&mut c, GENEROUS);
        let text = String::from_utf8_lossy(all.data()).into_owned();
        assert!(all.is_closed(), "{path}: {text}");
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} ")),
            "{path}: {text}"
        );
        assert!(
            !text.contains("connection: close\r\n\r\n<html><body><h1>5"),
            "{path}: {text}"
        );
        assert!(
            text.ends_with("\r\n\r\nok"),
            "{path}: the next request was served: {text}"
        );
    }
}

#[test]
fn a_503_page_that_does_not_frame_itself_ends_the_connection() {
    let (listener, addr) = frontend();
    let pages = common::TempDir::new();
    // No length: only the connection's end delimits this page.
    let unframed = pages.write(
        "503.http",
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nno server",
    );
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend empty\n\
         backend empty\n    errorfile 503 {}\n",
        fd_bind(&listener),
        unframed.display()
    );
    let _p = sluice(&config).inherit(listener).start();
    let mut c = connect(addr);
    c.write_all(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let all = read_to_close(&mut c, GENEROUS);
    let text = String::from_utf8_lossy(all.data()).into_owned();
    assert!(all.is_closed(), "the page is delimited by the end: {text}");
    assert!(
        text.ends_with("\r\n\r\nno server"),
        "one answer, whole: {text}"
    );
    assert_eq!(text.matches("HTTP/1.1 503").count(), 1, "{text}");
}

/// `h1-case-adjust` (and its file) spell the listed field names, trailers included, as the
/// bogus peers of the proxies that ask for it want them: clients under
/// `option h1-case-adjust-bogus-client`, servers under `option h1-case-adjust-bogus-server`.
/// Other proxies' messages keep their names as they came.
#[test]
fn h1_case_adjust_spells_listed_names_for_the_peers_that_ask_for_it() {
    let (backend, log) = http_backend(|_| {
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-other: 1\r\n\
         transfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-sum: 9\r\n\r\n"
            .to_owned()
    });
    let (adjusted, adjusted_addr) = frontend();
    let (plain, plain_addr) = frontend();
    let builder = sluice("");
    let file = builder.dir().write(
        "case.txt",
        "# bogus peers\n  content-type\tContent-Type \n\nx-sum X-SUM\n",
    );
    let config = format!(
        "global\n    h1-case-adjust x-req X-Req\n    h1-case-adjust-file \"{}\"\n\
         {HTTP_DEFAULTS}\n\
         frontend adjusted\n    bind {}\n    option h1-case-adjust-bogus-client\n\
         \x20   http-request return status 200 content-type text/plain string own if {{ path /own }}\n\
         \x20   default_backend bogus\n\
         frontend plain\n    bind {}\n\
         \x20   http-request return status 200 content-type text/plain string own if {{ path /own }}\n\
         \x20   default_backend fine\n\
         backend bogus\n    option h1-case-adjust-bogus-server\n    server s1 {}\n\
         backend fine\n    server s1 {}\n",
        file.display(),
        fd_bind(&adjusted),
        fd_bind(&plain),
        backend.addr(),
        backend.addr(),
    );
    let _p = builder
        .config(&config)
        .inherit(adjusted)
        .inherit(plain)
        .start();
    let request = b"GET / HTTP/1.1\r\nhost: h\r\nx-REQ: 1\r\ncontent-type: a\r\nx-other: 2\r\nconnection: close\r\n\r\n";
    let adjusted = one_shot(adjusted_addr, request);
    let text = String::from_utf8_lossy(adjusted.data()).into_owned();
    assert!(text.contains("\r\nContent-Type: text/plain\r\n"), "{text}");
    assert!(text.contains("\r\nx-other: 1\r\n"), "{text}");
    assert!(text.contains("\r\n0\r\nX-SUM: 9\r\n\r\n"), "{text}");
    let plain = one_shot(plain_addr, request);
    let text = String::from_utf8_lossy(plain.data()).into_owned();
    assert!(text.contains("\r\ncontent-type: text/plain\r\n"), "{text}");
    assert!(text.contains("\r\n0\r\nx-sum: 9\r\n\r\n"), "{text}");
    // The proxy's own answers too.
    let own = b"GET /own HTTP/1.1\r\nhost: h\r\nconnection: close\r\n\r\n";
    let adjusted_own = one_shot(adjusted_addr, own);
    let text = String::from_utf8_lossy(adjusted_own.data()).into_owned();
    assert!(text.contains("\r\nContent-Type: text/plain\r\n"), "{text}");
    let plain_own = one_shot(plain_addr, own);
    let text = String::from_utf8_lossy(plain_own.data()).into_owned();
    assert!(!text.contains("\r\nContent-Type: "), "{text}");
    let seen = log.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let to_bogus = &seen[0].head;
    assert!(to_bogus.contains("\r\nX-Req: 1\r\n"), "{to_bogus}");
    assert!(to_bogus.contains("\r\nContent-Type: a\r\n"), "{to_bogus}");
    assert!(to_bogus.contains("\r\nx-other: 2\r\n"), "{to_bogus}");
    let to_fine = &seen[1].head;
    assert!(to_fine.contains("\r\nx-REQ: 1\r\n"), "{to_fine}");
    assert!(to_fine.contains("\r\ncontent-type: a\r\n"), "{to_fine}");
}

/// A compressed chunked answer ends with the trailers the server sent, as in HAProxy.
#[test]
fn a_compressed_answer_keeps_the_servers_trailers() {
    let backend = common::http::answering(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
          19\r\nsome text some text some \r\n0\r\nx-sum: 9\r\n\r\n",
    );
    let (_p, addr) = proxy(backend.addr(), "    compression algo gzip");
    let answer = one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    );
    let data = answer.data();
    let text = String::from_utf8_lossy(data);
    assert!(
        text.to_ascii_lowercase()
            .contains("\r\ncontent-encoding: gzip\r\n"),
        "{text}"
    );
    assert!(data.ends_with(b"\r\n0\r\nx-sum: 9\r\n\r\n"), "{text}");
    let at = data.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut reader = BufReader::new(&data[at..]);
    let mut compressed = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        compressed.extend_from_slice(&chunk[..size]);
    }
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, "some text some text some ");
}

#[test]
fn http_error_pages_with_formats_are_built_for_each_answer() {
    let backend = common::http::answering(b"not an HTTP response\r\n\r\n");
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    \
         http-error status 400 content-type text/plain lf-string \"bad request from %[src]\"\n    \
         default_backend be\n\
         backend be\n    \
         http-error status 502 content-type text/plain lf-string \"502 for %[method] %[path]\" hdr x-n %[int(7)]\n    \
         server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let _p = sluice(&config).inherit(listener).start();
    // A request the proxy cannot parse: the page sees the connection (HAProxy 2.6 sends its
    // built-in page here; the manual, which Sluice follows, has the page replace it).
    let got = one_shot(addr, b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n");
    let text = String::from_utf8_lossy(got.data()).into_owned();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(
        text.ends_with("\r\n\r\nbad request from 127.0.0.1"),
        "{text}"
    );
    // A server's invalid response, after the request was sent: the page reads the request
    // kept for the response side.
    let got = one_shot(addr, b"GET /x?y=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    let text = String::from_utf8_lossy(got.data()).into_owned();
    assert!(text.starts_with("HTTP/1.1 502 "), "{text}");
    assert!(text.contains("\r\nx-n: 7\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n502 for GET /x"), "{text}");
}
