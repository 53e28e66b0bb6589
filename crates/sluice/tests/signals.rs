//! Signals (management.txt §4): SIGINT and SIGTERM stop the process at once with status 0,
//! live sessions included; SIGUSR1 is a soft stop (listeners close so new connections are
//! refused, live sessions keep relaying, the process exits 0 once the last one ends, and
//! `hard-stop-after` bounds the wait); SIGTTOU pauses the listeners (new connections are not
//! served, live sessions go on; a port the process bound itself stops listening, so clients
//! are refused) and SIGTTIN resumes them. A reload (`-sf`/`-st`) starts a new process on the
//! same address while the old one still listens, or, under `noreuseport`, once the old one
//! paused (and has it resume should the new one fail to bind). `busy-polling` keeps an idle
//! event loop awake until a soft stop; the `stopping` fetch tells rules that one began. A soft
//! stop closes idle kept-alive HTTP connections at once and the others after their next
//! answer, which says `Connection: close`, as HAProxy does; `close-spread-time` spreads
//! that over a window, or (`infinite`) leaves them be; `grace` delays the stop while
//! `stopping` already says true.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, Closed, GENEROUS, TCP_DEFAULTS, connect, fd_bind, frontend, read_n, read_to_close,
    stays_silent,
};
use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn echo_proxy(backend: &Backend, global: &str) -> (common::Sluice, SocketAddr) {
    let (fe, addr) = frontend();
    let cfg = format!(
        "{global}{TCP_DEFAULTS}\nlisten app\n    bind {}\n    server s1 {}\n",
        fd_bind(&fe),
        backend.addr()
    );
    (common::sluice(&cfg).inherit(fe).start(), addr)
}

/// A client with one round trip done, so its session is established.
fn live_session(addr: SocketAddr) -> TcpStream {
    let mut c = connect(addr);
    c.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut c, 4), b"ping");
    c
}

/// True if a new connection to `addr` is served (an echo comes back) within `window`.
fn new_connection_served(addr: SocketAddr, window: Duration) -> bool {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return false;
    };
    if c.write_all(b"?").is_err() {
        return false;
    }
    c.set_read_timeout(Some(window)).unwrap();
    let mut b = [0u8; 1];
    matches!(c.read(&mut b), Ok(1))
}

fn assert_exit_zero(proxy: &mut common::Sluice) {
    let status = proxy.expect_exit();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status {status}\nstderr:\n{}",
        proxy.stderr()
    );
}

#[test]
fn sigint_exits_zero_at_once_even_with_a_live_session() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "");
    let mut c = live_session(addr);
    let sent = Instant::now();
    proxy.signal(Signal::SIGINT);
    assert_exit_zero(&mut proxy);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "took {:?}",
        sent.elapsed()
    );
    // The session died with the process.
    assert!(read_to_close(&mut c, GENEROUS).is_closed());
}

#[test]
fn sigterm_exits_zero_at_once_even_with_a_live_session() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "");
    let mut c = live_session(addr);
    let sent = Instant::now();
    proxy.signal(Signal::SIGTERM);
    assert_exit_zero(&mut proxy);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "took {:?}",
        sent.elapsed()
    );
    assert!(read_to_close(&mut c, GENEROUS).is_closed());
}

#[test]
fn sigusr1_soft_stop_lets_the_live_session_finish() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "");
    let mut c = live_session(addr);
    proxy.signal(Signal::SIGUSR1);
    // The listener closes: new connections are refused.
    assert!(
        common::wait_until(GENEROUS, || TcpStream::connect(addr).is_err()),
        "the listener still accepts connections after SIGUSR1"
    );
    // The process waits for the live session, which still relays both ways.
    assert!(
        proxy.wait_exit(Duration::from_millis(300)).is_none(),
        "exited with a session still open"
    );
    c.write_all(b"still here").unwrap();
    assert_eq!(read_n(&mut c, 10), b"still here");
    // Once it ends, the process exits 0.
    c.shutdown(Shutdown::Write).unwrap();
    assert!(matches!(read_to_close(&mut c, GENEROUS), Closed::Eof(_)));
    drop(c);
    assert_exit_zero(&mut proxy);
}

#[test]
fn the_stopping_fetch_turns_true_once_a_soft_stop_began() {
    // The server holds its answer until the test lets it go, after the soft stop.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (arrived, arrival) = std::sync::mpsc::channel::<String>();
    let held = std::sync::Mutex::new(held);
    let arrived = std::sync::Mutex::new(arrived);
    let backend = Backend::start(move |s| {
        let mut writer = s.try_clone().unwrap();
        let mut reader = std::io::BufReader::new(s);
        let request = common::http::read_message(&mut reader).unwrap();
        let seen = request.header("x-req-stopping").unwrap_or_default();
        arrived.lock().unwrap().send(seen).unwrap();
        held.lock().unwrap().recv().unwrap();
        let _ = writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let (mut proxy, addr) = common::http::proxy(
        backend.addr(),
        "    http-request set-header X-Req-Stopping %[stopping]\n    \
         http-response set-header X-Stopping %[stopping]",
    );
    let mut c = connect(addr);
    c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(arrival.recv_timeout(GENEROUS).unwrap(), "0");
    proxy.signal(Signal::SIGUSR1);
    assert!(
        common::wait_until(GENEROUS, || TcpStream::connect(addr).is_err()),
        "the listener still accepts connections after SIGUSR1"
    );
    release.send(()).unwrap();
    let Closed::Eof(data) = read_to_close(&mut c, GENEROUS) else {
        panic!("the proxy did not close the connection after its last answer");
    };
    let answer = String::from_utf8_lossy(&data).to_ascii_lowercase();
    assert!(answer.contains("\r\nx-stopping: 1\r\n"), "{answer}");
    drop(c);
    assert_exit_zero(&mut proxy);
}

/// Sends one kept-alive request on `c` and reads its answer, which keeps the connection.
fn kept_alive_request(c: &mut TcpStream) {
    c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\nok") {
        answer.extend(read_n(c, 1));
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
}

/// A connection that made one kept-alive request and is idle; when it `parks`, idle long
/// enough to leave its task for the parking lot (`show sess` stops listing it).
fn idle_connection(proxy: &common::Sluice, addr: SocketAddr, parks: bool) -> TcpStream {
    let mut c = connect(addr);
    kept_alive_request(&mut c);
    let source = c.local_addr().unwrap().to_string();
    assert!(
        !parks
            || common::wait_until(GENEROUS, || !proxy
                .cli("show sess")
                .lines()
                .any(|l| l.contains(&source))),
        "the idle connection was never parked"
    );
    c
}

#[test]
fn a_soft_stop_closes_idle_kept_alive_connections_and_answers_the_last_requests_with_close() {
    let (backend, _) =
        common::http::http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned());
    let (mut proxy, addr) = common::http::proxy(
        backend.addr(),
        "    http-request return status 204 if { path /own }",
    );
    let mut parked = idle_connection(&proxy, addr, true);
    // Idle since just now, still in its task.
    let mut recent = connect(addr);
    kept_alive_request(&mut recent);
    // Connected, its first request not sent yet.
    let mut fresh = connect(addr);
    let mut fresh_too = connect(addr);
    proxy.signal(Signal::SIGUSR1);
    for idle in [&mut parked, &mut recent] {
        assert!(
            matches!(read_to_close(idle, GENEROUS), Closed::Eof(d) if d.is_empty()),
            "an idle kept-alive connection stayed open after SIGUSR1"
        );
    }
    // As in HAProxy, a connection that has not spoken yet is not cut, and its request is
    // answered with the end of the connection, the proxy's own answers too.
    assert!(stays_silent(&mut fresh, Duration::from_millis(200)));
    for (c, path, status) in [(&mut fresh, "/", "200"), (&mut fresh_too, "/own", "204")] {
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes())
            .unwrap();
        let Closed::Eof(data) = read_to_close(c, GENEROUS) else {
            panic!("the connection was kept after the answer during a soft stop");
        };
        let answer = String::from_utf8_lossy(&data).to_ascii_lowercase();
        assert!(
            answer.starts_with(&format!("http/1.1 {status}")),
            "{answer}"
        );
        assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    }
    drop((parked, recent, fresh, fresh_too));
    assert_exit_zero(&mut proxy);
}

/// Under `option idle-close-on-response` a soft stop leaves idle kept-alive connections
/// open, parked or in their task (one keeping its server connection too), as HAProxy 2.6
/// does: each gets its next request answered with `Connection: close`, then ends.
#[test]
fn idle_close_on_response_answers_the_next_request_of_idle_connections_then_closes() {
    let (backend, _) =
        common::http::http_backend(|_| "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned());
    for reuse in ["", "    http-reuse never\n"] {
        let (mut proxy, addr) = common::http::proxy(
            backend.addr(),
            &format!("{reuse}    option idle-close-on-response"),
        );
        // Under `http-reuse never` it keeps its server connection, in its task.
        let mut parked = idle_connection(&proxy, addr, reuse.is_empty());
        let mut recent = connect(addr);
        kept_alive_request(&mut recent);
        proxy.signal(Signal::SIGUSR1);
        for idle in [&mut parked, &mut recent] {
            assert!(stays_silent(idle, Duration::from_millis(200)), "{reuse}");
            idle.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
                .unwrap();
            let Closed::Eof(data) = read_to_close(idle, GENEROUS) else {
                panic!("{reuse}: the connection was kept after its answer");
            };
            let answer = String::from_utf8_lossy(&data).to_ascii_lowercase();
            assert!(answer.starts_with("http/1.1 200"), "{answer}");
            assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
        }
        drop((parked, recent));
        assert_exit_zero(&mut proxy);
    }
}

/// An HTTP proxy with `global` lines, answering `200 ok` through one server, and telling
/// in `X-Stopping` what the `stopping` fetch said.
fn http_proxy_with(global: &str) -> (common::Sluice, SocketAddr, Backend) {
    let (backend, _) = common::http::ok_backend();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{global}{}\nlisten px\n    bind {}\n    \
         http-response set-header X-Stopping %[stopping]\n    server s1 {}\n",
        common::http::HTTP_DEFAULTS,
        fd_bind(&fe),
        backend.addr()
    );
    (common::sluice(&cfg).inherit(fe).start(), addr, backend)
}

/// Sends one request on a new connection that closes after it; returns the answer.
fn one_request(addr: SocketAddr) -> String {
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    let answer = common::http::one_shot(addr, raw);
    String::from_utf8_lossy(answer.data()).to_ascii_lowercase()
}

#[test]
fn a_soft_stop_closes_an_idle_connection_that_keeps_its_server_connection() {
    // Under `http-reuse never` the session keeps its server connection between requests
    // and waits in its task, neither parked nor in the short wait after an answer.
    let (backend, _) = common::http::ok_backend();
    let (fe, addr) = frontend();
    let cfg = format!(
        "{}\nlisten px\n    bind {}\n    http-reuse never\n    server s1 {}\n",
        common::http::HTTP_DEFAULTS,
        fd_bind(&fe),
        backend.addr()
    );
    let mut proxy = common::sluice(&cfg).inherit(fe).start();
    let mut idle = connect(addr);
    kept_alive_request(&mut idle);
    proxy.signal(Signal::SIGUSR1);
    assert!(
        matches!(read_to_close(&mut idle, GENEROUS), Closed::Eof(d) if d.is_empty()),
        "the idle connection stayed open after SIGUSR1"
    );
    drop(idle);
    assert_exit_zero(&mut proxy);
}

#[test]
fn grace_keeps_accepting_while_stopping_says_true_then_stops() {
    let (mut proxy, addr, _backend) = http_proxy_with("global\n    grace 3s\n");
    assert!(one_request(addr).contains("\r\nx-stopping: 0\r\n"));
    proxy.signal(Signal::SIGUSR1);
    // New connections are still served, and told the process is stopping.
    assert!(
        common::wait_until(GENEROUS, || one_request(addr)
            .contains("\r\nx-stopping: 1\r\n")),
        "the stopping fetch never turned true during the grace period"
    );
    let info = proxy.cli("show info");
    assert_eq!(common::info_field(&info, "Stopping"), Some("1"), "{info}");
    // Then the soft stop proper: the listener closes and the process exits.
    assert!(
        common::wait_until(GENEROUS, || TcpStream::connect(addr).is_err()),
        "the listener still accepts connections after the grace period"
    );
    assert_exit_zero(&mut proxy);
}

#[test]
fn close_spread_time_infinite_leaves_kept_alive_connections_to_their_timeouts() {
    let global = "global\n    close-spread-time infinite\n";
    let (mut proxy, addr, _backend) = http_proxy_with(global);
    let mut idle = connect(addr);
    kept_alive_request(&mut idle);
    proxy.signal(Signal::SIGUSR1);
    assert!(
        common::wait_until(GENEROUS, || TcpStream::connect(addr).is_err()),
        "the listener still accepts connections after SIGUSR1"
    );
    // Parked or not, the idle connection is kept, and its next answer keeps it too.
    assert!(stays_silent(&mut idle, Duration::from_millis(300)));
    idle.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\nok") {
        answer.extend(read_n(&mut idle, 1));
    }
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(!answer.contains("connection: close"), "{answer}");
    assert!(answer.contains("\r\nx-stopping: 1\r\n"), "{answer}");
    assert!(stays_silent(&mut idle, Duration::from_millis(200)));
    drop(idle);
    assert_exit_zero(&mut proxy);
}

#[test]
fn close_spread_time_closes_every_idle_kept_alive_connection_within_its_window() {
    let global = "global\n    close-spread-time 1s\n";
    let (mut proxy, addr, _backend) = http_proxy_with(global);
    let mut idle: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
    for c in &mut idle {
        kept_alive_request(c);
    }
    proxy.signal(Signal::SIGUSR1);
    for c in &mut idle {
        assert!(
            matches!(read_to_close(c, GENEROUS), Closed::Eof(d) if d.is_empty()),
            "an idle kept-alive connection outlived the close-spread-time window"
        );
    }
    drop(idle);
    assert_exit_zero(&mut proxy);
}

#[test]
fn sigusr1_without_sessions_exits_zero_at_once() {
    let backend = Backend::echo();
    let (mut proxy, _addr) = echo_proxy(&backend, "");
    proxy.signal(Signal::SIGUSR1);
    assert_exit_zero(&mut proxy);
}

#[test]
fn a_soft_stop_after_set_maxconn_lowered_the_limit_still_ends_once_sessions_end() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "global\n    maxconn 100\n");
    let session = live_session(addr);
    assert_eq!(proxy.cli("set maxconn global 10").trim(), "");
    proxy.signal(Signal::SIGUSR1);
    assert!(
        proxy.wait_exit(Duration::from_millis(300)).is_none(),
        "the process left before its live session ended"
    );
    drop(session);
    // The stop waits for the sessions, not for the slots the lowered limit withdrew.
    assert_exit_zero(&mut proxy);
}

/// Share of one CPU the process used over `window`, from the scheduler's account of its
/// threads (`schedstat`, in nanoseconds).
fn cpu_share(pid: u32, window: Duration) -> f64 {
    let on_cpu = || -> u64 {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|task| {
                let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
                stat.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    };
    let (before, start) = (on_cpu(), Instant::now());
    std::thread::sleep(window);
    (on_cpu() - before) as f64 / start.elapsed().as_nanos() as f64
}

/// `busy-polling`: an idle event loop never sleeps in the poller, so the process keeps a CPU
/// busy, until a soft stop ends it (HAProxy turns it off on the old process of a reload).
/// Without it, an idle process sleeps.
#[test]
fn busy_polling_keeps_an_idle_loop_awake_until_a_soft_stop() {
    let backend = Backend::echo();
    let (proxy, addr) = echo_proxy(&backend, "global\n    nbthread 1\n    busy-polling\n");
    let (quiet, _) = echo_proxy(&backend, "global\n    nbthread 1\n");
    let c = live_session(addr);
    // Lenient bounds: a spinning thread gets a large share of a CPU even beside other tests,
    // and a sleeping one next to nothing.
    let spinning = cpu_share(proxy.pid(), Duration::from_millis(500));
    assert!(spinning > 0.2, "busy-polling used {spinning:.2} of a CPU");
    let sleeping = cpu_share(quiet.pid(), Duration::from_millis(500));
    assert!(
        sleeping < 0.05,
        "an idle process used {sleeping:.2} of a CPU"
    );
    // A soft stop: the process stays for the live session, but no longer spins.
    proxy.signal(Signal::SIGUSR1);
    assert!(
        common::wait_until(GENEROUS, || TcpStream::connect(addr).is_err()),
        "the listener still accepts connections after SIGUSR1"
    );
    let stopping = cpu_share(proxy.pid(), Duration::from_millis(500));
    assert!(
        stopping < 0.05,
        "still spinning after a soft stop: {stopping:.2}"
    );
    drop(c);
}

#[test]
fn hard_stop_after_bounds_the_soft_stop() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "global\n    hard-stop-after 500ms\n");
    let mut c = live_session(addr);
    let sent = Instant::now();
    proxy.signal(Signal::SIGUSR1);
    // The session stays idle (timeouts are 30s): only hard-stop-after can end the process.
    let status = proxy.expect_exit();
    let elapsed = sent.elapsed();
    assert!(
        elapsed >= Duration::from_millis(480),
        "exited after {elapsed:?}, before hard-stop-after"
    );
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(
        read_to_close(&mut c, GENEROUS).is_closed(),
        "the session outlived the process"
    );
}

#[test]
fn sigttou_pauses_and_sigttin_resumes_the_listeners() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "");
    let mut established = live_session(addr);
    proxy.signal(Signal::SIGTTOU);
    // The pause takes effect asynchronously: once a new connection goes unserved, the
    // listeners are paused (a connection served before that raced the signal).
    assert!(
        common::wait_until(GENEROUS, || !new_connection_served(
            addr,
            Duration::from_millis(300)
        )),
        "new connections are still served after SIGTTOU"
    );
    assert!(
        !new_connection_served(addr, Duration::from_millis(500)),
        "a new connection was served during the pause"
    );
    // Sessions established before the pause are not affected, and the process lives on.
    established.write_all(b"paused?").unwrap();
    assert_eq!(read_n(&mut established, 7), b"paused?");
    proxy.assert_alive();

    proxy.signal(Signal::SIGTTIN);
    assert!(
        common::wait_until(GENEROUS, || new_connection_served(
            addr,
            Duration::from_millis(500)
        )),
        "new connections are not served after SIGTTIN"
    );
    proxy.assert_alive();
}

#[test]
fn a_paused_port_refuses_new_clients_until_resumed() {
    // A port the process bound itself (not an inherited `fd@`, whose queue is kept): the
    // pause takes it out of the listening state, as HAProxy's does, so clients are refused
    // at once instead of waiting in a queue. SIGTTOU/SIGTTIN and `disable|enable frontend`
    // alike.
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let mut proxy = common::sluice(&port_proxy_config(port, &backend)).start();
    let mut established = live_session(addr);
    let refused = || {
        TcpStream::connect(addr).is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    };
    for (pause, resume) in pauses_and_resumes() {
        pause.apply(&proxy);
        assert!(
            common::wait_until(GENEROUS, refused),
            "new clients are not refused after {pause:?}"
        );
        assert_eq!(common::listening_sockets(port), 0);
        // Sessions established before the pause go on.
        established.write_all(b"paused?").unwrap();
        assert_eq!(read_n(&mut established, 7), b"paused?");
        resume.apply(&proxy);
        assert!(
            common::wait_until(GENEROUS, || new_connection_served(
                addr,
                Duration::from_millis(500)
            )),
            "new connections are not served after {resume:?}"
        );
        // Resumed and idle, the process sleeps: a listener whose event-loop registration
        // kept the hang-up of the pause would be reported ready forever, its accept loop
        // spinning on a core (a full second of CPU over this second).
        let before = proxy.cpu_ticks();
        std::thread::sleep(Duration::from_secs(1));
        let used = proxy.cpu_ticks() - before;
        assert!(
            used < 30,
            "{used} ticks of CPU in an idle second after {resume:?}"
        );
    }
    proxy.assert_alive();
}

#[test]
fn a_port_its_threads_share_is_resumed_on_every_thread() {
    // Under `noreuseport` the two threads share one socket: the first to resume makes it
    // listen, and every thread's registration must still forget the pause's hang-up.
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let cfg = format!(
        "global\n    noreuseport\n    nbthread 2\n{}",
        port_proxy_config(port, &backend)
    );
    let mut proxy = common::sluice(&cfg).start();
    assert!(new_connection_served(addr, GENEROUS));
    proxy.signal(Signal::SIGTTOU);
    assert!(common::wait_until(GENEROUS, || {
        TcpStream::connect(addr).is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    }));
    proxy.signal(Signal::SIGTTIN);
    assert!(common::wait_until(GENEROUS, || new_connection_served(
        addr,
        Duration::from_millis(500)
    )));
    let before = proxy.cpu_ticks();
    std::thread::sleep(Duration::from_secs(1));
    let used = proxy.cpu_ticks() - before;
    assert!(
        used < 30,
        "{used} ticks of CPU in an idle second after resuming"
    );
    proxy.assert_alive();
}

/// The two ways to pause the listeners of frontend `app` and resume them: the signals, and
/// `disable|enable frontend`.
fn pauses_and_resumes() -> [(Pause, Pause); 2] {
    [
        (
            Pause::Signal(Signal::SIGTTOU),
            Pause::Signal(Signal::SIGTTIN),
        ),
        (
            Pause::Cli("disable frontend app"),
            Pause::Cli("enable frontend app"),
        ),
    ]
}

/// A way to pause or resume a process's listeners.
#[derive(Debug)]
enum Pause {
    Signal(Signal),
    Cli(&'static str),
}

impl Pause {
    fn apply(&self, proxy: &common::Sluice) {
        match self {
            Pause::Signal(signal) => proxy.signal(*signal),
            Pause::Cli(command) => assert_eq!(proxy.cli(command), "\n"),
        }
    }
}

#[test]
fn sighup_does_not_stop_the_process() {
    let backend = Backend::echo();
    let (mut proxy, addr) = echo_proxy(&backend, "");
    proxy.signal(Signal::SIGHUP);
    // A round trip on a new connection after the signal proves the process still serves.
    let _c = live_session(addr);
    proxy.assert_alive();
}

/// A free port of 127.0.0.1, and its address.
fn free_address() -> (u16, SocketAddr) {
    let port = common::free_port();
    (port, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// A configuration listening on a real port (a reload binds the same address twice).
fn port_proxy_config(port: u16, backend: &Backend) -> String {
    format!(
        "{TCP_DEFAULTS}\nlisten app\n    bind 127.0.0.1:{port}\n    server s1 {}\n",
        backend.addr()
    )
}

#[test]
fn reload_with_sf_hands_over_the_port_and_lets_old_sessions_finish() {
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let cfg = port_proxy_config(port, &backend);
    let mut old = common::sluice(&cfg).start();
    let mut old_session = live_session(addr);
    let mut new = common::sluice(&cfg)
        .arg("-sf")
        .arg(&old.pid().to_string())
        .start();
    // The new process serves new connections; the old one finishes its session and exits.
    assert!(new_connection_served(addr, GENEROUS));
    old_session.write_all(b"still here").unwrap();
    assert_eq!(read_n(&mut old_session, 10), b"still here");
    old_session.shutdown(Shutdown::Write).unwrap();
    assert!(matches!(
        read_to_close(&mut old_session, GENEROUS),
        Closed::Eof(_)
    ));
    assert_exit_zero(&mut old);
    for _ in 0..5 {
        assert!(new_connection_served(addr, GENEROUS));
    }
    new.assert_alive();
}

#[test]
fn reload_under_noreuseport_pauses_the_old_process_to_take_the_port() {
    // Without SO_REUSEPORT the new process cannot bind while the old one listens: it pauses
    // the old one (SIGTTOU), binds, then tells it to finish (SIGUSR1), as management.txt §4
    // describes.
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let cfg = format!(
        "global\n    noreuseport\n{}",
        port_proxy_config(port, &backend)
    );
    let mut old = common::sluice(&cfg).start();
    let mut old_session = live_session(addr);
    let mut new = common::sluice(&cfg)
        .arg("-sf")
        .arg(&old.pid().to_string())
        .start();
    assert!(new_connection_served(addr, GENEROUS));
    assert_eq!(
        common::listening_sockets(port),
        1,
        "one socket, the new one's"
    );
    old_session.write_all(b"still here").unwrap();
    assert_eq!(read_n(&mut old_session, 10), b"still here");
    drop(old_session);
    assert_exit_zero(&mut old);
    assert!(new_connection_served(addr, GENEROUS));
    new.assert_alive();
}

#[test]
fn a_reload_that_cannot_bind_resumes_the_old_process() {
    // The new configuration also wants a port someone else holds: the new process pauses
    // the old one, retries for about a second, gives up, and has the old one listen again
    // (SIGTTIN) before exiting with an error, leaving the old one's stats socket alone.
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let cfg = format!(
        "global\n    noreuseport\n{}",
        port_proxy_config(port, &backend)
    );
    let mut old = common::sluice(&cfg).start();
    // The new configuration names the old process's stats socket too, as a reload's does.
    let stats = old.stats_path().display().to_string();
    let new_cfg = format!(
        "global\n    stats socket \"{stats}\" level admin\n{cfg}    bind 127.0.0.1:{taken}\n"
    );
    let mut failed = common::sluice(&new_cfg)
        .arg("-sf")
        .arg(&old.pid().to_string())
        .without_stats_socket()
        .start();
    let status = failed.expect_exit();
    assert_ne!(status.code(), Some(0), "{}", failed.stderr());
    assert!(
        failed.stderr().contains("Address already in use"),
        "{}",
        failed.stderr()
    );
    assert!(
        common::wait_until(GENEROUS, || new_connection_served(
            addr,
            Duration::from_millis(500)
        )),
        "the old process does not listen again"
    );
    old.assert_alive();
    // Its stats socket is still there: the failed start did not replace the file. (Debian's
    // HAProxy 2.6 fails here: its failed start leaves the old process's path refusing
    // connections.)
    assert!(
        old.cli("show info")
            .contains(&format!("Pid: {}", old.pid()))
    );
}

#[test]
fn reload_with_st_terminates_the_old_process_at_once() {
    let backend = Backend::echo();
    let (port, addr) = free_address();
    let cfg = port_proxy_config(port, &backend);
    let mut old = common::sluice(&cfg).start();
    let _old_session = live_session(addr);
    let mut new = common::sluice(&cfg)
        .arg("-st")
        .arg(&old.pid().to_string())
        .start();
    // The old process exits even though its session is still open.
    assert_exit_zero(&mut old);
    assert!(new_connection_served(addr, GENEROUS));
    new.assert_alive();
}

#[test]
fn reload_with_x_takes_the_old_listening_socket_and_refuses_nothing() {
    let backend = Backend::echo();
    let shared = common::TempDir::new();
    let front = shared.join("front.sock");
    let expose = shared.join("expose.sock");
    // A unix socket cannot be bound twice: the new process must take the old one's socket
    // (same inode), or it would replace the file and strand the old queue.
    let cfg = format!(
        "global\n    stats socket \"{}\" level admin expose-fd listeners\n{TCP_DEFAULTS}\nlisten app\n    bind \"{}\"\n    server s1 {}\n",
        expose.display(),
        front.display(),
        backend.addr()
    );
    let mut old = common::sluice(&cfg).start();
    let inode =
        |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&front);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let front = front.clone();
        common::ping_until(std::sync::Arc::clone(&stop), move || {
            let c = std::os::unix::net::UnixStream::connect(&front)?;
            c.set_read_timeout(Some(GENEROUS))?;
            Ok(c)
        })
    };
    let mut new = common::sluice(&cfg)
        .arg("-x")
        .arg(expose.to_str().unwrap())
        .arg("-sf")
        .arg(&old.pid().to_string())
        .start();
    assert_exit_zero(&mut old);
    assert_eq!(
        inode(&front),
        before,
        "the new process bound a socket of its own"
    );
    // Traffic after the old process is gone goes through the shared socket.
    let mut c = std::os::unix::net::UnixStream::connect(&front).unwrap();
    c.write_all(b"pong").unwrap();
    assert_eq!(read_n(&mut c, 4), b"pong");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, failures) = prober.join().unwrap();
    assert!(ok > 0);
    assert!(
        failures.is_empty(),
        "{ok} exchanges worked; failures: {failures:?}"
    );
    new.assert_alive();
}

/// A process with an echo frontend on the abstract socket `abns@<name>-fe` and its stats
/// socket on `abns@<name>-cli`.
fn abstract_sockets_config(name: &str, backend: &Backend) -> String {
    format!(
        "global\n    stats socket abns@{name}-cli level admin\n{TCP_DEFAULTS}\nlisten app\n    bind abns@{name}-fe\n    server s1 {}\n",
        backend.addr()
    )
}

/// True if a new connection to `abns@name` is served (an echo comes back).
fn abstract_connection_served(name: &str) -> bool {
    let Ok(mut c) = common::connect_abstract(name) else {
        return false;
    };
    let mut b = [0u8; 1];
    c.write_all(b"?").is_ok() && matches!(c.read(&mut b), Ok(1))
}

#[test]
fn a_reload_takes_the_abstract_sockets_over() {
    // An abstract name is freed only when its socket closes: the new process pauses the old
    // one, which closes its abstract sockets (the frontend's and the stats socket), binds
    // them, then has the old one finish, as HAProxy does.
    let name = format!("sluice-reload-{}", std::process::id());
    let backend = Backend::echo();
    let cfg = abstract_sockets_config(&name, &backend);
    let mut old = common::sluice(&cfg).start();
    assert!(abstract_connection_served(&format!("{name}-fe")));
    let mut new = common::sluice(&cfg)
        .arg("-sf")
        .arg(&old.pid().to_string())
        .start();
    assert_exit_zero(&mut old);
    assert!(abstract_connection_served(&format!("{name}-fe")));
    let info = common::cli_abstract(&format!("{name}-cli"), "show info").unwrap();
    assert_eq!(
        common::info_field(&info, "Pid"),
        Some(new.pid().to_string().as_str())
    );
    new.assert_alive();
}

#[test]
fn a_paused_abstract_socket_frees_its_name_until_resumed() {
    let name = format!("sluice-pause-{}", std::process::id());
    let backend = Backend::echo();
    let mut proxy = common::sluice(&abstract_sockets_config(&name, &backend)).start();
    let frontend = format!("{name}-fe");
    for (pause, resume) in pauses_and_resumes() {
        pause.apply(&proxy);
        assert!(
            common::wait_until(GENEROUS, || common::connect_abstract(&frontend).is_err()),
            "the abstract socket still takes clients after {pause:?}"
        );
        // Free: another socket may take the name meanwhile.
        {
            use std::os::linux::net::SocketAddrExt;
            let mut padded = frontend.as_bytes().to_vec();
            padded.resize(107, 0);
            let at = std::os::unix::net::SocketAddr::from_abstract_name(&padded).unwrap();
            drop(std::os::unix::net::UnixListener::bind_addr(&at).unwrap());
        }
        resume.apply(&proxy);
        assert!(
            common::wait_until(GENEROUS, || abstract_connection_served(&frontend)),
            "the abstract socket is not served after {resume:?}"
        );
    }
    proxy.assert_alive();
}
