//! Server selection and connection failures: a refused server address closes the client
//! connection (after `retries` further attempts, each after a pause of min(`timeout connect`,
//! 1s)), retries really reconnect (a server that appears between attempts gets the session),
//! `disabled` servers take no traffic, a backend with every server disabled closes clients at
//! once, `backup` servers take over only when no active server is usable, and `balance
//! roundrobin` spreads connections in proportion to the servers' weights, and the states saved
//! with `show servers state` are given back at start-up (`load-server-state-from-file`).
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, read_to_close,
    refused_addr,
};
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Connects, sends a byte and waits for the proxy to close; returns what was seen and when.
fn closed_after(addr: std::net::SocketAddr) -> (Closed, Duration) {
    let started = Instant::now();
    let mut c = connect(addr);
    let _ = c.write_all(b"x");
    let seen = read_to_close(&mut c, GENEROUS);
    (seen, started.elapsed())
}

/// The answers of `n` sequential connections to a frontend whose servers send their name.
fn names(addr: std::net::SocketAddr, n: usize) -> Vec<String> {
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
fn refused_server_closes_the_client_after_every_retry() {
    // retries 2 and timeout connect 100ms: three attempts, two pauses of 100ms in between.
    // With `option redispatch`, the last retry chooses the only server again and, as in
    // HAProxy, pauses too: a redispatch is made at once only when another server is up.
    for redispatch in ["", "    option redispatch\n"] {
        let (fe, addr) = frontend();
        let cfg = format!(
            "defaults\n    mode tcp\n    timeout connect 100ms\n    timeout client 30s\n    timeout server 30s\n    retries 2\n\
             listen app\n    bind {}\n{redispatch}    server dead {}\n",
            fd_bind(&fe),
            refused_addr()
        );
        let proxy = common::sluice(&cfg).inherit(fe).start();
        let (seen, elapsed) = closed_after(addr);
        assert!(seen.is_closed(), "client left open: {seen:?}");
        assert!(
            seen.data().is_empty(),
            "nothing can come from a dead server: {seen:?}"
        );
        assert!(
            elapsed >= Duration::from_millis(190),
            "{redispatch}: closed after {elapsed:?}: the two 100ms pauses between the three attempts were skipped"
        );
        assert!(elapsed < GENEROUS, "closed after {elapsed:?}");
        // Fields 14 to 17 (econ, eresp, wretr, wredis): two retries, no redispatch; field 8
        // (stot): each attempt is a session of the server, as HAProxy counts them.
        let stat = proxy.cli("show stat");
        let row: Vec<&str> = stat
            .lines()
            .find(|l| l.starts_with("app,dead,"))
            .unwrap()
            .split(',')
            .collect();
        assert_eq!((row[13], row[15], row[16]), ("1", "2", "0"), "{stat}");
        assert_eq!(row[7], "3", "{stat}");
    }
}

#[test]
fn refused_server_without_retries_closes_the_client_promptly() {
    let (fe, addr) = frontend();
    // A long connect timeout would make any pause visible: retries 0 means no pause at all.
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 3s\n    timeout client 30s\n    timeout server 30s\n    retries 0\n\
         listen app\n    bind {}\n    server dead {}\n",
        fd_bind(&fe),
        refused_addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let (seen, elapsed) = closed_after(addr);
    assert!(seen.is_closed(), "client left open: {seen:?}");
    assert!(
        elapsed < Duration::from_secs(1),
        "closed only after {elapsed:?}"
    );
}

#[test]
fn retries_reconnect_to_a_server_that_comes_back() {
    // Pauses of 1s (min(timeout connect, 1s)) between attempts at t=0, 1s, 2s, 3s. The server
    // starts listening at t≈1.5s: one of the later attempts must reach it, which only happens
    // if retries really connect again.
    let late = refused_addr();
    let (fe, addr) = frontend();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n    retries 3\n\
         listen app\n    bind {}\n    server late {late}\n",
        fd_bind(&fe),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let started = Instant::now();
    let mut c = connect(addr);
    c.write_all(b"hello?").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // The same port again (std sets SO_REUSEADDR, so a recent close does not get in the way).
    let server = TcpListener::bind(late).expect("rebind the server port");
    server.set_nonblocking(true).unwrap();
    let mut accepted = None;
    assert!(
        common::wait_until(GENEROUS, || {
            accepted = server.accept().ok();
            accepted.is_some()
        }),
        "no retry reached the server once it listened"
    );
    let (mut s, _) = accepted.unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(GENEROUS)).unwrap();
    assert_eq!(read_n(&mut s, 6), b"hello?");
    s.write_all(b"finally").unwrap();
    drop(s);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(d) => assert_eq!(d, b"finally"),
        other => panic!("the retried connection did not carry the session: {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

#[test]
fn disabled_server_takes_no_traffic() {
    let good = Backend::named("good");
    let parked = Backend::named("disabled");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance roundrobin\n    server off {} disabled\n    server on {}\n",
        fd_bind(&fe),
        parked.addr(),
        good.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert_eq!(names(addr, 4), ["good"; 4]);
    assert_eq!(parked.accepted(), 0);
}

#[test]
fn all_servers_disabled_closes_the_client_at_once() {
    let parked = Backend::named("disabled");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server a {} disabled\n    server b {} disabled\n",
        fd_bind(&fe),
        parked.addr(),
        parked.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let (seen, elapsed) = closed_after(addr);
    assert!(seen.is_closed(), "client left open: {seen:?}");
    assert!(seen.data().is_empty());
    assert!(
        elapsed < Duration::from_secs(1),
        "closed only after {elapsed:?}"
    );
    assert_eq!(parked.accepted(), 0);
}

#[test]
fn backup_server_is_used_only_without_a_usable_active_server() {
    let active = Backend::named("active");
    let backup = Backend::named("backup");
    let (fe1, addr1) = frontend();
    let (fe2, addr2) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten with_active\n    bind {}\n    server a {}\n    server b {} backup\n\
         listen active_disabled\n    bind {}\n    server a {} disabled\n    server b {} backup\n",
        fd_bind(&fe1),
        active.addr(),
        backup.addr(),
        fd_bind(&fe2),
        active.addr(),
        backup.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe1).inherit(fe2).start();
    assert_eq!(names(addr1, 3), ["active"; 3]);
    assert_eq!(names(addr2, 3), ["backup"; 3]);
}

#[test]
fn roundrobin_alternates_between_equal_servers() {
    let a = Backend::named("a");
    let b = Backend::named("b");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance roundrobin\n    server a {}\n    server b {}\n",
        fd_bind(&fe),
        a.addr(),
        b.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let got = names(addr, 6);
    for pair in got.windows(2) {
        assert_ne!(pair[0], pair[1], "the same server twice in a row: {got:?}");
    }
    assert_eq!((a.accepted(), b.accepted()), (3, 3));
}

#[test]
fn roundrobin_follows_the_weights() {
    let a = Backend::named("a");
    let b = Backend::named("b");
    let c = Backend::named("c");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance roundrobin\n    server a {} weight 3\n    server b {} weight 2\n    server c {} weight 1\n",
        fd_bind(&fe),
        a.addr(),
        b.addr(),
        c.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    // Two full cycles of sum(weights) = 6 connections each.
    let got = names(addr, 12);
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in &got {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    assert_eq!(
        (counts.get("a"), counts.get("b"), counts.get("c")),
        (Some(&6), Some(&4), Some(&2)),
        "picks: {got:?}"
    );
    // Each cycle of 6 alone is already proportional.
    for cycle in got.chunks(6) {
        let a_picks = cycle.iter().filter(|n| *n == "a").count();
        assert_eq!(a_picks, 3, "cycle {cycle:?}");
    }
}

#[test]
fn zero_weight_server_takes_no_new_traffic() {
    let a = Backend::named("a");
    let idle = Backend::named("idle");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server a {}\n    server idle {} weight 0\n",
        fd_bind(&fe),
        a.addr(),
        idle.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    assert_eq!(names(addr, 4), ["a"; 4]);
    assert_eq!(idle.accepted(), 0);
}

#[test]
fn server_without_port_uses_the_port_the_client_connected_to() {
    // configuration.txt §5.2: a server address without a port takes the destination port of
    // the client's connection. The backend listens on the same port number as the frontend,
    // on another loopback address (127.0.0.2).
    let (fe, addr) = frontend();
    let Ok(listener) = TcpListener::bind(("127.0.0.2", addr.port())) else {
        // The port number is taken on 127.0.0.2: nothing to learn from this run.
        return;
    };
    let backend = Backend::serve(listener, |mut s| {
        let _ = s.write_all(b"same port");
    });
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s 127.0.0.2\n",
        fd_bind(&fe)
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(d) => assert_eq!(d, b"same port"),
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.accepted(), 1);
}

#[test]
fn balance_source_sends_one_client_address_to_one_server() {
    let a = Backend::named("a");
    let b = Backend::named("b");
    let c = Backend::named("c");
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    balance source\n    server a {}\n    server b {}\n    server c {}\n",
        fd_bind(&fe),
        a.addr(),
        b.addr(),
        c.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let got = names(addr, 6);
    assert!(got.iter().all(|n| *n == got[0]), "{got:?}");
}

#[test]
fn first_backup_serves_alone_unless_allbackups() {
    let b1 = Backend::named("b1");
    let b2 = Backend::named("b2");
    let (fe1, addr1) = frontend();
    let (fe2, addr2) = frontend();
    let refused = refused_addr();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten first_only\n    bind {}\n    server a {refused} disabled\n    server b1 {} backup\n    server b2 {} backup\n\
         listen all\n    bind {}\n    option allbackups\n    server a {refused} disabled\n    server b1 {} backup\n    server b2 {} backup\n",
        fd_bind(&fe1),
        b1.addr(),
        b2.addr(),
        fd_bind(&fe2),
        b1.addr(),
        b2.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe1).inherit(fe2).start();
    assert_eq!(names(addr1, 4), ["b1"; 4]);
    let mut got = names(addr2, 4);
    got.sort();
    assert_eq!(got, ["b1", "b1", "b2", "b2"]);
}

#[test]
fn option_redispatch_moves_a_tcp_session_off_a_refusing_server() {
    let alive = Backend::named("alive");
    let (fe, addr) = frontend();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 100ms\n    timeout client 30s\n    timeout server 30s\n    retries 1\n\
         listen app\n    bind {}\n    balance first\n    option redispatch\n    server dead {}\n    server alive {}\n",
        fd_bind(&fe),
        refused_addr(),
        alive.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    let Closed::Eof(data) = read_to_close(&mut c, GENEROUS) else {
        panic!("the session must reach the live server and end");
    };
    assert_eq!(data, b"alive", "the last retry went to the other server");
    // Field 8 (stot): the session counts on the server it left and on the one it reached,
    // as HAProxy counts each attempt.
    let stat = proxy.cli("show stat");
    for server in ["dead", "alive"] {
        let prefix = format!("app,{server},");
        let row = stat.lines().find(|l| l.starts_with(&prefix)).unwrap();
        assert_eq!(row.split(',').nth(7), Some("1"), "{row}");
    }
}

#[test]
fn saved_server_states_are_loaded_at_start_up() {
    // A first process: a server put in maintenance, another given a weight and an address.
    let (fe, _addr) = frontend();
    let config = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 127.0.0.1:9001\n    \
         server s2 127.0.0.1:9002 weight 10\n    server s3 127.0.0.1:9003\n",
        fd_bind(&fe)
    );
    let first = common::sluice(&config).inherit(fe).start();
    first.cli("disable server app/s1");
    first.cli("set weight app/s2 3");
    first.cli("set server app/s2 addr 127.0.0.2");
    let saved = first.cli("show servers state");
    drop(first);
    // The next one reads them, as after a reload.
    let builder = {
        let (fe, _addr) = frontend();
        let bind = fd_bind(&fe);
        let b = common::sluice("").inherit(fe);
        let state = b.dir().write("state", &saved);
        let config = format!(
            "global\n    server-state-file {}\n{TCP_DEFAULTS}    load-server-state-from-file global\n\
             listen app\n    bind {}\n    server s1 127.0.0.1:9001\n    \
             server s2 127.0.0.1:9002 weight 10\n    server s3 127.0.0.1:9003\n    \
             server gone 127.0.0.1:9004\n",
            state.display(),
            bind
        );
        b.config(&config)
    };
    let second = builder.start();
    let now = second.cli("show servers state");
    let line = |name: &str| -> Vec<String> {
        now.lines()
            .find(|l| l.split_whitespace().nth(3) == Some(name))
            .unwrap()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // srv_admin_state (7th field) 1: in maintenance by hand.
    assert_eq!(line("s1")[6], "1", "{now}");
    // srv_uweight (8th) and srv_addr (5th).
    assert_eq!(line("s2")[7], "3", "{now}");
    assert_eq!(line("s2")[4], "127.0.0.2", "{now}");
    assert_eq!(line("s3")[6], "0", "{now}");
    assert_eq!(line("s3")[7], "1", "{now}");
}
