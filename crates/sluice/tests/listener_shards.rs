//! Listening sockets and event-loop threads: a TCP address the process binds gets one socket
//! per thread in one `SO_REUSEPORT` group, so a new connection wakes one thread only (no
//! thundering herd), while sockets meant to be taken over by a later process (`expose-fd
//! listeners`) stay one socket that all threads share. The sockets are counted in the kernel's
//! table of listening TCP sockets (`/proc/net/tcp`, one line per socket). With a connection
//! limit, a queued client is served whichever thread's socket it landed on.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, GENEROUS, TCP_DEFAULTS, connect, read_n};
use std::io::Write;
use std::net::{Shutdown, SocketAddr};

fn config(threads: usize, port: u16, backend: &Backend, extra: &str) -> String {
    format!(
        "global\n    nbthread {threads}\n{extra}{TCP_DEFAULTS}\nlisten app\n    bind 127.0.0.1:{port}\n    server s1 {}\n",
        backend.addr()
    )
}

/// Every one of `count` clients gets its bytes echoed back.
fn all_served(addr: SocketAddr, count: usize) {
    for n in 0..count {
        let mut client = connect(addr);
        let text = format!("client {n:02}");
        client.write_all(text.as_bytes()).unwrap();
        assert_eq!(read_n(&mut client, text.len()), text.as_bytes());
    }
}

#[test]
fn each_thread_listens_on_a_socket_of_its_own() {
    let backend = Backend::echo();
    let port = common::free_port();
    let _proxy = common::sluice(&config(3, port, &backend, "")).start();
    assert_eq!(common::listening_sockets(port), 3);
    all_served(SocketAddr::from(([127, 0, 0, 1], port)), 30);
}

#[test]
fn one_thread_listens_on_one_socket() {
    let backend = Backend::echo();
    let port = common::free_port();
    let _proxy = common::sluice(&config(1, port, &backend, "")).start();
    assert_eq!(common::listening_sockets(port), 1);
    all_served(SocketAddr::from(([127, 0, 0, 1], port)), 5);
}

#[test]
fn sockets_exposed_for_a_takeover_are_shared_by_the_threads() {
    let backend = Backend::echo();
    let port = common::free_port();
    let builder = common::sluice("");
    let exposed = builder.dir().join("exposed.sock");
    let extra = format!(
        "    stats socket \"{}\" level admin expose-fd listeners\n",
        exposed.display()
    );
    let _proxy = builder.config(&config(3, port, &backend, &extra)).start();
    assert_eq!(common::listening_sockets(port), 1);
    all_served(SocketAddr::from(([127, 0, 0, 1], port)), 10);
}

/// With `maxconn 1`, each client queues while the one before is served, then is served once
/// that one leaves, on whichever thread's socket the kernel put it: a thread whose own queue is
/// empty must not keep the only slot waiting there. Eight clients in a row: each lands on
/// either thread's socket, so a slot kept by the wrong thread would show.
#[test]
fn a_queued_client_gets_the_slot_whichever_socket_it_is_on() {
    let backend = Backend::echo();
    let port = common::free_port();
    let cfg = format!(
        "global\n    nbthread 2\n{TCP_DEFAULTS}\nfrontend fe\n    bind 127.0.0.1:{port}\n    maxconn 1\n    default_backend be\nbackend be\n    server s1 {}\n",
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).start();
    assert_eq!(common::listening_sockets(port), 2);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut current = connect(addr);
    current.write_all(b"first").unwrap();
    assert_eq!(read_n(&mut current, 5), b"first");
    for n in 0..8 {
        let mut next = connect(addr);
        let text = format!("next {n}");
        next.write_all(text.as_bytes()).unwrap();
        current.shutdown(Shutdown::Both).unwrap();
        drop(current);
        next.set_read_timeout(Some(GENEROUS)).unwrap();
        assert_eq!(
            read_n(&mut next, text.len()),
            text.as_bytes(),
            "client {n} was never served"
        );
        current = next;
    }
    assert_eq!(backend.accepted(), 9);
}
