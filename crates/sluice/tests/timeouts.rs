//! Timeouts firing end to end (configuration.txt §4.2): `timeout client` closes an idle
//! client (and activity postpones it), `timeout server` closes a session whose server stays
//! silent, `timeout tunnel` replaces both once the session is established, `timeout
//! client-fin`/`server-fin` bound the wait for a peer to close after the proxy passed the
//! other peer's end of stream on (and only then, as in HAProxy), and `timeout connect` bounds
//! a connection attempt that never completes.
//!
//! Every bound is generous: "not before" the configured delay (minus a few milliseconds of
//! clock granularity), and "well before" anything else the configuration could explain.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, Closed, GENEROUS, connect, fd_bind, frontend, read_n, read_to_close};
use nix::sys::socket::{Backlog, listen};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The earliest a 300ms timeout may be reported, allowing for timer granularity.
const AFTER_300MS: Duration = Duration::from_millis(280);

fn config(timeouts: &str, bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode tcp\n    timeout connect 2s\n{timeouts}\
         listen app\n    bind {bind}\n    server s1 {server}\n"
    )
}

/// A backend that reads until the peer's end of stream, then keeps its own side open
/// (a half-closed session only the proxy's timeouts can end).
fn holding_backend() -> Backend {
    Backend::start(|mut s| {
        let mut buf = [0u8; 4096];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        std::thread::sleep(Duration::from_secs(30));
    })
}

#[test]
fn client_timeout_closes_an_idle_client() {
    let backend = Backend::silent();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 300ms\n    timeout server 30s\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let started = Instant::now();
    let mut c = connect(addr);
    let seen = read_to_close(&mut c, GENEROUS);
    let elapsed = started.elapsed();
    assert!(
        seen.is_closed(),
        "idle client still connected after {elapsed:?}"
    );
    assert!(
        elapsed >= AFTER_300MS,
        "closed after {elapsed:?}, before timeout client"
    );
}

#[test]
fn client_activity_postpones_the_client_timeout() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 300ms\n    timeout server 30s\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    // Eight exchanges 100ms apart: 800ms in all, far beyond 300ms, never idle for 300ms.
    for i in 0..8u8 {
        std::thread::sleep(Duration::from_millis(100));
        c.write_all(&[b'a' + i]).unwrap();
        assert_eq!(read_n(&mut c, 1), [b'a' + i], "exchange {i} failed");
    }
    let idle_from = Instant::now();
    let seen = read_to_close(&mut c, GENEROUS);
    assert!(seen.is_closed(), "never closed once idle");
    assert!(
        idle_from.elapsed() >= AFTER_300MS,
        "closed after {:?}",
        idle_from.elapsed()
    );
}

#[test]
fn server_timeout_closes_a_session_whose_server_is_silent() {
    let backend = Backend::silent();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 300ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let started = Instant::now();
    let mut c = connect(addr);
    c.write_all(b"anyone there?").unwrap();
    let seen = read_to_close(&mut c, GENEROUS);
    let elapsed = started.elapsed();
    assert!(seen.is_closed(), "session still open after {elapsed:?}");
    assert!(seen.data().is_empty());
    assert!(
        elapsed >= AFTER_300MS,
        "closed after {elapsed:?}, before timeout server"
    );
}

#[test]
fn tunnel_timeout_replaces_client_and_server_timeouts() {
    let backend = Backend::echo();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 200ms\n    timeout server 200ms\n    timeout tunnel 1500ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.write_all(b"1").unwrap();
    assert_eq!(read_n(&mut c, 1), b"1");
    // Idle three times longer than timeout client/server: the tunnel timeout holds.
    std::thread::sleep(Duration::from_millis(600));
    c.write_all(b"2").unwrap();
    assert_eq!(
        read_n(&mut c, 1),
        b"2",
        "the session died while idle for less than timeout tunnel"
    );
    let idle_from = Instant::now();
    let seen = read_to_close(&mut c, GENEROUS);
    let idle = idle_from.elapsed();
    assert!(seen.is_closed(), "timeout tunnel never fired");
    assert!(
        idle >= Duration::from_millis(1450),
        "closed after {idle:?} idle, before timeout tunnel"
    );
}

/// A backend that sends "x", half-closes, then watches for up to `window` how long the proxy
/// takes to close the server connection. Reports (closed, elapsed since the half-close).
fn half_closing_backend(window: Duration) -> (Backend, mpsc::Receiver<(bool, Duration)>) {
    let (tx, rx) = mpsc::channel::<(bool, Duration)>();
    let tx = Mutex::new(tx);
    let backend = Backend::start(move |mut s: TcpStream| {
        s.write_all(b"x").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let half_closed_at = Instant::now();
        s.set_read_timeout(Some(window)).unwrap();
        let mut buf = [0u8; 64];
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        };
        tx.lock()
            .unwrap()
            .send((closed, half_closed_at.elapsed()))
            .unwrap();
    });
    (backend, rx)
}

/// Connects a client that reads the backend's "x" and end of stream, and then stays open.
fn client_seeing_the_server_half_close(addr: SocketAddr) -> TcpStream {
    let mut c = connect(addr);
    match read_to_close(&mut c, GENEROUS) {
        Closed::Eof(d) => assert_eq!(d, b"x"),
        other => panic!("the server's data and end of stream did not arrive: {other:?}"),
    }
    c
}

// HAProxy arms `timeout client-fin` on the client side once it has shut its own sending side
// towards the client (the server's end of stream was passed on), and `timeout server-fin` on
// the server side once it has shut its sending side towards the server (the client's end of
// stream was passed on): the timeout bounds the wait for the peer to close in turn, the
// FIN_WAIT state of configuration.txt's description.

#[test]
fn server_fin_timeout_ends_a_session_the_client_half_closed() {
    let backend = holding_backend();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 30s\n    timeout server-fin 300ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.write_all(b"last words").unwrap();
    let half_closed_at = Instant::now();
    c.shutdown(Shutdown::Write).unwrap();
    let seen = read_to_close(&mut c, GENEROUS);
    let elapsed = half_closed_at.elapsed();
    assert!(
        seen.is_closed(),
        "half-closed session still open after {elapsed:?}: timeout server-fin ignored"
    );
    assert!(
        elapsed >= AFTER_300MS,
        "closed after {elapsed:?}, before timeout server-fin"
    );
}

#[test]
fn client_fin_timeout_ends_a_session_the_server_half_closed() {
    let (backend, rx) = half_closing_backend(GENEROUS);
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 30s\n    timeout client-fin 300ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let c = client_seeing_the_server_half_close(addr);
    let (closed, elapsed) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        closed,
        "the proxy never closed the session: timeout client-fin ignored"
    );
    assert!(
        elapsed >= Duration::from_millis(250),
        "closed after {elapsed:?}, before timeout client-fin"
    );
    drop(c);
}

#[test]
fn half_closed_session_without_fin_timeout_stays_open() {
    // Only timeout client/server (30s) apply, so a half-closed session whose server keeps its
    // side open lives on.
    let backend = holding_backend();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 30s\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.shutdown(Shutdown::Write).unwrap();
    assert!(
        common::stays_silent(&mut c, Duration::from_millis(1200)),
        "the session ended although no timeout applies"
    );
}

#[test]
fn client_fin_timeout_does_not_apply_when_the_client_half_closed() {
    // The client sent its end of stream; the proxy has not shut anything towards the client,
    // so client-fin has nothing to wait for. timeout server (30s) keeps the session.
    let backend = holding_backend();
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 30s\n    timeout client-fin 300ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let mut c = connect(addr);
    c.shutdown(Shutdown::Write).unwrap();
    assert!(
        common::stays_silent(&mut c, Duration::from_millis(1200)),
        "the session was closed by timeout client-fin after the client's own half-close"
    );
}

#[test]
fn server_fin_timeout_does_not_apply_when_the_server_half_closed() {
    let (backend, rx) = half_closing_backend(Duration::from_millis(1200));
    let (fe, addr) = frontend();
    let cfg = config(
        "    timeout client 30s\n    timeout server 30s\n    timeout server-fin 300ms\n",
        &fd_bind(&fe),
        backend.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let c = client_seeing_the_server_half_close(addr);
    let (closed, elapsed) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        !closed,
        "the proxy closed the session {elapsed:?} after the server's own half-close"
    );
    drop(c);
}

/// A listener whose accept queue is full: further connection attempts get no answer at all
/// (Linux drops the SYN), so they can only end by a timeout. Returns it, its address, and the
/// connections filling its queue.
fn unanswering_server() -> (TcpListener, SocketAddr, Vec<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Listening again on Linux only changes the queue length.
    listen(&listener, Backlog::new(0).unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    // Fill the queue until an attempt gets no answer within 300ms.
    while let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
        fillers.push(s);
        assert!(fillers.len() < 64, "the accept queue never filled up");
    }
    (listener, addr, fillers)
}

#[test]
fn connect_timeout_bounds_an_attempt_that_never_completes() {
    let (_listener, server, _fillers) = unanswering_server();
    let (fe, addr) = frontend();
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 500ms\n    timeout client 30s\n    timeout server 30s\n    retries 0\n\
         listen app\n    bind {}\n    server s1 {server}\n",
        fd_bind(&fe)
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let started = Instant::now();
    let mut c = connect(addr);
    let seen = read_to_close(&mut c, GENEROUS);
    let elapsed = started.elapsed();
    assert!(
        seen.is_closed(),
        "client still open after {elapsed:?}: timeout connect ignored"
    );
    assert!(
        elapsed >= Duration::from_millis(480),
        "closed after {elapsed:?}, before timeout connect"
    );
}

/// `http-request set-timeout server`: the request's `timeout server`, when its rules belong
/// to the proxy whose servers it goes to; a request routed to another backend keeps that
/// backend's, as the manual says (HAProxy 2.6 itself keeps the listen section's value there;
/// later versions follow the manual).
#[test]
fn set_timeout_server_changes_the_timeout_of_its_own_backend_only() {
    let silent = Backend::silent();
    let (fe, addr) = frontend();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n\
         listen app\n    bind {}\n    timeout server 20s\n\
         \x20   http-request set-timeout server 300ms\n\
         \x20   use_backend other if {{ path /other }}\n    server s1 {}\n\
         backend other\n    timeout server 1s\n    server s1 {}\n",
        fd_bind(&fe),
        silent.addr(),
        silent.addr(),
    );
    let _proxy = common::sluice(&cfg).inherit(fe).start();
    let waited = |path: &str| {
        let started = Instant::now();
        let mut c = connect(addr);
        write!(c, "GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 504", "{path}");
        started.elapsed()
    };
    let own = waited("/");
    assert!(
        own >= AFTER_300MS && own < Duration::from_secs(10),
        "{own:?}"
    );
    let other = waited("/other");
    assert!(
        other >= Duration::from_millis(980) && other < Duration::from_secs(10),
        "{other:?}"
    );
}
