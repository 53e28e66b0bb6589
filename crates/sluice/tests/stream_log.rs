//! The stream records of the data path, as the `-d` debug output prints them: one line per
//! finished HTTP request (HAProxy's `option httplog` layout) or TCP session (`option tcplog`
//! layout), with the right names, status, termination state and request line.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close, sluice, wait_until,
};
use std::io::{Read, Write};

/// The fields of the first stderr line containing `needle`, split at spaces.
fn log_line(stderr: &str, needle: &str) -> Option<Vec<String>> {
    stderr
        .lines()
        .find(|l| l.contains(needle))
        .map(|l| l.split(' ').map(str::to_owned).collect())
}

#[test]
fn http_requests_are_logged_in_httplog_layout() {
    let backend = Backend::start(|mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(
            b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nConnection: close\r\n\r\nyes",
        );
    });
    let (listener, addr) = frontend();
    let config = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\n\
         frontend web\n    bind {}\n    default_backend app\n\nbackend app\n    server s1 {}\n",
        fd_bind(&listener),
        backend.addr()
    );
    let p = sluice(&config).inherit(listener).start();
    let mut s = connect(addr);
    s.write_all(b"GET /logged?x=1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut s, GENEROUS);
    assert!(String::from_utf8_lossy(answer.data()).starts_with("HTTP/1.1 201"));
    assert!(
        wait_until(GENEROUS, || p.stderr().contains("/logged?x=1")),
        "{}",
        p.stderr()
    );
    let f = log_line(&p.stderr(), "/logged?x=1").unwrap();
    // client:port [date] frontend backend/server TR/Tw/Tc/Tr/Ta status bytes - - term ...
    assert!(f[0].starts_with("127.0.0.1:"), "{f:?}");
    assert!(f[1].starts_with('[') && f[1].ends_with(']'), "{f:?}");
    assert_eq!(&f[2..4], ["web", "app/s1"]);
    let timers: Vec<i64> = f[4].split('/').map(|t| t.parse().unwrap()).collect();
    assert_eq!(timers.len(), 5);
    assert!(timers.iter().all(|&t| t >= 0), "{f:?}");
    assert_eq!(f[5], "201");
    assert!(
        f[6].parse::<u64>().unwrap() > 3,
        "bytes include the head: {f:?}"
    );
    assert_eq!(f[9], "----");
    assert_eq!(f.last().unwrap(), "HTTP/1.1\"");
    assert_eq!(f[f.len() - 3], "\"GET");

    // A malformed request: refused by the proxy while reading the request.
    let mut bad = connect(addr);
    bad.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    read_to_close(&mut bad, GENEROUS);
    assert!(
        wait_until(GENEROUS, || p.stderr().contains("<BADREQ>")),
        "{}",
        p.stderr()
    );
    let f = log_line(&p.stderr(), "<BADREQ>").unwrap();
    assert_eq!(&f[2..4], ["web", "web/<NOSRV>"]);
    assert_eq!(f[5], "400");
    assert_eq!(f[9], "PR--");
}

#[test]
fn tcp_sessions_are_logged_in_tcplog_layout() {
    let backend = Backend::echo();
    let (listener, addr) = frontend();
    let (dead_listener, dead_addr) = frontend();
    let refused = common::refused_addr();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten echo\n    bind {}\n    server s1 {}\n\nlisten dead\n    bind {}\n    retries 1\n    timeout connect 100ms\n    server gone {refused}\n",
        fd_bind(&listener),
        backend.addr(),
        fd_bind(&dead_listener),
    );
    let p = sluice(&config)
        .inherit(listener)
        .inherit(dead_listener)
        .start();
    let mut s = connect(addr);
    s.write_all(b"ping").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let echoed = read_to_close(&mut s, GENEROUS);
    assert_eq!(echoed.data(), b"ping");
    assert!(
        wait_until(GENEROUS, || p.stderr().contains(" echo echo/s1 ")),
        "{}",
        p.stderr()
    );
    let f = log_line(&p.stderr(), " echo echo/s1 ").unwrap();
    // client:port [date] frontend backend/server Tw/Tc/Tt bytes term counts queues
    let timers: Vec<i64> = f[4].split('/').map(|t| t.parse().unwrap()).collect();
    assert_eq!(timers.len(), 3);
    assert_eq!(f[5], "4", "bytes sent to the client");
    assert_eq!(f[6], "--");

    // A server that refuses: a connection failure ("SC"), after one retry, with no connect time.
    let mut d = connect(dead_addr);
    assert!(read_to_close(&mut d, GENEROUS).is_closed());
    assert!(
        wait_until(GENEROUS, || p.stderr().contains(" dead dead/gone ")),
        "{}",
        p.stderr()
    );
    let f = log_line(&p.stderr(), " dead dead/gone ").unwrap();
    assert!(f[4].starts_with("0/-1/"), "{f:?}");
    assert_eq!(f[6], "SC");
    assert!(f[7].ends_with("/1"), "one retry: {f:?}");
}
