//! Idle client connections, once parked outside any task (`sluice_proxy::park`): kept-alive
//! ones between two requests, and new ones that have not sent their first request. They leave
//! `show sess` (as HAProxy's idle connections have no stream) but still count as sessions,
//! keep their session's variables, answer their next request, close at `timeout
//! http-keep-alive` (a first request: at `timeout http-request`, counted as a request error),
//! and give their `maxconn` slot back when the client leaves.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, ok_backend, read_message};
use common::{Closed, fd_bind, frontend, read_to_close, sluice, wait_until};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(10);

/// Sluice in front of an origin answering `200 ok`, with `extra` lines in its `listen px`
/// section; each answer carries the session's request count (`X-Count`).
fn start(extra: &str) -> (common::Sluice, SocketAddr, common::Backend) {
    let (origin, _) = ok_backend();
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nlisten px\n    bind {}\n{extra}\n    \
         http-request set-var(sess.count) var(sess.count),add(1) if {{ var(sess.count) -m found }}\n    \
         http-request set-var(sess.count) int(1) unless {{ var(sess.count) -m found }}\n    \
         http-response set-header X-Count %[var(sess.count)]\n    \
         server s1 {}\n",
        fd_bind(&listener),
        origin.addr()
    );
    (sluice(&config).inherit(listener).start(), addr, origin)
}

/// Sends a request on `client` and returns the answer's `X-Count`.
fn request(client: &TcpStream) -> String {
    (&*client)
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = read_message(&mut BufReader::new(client.try_clone().unwrap())).unwrap();
    assert_eq!(answer.request_line(), "HTTP/1.1 200 OK");
    answer.header("x-count").unwrap()
}

/// Whether `show sess` lists a stream from the client's address.
fn listed(proxy: &common::Sluice, client: &TcpStream) -> bool {
    let source = format!("src={}", client.local_addr().unwrap());
    proxy.cli("show sess").lines().any(|l| l.contains(&source))
}

/// The frontend's `field` in `show stat`.
fn frontend_stat(proxy: &common::Sluice, field: &str) -> String {
    let csv = proxy.cli("show stat");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap()[2..].split(',').collect();
    let column = header.iter().position(|h| *h == field).unwrap();
    let row = lines
        .find(|l| l.starts_with("px,FRONTEND,"))
        .unwrap_or_else(|| panic!("no frontend row in {csv}"));
    row.split(',').nth(column).unwrap().to_owned()
}

/// The frontend's current sessions (`scur` of `show stat`).
fn sessions(proxy: &common::Sluice) -> String {
    frontend_stat(proxy, "scur")
}

/// Waits until the new connection of `client`, which has sent nothing yet, is parked: first
/// listed by `show sess` (accepted), then out of it.
fn wait_parked_silent(proxy: &common::Sluice, client: &TcpStream) {
    assert!(
        wait_until(LIMIT, || listed(proxy, client)),
        "the connection was never listed"
    );
    wait_parked(proxy, client);
}

/// Waits until the idle connection of `client` is parked: out of `show sess`.
fn wait_parked(proxy: &common::Sluice, client: &TcpStream) {
    assert!(
        wait_until(LIMIT, || !listed(proxy, client)),
        "the idle connection stayed in its task"
    );
}

#[test]
fn a_parked_connection_keeps_its_session_and_serves_its_next_request() {
    let (proxy, addr, _origin) = start("    timeout http-keep-alive 30s");
    let client = common::connect(addr);
    assert_eq!(request(&client), "1");
    wait_parked(&proxy, &client);
    // Still a session of the frontend while parked.
    assert_eq!(sessions(&proxy), "1");
    // Woken by the next request, with the session's variables as they were.
    assert_eq!(request(&client), "2");
    wait_parked(&proxy, &client);
    assert_eq!(request(&client), "3");
}

#[test]
fn a_parked_connection_closes_at_its_keep_alive_timeout() {
    let (proxy, addr, _origin) = start("    timeout http-keep-alive 3s");
    let mut client = common::connect(addr);
    assert_eq!(request(&client), "1");
    wait_parked(&proxy, &client);
    assert_eq!(sessions(&proxy), "1");
    // Closed without a word, as an idle connection in its task would be.
    assert_eq!(read_to_close(&mut client, LIMIT), Closed::Eof(Vec::new()));
    assert!(wait_until(LIMIT, || sessions(&proxy) == "0"));
}

#[test]
fn a_client_leaving_while_parked_frees_its_slot() {
    // One connection at a time: the next client is served only once the first one's
    // session, parked when it left, has ended.
    let (proxy, addr, _origin) = start("    maxconn 1\n    timeout http-keep-alive 30s");
    let first = common::connect(addr);
    assert_eq!(request(&first), "1");
    wait_parked(&proxy, &first);
    drop(first);
    assert!(wait_until(LIMIT, || sessions(&proxy) == "0"));
    let second = common::connect(addr);
    assert_eq!(request(&second), "1");
}

#[test]
fn a_connection_that_has_not_spoken_yet_parks_and_is_served_when_it_does() {
    let (proxy, addr, _origin) = start("    timeout http-keep-alive 30s");
    let client = common::connect(addr);
    wait_parked_silent(&proxy, &client);
    assert_eq!(sessions(&proxy), "1");
    // Its first request, with the session's variables starting from nothing.
    assert_eq!(request(&client), "1");
    wait_parked(&proxy, &client);
    assert_eq!(request(&client), "2");
}

#[test]
fn a_first_request_that_never_comes_is_a_408_at_timeout_http_request_even_parked() {
    let (proxy, addr, _origin) = start("    timeout http-request 3s");
    let mut client = common::connect(addr);
    wait_parked_silent(&proxy, &client);
    assert_eq!(frontend_stat(&proxy, "ereq"), "0");
    // The parked connection is answered and counted as one waiting in its task: HAProxy's
    // 408 page and request error, and the 408 `cR` log line (`logging.rs`).
    let Closed::Eof(answer) = read_to_close(&mut client, LIMIT) else {
        panic!("the connection was not closed");
    };
    assert!(answer.starts_with(b"HTTP/1.1 408 "), "{answer:?}");
    assert!(wait_until(LIMIT, || sessions(&proxy) == "0"));
    assert_eq!(frontend_stat(&proxy, "ereq"), "1");
}

#[test]
fn with_http_ignore_probes_a_silent_connection_gets_no_answer_and_no_count() {
    let (proxy, addr, _origin) = start(
        "    timeout http-request 3s
    option http-ignore-probes",
    );
    let mut parked = common::connect(addr);
    wait_parked_silent(&proxy, &parked);
    assert_eq!(read_to_close(&mut parked, LIMIT), Closed::Eof(Vec::new()));
    let mut left = common::connect(addr);
    left.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_close(&mut left, LIMIT), Closed::Eof(Vec::new()));
    // A connection that sent part of a request is no probe: it gets its 400.
    let mut half = common::connect(addr);
    half.write_all(b"GET / HT").unwrap();
    half.shutdown(std::net::Shutdown::Write).unwrap();
    let Closed::Eof(answer) = read_to_close(&mut half, LIMIT) else {
        panic!("the connection was not closed");
    };
    assert!(answer.starts_with(b"HTTP/1.1 400 "), "{answer:?}");
    assert!(wait_until(LIMIT, || sessions(&proxy) == "0"));
    assert_eq!(frontend_stat(&proxy, "ereq"), "1");
}
