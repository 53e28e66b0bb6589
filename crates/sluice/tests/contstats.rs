//! `option contstats` end to end: the byte counters of `show stat` follow a TCP session, and
//! an HTTP response body, while they are still open; without the option they move only when
//! the transfer ends; either way, each byte is counted once.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::HTTP_DEFAULTS;
use common::{Backend, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, wait_until};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// `field` of the `show stat` row starting with `row` (`"proxy,name,"`), as a number.
fn stat(proxy: &common::Sluice, row: &str, field: &str) -> u64 {
    let csv = proxy.cli("show stat");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap()[2..].split(',').collect();
    let column = header.iter().position(|h| *h == field).unwrap();
    let line = lines
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row {row} in {csv}"));
    line.split(',').nth(column).unwrap().parse().unwrap_or(0)
}

/// Two frontends, `live` with `option contstats` and `plain` without, each with its own
/// backend towards `server`, in `defaults`.
fn two_frontends(
    defaults: &str,
    server: std::net::SocketAddr,
) -> (common::Sluice, [std::net::SocketAddr; 2]) {
    let (live, live_addr) = frontend();
    let (plain, plain_addr) = frontend();
    let config = format!(
        "{defaults}\n\
         frontend live\n    bind {}\n    option contstats\n    default_backend be_live\n\
         frontend plain\n    bind {}\n    default_backend be_plain\n\
         backend be_live\n    server s1 {server}\n\
         backend be_plain\n    server s1 {server}\n",
        fd_bind(&live),
        fd_bind(&plain),
    );
    let proxy = common::sluice(&config).inherit(live).inherit(plain).start();
    (proxy, [live_addr, plain_addr])
}

#[test]
fn tcp_sessions_count_their_bytes_while_open_under_contstats() {
    let backend = Backend::echo();
    let (proxy, [live_addr, plain_addr]) = two_frontends(TCP_DEFAULTS, backend.addr());
    let payload = vec![b'x'; 1000];
    let mut clients = Vec::new();
    for addr in [live_addr, plain_addr] {
        let mut client = connect(addr);
        client.write_all(&payload).unwrap();
        assert_eq!(read_n(&mut client, payload.len()), payload);
        clients.push(client);
    }
    let counted = |row: &str| (stat(&proxy, row, "bin"), stat(&proxy, row, "bout"));
    assert!(
        wait_until(GENEROUS, || counted("live,FRONTEND,") == (1000, 1000)),
        "the open session's bytes never showed: {:?}",
        counted("live,FRONTEND,")
    );
    assert_eq!(counted("be_live,BACKEND,"), (1000, 1000));
    assert_eq!(counted("be_live,s1,"), (1000, 1000));
    // Without the option, nothing shows until the session ends.
    assert_eq!(counted("plain,FRONTEND,"), (0, 0));
    drop(clients);
    let ended = || stat(&proxy, "live,FRONTEND,", "scur") + stat(&proxy, "plain,FRONTEND,", "scur");
    assert!(wait_until(GENEROUS, || ended() == 0));
    for row in [
        "live,FRONTEND,",
        "be_live,s1,",
        "plain,FRONTEND,",
        "be_plain,s1,",
    ] {
        assert_eq!(counted(row), (1000, 1000), "{row} counts each byte once");
    }
}

#[test]
fn http_response_bodies_count_their_bytes_while_they_move_under_contstats() {
    const HALF: usize = 100_000;
    // Each connection's answer stops halfway until the test lets it finish.
    let (gate, gates) = mpsc::channel::<()>();
    let gates = Arc::new(Mutex::new(gates));
    let backend = Backend::start(move |mut s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 2 * HALF);
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(&[b'a'; HALF]).unwrap();
        gates.lock().unwrap().recv().unwrap();
        s.write_all(&[b'b'; HALF]).unwrap();
        let _ = reader.read(&mut [0u8; 1]);
    });
    let (proxy, [live_addr, plain_addr]) = two_frontends(HTTP_DEFAULTS, backend.addr());
    let request = b"GET /big HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    let mut live = connect(live_addr);
    live.write_all(request).unwrap();
    let sent = || stat(&proxy, "live,FRONTEND,", "bout");
    assert!(
        wait_until(GENEROUS, || sent() >= HALF as u64),
        "the moving body never showed: {}",
        sent()
    );
    assert!(stat(&proxy, "be_live,s1,", "bout") >= HALF as u64);
    gate.send(()).unwrap();
    let mut answer = Vec::new();
    live.read_to_end(&mut answer).unwrap();
    assert!(answer.ends_with(&[b'b'; HALF]));
    // The same exchange without the option, counted at its end only.
    gate.send(()).unwrap();
    let mut plain = connect(plain_addr);
    plain.write_all(request).unwrap();
    let mut same = Vec::new();
    plain.read_to_end(&mut same).unwrap();
    assert_eq!(same.len(), answer.len());
    let ended = || stat(&proxy, "live,FRONTEND,", "scur") + stat(&proxy, "plain,FRONTEND,", "scur");
    assert!(wait_until(GENEROUS, || ended() == 0));
    for field in ["bin", "bout"] {
        let counted = stat(&proxy, "live,FRONTEND,", field);
        assert_eq!(counted, stat(&proxy, "plain,FRONTEND,", field), "{field}");
        assert_eq!(counted, stat(&proxy, "be_live,s1,", field), "{field}");
    }
    assert_eq!(stat(&proxy, "live,FRONTEND,", "bout"), answer.len() as u64);
}

#[test]
fn a_response_the_server_breaks_off_counts_what_went_through_with_or_without_contstats() {
    const SENT: usize = 30_000;
    // The server announces twice what it sends, then closes: what the request brought to it
    // goes back on a channel.
    let (heads, received) = mpsc::channel::<usize>();
    let heads = Arc::new(Mutex::new(heads));
    let backend = Backend::start(move |mut s| {
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let (mut line, mut head) = (String::new(), 0);
        while reader.read_line(&mut line).unwrap() > 2 {
            head += line.len();
            line.clear();
        }
        heads.lock().unwrap().send(head + line.len()).unwrap();
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 2 * SENT);
        s.write_all(answer.as_bytes()).unwrap();
        s.write_all(&[b'a'; SENT]).unwrap();
    });
    let (proxy, [live_addr, plain_addr]) = two_frontends(HTTP_DEFAULTS, backend.addr());
    for (addr, row, server) in [
        (live_addr, "live,FRONTEND,", "be_live,s1,"),
        (plain_addr, "plain,FRONTEND,", "be_plain,s1,"),
    ] {
        let mut client = connect(addr);
        client
            .write_all(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer);
        assert!(
            answer.ends_with(&[b'a'; SENT]),
            "{row}: {} bytes",
            answer.len()
        );
        let request = received.recv().unwrap() as u64;
        let ended = || stat(&proxy, row, "scur");
        assert!(wait_until(GENEROUS, || ended() == 0));
        for row in [row, server] {
            let counted = (stat(&proxy, row, "bin"), stat(&proxy, row, "bout"));
            assert_eq!(counted, (request, answer.len() as u64), "{row}");
        }
    }
}
