//! More server options, end to end: `id` decides the order `balance first` fills servers in;
//! `minconn` with `fullconn` makes a server's limit follow the backend's load (watched through
//! a frontend answering `%[queue(app)]`, so every step waits for an observed state).
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, wait_until,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// The answers of `n` sequential connections to a frontend whose servers send their name.
fn names(addr: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let mut c = connect(addr);
            match read_to_close(&mut c, GENEROUS) {
                Closed::Eof(d) => String::from_utf8(d).unwrap(),
                other => panic!("connection not served: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn balance_first_follows_server_ids_not_declaration_order() {
    let late = Backend::named("declared-first");
    let early = Backend::named("lowest-id");
    let (fe, addr) = frontend();
    // The second server has id 1; the first one takes the next free id, 2.
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance first\n    server a {}\n    server b {} id 1\n",
        fd_bind(&fe),
        late.addr(),
        early.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert_eq!(names(addr, 3), ["lowest-id"; 3]);
    assert_eq!(late.accepted(), 0);
}

/// The requests waiting in backend `app`'s queues, read through the `watch` frontend.
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

#[test]
fn a_minconn_server_takes_more_connections_as_the_backend_fills() {
    // Limit = max(minconn 1, 4 x connections / fullconn 8): 1 until the backend holds 4
    // connections (queued ones included), then 2, 3 at 6, and maxconn 4 from 8 on.
    let server = Backend::silent();
    let (fe, addr) = frontend();
    let (watch_fe, watch) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    fullconn 8\n    timeout queue 30s\n    server s {} minconn 1 maxconn 4\n\
         frontend watch\n    mode http\n    bind {}\n    http-request return status 200 content-type text/plain lf-string %[queue(app)]\n",
        fd_bind(&fe),
        server.addr(),
        fd_bind(&watch_fe),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).inherit(watch_fe).start();
    let mut clients: Vec<TcpStream> = Vec::new();
    // (accepted by the server, queued) after each new client.
    let expected = [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 2),
        (2, 3),
        (3, 3),
        (3, 4),
        (4, 4),
    ];
    for (n, (accepted, waiting)) in expected.into_iter().enumerate() {
        clients.push(connect(addr));
        assert!(
            wait_until(GENEROUS, || server.accepted() == accepted
                && queued(watch) == waiting),
            "client {}: expected {accepted} served and {waiting} queued, saw {} and {}",
            n + 1,
            server.accepted(),
            queued(watch)
        );
    }
}
