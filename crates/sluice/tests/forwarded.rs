//! End-to-end behaviour of `option forwarded` (configuration.txt §4.2, RFC 7239; HAProxy 2.8,
//! which Debian's 2.6 lacks): the `forwarded` field a backend adds to what it sends, each
//! parameter from the connection or an expression, appended to valid fields the request
//! already has, beside invalid ones.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{Log, ok_backend, one_shot, proxy, status_of};
use std::net::SocketAddr;

/// Sends `request` (a request line and its fields, without the empty line) through a
/// `listen` section with `option_line`; returns the `forwarded` lines the server received,
/// and the client's port.
fn forwarded_of(option_line: &str, fields: &str) -> (Vec<String>, u16, SocketAddr) {
    let (backend, log) = ok_backend();
    let (_proxy, addr) = proxy(backend.addr(), &format!("    {option_line}"));
    let mut conn = common::connect(addr);
    let port = conn.local_addr().unwrap().port();
    std::io::Write::write_all(
        &mut conn,
        format!("GET / HTTP/1.1\r\nHost: example.com\r\n{fields}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let answer = common::read_to_close(&mut conn, common::GENEROUS);
    assert_eq!(status_of(answer.data()), 200);
    (lines(&log), port, addr)
}

fn lines(log: &Log) -> Vec<String> {
    let received = log.lock().unwrap();
    received[0]
        .head
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("forwarded:"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn without_arguments_it_names_the_protocol_and_the_client() {
    let (got, _, _) = forwarded_of("option forwarded", "");
    assert_eq!(got, ["forwarded: proto=http;for=127.0.0.1"]);
}

#[test]
fn ports_quote_the_nodes_and_host_is_the_request_host() {
    let (got, port, addr) = forwarded_of("option forwarded host by by_port for for_port", "");
    assert_eq!(
        got,
        [format!(
            "forwarded: host=\"example.com\";by=\"127.0.0.1:{}\";for=\"127.0.0.1:{port}\"",
            addr.port()
        )]
    );
}

/// The manual's examples: computed values, an identifier written obfuscated, a port from an
/// expression; a value that is neither is `unknown`, a port that is not one is left out.
#[test]
fn expressions_give_hosts_nodes_and_ports() {
    let (got, _, _) = forwarded_of(
        "option forwarded host-expr str(host.com) by-expr str(_haproxy) for for_port-expr int(10)",
        "",
    );
    assert_eq!(
        got,
        ["forwarded: host=\"host.com\";by=_haproxy;for=\"127.0.0.1:10\""]
    );
    let (got, _, _) = forwarded_of(
        "option forwarded for-expr str(secret) by-expr str(a/b) by_port-expr str(x/y)",
        "",
    );
    assert_eq!(got, ["forwarded: by=\"unknown\";for=_secret"]);
    // A bracketed IPv6 address is quoted; a bare one is neither a node nor an identifier.
    let (got, _, _) = forwarded_of(
        "option forwarded for-expr str([::1]) host-expr str(a:b)",
        "",
    );
    assert_eq!(got, ["forwarded: host=\"\";for=\"[::1]\""]);
    let (got, _, _) = forwarded_of("option forwarded for-expr str(::1)", "");
    assert_eq!(got, ["forwarded: for=unknown"]);
}

#[test]
fn valid_fields_are_extended_and_invalid_ones_kept_apart() {
    let (got, _, _) = forwarded_of(
        "option forwarded",
        "Forwarded: for=192.0.2.60;proto=http\r\nForwarded: for=\"[2001:db8::1]:80\"\r\n",
    );
    assert_eq!(
        got,
        [
            "forwarded: for=192.0.2.60;proto=http, for=\"[2001:db8::1]:80\", proto=http;for=127.0.0.1"
        ]
    );
    let (got, _, _) = forwarded_of("option forwarded", "Forwarded: for=192.0.2.60;secret=x\r\n");
    assert_eq!(
        got,
        [
            "Forwarded: for=192.0.2.60;secret=x",
            "forwarded: proto=http;for=127.0.0.1"
        ]
    );
}

/// A frontend's `option forwarded` is ignored with a warning, as HAProxy ignores it.
#[test]
fn a_frontend_ignores_it() {
    let (backend, log) = ok_backend();
    let (listener, addr) = common::frontend();
    let config = format!(
        "{}\nfrontend fe\n    bind {}\n    option forwarded\n    default_backend be\nbackend be\n    server s1 {}\n",
        common::http::HTTP_DEFAULTS,
        common::fd_bind(&listener),
        backend.addr()
    );
    let proxy = common::sluice(&config).inherit(listener).start();
    let answer = one_shot(
        addr,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(answer.data()), 200);
    assert!(lines(&log).is_empty());
    assert!(
        proxy
            .stderr()
            .contains("ignored because a 'frontend' section has no backend capability"),
        "{}",
        proxy.stderr()
    );
}
