//! End-to-end behaviour of `set-fc-tos` and `set-fc-mark` (HAProxy 2.6's `set-tos` and
//! `set-mark`): the TOS byte and the firewall mark of the packets the proxy sends to the client,
//! set by `tcp-request` and `http-request|response` rules.
//!
//! The proxy's socket towards the client is read with `ss` (iproute2, which the test command
//! installs if it is missing): it reports the socket's TOS and, when set, its mark. A mark
//! needs CAP_NET_ADMIN; without it the action does nothing, as in HAProxy, and the tests check
//! the mark only when they run as root. The first two tests pass on HAProxy 2.6 once the
//! actions carry its names (`set-tos`, `set-mark`: it lacks the `set-fc-*` ones).
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, ok_backend};
use common::{Backend, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, sluice};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;

/// What `ss` says of the proxy's side of the connection `client` (the one socket whose peer
/// port is the client's port and whose own port is the proxy's: the tests run side by side,
/// and another test's client may have the same port towards another proxy): its `tos:` and,
/// when set, its `fwmark:`.
fn proxy_side_of(client: &TcpStream) -> String {
    let port = client.local_addr().unwrap().port();
    let proxy_port = client.peer_addr().unwrap().port();
    let out = Command::new("ss")
        .args(["-tnHOe", "--tos", "state", "established"])
        .arg(format!("( dport = :{port} and sport = :{proxy_port} )"))
        .output()
        .expect("run ss (package iproute2)");
    assert!(out.status.success(), "ss failed: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "one socket has the client as its peer: {text}"
    );
    lines[0].to_owned()
}

/// The value `ss` shows after `field:` (`tos`, `fwmark`), if it shows the field.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}:");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))
}

fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn start(config: &str) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let text = config.replace("{bind}", &format!("bind {}", fd_bind(&listener)));
    (sluice(&text).inherit(listener).start(), addr)
}

/// Sends a GET for `path` on `conn`, kept alive, with the `fields` lines (each ending with CRLF),
/// and reads the answer's head and 2-byte body.
fn exchange(conn: &mut BufReader<TcpStream>, path: &str, fields: &str) {
    write!(
        conn.get_mut(),
        "GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n"
    )
    .unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        conn.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        assert!(
            !line.is_empty(),
            "connection closed before the answer's end"
        );
    }
    read_n(conn, 2);
}

#[test]
fn http_rules_set_the_tos_and_mark_of_the_packets_to_the_client() {
    let (backend, _log) = ok_backend();
    let (_proxy, addr) = start(&format!(
        "{HTTP_DEFAULTS}
listen px
    {{bind}}
    http-request set-tos 0x20 if {{ path /tos }}
    http-response set-fc-mark 7 if {{ var(txn.mark) -m found }}
    http-request set-var(txn.mark) bool(true) if {{ path /mark }}
    server s1 {}
",
        backend.addr()
    ));
    let mut conn = BufReader::new(connect(addr));
    exchange(&mut conn, "/plain", "");
    let before = proxy_side_of(conn.get_ref());
    assert_eq!(field(&before, "tos"), Some("0"), "{before}");
    assert_eq!(field(&before, "fwmark"), None, "{before}");

    exchange(&mut conn, "/tos", "");
    let after = proxy_side_of(conn.get_ref());
    assert_eq!(field(&after, "tos"), Some("0x20"), "{after}");

    exchange(&mut conn, "/mark", "");
    let marked = proxy_side_of(conn.get_ref());
    // The TOS stays: it belongs to the connection, not to the request.
    assert_eq!(field(&marked, "tos"), Some("0x20"), "{marked}");
    if running_as_root() {
        assert_eq!(field(&marked, "fwmark"), Some("0x7"), "{marked}");
    }
}

#[test]
fn tcp_request_connection_rules_mark_the_connection_before_any_data() {
    let backend = Backend::echo();
    let (_proxy, addr) = start(&format!(
        "{TCP_DEFAULTS}
listen px
    {{bind}}
    tcp-request connection set-fc-tos 72
    tcp-request connection set-mark 0x10
    server s1 {}
",
        backend.addr()
    ));
    let mut client = connect(addr);
    client.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut client, 4), b"ping");
    let line = proxy_side_of(&client);
    assert_eq!(field(&line, "tos"), Some("0x48"), "{line}");
    if running_as_root() {
        assert_eq!(field(&line, "fwmark"), Some("0x10"), "{line}");
    }
}

/// HAProxy 3.x: the value may be computed (HAProxy 2.6 takes a number only).
#[test]
fn a_computed_tos_comes_from_the_expression() {
    let (backend, _log) = ok_backend();
    let (_proxy, addr) = start(&format!(
        "{HTTP_DEFAULTS}
listen px
    {{bind}}
    http-request set-fc-tos req.hdr(x-tos)
    server s1 {}
",
        backend.addr()
    ));
    let mut conn = BufReader::new(connect(addr));
    exchange(&mut conn, "/", "X-Tos: 40\r\n");
    let side = proxy_side_of(conn.get_ref());
    assert_eq!(field(&side, "tos"), Some("0x28"), "{side}");
}
