//! Changing the server list of a running process over the stats socket, as HAProxy 2.6
//! does: `add server` (a new server starts in maintenance; `enable server` puts it in
//! service), `del server` (only a server in maintenance without connections), and `set
//! server ... addr` (new connections, and no idle one, go to the new address). The answers
//! are HAProxy 2.6's words, checked side by side when this was written.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, http_backend};
use common::{Backend, fd_bind, frontend, sluice};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// A server answering its name as the body, on kept-alive connections.
fn named(name: &'static str) -> Backend {
    http_backend(move |_| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{name}",
            name.len()
        )
    })
    .0
}

/// The body of one request sent on a new connection.
fn get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(common::GENEROUS)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.rsplit("\r\n\r\n").next().unwrap().to_owned()
}

/// Which servers answered `n` requests.
fn answering(addr: SocketAddr, n: usize) -> BTreeSet<String> {
    (0..n).map(|_| get(addr)).collect()
}

fn start(extra_backend: &str, first: &Backend) -> (common::Sluice, SocketAddr) {
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server a {}\n{extra_backend}",
        fd_bind(&listener),
        first.addr(),
    );
    (sluice(&config).inherit(listener).start(), addr)
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn an_added_server_serves_once_enabled_and_leaves_when_deleted() {
    let (a, b) = (named("a"), named("b"));
    let (proxy, addr) = start("", &a);
    assert_eq!(
        proxy.cli(&format!("add server be/b {} weight 1", b.addr())),
        "New server registered.\n\n"
    );
    assert_eq!(
        answering(addr, 4),
        set(&["a"]),
        "a new server starts in maintenance"
    );
    let state = proxy.cli("show servers state be");
    let row = state.lines().find(|l| l.contains(" b ")).unwrap();
    let fields: Vec<&str> = row.split(' ').collect();
    // Id 2, stopped, in maintenance by the CLI (not by the configuration).
    assert_eq!(
        &fields[1..7],
        ["be", "2", "b", "127.0.0.1", "0", "1"],
        "{state}"
    );
    assert_eq!(proxy.cli("enable server be/b"), "\n");
    assert_eq!(answering(addr, 4), set(&["a", "b"]));
    assert!(proxy.cli("show stat").contains("\nbe,b,"));
    assert_eq!(
        proxy.cli("del server be/b"),
        "Only servers in maintenance mode can be deleted.\n\n"
    );
    proxy.cli("disable server be/b");
    assert_eq!(proxy.cli("del server be/b"), "Server deleted.\n\n");
    assert_eq!(answering(addr, 4), set(&["a"]));
    assert_eq!(proxy.cli("disable server be/b"), "No such server.\n\n");
    assert!(!proxy.cli("show stat").contains("\nbe,b,"));
    // The name is free again; the new server takes the first free id.
    assert_eq!(
        proxy.cli(&format!("add server be/b {}", b.addr())),
        "New server registered.\n\n"
    );
    assert!(proxy.cli("show servers state be").contains(" be 2 b "));
}

#[test]
fn servers_that_cannot_be_added_are_refused_in_haproxys_words() {
    let a = named("a");
    let (proxy, _) = start(
        "backend st\n    balance static-rr\n    server s 127.0.0.1:1\n",
        &a,
    );
    let cases = [
        (
            "add server be/a 127.0.0.1:2",
            "Already exists a server with the same name in backend.",
        ),
        (
            "add server st/x 127.0.0.1:2",
            "Backend must use a dynamic load balancing to support dynamic servers.",
        ),
        ("add server nope/x 127.0.0.1:2", "No such backend."),
        ("add server be", "Require 'backend/server'."),
        (
            "add server be/x",
            "'server' expects <name> and <addr>[:<port>] as arguments.",
        ),
        (
            "add server be/x 127.0.0.1:2 cookie c",
            "'cookie' option is not accepted for dynamic server",
        ),
        (
            "add server be/x 127.0.0.1:2 max-reuse 3",
            "'max-reuse' option is not accepted for dynamic server",
        ),
        (
            "add server be/x 127.0.0.1:2 check",
            "'check' is not supported by Sluice for dynamic servers",
        ),
        (
            "add server be/x 127.0.0.1:2 id 1",
            "'id' : custom id 1 already used at",
        ),
        ("del server be/nope", "No such server."),
    ];
    for (line, answer) in cases {
        let got = proxy.cli(line);
        assert!(got.starts_with(answer), "{line}: {got}");
    }
    assert!(
        !proxy.cli("show servers state be").contains(" x "),
        "nothing was added"
    );
}

#[test]
fn set_server_addr_moves_new_connections_and_skips_idle_ones() {
    let (a, b) = (named("a"), named("b"));
    let (proxy, addr) = start("", &a);
    // A kept-alive server connection to `a` now waits in the idle pool.
    assert_eq!(get(addr), "a");
    let port = b.addr().port();
    assert_eq!(
        proxy.cli(&format!("set server be/a addr 127.0.0.1 port {port}")),
        format!(
            "no need to change the addr, port changed from '{}' to '{port}' by 'stats socket command'\n\n",
            a.addr().port()
        )
    );
    assert_eq!(answering(addr, 3), set(&["b"]));
    assert!(
        proxy
            .cli("show servers state be")
            .contains(&format!(" {port} - ")),
        "the new port is shown"
    );
    assert_eq!(
        proxy.cli("set server be/a addr 127.0.0.1"),
        "no need to change the addr by 'stats socket command'\n\n"
    );
    assert_eq!(
        proxy.cli("set server be/a addr nowhere"),
        "Invalid addr 'nowhere' by 'stats socket command'\n\n"
    );
    assert_eq!(
        proxy.cli("set server be/a addr ::1"),
        "IP changed from '127.0.0.1' to '::1' by 'stats socket command'\n\n"
    );
}

#[test]
fn health_checks_follow_a_moved_server() {
    let live = named("live");
    let (listener, addr) = frontend();
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server a {} check inter 50ms rise 1 fall 1\n",
        fd_bind(&listener),
        common::refused_addr(),
    );
    let proxy = sluice(&config).inherit(listener).start();
    let status = || {
        let stat = proxy.cli("show stat");
        let row = stat.lines().find(|l| l.starts_with("be,a,")).unwrap_or("");
        row.split(',').nth(17).unwrap_or("").to_owned()
    };
    assert!(common::wait_until(common::GENEROUS, || status() == "DOWN"));
    proxy.cli(&format!(
        "set server be/a addr 127.0.0.1 port {}",
        live.addr().port()
    ));
    assert!(
        common::wait_until(common::GENEROUS, || status().starts_with("UP")),
        "the checks go to the new address: {}",
        status()
    );
    assert_eq!(get(addr), "live");
}

#[test]
fn health_and_check_targets_are_set_from_the_cli() {
    let live = named("live");
    let (listener, addr) = frontend();
    let closed = common::refused_addr();
    // The server answers, but its checks go to a closed port: it is down.
    let config = format!(
        "{HTTP_DEFAULTS}\nfrontend fe\n    bind {}\n    default_backend be\nbackend be\n    server a {} check port {} inter 50ms rise 1 fall 1\n    server n {}\n",
        fd_bind(&listener),
        live.addr(),
        closed.port(),
        live.addr(),
    );
    let proxy = sluice(&config).inherit(listener).start();
    let status = |server: &str| {
        let stat = proxy.cli("show stat");
        let prefix = format!("be,{server},");
        let row = stat.lines().find(|l| l.starts_with(&prefix)).unwrap_or("");
        row.split(',').nth(17).unwrap_or("").to_owned()
    };
    assert!(common::wait_until(common::GENEROUS, || status("a") == "DOWN"));
    assert_eq!(
        proxy.cli(&format!(
            "set server be/a check-port {}",
            live.addr().port()
        )),
        "\n"
    );
    assert!(
        common::wait_until(common::GENEROUS, || status("a").starts_with("UP")),
        "{}",
        status("a")
    );
    // With the checks paused, a forced verdict stays until they resume.
    proxy.cli("disable health be/a");
    assert_eq!(proxy.cli("set server be/a health stopping"), "\n");
    assert_eq!(status("a"), "NOLB");
    assert_eq!(proxy.cli("set server be/a health down"), "\n");
    assert_eq!(status("a"), "DOWN");
    assert_eq!(
        proxy.cli("set server be/n check-port 80"),
        "health checks are not enabled on this server\n"
    );
    assert_eq!(
        proxy.cli("set server be/a agent up"),
        "agent checks are not enabled on this server.\n\n"
    );
    assert_eq!(
        proxy.cli("set server be/a health sideways"),
        "'set server <srv> health' expects 'up', 'stopping', or 'down'.\n\n"
    );
    assert_eq!(get(addr), "live");
}
