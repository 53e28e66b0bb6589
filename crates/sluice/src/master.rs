//! Master-worker mode (management.txt §4 and §5, `-W`, `master-worker`): a master process
//! that owns the listening sockets and runs the proxy in worker processes it starts, replaces
//! on reload and watches.
//!
//! The master reads the configuration, binds every `bind` address itself (a TCP one with a
//! socket per worker thread, see `listeners::shards_wanted`) and starts a worker:
//! the same program with the same arguments (minus the master's own: `-W`, `-S`, `-D`, `-p`,
//! `-C`), which finds its listening sockets among the descriptors it inherited (their keys are
//! in [`LISTENERS_VAR`]) instead of binding them. On `reload` (master CLI) or SIGUSR2 the master
//! reads the configuration again (a broken one is reported and changes nothing), binds only the
//! addresses that are new, and starts a new worker with `-sf` naming the current ones: once
//! listening it soft-stops them, and they finish their sessions and exit. The kernel queue of a
//! socket lives as long as some process holds it, and the master always does, so no connection
//! is refused during a reload: what the old worker no longer accepts, the new one does.
//!
//! Each worker also inherits a CLI socket of its own (level admin, a Linux abstract unix
//! address known only to the master): the master CLI (`-S`) answers `show proc`, `reload`,
//! `show version` itself and passes `@1 <command>` (the current worker), `@!<pid> <command>`
//! (any worker) on to a worker's CLI. When the current worker dies, the master stops the others
//! and exits with its code (HAProxy's default `exit-on-failure`); SIGTERM/SIGINT and SIGUSR1
//! are passed on to every worker, and the master exits once they all have (SIGTTOU, SIGTTIN
//! and SIGHUP are passed on too). With `-Ws` the
//! master also tells systemd (`NOTIFY_SOCKET`, `Type=notify` units) when a worker is ready
//! (`READY=1`, once it answers on its CLI), reloading (`RELOADING=1`) and stopping
//! (`STOPPING=1`). Read [`run`] first.

use crate::args::{self, Options};
use crate::listeners;
use sluice_admin::cli::{self, MAX_LINE};
use sluice_config::global::{CliLevel, Owner, StatsSocketConf};
use sluice_config::plan::Plan;
use sluice_net::listen::{self, BoundListener, Endpoint};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// Lines `KEY=FD`, one per listening socket a worker inherits (`KEY` as in [`Endpoint`]).
pub const LISTENERS_VAR: &str = "SLUICE_WORKER_LISTENERS";
/// The descriptor of the worker's own CLI socket, served at level admin.
pub const CLI_VAR: &str = "SLUICE_WORKER_CLI";
/// The master's process id, which a worker checks is still its parent.
pub const MASTER_VAR: &str = "SLUICE_WORKER_MASTER";

/// Listening sockets handed over to this process, by endpoint key: by its master (a worker)
/// or by the process it replaces (`-x`). Those the configuration does not use are closed
/// when the handoff is dropped.
#[derive(Debug, Default)]
pub struct Handoff {
    listeners: HashMap<String, OwnedFd>,
    /// The worker's CLI socket (from a master only).
    pub cli: Option<RawFd>,
    /// True in a worker of a master process.
    pub from_master: bool,
    /// The master's process id (from a master only).
    pub master: Option<i32>,
}

impl Handoff {
    /// The handoff of this process, if a master started it. Descriptors that are not
    /// listening sockets are ignored.
    pub fn from_env() -> Option<Handoff> {
        let listeners = std::env::var(LISTENERS_VAR).ok()?;
        let listeners = listeners
            .lines()
            .filter_map(|line| {
                let (key, fd) = line.rsplit_once('=')?;
                let fd = sluice_net::fd::adopt_listening_socket(fd.parse().ok()?).ok()?;
                Some((key.to_owned(), fd))
            })
            .collect();
        let cli = std::env::var(CLI_VAR).ok().and_then(|v| v.parse().ok());
        let master = std::env::var(MASTER_VAR).ok().and_then(|v| v.parse().ok());
        Some(Handoff {
            listeners,
            cli,
            from_master: true,
            master,
        })
    }

    /// The listening sockets of the process serving the stats socket at `path` (`-x`).
    pub fn from_old_process(path: &Path) -> io::Result<Handoff> {
        let listeners = sluice_net::fd_pass::receive_listeners(path, cli::DEFAULT_TIMEOUT)?;
        Ok(Handoff {
            listeners: listeners.into_iter().collect(),
            cli: None,
            from_master: false,
            master: None,
        })
    }

    /// Takes the handed-over socket of `endpoint`, if there is one.
    pub fn take(&mut self, endpoint: &Endpoint) -> Option<OwnedFd> {
        self.listeners.remove(&endpoint.to_string())
    }

    /// Takes every handed-over shard of the socket of `endpoint`, in order
    /// (`listeners::shard_key`).
    pub fn take_shards(&mut self, endpoint: &Endpoint) -> Vec<OwnedFd> {
        let key = endpoint.to_string();
        (1..)
            .map_while(|index| self.listeners.remove(&listeners::shard_key(&key, index)))
            .collect()
    }
}

/// Reads and checks the configuration again (for a reload).
pub type Loader<'a> = &'a dyn Fn() -> Result<Plan, Vec<String>>;

/// Runs the master until every worker has exited; returns the exit status.
pub fn run(opts: &Options, plan: &Plan, load: Loader<'_>) -> Result<u8, Vec<String>> {
    let exe = std::env::current_exe().map_err(|e| {
        vec![format!(
            "[ALERT] cannot find the program to start workers: {e}"
        )]
    })?;
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let master_cli = match &opts.master_socket {
        Some(text) => Some(bind_master_socket(text)?),
        None => None,
    };
    let mut sockets = Sockets::default();
    sockets.bind_plan(plan, opts)?;
    let quiet = opts.quiet || plan.global.quiet;
    let daemon = (opts.daemon || plan.global.daemon) && !opts.debug && !opts.foreground;
    if daemon {
        crate::system::daemonize()
            .map_err(|e| vec![format!("[ALERT] cannot go to the background: {e}")])?;
    }
    let pidfile = opts
        .pidfile
        .clone()
        .or_else(|| plan.global.pidfile.as_ref().map(Into::into));
    if let Some(path) = &pidfile {
        crate::system::write_pidfile(path).map_err(|e| {
            vec![format!(
                "[ALERT] cannot write pid file '{}': {e}",
                path.display()
            )]
        })?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| vec![format!("[ALERT] cannot start the master: {e}")])?;
    let (exits_tx, exits) = mpsc::unbounded_channel();
    let master = Rc::new(RefCell::new(Master {
        exe,
        worker_args: args::worker_args(&raw),
        sockets,
        workers: Vec::new(),
        started: Instant::now(),
        reloads: 0,
        failed_reloads: 0,
        max_reloads: plan.global.mworker_max_reloads,
        next_cli: 0,
        exits: exits_tx,
        quiet,
        systemd: if opts.systemd {
            Notifier::from_env()
        } else {
            None
        },
    }));
    master
        .borrow_mut()
        .spawn_worker()
        .map_err(|e| vec![format!("[ALERT] cannot start a worker: {e}")])?;
    let local = tokio::task::LocalSet::new();
    let end = local
        .block_on(&runtime, supervise(master, master_cli, exits, opts, load))
        .map_err(|e| vec![format!("[ALERT] master failed: {e}")])?;
    drop(local);
    drop(runtime);
    match end {
        End::Code(code) => Ok(code),
        // Stopped by SIGINT or SIGTERM: die of it, as HAProxy's master does.
        End::Signal(signal) => sluice_net::fd::exit_by_signal(signal),
    }
}

/// How the master ends once its workers are gone.
enum End {
    /// With this exit status.
    Code(u8),
    /// By this signal (the one that stopped it).
    Signal(i32),
}

/// The listening sockets the master holds, by endpoint key.
#[derive(Default)]
struct Sockets {
    held: Vec<(String, BoundListener)>,
}

impl Sockets {
    /// Takes the held socket of `key` out, if the master holds one.
    fn take_held(&mut self, key: &str) -> Option<BoundListener> {
        let at = self.held.iter().position(|(k, _)| k == key)?;
        Some(self.held.swap_remove(at).1)
    }

    /// Binds the endpoints of `plan` the master does not hold yet, with a shard for each of
    /// a worker's other threads for a TCP one (`listeners::shards_wanted`), and closes those
    /// it no longer names (the workers keep their own copies as long as they run). Holding
    /// the shards, the master keeps their queues across reloads as it does the sockets'; a
    /// reload to fewer threads closes the extra shards, and the connections queued on them.
    fn bind_plan(&mut self, plan: &Plan, opts: &Options) -> Result<(), Vec<String>> {
        // (key, socket, kept from the previous configuration)
        let mut wanted: Vec<(String, BoundListener, bool)> = Vec::new();
        let mut errors = Vec::new();
        let shards = listeners::shards_wanted(plan);
        for frontend in &plan.frontends {
            let maxconn = frontend
                .maxconn
                .or(opts.proxy_maxconn)
                .or(opts.maxconn)
                .or(plan.global.maxconn)
                .unwrap_or(u32::MAX);
            for bind in &frontend.binds {
                let bind_opts =
                    match listeners::bind_options(bind, maxconn, plan.global.noreuseport) {
                        Ok(opts) => opts,
                        Err(err) => {
                            for addr in &bind.addrs {
                                errors.push(listeners::bind_error(
                                    &bind.span,
                                    &frontend.id.name,
                                    addr,
                                    &err,
                                ));
                            }
                            continue;
                        }
                    };
                for addr in &bind.addrs {
                    let failed = |err: &io::Error| {
                        listeners::bind_error(&bind.span, &frontend.id.name, addr, err)
                    };
                    let endpoints = match listen::endpoints(addr) {
                        Ok(endpoints) => endpoints,
                        Err(err) => {
                            errors.push(failed(&err));
                            continue;
                        }
                    };
                    for endpoint in endpoints {
                        let key = endpoint.to_string();
                        if wanted.iter().any(|(k, _, _)| *k == key) {
                            continue;
                        }
                        let (primary, kept) = match self.take_held(&key) {
                            Some(socket) => (socket, true),
                            None => match listen::bind_endpoint(&endpoint, &bind_opts) {
                                Ok(socket) => (socket, false),
                                Err(err) => {
                                    errors.push(failed(&err));
                                    continue;
                                }
                            },
                        };
                        // An inherited `fd@N` is one socket, whoever bound it.
                        let count = match endpoint {
                            Endpoint::Tcp(_) => shards,
                            _ => 0,
                        };
                        for index in 1..=count {
                            let shard_key = listeners::shard_key(&key, index);
                            if let Some(socket) = self.take_held(&shard_key) {
                                wanted.push((shard_key, socket, true));
                                continue;
                            }
                            match primary.shards(1, &bind_opts) {
                                Ok(mut bound) => {
                                    if let Some(socket) = bound.pop() {
                                        wanted.push((shard_key, socket, false));
                                    }
                                }
                                Err(err) => errors.push(failed(&err)),
                            }
                        }
                        wanted.push((key, primary, kept));
                    }
                }
            }
        }
        if !errors.is_empty() {
            // The running workers' configuration stays in force: keep what was held, close
            // what was bound for the refused one.
            self.held.extend(
                wanted
                    .into_iter()
                    .filter(|(_, _, kept)| *kept)
                    .map(|(key, socket, _)| (key, socket)),
            );
            return Err(errors);
        }
        self.held = wanted
            .into_iter()
            .map(|(key, socket, _)| (key, socket))
            .collect();
        Ok(())
    }
}

/// One worker process.
struct Worker {
    pid: u32,
    started: Instant,
    /// The master's reload count when it started (`show proc` shows the reloads since).
    born_at_reload: u32,
    /// The abstract address of its CLI socket.
    cli: String,
    /// The newest worker: `@1`, and the one whose failure ends the master.
    current: bool,
}

/// The master's state, shared by the signal handlers and the CLI sessions (one thread).
struct Master {
    exe: std::path::PathBuf,
    worker_args: Vec<String>,
    sockets: Sockets,
    workers: Vec<Worker>,
    started: Instant,
    reloads: u32,
    failed_reloads: u32,
    /// `mworker-max-reloads` of the configuration last loaded.
    max_reloads: Option<u32>,
    next_cli: u64,
    exits: mpsc::UnboundedSender<(u32, ExitStatus)>,
    quiet: bool,
    /// systemd's notification socket (`-Ws`).
    systemd: Option<Rc<Notifier>>,
}

/// systemd's notification socket (`sd_notify`): a unix datagram path, or an abstract name
/// written with a leading `@`.
struct Notifier {
    socket: std::os::unix::net::UnixDatagram,
    to: UnixAddr,
}

impl Notifier {
    fn from_env() -> Option<Rc<Notifier>> {
        let path = std::env::var("NOTIFY_SOCKET").ok()?;
        let to = match path.strip_prefix('@') {
            Some(name) => UnixAddr::from_abstract_name(name.as_bytes()).ok()?,
            None => UnixAddr::from_pathname(&path).ok()?,
        };
        let socket = std::os::unix::net::UnixDatagram::unbound().ok()?;
        Some(Rc::new(Notifier { socket, to }))
    }

    /// Sends one state change; systemd being away is no reason to fail.
    fn send(&self, state: &str) {
        let _ = self.socket.send_to_addr(state.as_bytes(), &self.to);
    }
}

/// How long a new worker may take to answer its first CLI command (start-up: reading the
/// configuration, resolving names) before it is not announced as ready.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// Tells systemd `READY=1` once the worker behind `cli` answers (it has started); a worker
/// that dies first is never announced.
async fn announce_ready(notifier: Rc<Notifier>, cli: String) {
    if ask_worker(&cli, "show info", READY_LIMIT)
        .await
        .starts_with("Name:")
    {
        notifier.send(&format!("READY=1\nMAINPID={}\n", std::process::id()));
    }
}

impl Master {
    fn notice(&self, message: &str) {
        if !self.quiet {
            eprintln!("[NOTICE]   ({}) : {message}", std::process::id());
        }
    }

    /// Starts a worker on the held sockets; the current workers (if any) become old ones,
    /// which the new worker soft-stops once it listens (`-sf`).
    fn spawn_worker(&mut self) -> io::Result<()> {
        let name = format!("sluice-{}-worker-{}", std::process::id(), self.next_cli);
        self.next_cli += 1;
        let cli = UnixListener::bind_addr(&UnixAddr::from_abstract_name(name.as_bytes())?)?;
        let old: Vec<String> = self.workers.iter().map(|w| w.pid.to_string()).collect();
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.worker_args);
        if !old.is_empty() {
            cmd.arg("-sf").args(&old);
        }
        let mut listeners = String::new();
        for (key, socket) in &self.sockets.held {
            let _ = writeln!(listeners, "{key}={}", socket.as_fd().as_raw_fd());
        }
        cmd.env(LISTENERS_VAR, listeners)
            .env(CLI_VAR, cli.as_raw_fd().to_string())
            .env(MASTER_VAR, std::process::id().to_string());
        let inherited: Vec<std::os::fd::BorrowedFd<'_>> = self
            .sockets
            .held
            .iter()
            .map(|(_, s)| s.as_fd())
            .chain([cli.as_fd()])
            .collect();
        // Close-on-exec is lifted only around the spawn, on the master's only thread, so no
        // other child can inherit these descriptors.
        for fd in &inherited {
            set_cloexec(fd.as_raw_fd(), false)?;
        }
        let spawned = cmd.spawn();
        for fd in &inherited {
            set_cloexec(fd.as_raw_fd(), true)?;
        }
        let mut child = spawned?;
        let pid = child.id();
        let exits = self.exits.clone();
        std::thread::Builder::new()
            .name(format!("sluice-wait-{pid}"))
            .spawn(move || {
                if let Ok(status) = child.wait() {
                    let _ = exits.send((pid, status));
                }
            })?;
        for w in &mut self.workers {
            w.current = false;
        }
        self.workers.push(Worker {
            pid,
            started: Instant::now(),
            born_at_reload: self.reloads,
            cli: name,
            current: true,
        });
        self.notice(&format!("New worker ({pid}) forked"));
        Ok(())
    }

    /// Reads the configuration again and starts a worker for it (management.txt §5).
    fn reload(&mut self, opts: &Options, load: Loader<'_>) {
        self.notice("Reloading Sluice");
        if let Some(systemd) = &self.systemd {
            systemd.send("RELOADING=1\n");
        }
        self.reloads += 1;
        let outcome = load().and_then(|plan| {
            self.sockets.bind_plan(&plan, opts)?;
            self.spawn_worker()
                .map_err(|e| vec![format!("[ALERT] cannot start a worker: {e}")])?;
            Ok(plan.global.mworker_max_reloads)
        });
        match outcome {
            Ok(max_reloads) => {
                self.notice("Loading success.");
                self.announce_current();
                self.max_reloads = max_reloads;
                self.stop_outlived_workers();
            }
            Err(messages) => {
                self.failed_reloads += 1;
                for m in messages {
                    eprintln!("{m}");
                }
                eprintln!(
                    "[ALERT]    ({}) : Loading failure! The workers keep running.",
                    std::process::id()
                );
                // The running worker is still ready.
                if let Some(systemd) = &self.systemd {
                    systemd.send("READY=1\n");
                }
            }
        }
    }

    /// `mworker-max-reloads N`: an old worker still running after more than N reloads gets
    /// SIGTERM, as HAProxy sends it.
    fn stop_outlived_workers(&self) {
        let Some(max) = self.max_reloads else {
            return;
        };
        for w in &self.workers {
            if !w.current && self.reloads - w.born_at_reload > max {
                let pid = nix::unistd::Pid::from_raw(w.pid as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
    }

    /// With `-Ws`, announces the current worker to systemd once it answers.
    fn announce_current(&self) {
        if let (Some(systemd), Some(worker)) =
            (&self.systemd, self.workers.iter().find(|w| w.current))
        {
            tokio::task::spawn_local(announce_ready(Rc::clone(systemd), worker.cli.clone()));
        }
    }

    /// Passes a stop to the workers (and tells systemd, with `-Ws`).
    fn stop_workers(&self, signal: nix::sys::signal::Signal) {
        if let Some(systemd) = &self.systemd {
            systemd.send("STOPPING=1\n");
        }
        self.signal_workers(signal);
    }

    fn signal_workers(&self, signal: nix::sys::signal::Signal) {
        for w in &self.workers {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(w.pid as i32), signal);
        }
    }

    /// `show proc`: the master, the current worker, the old workers.
    fn show_proc(&self, out: &mut String) {
        let version = env!("CARGO_PKG_VERSION");
        let row = |out: &mut String, pid: u32, kind: &str, reloads: &str, since: Instant| {
            let _ = writeln!(
                out,
                "{pid:<15} {kind:<15} {reloads:<15} {:<15} {version}",
                uptime(since.elapsed())
            );
        };
        let _ = writeln!(
            out,
            "{:<15} {:<15} {:<15} {:<15} {:<15}",
            "#<PID>", "<type>", "<reloads>", "<uptime>", "<version>"
        );
        row(
            out,
            std::process::id(),
            "master",
            &format!("{} [failed: {}]", self.reloads, self.failed_reloads),
            self.started,
        );
        out.push_str("# workers\n");
        for w in self.workers.iter().filter(|w| w.current) {
            let reloads = (self.reloads - w.born_at_reload).to_string();
            row(out, w.pid, "worker", &reloads, w.started);
        }
        if self.workers.iter().any(|w| !w.current) {
            out.push_str("# old workers\n");
            for w in self.workers.iter().filter(|w| !w.current) {
                let reloads = (self.reloads - w.born_at_reload).to_string();
                row(out, w.pid, "worker", &reloads, w.started);
            }
        }
        out.push_str("# programs\n");
    }
}

/// HAProxy's `show proc` uptime: `0d00h00m01s`.
fn uptime(d: Duration) -> String {
    let s = d.as_secs();
    format!(
        "{}d{:02}h{:02}m{:02}s",
        s / 86400,
        s / 3600 % 24,
        s / 60 % 60,
        s % 60
    )
}

fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let flags = if on {
        FdFlag::FD_CLOEXEC
    } else {
        FdFlag::empty()
    };
    fcntl(fd, FcntlArg::F_SETFD(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// `-S <address>[,<option>,<value>]...`: the master CLI socket (`level`, `mode`, `user`,
/// `group`, `uid`, `gid` as on a `stats socket` line; level admin by default).
fn bind_master_socket(text: &str) -> Result<(BoundListener, CliLevel), Vec<String>> {
    let err = |m: String| vec![format!("[ALERT] -S {text}: {m}")];
    let mut parts = text.split(',');
    let addr = parts.next().unwrap_or_default();
    let addr = match sluice_config::addr::parse_listen_addrs(addr) {
        Ok(list) if list.len() == 1 => list.into_iter().next(),
        Ok(_) => None,
        Err(e) => return Err(err(e.to_string())),
    }
    .ok_or_else(|| err("expects exactly one address".to_owned()))?;
    let mut conf = StatsSocketConf {
        span: sluice_config::diag::Span::new(&"command line".into(), 0),
        addr,
        level: CliLevel::Admin,
        mode: None,
        uid: None,
        gid: None,
        expose_listeners: false,
    };
    let options: Vec<&str> = parts.collect();
    for pair in options.chunks(2) {
        let [option, value] = pair else {
            return Err(err(format!("option '{}' expects a value", pair[0])));
        };
        match *option {
            "level" => {
                conf.level = match *value {
                    "user" => CliLevel::User,
                    "operator" => CliLevel::Operator,
                    "admin" => CliLevel::Admin,
                    _ => {
                        return Err(err(format!(
                            "'level' expects 'user', 'operator' or 'admin', not '{value}'"
                        )));
                    }
                };
            }
            "mode" => {
                conf.mode =
                    Some(u32::from_str_radix(value, 8).map_err(|_| {
                        err(format!("'mode' expects an octal mode, not '{value}'"))
                    })?);
            }
            "user" => conf.uid = Some(Owner::Name((*value).to_owned())),
            "group" => conf.gid = Some(Owner::Name((*value).to_owned())),
            "uid" | "gid" => {
                let id = value
                    .parse()
                    .map_err(|_| err(format!("'{option}' expects a number, not '{value}'")))?;
                if *option == "uid" {
                    conf.uid = Some(Owner::Id(id));
                } else {
                    conf.gid = Some(Owner::Id(id));
                }
            }
            other => return Err(err(format!("option '{other}' is not supported by Sluice"))),
        }
    }
    let mut sockets = listeners::bind_stats_socket(&conf)
        .map_err(|e| err(format!("cannot bind the master CLI socket: {e}")))?;
    match (sockets.pop(), sockets.is_empty()) {
        (Some(socket), true) => Ok((socket, conf.level)),
        _ => Err(err("expects exactly one address".to_owned())),
    }
}

/// The master's loop: signals, worker exits and the master CLI.
async fn supervise(
    master: Rc<RefCell<Master>>,
    cli: Option<(BoundListener, CliLevel)>,
    mut exits: mpsc::UnboundedReceiver<(u32, ExitStatus)>,
    opts: &Options,
    load: Loader<'_>,
) -> io::Result<End> {
    let mut reload_sig = signal(SignalKind::user_defined2())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut soft_stop = signal(SignalKind::user_defined1())?;
    let mut pause = signal(SignalKind::from_raw(nix::libc::SIGTTOU))?;
    let mut resume = signal(SignalKind::from_raw(nix::libc::SIGTTIN))?;
    // A closing terminal must not end the master (SIGHUP's default action); workers ignore it.
    let mut hangup = signal(SignalKind::hangup())?;
    // CLI sessions ask the loop to reload, so that a reload runs where signals run.
    let (reload_tx, mut reload_rx) = mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
    if let Some((cli, level)) = cli {
        let listener = cli.into_async()?;
        let master = Rc::clone(&master);
        let reloads = Rc::new(CliReloads {
            reload_tx,
            pending: std::cell::Cell::new(0),
            done: tokio::sync::Notify::new(),
        });
        tokio::task::spawn_local(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let master = Rc::clone(&master);
                let reloads = Rc::clone(&reloads);
                tokio::task::spawn_local(async move {
                    let _ = master_session(&master, stream, level, &reloads).await;
                });
            }
        });
    }
    master.borrow().announce_current();
    let mut exiting = false;
    let mut exit_code: u8 = 0;
    let mut stopped_by: Option<i32> = None;
    loop {
        tokio::select! {
            _ = reload_sig.recv() => master.borrow_mut().reload(opts, load),
            Some(done) = reload_rx.recv() => {
                master.borrow_mut().reload(opts, load);
                let _ = done.send(());
            }
            _ = terminate.recv() => {
                master.borrow().notice("Exiting Master process...");
                exiting = true;
                stopped_by = Some(nix::libc::SIGTERM);
                master.borrow().stop_workers(nix::sys::signal::Signal::SIGTERM);
            }
            _ = interrupt.recv() => {
                master.borrow().notice("Exiting Master process...");
                exiting = true;
                stopped_by = Some(nix::libc::SIGINT);
                master.borrow().stop_workers(nix::sys::signal::Signal::SIGINT);
            }
            _ = soft_stop.recv() => {
                exiting = true;
                master.borrow().stop_workers(nix::sys::signal::Signal::SIGUSR1);
            }
            _ = pause.recv() => master.borrow().signal_workers(nix::sys::signal::Signal::SIGTTOU),
            _ = resume.recv() => master.borrow().signal_workers(nix::sys::signal::Signal::SIGTTIN),
            _ = hangup.recv() => master.borrow().signal_workers(nix::sys::signal::Signal::SIGHUP),
            Some((pid, status)) = exits.recv() => {
                let mut guard = master.borrow_mut();
                let m = &mut *guard;
                let Some(i) = m.workers.iter().position(|w| w.pid == pid) else { continue };
                let worker = m.workers.remove(i);
                let code = exit_code_of(status);
                if worker.current && !exiting {
                    if code != 0
                        && let Some(previous) = m.workers.last_mut()
                    {
                        // A new worker that failed to start leaves the previous one serving.
                        previous.current = true;
                        m.failed_reloads += 1;
                        eprintln!(
                            "[ALERT]    ({}) : New worker ({pid}) exited with code {code}: the previous worker ({}) keeps serving.",
                            std::process::id(),
                            previous.pid
                        );
                        continue;
                    }
                    eprintln!(
                        "[ALERT]    ({}) : Current worker ({pid}) exited with code {code}: exiting.",
                        std::process::id()
                    );
                    exiting = true;
                    exit_code = code;
                    m.signal_workers(nix::sys::signal::Signal::SIGTERM);
                } else if !m.quiet {
                    eprintln!(
                        "[WARNING]  ({}) : Former worker ({pid}) exited with code {code}",
                        std::process::id()
                    );
                }
                if exiting && m.workers.is_empty() {
                    if !m.quiet {
                        eprintln!(
                            "[WARNING]  ({}) : All workers exited. Exiting... ({exit_code})",
                            std::process::id()
                        );
                    }
                    return Ok(match stopped_by {
                        Some(signal) if exit_code == 0 => End::Signal(signal),
                        _ => End::Code(exit_code),
                    });
                }
            }
        }
    }
}

/// A worker's exit code as a shell reports it (128 + signal for a killed one).
fn exit_code_of(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

const MASTER_HELP: &str = "\
The following commands are valid at this level:
  @!<pid>                                 : send a command to the <pid> process
  @<relative pid>                         : send a command to the <relative pid> process
  @master                                 : send a command to the master process
  reload                                  : reload the configuration, replacing the workers
  show proc                               : show processes status
  show version                            : show version of the current process
  help                                    : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect
";

/// The master CLI's reloads: how its sessions ask the loop for one, and those asked and not
/// done yet.
struct CliReloads {
    reload_tx: mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>,
    pending: std::cell::Cell<u32>,
    /// Told when a reload asked here is done.
    done: tokio::sync::Notify,
}

impl CliReloads {
    /// Asks the loop for a reload and waits until it is done.
    async fn reload(&self) {
        /// Counts the reload pending while it lives, whatever ends the wait.
        struct Pending<'r>(&'r CliReloads);
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                self.0.pending.set(self.0.pending.get() - 1);
                self.0.done.notify_waiters();
            }
        }
        self.pending.set(self.pending.get() + 1);
        let _pending = Pending(self);
        let (done, finished) = tokio::sync::oneshot::channel();
        if self.reload_tx.send(done).is_ok() {
            let _ = finished.await;
        }
    }

    /// Waits until no reload asked on the CLI is pending. A command read after a `reload`
    /// then sees its outcome (`show proc`, `@1`), as HAProxy's master, which re-executes
    /// itself at once, answers it: sessions whose lines came together run in one turn of
    /// the loop, before the loop itself runs the reload.
    async fn settled(&self) {
        loop {
            // Created before the check: `notify_waiters` reaches it from then on.
            let done = self.done.notified();
            if self.pending.get() == 0 {
                return;
            }
            done.await;
        }
    }
}

/// One connection to the master CLI: lines until `quit`, or one line without `prompt`. Below
/// level admin, `reload` is refused and commands reach the workers at the socket's level.
async fn master_session(
    master: &RefCell<Master>,
    stream: sluice_net::stream::Stream,
    level: CliLevel,
    reloads: &CliReloads,
) -> io::Result<()> {
    let (reader, mut writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(reader);
    let mut interactive = false;
    let mut prompt = false;
    loop {
        let mut line = String::new();
        let read = tokio::time::timeout(
            cli::DEFAULT_TIMEOUT,
            (&mut reader).take(MAX_LINE as u64 + 1).read_line(&mut line),
        )
        .await;
        let Ok(Ok(n)) = read else { break };
        if n == 0 {
            break;
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        // `@master`, `@0` and `@!<master pid>` name the master itself.
        let master_pid = format!("@!{}", std::process::id());
        if words.len() > 1 && ["@master", "@0", master_pid.as_str()].contains(&words[0]) {
            words.remove(0);
        }
        reloads.settled().await;
        let mut out = String::new();
        match words.as_slice() {
            [] => {}
            ["quit"] => break,
            ["prompt"] => {
                prompt = !prompt;
                interactive = prompt;
            }
            ["help", ..] => out.push_str(MASTER_HELP),
            ["show", "proc"] => {
                master.borrow().show_proc(&mut out);
                out.push('\n');
            }
            ["show", "version"] => {
                let _ = writeln!(out, "{}\n", env!("CARGO_PKG_VERSION"));
            }
            ["reload"] if level < CliLevel::Admin => out.push_str("Permission denied\n\n"),
            ["reload"] => reloads.reload().await,
            [target, command @ ..] if target.starts_with('@') && !command.is_empty() => {
                let cli = {
                    let m = master.borrow();
                    let worker = match target.strip_prefix("@!") {
                        Some(pid) => m.workers.iter().find(|w| pid.parse() == Ok(w.pid)),
                        None if *target == "@1" => m.workers.iter().find(|w| w.current),
                        None => None,
                    };
                    worker.map(|w| w.cli.clone())
                };
                // The worker's CLI socket is at level admin: the session lowers itself first.
                let lower = match level {
                    CliLevel::User => "user;",
                    CliLevel::Operator => "operator;",
                    CliLevel::Admin => "",
                };
                match cli {
                    Some(name) => {
                        let line = format!("{lower}{}", command.join(" "));
                        let answer = ask_worker(&name, &line, cli::DEFAULT_TIMEOUT).await;
                        // The lowering command's own (empty) answer is not the client's.
                        let answer = match lower {
                            "" => &answer[..],
                            _ => answer.strip_prefix('\n').unwrap_or(&answer),
                        };
                        out.push_str(answer);
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "Can't find the target PID matching the prefix '{target}'\n"
                        );
                    }
                }
            }
            _ => {
                out.push_str(
                    "Unknown command, but maybe one of the following ones is a better match:\n",
                );
                out.push_str(MASTER_HELP.split_once('\n').map_or("", |(_, rest)| rest));
                out.push('\n');
            }
        }
        if prompt {
            out.push_str("master> ");
        }
        writer.write_all(out.as_bytes()).await?;
        writer.flush().await?;
        if !interactive {
            break;
        }
    }
    writer.shutdown().await
}

/// Sends one command line to a worker's CLI and returns its whole answer, waiting at most
/// `limit`.
async fn ask_worker(name: &str, command: &str, limit: Duration) -> String {
    let asked = async {
        let addr = UnixAddr::from_abstract_name(name.as_bytes())?;
        let stream = UnixStream::connect_addr(&addr)?;
        stream.set_nonblocking(true)?;
        let mut stream = tokio::net::UnixStream::from_std(stream)?;
        stream.write_all(command.as_bytes()).await?;
        stream.write_all(b"\n").await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, io::Error>(answer)
    };
    match tokio::time::timeout(limit, asked).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(err)) => format!("The worker did not answer: {err}\n\n"),
        Err(_) => "The worker did not answer in time.\n\n".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_is_written_as_haproxy_writes_it() {
        assert_eq!(uptime(Duration::from_secs(1)), "0d00h00m01s");
        assert_eq!(uptime(Duration::from_secs(90061)), "1d01h01m01s");
    }

    #[test]
    fn handed_over_sockets_are_taken_by_key() {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|_| unreachable!());
        let addr = socket.local_addr().unwrap_or_else(|_| unreachable!());
        let mut h = Handoff {
            listeners: HashMap::from([(addr.to_string(), OwnedFd::from(socket))]),
            cli: None,
            from_master: false,
            master: None,
        };
        assert!(h.take(&Endpoint::Unix("/x".into())).is_none());
        assert!(h.take(&Endpoint::Tcp(addr)).is_some());
        assert!(h.take(&Endpoint::Tcp(addr)).is_none());
    }
}
