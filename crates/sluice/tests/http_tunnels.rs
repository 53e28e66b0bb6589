//! Upgraded HTTP connections (a `101` to a WebSocket upgrade) relayed after their request's
//! state is gone: bytes flow both ways, the server's `maxconn` slot stays taken until the
//! tunnel ends (a second client waits in the queue meanwhile), and `shutdown sessions server`
//! ends a tunnel.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, UPGRADE, open_tunnel, read_head, upgrading_backend};
use common::{Backend, GENEROUS, connect, fd_bind, frontend, sluice};
use std::io::{Read, Write};
use std::net::SocketAddr;

fn start(backend: &Backend) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}    timeout queue 10s\n    timeout tunnel 30s\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server s1 {} maxconn 1\n",
        fd_bind(&listener),
        backend.addr()
    );
    (sluice(&config).inherit(listener).start(), addr)
}

/// The CSV fields of `show stat` for the row of `be` starting `be,<name>,`.
fn row(proxy: &common::Sluice, name: &str) -> Vec<String> {
    let stat = proxy.cli("show stat");
    let prefix = format!("be,{name},");
    let line = stat.lines().find(|l| l.starts_with(&prefix)).unwrap();
    line.split(',').map(str::to_owned).collect()
}

#[test]
fn a_tunnel_keeps_its_server_slot_until_it_ends() {
    let backend = upgrading_backend();
    let (proxy, addr) = start(&backend);
    let first = open_tunnel(addr);
    // scur (field 4) counts the tunnel on its server.
    assert_eq!(row(&proxy, "s1")[4], "1");
    // A second client finds the only server at its maxconn and waits in the backend's queue
    // (qcur, field 2).
    let mut second = connect(addr);
    second.write_all(UPGRADE).unwrap();
    assert!(
        common::wait_until(GENEROUS, || row(&proxy, "BACKEND")[2] == "1"),
        "{:?}",
        row(&proxy, "BACKEND")
    );
    // The first tunnel ends: its slot goes to the waiting client.
    drop(first);
    let head = read_head(&mut second);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    second.write_all(b"pong").unwrap();
    assert_eq!(common::read_n(&mut second, 4), b"pong");
    assert_eq!(backend.accepted(), 2);
}

#[test]
fn shutdown_sessions_ends_a_tunnel() {
    let backend = upgrading_backend();
    let (proxy, addr) = start(&backend);
    let mut tunnel = open_tunnel(addr);
    assert_eq!(proxy.cli("shutdown sessions server be/s1"), "\n");
    tunnel.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut rest = Vec::new();
    // The proxy closes the client's side: an end of stream (or a reset), not a timeout.
    match tunnel.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{rest:?}"),
        Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
    }
}
