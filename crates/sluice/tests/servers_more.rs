//! More server options, end to end: `id` decides the order `balance first` fills servers in.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_to_close};
use std::net::SocketAddr;

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
