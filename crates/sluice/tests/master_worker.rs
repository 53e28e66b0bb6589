//! Master-worker mode end to end (management.txt §4, §5): `-W -S` starts a master that lists
//! its worker in `show proc` and passes `@1` commands on to it; `reload` on the master socket
//! (and SIGUSR2) replaces the worker while a client keeps connecting, and not one connection
//! is refused; a broken configuration at reload changes nothing; `-W -D` detaches the master.
#![allow(clippy::unwrap_used)]

mod common;

use common::{
    Backend, GENEROUS, TCP_DEFAULTS, TempDir, cli_at, fd_bind, frontend, sluice, wait_until,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The pids `show proc` lists under `section` (`# workers`, `# old workers`).
fn pids_in(show_proc: &str, section: &str) -> Vec<u32> {
    show_proc
        .lines()
        .skip_while(|l| *l != section)
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn show_proc(master: &Path) -> String {
    cli_at(master, "show proc").unwrap_or_default()
}

/// Waits until the master lists a current worker that answers `@1 show info`; its pid.
fn ready_worker(master: &Path) -> u32 {
    let mut pid = 0;
    assert!(
        wait_until(GENEROUS, || {
            let Some(&worker) = pids_in(&show_proc(master), "# workers").first() else {
                return false;
            };
            let info = cli_at(master, "@1 show info").unwrap_or_default();
            pid = worker;
            common::info_field(&info, "Pid") == Some(worker.to_string().as_str())
        }),
        "no worker answers: {}",
        show_proc(master)
    );
    pid
}

fn echo_config(listener: &impl std::os::fd::AsRawFd, echo: &Backend) -> String {
    format!(
        "{TCP_DEFAULTS}
listen app
    bind {}
    server s1 {}
",
        fd_bind(listener),
        echo.addr()
    )
}

/// Connects, sends a word and reads it back, over and over until told to stop; counts
/// exchanges that worked and any that did not.
struct Prober {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Prober {
    fn start(addr: SocketAddr) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, o, f, e) = (
            Arc::clone(&stop),
            Arc::clone(&ok),
            Arc::clone(&failed),
            Arc::clone(&errors),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match exchange(addr) {
                    Ok(()) => o.fetch_add(1, Ordering::SeqCst),
                    Err(err) => {
                        e.lock().unwrap().push(err.to_string());
                        f.fetch_add(1, Ordering::SeqCst)
                    }
                };
            }
        });
        Prober {
            stop,
            ok,
            failed,
            errors,
            thread: Some(thread),
        }
    }

    /// Starts probing `addr` and waits until 20 exchanges worked.
    fn serving(addr: SocketAddr) -> Prober {
        let prober = Prober::start(addr);
        assert!(
            wait_until(GENEROUS, || prober.ok() >= 20),
            "the proxy does not answer"
        );
        prober
    }

    fn ok(&self) -> usize {
        self.ok.load(Ordering::SeqCst)
    }

    /// Waits for 20 more exchanges that work (traffic goes on through the current worker),
    /// then stops, asserting that none failed.
    fn finish_serving(self) {
        let before = self.ok();
        assert!(
            wait_until(GENEROUS, || self.ok() >= before + 20),
            "no traffic after the reloads"
        );
        let (ok, failed, errors) = self.finish();
        assert_eq!(
            failed, 0,
            "{ok} exchanges worked, {failed} failed: {errors:?}"
        );
    }

    /// Stops the loop; (exchanges that worked, failures with their errors).
    fn finish(mut self) -> (usize, usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let errors = self.errors.lock().unwrap().clone();
        (self.ok(), self.failed.load(Ordering::SeqCst), errors)
    }
}

/// Starts `builder` as a master (`-W`) with its master socket (`-S`) in its directory; the
/// process and that socket's path.
fn start_master(builder: common::Builder) -> (common::Sluice, PathBuf) {
    let master_sock = builder.dir().join("master.sock");
    let p = builder
        .without_stats_socket()
        .arg("-W")
        .arg("-S")
        .arg(master_sock.to_str().unwrap())
        .start();
    (p, master_sock)
}

/// Reloads through the master socket, waits for the new worker (its pid) and for the
/// `first` one to soft-stop and exit once its sessions are done.
fn reload_and_retire(master_sock: &Path, first: u32) -> u32 {
    // The answer comes once the new worker is started.
    cli_at(master_sock, "reload").unwrap();
    let second = ready_worker(master_sock);
    assert_ne!(first, second, "{}", show_proc(master_sock));
    assert!(
        wait_until(GENEROUS, || !pids_in(
            &show_proc(master_sock),
            "# old workers"
        )
        .contains(&first)
            && !show_proc(master_sock).contains(&format!("\n{first} "))),
        "the old worker is still there: {}",
        show_proc(master_sock)
    );
    second
}

fn exchange(addr: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, GENEROUS)?;
    s.set_read_timeout(Some(GENEROUS))?;
    s.write_all(b"ping")?;
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf)?;
    if &buf != b"ping" {
        return Err(std::io::Error::other("wrong echo"));
    }
    Ok(())
}

#[test]
fn show_proc_lists_the_worker_and_at_prefixes_reach_it() {
    let echo = Backend::echo();
    let (listener, _addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let master_sock = builder.dir().join("master.sock");
    let p = builder
        .without_stats_socket()
        .arg("-W")
        .arg("-S")
        .arg(&format!("{},mode,600", master_sock.display()))
        .inherit(listener)
        .start();
    let worker = ready_worker(&master_sock);
    assert_ne!(worker, p.pid());
    let proc_list = show_proc(&master_sock);
    assert!(
        proc_list.starts_with(
            "#<PID>          <type>          <reloads>       <uptime>        <version>"
        ),
        "{proc_list}"
    );
    let master_line = proc_list.lines().nth(1).unwrap();
    assert!(
        master_line.starts_with(&format!("{:<15} master          0 [failed: 0]", p.pid())),
        "{proc_list}"
    );
    // `@!PID` names a worker by its pid; an unknown target is named in the answer.
    let info = cli_at(&master_sock, &format!("@!{worker} show info")).unwrap();
    assert_eq!(
        common::info_field(&info, "Pid"),
        Some(worker.to_string().as_str())
    );
    assert_eq!(
        cli_at(&master_sock, "@7 show info").unwrap(),
        "Can't find the target PID matching the prefix '@7'\n\n"
    );
    // The master names itself too.
    for prefix in [
        "@master".to_owned(),
        "@0".to_owned(),
        format!("@!{}", p.pid()),
    ] {
        let answer = cli_at(&master_sock, &format!("{prefix} show proc")).unwrap();
        assert!(answer.starts_with("#<PID>"), "{prefix}: {answer}");
    }
    let mode = std::fs::metadata(&master_sock).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
}

#[test]
fn reload_replaces_the_worker_without_refusing_a_connection() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (mut p, master_sock) = start_master(builder.inherit(listener));
    let first = ready_worker(&master_sock);
    let prober = Prober::serving(addr);
    let second = reload_and_retire(&master_sock, first);
    // SIGUSR2 reloads too; traffic goes on through the third worker.
    p.signal(Signal::SIGUSR2);
    assert!(
        wait_until(GENEROUS, || {
            let current = pids_in(&show_proc(&master_sock), "# workers");
            !current.is_empty() && !current.contains(&second)
        }),
        "{}",
        show_proc(&master_sock)
    );
    let third = ready_worker(&master_sock);
    prober.finish_serving();
    let proc_list = show_proc(&master_sock);
    assert!(
        proc_list.contains(" master          2 [failed: 0]"),
        "{proc_list}"
    );
    assert_eq!(pids_in(&proc_list, "# workers"), [third]);
    p.assert_alive();
}

#[test]
fn a_command_read_together_with_a_reload_sees_it_done() {
    let echo = Backend::echo();
    let (listener, _addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (mut p, master_sock) = start_master(builder.inherit(listener));
    let first = ready_worker(&master_sock);
    // With the master stopped, both connections and their lines wait for it, and its loop
    // then reads them in the same turn, the `reload` first.
    p.signal(Signal::SIGSTOP);
    let mut reload = std::os::unix::net::UnixStream::connect(&master_sock).unwrap();
    reload.write_all(b"reload\n").unwrap();
    let mut show = std::os::unix::net::UnixStream::connect(&master_sock).unwrap();
    show.write_all(b"show proc\n").unwrap();
    p.signal(Signal::SIGCONT);
    show.set_read_timeout(Some(GENEROUS)).unwrap();
    let mut answer = String::new();
    show.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains(" master          1 [failed: 0]"),
        "{answer}"
    );
    let workers = pids_in(&answer, "# workers");
    assert!(!workers.is_empty() && !workers.contains(&first), "{answer}");
    p.assert_alive();
}

/// `mworker-max-reloads 1`: a worker kept alive by a session outlives one reload, and gets
/// SIGTERM at the second, which ends its session.
#[test]
fn mworker_max_reloads_stops_a_worker_that_outlived_too_many_reloads() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let config = format!(
        "global\n    mworker-max-reloads 1\n{}",
        echo_config(&listener, &echo)
    );
    let (mut p, master_sock) = start_master(sluice(&config).inherit(listener));
    let first = ready_worker(&master_sock);
    let mut session = TcpStream::connect(addr).unwrap();
    session.set_read_timeout(Some(GENEROUS)).unwrap();
    session.write_all(b"ping").unwrap();
    let mut echoed = [0u8; 4];
    session.read_exact(&mut echoed).unwrap();
    for reload in 1..=2 {
        cli_at(&master_sock, "reload").unwrap();
        assert!(
            wait_until(GENEROUS, || {
                let list = show_proc(&master_sock);
                pids_in(&list, "# workers")
                    .first()
                    .is_some_and(|&w| w != first)
            }),
            "reload {reload}: {}",
            show_proc(&master_sock)
        );
        if reload == 1 {
            // Soft-stopped, it waits for its session: one reload is allowed.
            assert!(pids_in(&show_proc(&master_sock), "# old workers").contains(&first));
            session.write_all(b"pong").unwrap();
            session.read_exact(&mut echoed).unwrap();
        }
    }
    assert!(
        wait_until(GENEROUS, || !pids_in(
            &show_proc(&master_sock),
            "# old workers"
        )
        .contains(&first)),
        "the worker outlived its second reload: {}",
        show_proc(&master_sock)
    );
    let mut rest = Vec::new();
    assert!(
        matches!(session.read_to_end(&mut rest), Ok(0) | Err(_)),
        "the session went on"
    );
    p.assert_alive();
}

#[test]
fn a_broken_configuration_at_reload_keeps_the_worker() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (p, master_sock) = start_master(builder.inherit(listener));
    let worker = ready_worker(&master_sock);
    let cfg = p.dir().join("sluice.cfg");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("    no-such-keyword here\n");
    std::fs::write(&cfg, text).unwrap();
    cli_at(&master_sock, "reload").unwrap();
    let proc_list = show_proc(&master_sock);
    assert!(
        proc_list.contains(" master          1 [failed: 1]"),
        "{proc_list}"
    );
    assert_eq!(pids_in(&proc_list, "# workers"), [worker]);
    exchange(addr).unwrap();
    assert!(p.stderr().contains("no-such-keyword"), "{}", p.stderr());
}

/// Kills a detached master (by pid) if the test ends early; its workers follow it.
struct Detached(i32);

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

#[test]
fn with_daemon_mode_the_master_detaches_and_writes_its_pid() {
    let dir = TempDir::new();
    let master_sock = dir.join("master.sock");
    let pidfile: PathBuf = dir.join("sluice.pid");
    let front = dir.join("front.sock");
    let cfg = dir.write(
        "mw.cfg",
        &format!(
            "global\n    master-worker\n{TCP_DEFAULTS}\nlisten app\n    bind \"{}\"\n    server s1 127.0.0.1:9\n",
            front.display()
        ),
    );
    let launcher = common::run(
        &[
            "-D",
            "-p",
            pidfile.to_str().unwrap(),
            "-S",
            master_sock.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(launcher.status.code(), Some(0));
    let mut pid = None;
    assert!(wait_until(GENEROUS, || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        pid.is_some()
    }));
    let pid = pid.unwrap();
    let _guard = Detached(pid);
    let worker = ready_worker(&master_sock);
    let proc_list = show_proc(&master_sock);
    assert!(
        proc_list
            .lines()
            .nth(1)
            .unwrap()
            .starts_with(&format!("{pid:<15} master")),
        "the pid file names the master: {proc_list}"
    );
    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    let gone = |p: u32| !Path::new(&format!("/proc/{p}")).exists();
    assert!(
        wait_until(GENEROUS, || gone(pid as u32) && gone(worker)),
        "the master or its worker survived SIGTERM"
    );
}

#[test]
fn a_worker_that_fails_to_start_leaves_the_previous_one_serving() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (mut p, master_sock) = start_master(builder.inherit(listener));
    let worker = ready_worker(&master_sock);
    // The master's check passes; the worker fails when it resolves the server's name.
    let cfg = p.dir().join("sluice.cfg");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let broken = text.replace(&echo.addr().to_string(), "no-such-host.invalid:80");
    std::fs::write(&cfg, broken).unwrap();
    cli_at(&master_sock, "reload").unwrap();
    assert!(
        wait_until(GENEROUS, || show_proc(&master_sock)
            .contains(" master          1 [failed: 1]")),
        "{}\n{}",
        show_proc(&master_sock),
        p.stderr()
    );
    assert_eq!(pids_in(&show_proc(&master_sock), "# workers"), [worker]);
    exchange(addr).unwrap();
    p.assert_alive();
}

#[test]
fn systemd_mode_notifies_ready_reloading_and_stopping() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let master_sock = builder.dir().join("master.sock");
    let notify_path = builder.dir().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(GENEROUS)).unwrap();
    let next = || {
        let mut buf = [0u8; 256];
        let n = notify.recv(&mut buf).expect("a notification in time");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut p = builder
        .without_stats_socket()
        .env("NOTIFY_SOCKET", notify_path.to_str().unwrap())
        .arg("-Ws")
        .arg("-S")
        .arg(master_sock.to_str().unwrap())
        .inherit(listener)
        .start();
    // READY=1 comes once the worker answers: traffic flows from then on.
    assert_eq!(next(), format!("READY=1\nMAINPID={}\n", p.pid()));
    exchange(addr).unwrap();
    p.signal(Signal::SIGUSR2);
    assert_eq!(next(), "RELOADING=1\n");
    assert_eq!(next(), format!("READY=1\nMAINPID={}\n", p.pid()));
    let worker = ready_worker(&master_sock);
    p.signal(Signal::SIGTERM);
    assert_eq!(next(), "STOPPING=1\n");
    let status = p.expect_exit();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "the master dies of SIGTERM once its workers are gone"
    );
    assert!(wait_until(GENEROUS, || !Path::new(&format!(
        "/proc/{worker}"
    ))
    .exists()));
}

#[test]
fn a_master_socket_below_admin_lowers_the_workers_cli_and_cannot_reload() {
    let echo = Backend::echo();
    let (listener, _addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let admin_sock = builder.dir().join("master.sock");
    let _p = builder
        .without_stats_socket()
        .arg("-W")
        .arg("-S")
        .arg(&format!("{},level,operator", admin_sock.display()))
        .inherit(listener)
        .start();
    // Readiness through the operator socket: `show info` is allowed at that level.
    ready_worker(&admin_sock);
    assert_eq!(
        cli_at(&admin_sock, "@1 show cli level").unwrap(),
        "operator\n\n"
    );
    assert_eq!(
        cli_at(&admin_sock, "@1 disable frontend app").unwrap(),
        "Permission denied\n\n"
    );
    assert_eq!(
        cli_at(&admin_sock, "reload").unwrap(),
        "Permission denied\n\n"
    );
    assert!(show_proc(&admin_sock).contains(" master          0 [failed: 0]"));
}

#[test]
fn sigusr1_to_the_master_soft_stops_the_workers_and_then_the_master() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (mut p, master_sock) = start_master(builder.inherit(listener));
    ready_worker(&master_sock);
    let mut live = TcpStream::connect(addr).unwrap();
    live.set_read_timeout(Some(GENEROUS)).unwrap();
    live.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    live.read_exact(&mut buf).unwrap();
    p.signal(Signal::SIGUSR1);
    // The worker stops listening but its session goes on; the master waits for it.
    assert!(
        wait_until(GENEROUS, || cli_at(&master_sock, "@1 show info")
            .is_ok_and(|info| info.contains("Stopping: 1"))),
        "the worker did not start stopping"
    );
    live.write_all(b"more").unwrap();
    live.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"more");
    p.assert_alive();
    drop(live);
    let status = p.expect_exit();
    assert_eq!(status.code(), Some(0), "{}", p.stderr());
}

/// The proof of a hitless reload: ten reloads in a row while a client keeps
/// connecting and exchanging, and not one connection refused, reset or left unanswered.
#[test]
fn ten_reloads_under_load_lose_no_connection() {
    let echo = Backend::echo();
    let (listener, addr) = frontend();
    let builder = sluice(&echo_config(&listener, &echo));
    let (mut p, master_sock) = start_master(builder.inherit(listener));
    let mut worker = ready_worker(&master_sock);
    let prober = Prober::serving(addr);
    for round in 0..10 {
        cli_at(&master_sock, "reload").unwrap();
        let next = ready_worker(&master_sock);
        assert_ne!(next, worker, "reload {round}: {}", show_proc(&master_sock));
        worker = next;
        // Traffic goes on through the new worker before the next reload.
        let before = prober.ok();
        assert!(
            wait_until(GENEROUS, || prober.ok() >= before + 10),
            "no traffic after reload {round}"
        );
    }
    prober.finish_serving();
    assert!(
        show_proc(&master_sock).contains(" master          10 [failed: 0]"),
        "{}",
        show_proc(&master_sock)
    );
    p.assert_alive();
}

/// The master holds a socket per worker thread for a TCP address (so no thread wakes for
/// another's connection) and keeps them all across a reload, as it keeps the first one: not
/// one connection is refused while the worker changes.
#[test]
fn the_master_holds_a_socket_per_thread_across_reloads() {
    let echo = Backend::echo();
    let port = common::free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let cfg = format!(
        "global\n    nbthread 2\n{TCP_DEFAULTS}\nlisten app\n    bind 127.0.0.1:{port}\n    server s1 {}\n",
        echo.addr()
    );
    let builder = sluice(&cfg);
    let (mut p, master_sock) = start_master(builder);
    let first = ready_worker(&master_sock);
    assert_eq!(common::listening_sockets(port), 2);
    let prober = Prober::serving(addr);
    reload_and_retire(&master_sock, first);
    prober.finish_serving();
    // The same two sockets: none closed, none added.
    assert_eq!(common::listening_sockets(port), 2);
    p.assert_alive();
}

/// A worker whose master died before the worker could ask to be told of its death finds
/// another parent, and exits at once rather than serve with nobody to stop it.
#[test]
fn a_worker_whose_master_is_gone_exits() {
    let dir = TempDir::new();
    let config = dir.write(
        "sluice.cfg",
        &format!(
            "{TCP_DEFAULTS}\nlisten app\n    bind 127.0.0.1:{}\n    server s 127.0.0.1:9\n",
            common::free_port()
        ),
    );
    // The test is the worker's parent, never pid 1, which the worker is told is its master.
    let mut worker = std::process::Command::new(common::binary())
        .args(["-f", config.to_str().unwrap()])
        .env("SLUICE_WORKER_LISTENERS", "")
        .env("SLUICE_WORKER_MASTER", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A worker that stays (the check broken) is killed, and the test fails, not hangs.
    let exited = wait_until(GENEROUS, || matches!(worker.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = worker.kill();
    }
    let out = worker.wait_with_output().unwrap();
    assert!(exited, "the worker kept running");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the master process is gone"),
        "{out:?}"
    );
}
