//! Listening sockets and event-loop threads: a TCP address the process binds gets one socket
//! per thread in one `SO_REUSEPORT` group, so a new connection wakes one thread only (no
//! thundering herd), and a process taking them over with `-x` takes every one. The sockets
//! are counted in the kernel's table of listening TCP sockets (`/proc/net/tcp`, one line per
//! socket). With a connection limit, a queued client is served whichever thread's socket it
//! landed on. `cpu-map` binds each event-loop thread to its CPUs.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, GENEROUS, TCP_DEFAULTS, connect, read_n};
use std::io::Write;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// The process's threads (`/proc/PID/task`).
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).unwrap())
        .map(|name| name.trim().to_owned())
        .collect();
    names.sort();
    names
}

/// The first event loop runs on the main thread, with the control tasks: with one event loop
/// (and neither health checks nor a log writer) the process is a single thread, as HAProxy's
/// with `nbthread 1`; with three, the main thread and two more. Either way the loops serve,
/// the CLI answers and a soft stop ends the process.
#[test]
fn the_main_thread_runs_the_first_event_loop() {
    for (threads, expected) in [
        (1, vec!["sluice"]),
        (3, vec!["sluice", "sluice-loop-1", "sluice-loop-2"]),
    ] {
        let backend = Backend::echo();
        let port = common::free_port();
        let mut proxy = common::sluice(&config(threads, port, &backend, "")).start();
        // A new thread names itself as it starts, which may come just after the process
        // answers: until then /proc shows the process's name for it.
        common::wait_until(GENEROUS, || thread_names(proxy.pid()) == expected);
        assert_eq!(thread_names(proxy.pid()), expected, "nbthread {threads}");
        all_served(SocketAddr::from(([127, 0, 0, 1], port)), 10);
        assert!(
            proxy.cli("show info").contains("Nbthread: "),
            "the CLI answers"
        );
        proxy.signal(nix::sys::signal::Signal::SIGUSR1);
        assert!(proxy.expect_exit().success());
    }
}

/// `-x` takes every shard of the old process over (`expose-fd listeners` hands them all):
/// from 3 threads to 2, the new process accepts from the 3 sockets and binds none; from 2 to
/// 4, it binds the one it lacks. Clients connecting all along are all served.
#[test]
fn a_takeover_with_x_keeps_every_shard() {
    let backend = Backend::echo();
    let port = common::free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let shared = common::TempDir::new();
    let expose = shared.join("expose.sock");
    let extra = format!(
        "    stats socket \"{}\" level admin expose-fd listeners\n",
        expose.display()
    );
    let mut first = common::sluice(&config(3, port, &backend, &extra)).start();
    assert_eq!(common::listening_sockets(port), 3);
    let stop = Arc::new(AtomicBool::new(false));
    let prober = common::ping_until(Arc::clone(&stop), move || {
        let c = std::net::TcpStream::connect_timeout(&addr, GENEROUS)?;
        c.set_read_timeout(Some(GENEROUS))?;
        Ok(c)
    });
    let mut second = common::sluice(&config(2, port, &backend, &extra))
        .arg("-x")
        .arg(expose.to_str().unwrap())
        .arg("-sf")
        .arg(&first.pid().to_string())
        .start();
    assert!(
        first.wait_exit(GENEROUS).is_some(),
        "the first process stayed"
    );
    assert_eq!(common::listening_sockets(port), 3);
    all_served(addr, 12);
    let third = common::sluice(&config(4, port, &backend, &extra))
        .arg("-x")
        .arg(expose.to_str().unwrap())
        .arg("-sf")
        .arg(&second.pid().to_string())
        .start();
    assert!(
        second.wait_exit(GENEROUS).is_some(),
        "the second process stayed"
    );
    assert_eq!(common::listening_sockets(port), 4);
    all_served(addr, 12);
    stop.store(true, Ordering::SeqCst);
    let (ok, failures) = prober.join().unwrap();
    assert!(ok > 0);
    assert!(
        failures.is_empty(),
        "{ok} exchanges worked; failures: {failures:?}"
    );
    drop(third);
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

/// The CPUs the threads of `pid` named `name` may run on (`Cpus_allowed_list`).
fn allowed_cpus(pid: u32, name: &str) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let mut found = Vec::new();
    for task in tasks {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        found.push(line.trim().to_owned());
    }
    found
}

#[test]
fn cpu_map_binds_each_event_loop_thread_to_its_cpus() {
    let backend = Backend::echo();
    let port = common::free_port();
    // CPU 0 only: every machine has it. The second thread's line comes last and wins.
    let extra = "    cpu-map 1/all 0-1\n    cpu-map auto:1/2 0\n    cpu-map 1/1 0\n";
    let proxy = common::sluice(&config(2, port, &backend, extra)).start();
    all_served(SocketAddr::from(([127, 0, 0, 1], port)), 2);
    // The first loop runs on the process's main thread, the second on `sluice-loop-1`.
    let main = std::fs::read_to_string(format!("/proc/{}/comm", proxy.pid())).unwrap();
    assert_eq!(allowed_cpus(proxy.pid(), main.trim()), ["0"]);
    assert_eq!(allowed_cpus(proxy.pid(), "sluice-loop-1"), ["0"]);
}
