//! Connection limits: with `maxconn 1` (on the frontend, on the `bind` line, in `global`, or
//! from `-n 1` on the command line), a second client is accepted by the kernel's queue but not
//! served while the first session lives; once the first client leaves, the second is served.
//! The assertions are about order (the second answer comes only after the first session
//! ended), with a fixed observation window for "not served yet".
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, read_to_close,
};
use std::io::Write;
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

/// How long the waiting client is watched for an answer it must not get.
const WINDOW: Duration = Duration::from_millis(600);

/// Drives two clients through a proxy limited to one session at a time.
fn second_client_waits_for_the_first(addr: SocketAddr, backend: &Backend) {
    let mut first = connect(addr);
    first.write_all(b"first").unwrap();
    assert_eq!(read_n(&mut first, 5), b"first");

    let mut second = connect(addr);
    second.write_all(b"second").unwrap();
    assert!(
        common::stays_silent(&mut second, WINDOW),
        "the second client was served while the first session was still open"
    );
    // The first session still works, and the server never saw a second connection.
    first.write_all(b"again").unwrap();
    assert_eq!(read_n(&mut first, 5), b"again");
    assert_eq!(
        backend.accepted(),
        1,
        "the proxy opened a server connection for the waiting client"
    );

    // The first client leaves; its session ends once the echo server closes too.
    first.shutdown(Shutdown::Write).unwrap();
    assert!(matches!(
        read_to_close(&mut first, GENEROUS),
        Closed::Eof(_)
    ));
    drop(first);

    second.set_read_timeout(Some(GENEROUS)).unwrap();
    assert_eq!(
        read_n(&mut second, 6),
        b"second",
        "the waiting client was never served"
    );
    assert_eq!(backend.accepted(), 2);
}

#[test]
fn frontend_maxconn_makes_the_next_client_wait() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nfrontend fe\n    bind {}\n    maxconn 1\n    default_backend be\nbackend be\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    second_client_waits_for_the_first(addr, &backend);
}

#[test]
fn bind_maxconn_makes_the_next_client_wait() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {} maxconn 1\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    second_client_waits_for_the_first(addr, &backend);
}

#[test]
fn global_maxconn_makes_the_next_client_wait() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "global\n    maxconn 1\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    second_client_waits_for_the_first(addr, &backend);
}

#[test]
fn command_line_maxconn_makes_the_next_client_wait() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let _proxy = common::sluice(&cfg).arg("-n").arg("1").inherit(fe).start();
    second_client_waits_for_the_first(addr, &backend);
}

#[test]
fn frontend_maxconn_is_per_frontend() {
    // Two frontends with maxconn 1 each: a session on one does not hold back the other.
    let backend = Backend::echo();
    let (fe1, addr1) = frontend();
    let (fe2, addr2) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten one\n    bind {}\n    maxconn 1\n    server s1 {b}\n\
         listen two\n    bind {}\n    maxconn 1\n    server s1 {b}\n",
        fd_bind(&fe1),
        fd_bind(&fe2),
        b = backend.addr()
    );
    let _proxy = common::sluice(&cfg).inherit(fe1).inherit(fe2).start();
    let mut a = connect(addr1);
    a.write_all(b"one").unwrap();
    assert_eq!(read_n(&mut a, 3), b"one");
    let mut b = connect(addr2);
    b.write_all(b"two").unwrap();
    assert_eq!(
        read_n(&mut b, 3),
        b"two",
        "the other frontend's limit held this client back"
    );
}

#[test]
fn show_info_reports_the_configured_maxconn() {
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n    maxconn 42\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 127.0.0.1:9\n",
        fd_bind(&fe)
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let info = proxy.cli("show info");
    assert_eq!(common::info_field(&info, "Maxconn"), Some("42"), "{info}");
}

/// A `maxconn` whose descriptors (two per connection) no hard limit can grant: the kernel
/// caps any descriptor limit at `fs.nr_open`, at most about 2^30.
const UNREACHABLE_MAXCONN: &str = "2000000000";

#[test]
fn a_descriptor_limit_out_of_reach_stops_the_start_under_strict_limits() {
    // `strict-limits` is HAProxy's default: the process refuses to start rather than run
    // short of descriptors.
    // The limit is applied before any socket is bound: this address is never reached.
    let (_held, addr) = frontend();
    let dir = common::TempDir::new();
    let cfg = dir.write(
        "limits.cfg",
        &format!(
            "global\n    maxconn {UNREACHABLE_MAXCONN}\n    nbthread 2\n{TCP_DEFAULTS}\nlisten app\n    bind {addr}\n    server s1 127.0.0.1:9\n"
        ),
    );
    let out = common::run(&["-db", "-f", cfg.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        // Two per connection, 64 kept aside, and the listening sockets: the address's two
        // (one per thread).
        stderr.contains("[ALERT] 'maxconn' needs 4000000066 file descriptors")
            && stderr.contains("'no strict-limits'"),
        "{stderr}"
    );
}

#[test]
fn no_strict_limits_starts_short_of_descriptors_with_a_warning() {
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n    maxconn {UNREACHABLE_MAXCONN}\n    no strict-limits\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 127.0.0.1:9\n",
        fd_bind(&fe)
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let info = proxy.cli("show info");
    // The configured limit stands, as in HAProxy; the descriptors are what could be had.
    assert_eq!(
        common::info_field(&info, "Maxconn"),
        Some(UNREACHABLE_MAXCONN),
        "{info}"
    );
    let ulimit: u64 = common::info_field(&info, "Ulimit-n")
        .unwrap()
        .parse()
        .unwrap();
    assert!(ulimit < 4_000_000_066, "{info}");
    assert!(
        proxy
            .stderr()
            // The inherited socket and the harness's stats socket.
            .contains("[WARNING] 'maxconn' needs 4000000066 file descriptors"),
        "{}",
        proxy.stderr()
    );
}

#[test]
fn rate_limit_sessions_makes_the_next_client_wait_its_turn() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind {}\n    rate-limit sessions 1\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let mut first = connect(addr);
    first.write_all(b"first").unwrap();
    assert_eq!(read_n(&mut first, 5), b"first");
    // One session a second: the next waits in the kernel's queue, though the first is
    // still open and there is no connection limit.
    let mut second = connect(addr);
    second.write_all(b"second").unwrap();
    assert!(
        common::stays_silent(&mut second, Duration::from_millis(300)),
        "a second session was accepted within the same second"
    );
    second.set_read_timeout(Some(GENEROUS)).unwrap();
    assert_eq!(read_n(&mut second, 6), b"second");
    // The frontend's row shows the limit (`rate_lim`, the 35th field).
    let stat = proxy.cli("show stat");
    let row = stat
        .lines()
        .find(|l| l.starts_with("app,FRONTEND,"))
        .unwrap();
    assert_eq!(row.split(',').nth(34), Some("1"), "{row}");
}

/// `fd-hard-limit`: with neither `maxconn` nor `ulimit-n`, the process takes no more
/// descriptors than it says (nor more than the hard limit), and derives `maxconn` from them.
#[test]
fn fd_hard_limit_caps_the_descriptors_taken_and_the_derived_maxconn() {
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    let (fe, _addr) = frontend();
    let cfg = format!(
        "global\n    fd-hard-limit 3000\n{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 127.0.0.1:9\n",
        fd_bind(&fe)
    );
    let proxy = common::sluice(&cfg).inherit(fe).start();
    let info = proxy.cli("show info");
    let field = |name| -> u64 { common::info_field(&info, name).unwrap().parse().unwrap() };
    assert_eq!(field("Ulimit-n"), hard.min(3000), "{info}");
    let maxconn = field("Maxconn");
    assert!(maxconn > 0 && maxconn * 2 < field("Ulimit-n"), "{info}");
}
