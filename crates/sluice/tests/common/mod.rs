//! Shared harness of the end-to-end tests: start the real `sluice` binary on a temporary
//! configuration, hand it pre-bound listening sockets (`bind "fd@N"`), wait until it answers,
//! talk to it over sockets, and kill it when the test ends.
//!
//! Everything is hermetic: frontends are `127.0.0.1:0` listeners bound by the test and
//! inherited by the child, backends are in-test servers on `127.0.0.1:0`, and every file
//! (configuration, stats socket, pid file) lives in a per-test temporary directory. Readiness
//! is detected by talking to the process (its stats socket, or a listener it binds itself),
//! never by sleeping.
#![allow(dead_code)]

pub mod http;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The binary under test: this package's `sluice`, unless `SLUICE_TEST_BINARY` names another
/// one (e.g. `/usr/sbin/haproxy`, to see which tests describe HAProxy's behaviour too).
pub fn binary() -> String {
    std::env::var("SLUICE_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sluice").to_owned())
}

/// How long anything that should happen "at once" may take on a loaded machine.
pub const GENEROUS: Duration = Duration::from_secs(5);

/// How long start-up may take (debug build, two cores shared with parallel builds).
pub const STARTUP: Duration = Duration::from_secs(20);

/// Read timeout of client sockets, so a broken proxy fails a test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Serialises every child spawn of the test process. While a listener's close-on-exec flag
/// is cleared for one child, no other child may be spawned, or it would inherit that socket
/// too and keep it open after the proxy closed it.
static SPAWN_LOCK: Mutex<()> = Mutex::new(());

fn spawn_lock() -> MutexGuard<'static, ()> {
    SPAWN_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A temporary directory removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A new, empty directory under the system's temporary directory. Paths stay short:
    /// unix socket paths are limited to 107 bytes.
    pub fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sluice-it-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temporary directory");
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `text` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, text).expect("write file");
        path
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A listening TCP socket on 127.0.0.1 with a kernel-chosen port, to pass to the proxy as
/// `bind "fd@N"`. Returns the listener (to give to [`Builder::inherit`]) and its address.
pub fn frontend() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind frontend listener");
    let addr = listener.local_addr().expect("frontend address");
    (listener, addr)
}

/// A TCP port free on 127.0.0.1 right now, for configurations that bind a real address (a
/// reload binds it twice; threads listen on it apart).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a probe listener")
        .local_addr()
        .expect("probe address")
        .port()
}

/// How many sockets listen on 127.0.0.1:`port`.
pub fn listening_sockets(port: u16) -> usize {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .expect("read /proc/net/tcp")
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // `st` 0A is LISTEN.
            fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A")
        })
        .count()
}

/// Connects with `connect` over and over until `stop` is set, each time sending "ping" and
/// reading it back (through an echo backend); returns (exchanges that worked, failures).
pub fn ping_until<S, C>(
    stop: Arc<AtomicBool>,
    connect: C,
) -> thread::JoinHandle<(usize, Vec<String>)>
where
    S: Read + Write,
    C: Fn() -> io::Result<S> + Send + 'static,
{
    thread::spawn(move || {
        let (mut ok, mut failures) = (0usize, Vec::new());
        while !stop.load(Ordering::SeqCst) {
            let round = (|| -> io::Result<()> {
                let mut c = connect()?;
                c.write_all(b"ping")?;
                let mut b = [0u8; 4];
                c.read_exact(&mut b)?;
                Ok(())
            })();
            match round {
                Ok(()) => ok += 1,
                Err(e) => failures.push(e.to_string()),
            }
        }
        (ok, failures)
    })
}

/// The `bind` (or `stats socket`) argument for an inherited listener: `"fd@N"`.
pub fn fd_bind(listener: &impl AsRawFd) -> String {
    format!("\"fd@{}\"", listener.as_raw_fd())
}

/// An address where nothing listens (connections are refused), and that no other test of
/// the run will listen on either: its port is below the kernel's ephemeral range (32768 and
/// up on Linux), where the tests' own listeners (all bound to port 0) never land, and each
/// call takes the next free one. A freed ephemeral port could be handed to another test's
/// listener meanwhile, which would then receive this test's "refused" connections.
pub fn refused_addr() -> SocketAddr {
    use std::sync::atomic::{AtomicU16, Ordering};
    // Spread by process id, so that two test binaries run at once would rarely meet.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 64) as u16 * 150;
    for _ in 0..150 {
        let port = base + NEXT.fetch_add(1, Ordering::Relaxed) % 150;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        // Free right now: nothing listens there.
        if TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no free port from {base} to {}", base + 149);
}

/// Prepares a `sluice` child process.
pub struct Builder {
    config: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    inherited: Vec<OwnedFd>,
    stats: bool,
    dir: TempDir,
    shell: Option<String>,
}

/// Starts building a process running `config`. A `global` section with a `stats socket`
/// (level admin) in the temporary directory is put first, for readiness and the CLI;
/// `config` may add its own `global` sections.
pub fn sluice(config: &str) -> Builder {
    Builder {
        config: config.to_owned(),
        args: Vec::new(),
        env: Vec::new(),
        inherited: Vec::new(),
        stats: true,
        dir: TempDir::new(),
        shell: None,
    }
}

impl Builder {
    /// Passes `listener` (TCP or unix) to the child at the same descriptor number (see
    /// [`fd_bind`]). The test's own copy is closed once the child started, so the proxy is its
    /// only owner.
    pub fn inherit(mut self, listener: impl Into<OwnedFd>) -> Self {
        self.inherited.push(listener.into());
        self
    }

    /// Replaces the configuration (for one that names files written in [`Builder::dir`]).
    pub fn config(mut self, config: &str) -> Self {
        self.config = config.to_owned();
        self
    }

    /// Adds a command-line argument (after `-d -f cfg`).
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Runs the shell `commands` first (`ulimit`...), which the process is then started from
    /// (with `exec`: the same process).
    pub fn after_shell(mut self, commands: &str) -> Self {
        self.shell = Some(commands.to_owned());
        self
    }

    /// Does not add the harness's stats socket; readiness must then be checked by the test.
    pub fn without_stats_socket(mut self) -> Self {
        self.stats = false;
        self
    }

    /// The temporary directory of this process (for unix socket paths in the config).
    pub fn dir(&self) -> &TempDir {
        &self.dir
    }

    /// Spawns the process and, if it has the harness's stats socket, waits until it answers
    /// `show info` with its own pid.
    pub fn start(self) -> Sluice {
        let stats_path = self.dir.join("stats.sock");
        let mut text = String::new();
        if self.stats {
            text.push_str(&format!(
                "global\n    stats socket \"{}\" level admin mode 600\n\n",
                stats_path.display()
            ));
        }
        text.push_str(&self.config);
        let cfg = self.dir.write("sluice.cfg", &text);
        let stderr_path = self.dir.join("stderr.log");
        let stdout_path = self.dir.join("stdout.log");
        let mut cmd = match &self.shell {
            Some(commands) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("{commands}\nexec \"$0\" \"$@\""))
                    .arg(binary());
                sh
            }
            None => Command::new(binary()),
        };
        cmd.arg("-d")
            .arg("-f")
            .arg(&cfg)
            .args(&self.args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = spawn_inheriting(&mut cmd, &self.inherited).expect("spawn sluice");
        drop(self.inherited);
        let mut proc = Sluice {
            child: Some(child),
            dir: self.dir,
            stats_path,
            stderr_path,
            cfg,
        };
        if self.stats {
            proc.wait_ready();
        }
        proc
    }
}

/// Spawns `cmd` with the `inherited` sockets left open across exec (close-on-exec cleared for
/// the duration of the spawn only, under the spawn lock).
pub fn spawn_inheriting(cmd: &mut Command, inherited: &[OwnedFd]) -> io::Result<Child> {
    let _guard = spawn_lock();
    for l in inherited {
        set_cloexec(l.as_raw_fd(), false)?;
    }
    let child = cmd.spawn();
    for l in inherited {
        set_cloexec(l.as_raw_fd(), true)?;
    }
    child
}

fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    let flags = if on {
        FdFlag::FD_CLOEXEC
    } else {
        FdFlag::empty()
    };
    fcntl(fd, FcntlArg::F_SETFD(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// Runs `sluice ARGS` to completion (for `-c`, `-cc`, `-v`...), with `env` added.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = {
        let _guard = spawn_lock();
        cmd.spawn().expect("spawn sluice")
    };
    child.wait_with_output().expect("wait for sluice")
}

/// A running `sluice`, killed (SIGKILL) on drop if still alive.
pub struct Sluice {
    child: Option<Child>,
    dir: TempDir,
    stats_path: PathBuf,
    stderr_path: PathBuf,
    cfg: PathBuf,
}

impl Sluice {
    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The CPU time the process used so far, user and system, in clock ticks (1/100 s on
    /// Linux): fields 14 and 15 of `/proc/PID/stat`, counted after the command name, which
    /// is in parentheses and may hold spaces.
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split(' ').collect();
        // Field 3 (the state) is the first after the name.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// Its temporary directory.
    pub fn dir(&self) -> &TempDir {
        &self.dir
    }

    /// The path of the harness's stats socket.
    pub fn stats_path(&self) -> &Path {
        &self.stats_path
    }

    /// Everything the process wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The configuration file it runs.
    pub fn config_text(&self) -> String {
        std::fs::read_to_string(&self.cfg).unwrap_or_default()
    }

    /// Panics with the process's stderr if it has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.try_wait() {
            panic!(
                "sluice exited early with {status}\nconfig:\n{}\nstderr:\n{}",
                self.config_text(),
                self.stderr()
            );
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Polls the stats socket until `show info` answers with this process's pid.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + STARTUP;
        let want = format!("Pid: {}\n", self.pid());
        loop {
            self.assert_alive();
            if cli_at(&self.stats_path, "show info").is_ok_and(|answer| answer.contains(&want)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sluice did not answer on its stats socket within {STARTUP:?}\nstderr:\n{}",
                self.stderr()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends one CLI line on the harness's stats socket and returns the whole answer.
    pub fn cli(&self, line: &str) -> String {
        cli_at(&self.stats_path, line).expect("stats socket answers")
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.pid() as i32), signal).expect("send signal");
    }

    /// Waits up to `limit` for the process to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits up to [`GENEROUS`] for the process to exit and returns its status.
    pub fn expect_exit(&mut self) -> ExitStatus {
        match self.wait_exit(GENEROUS) {
            Some(status) => status,
            None => panic!(
                "sluice still running after {GENEROUS:?}\nstderr:\n{}",
                self.stderr()
            ),
        }
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `line` on the unix stats socket at `path` and reads the answer to the end (the
/// non-interactive CLI closes after one line).
pub fn cli_at(path: &Path, line: &str) -> io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Connects to the abstract unix socket `abns@name` (HAProxy's form: the name padded with
/// NUL bytes to the end of `sun_path`, all of which are the address), with the harness's
/// I/O timeouts set.
pub fn connect_abstract(name: &str) -> io::Result<UnixStream> {
    use std::os::linux::net::SocketAddrExt;
    let mut padded = name.as_bytes().to_vec();
    padded.resize(107, 0);
    let at = std::os::unix::net::SocketAddr::from_abstract_name(&padded)?;
    let s = UnixStream::connect_addr(&at)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

/// A command's answer on the abstract stats socket `abns@name`.
pub fn cli_abstract(name: &str, line: &str) -> io::Result<String> {
    let mut s = connect_abstract(name)?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer)
}

/// The value of `field` in a `show info` answer.
pub fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(": "))
    })
}

/// Connects to `addr` with the harness's I/O timeouts set.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT))
        .expect("set read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("set write timeout");
    s
}

/// Reads exactly `n` bytes.
pub fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).expect("read the expected bytes");
    buf
}

/// What a read that waited for the peer to close saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// A clean end of stream, after these bytes.
    Eof(Vec<u8>),
    /// A reset (or other error), after these bytes.
    Reset(Vec<u8>),
    /// Still open when the read timeout expired, after these bytes.
    StillOpen(Vec<u8>),
}

impl Closed {
    /// True if the peer closed (cleanly or not).
    pub fn is_closed(&self) -> bool {
        !matches!(self, Closed::StillOpen(_))
    }

    /// The bytes received before the end.
    pub fn data(&self) -> &[u8] {
        match self {
            Closed::Eof(d) | Closed::Reset(d) | Closed::StillOpen(d) => d,
        }
    }
}

/// Reads until the peer closes or `limit` passes without the connection closing.
pub fn read_to_close(s: &mut TcpStream, limit: Duration) -> Closed {
    let deadline = Instant::now() + limit;
    let mut data = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Closed::StillOpen(data);
        }
        s.set_read_timeout(Some(left)).expect("set read timeout");
        match s.read(&mut buf) {
            Ok(0) => return Closed::Eof(data),
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Closed::StillOpen(data);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Closed::Reset(data),
        }
    }
}

/// True if nothing arrives on `s` (and it stays open) for `window`.
pub fn stays_silent(s: &mut TcpStream, window: Duration) -> bool {
    matches!(read_to_close(s, window), Closed::StillOpen(d) if d.is_empty())
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes; returns whether it
/// held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// An in-test TCP server on 127.0.0.1:0 running `handler` on each connection in its own
/// thread. Counts accepted connections. Stops accepting on drop.
pub struct Backend {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Backend {
    /// Starts a server calling `handler` for every connection.
    pub fn start<F>(handler: F) -> Backend
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        Backend::serve(listener, handler)
    }

    /// Serves `handler` on an existing listener.
    pub fn serve<F>(listener: TcpListener, handler: F) -> Backend
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        let addr = listener.local_addr().expect("backend address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Arc::new(handler);
        let (count, stopping) = (Arc::clone(&accepted), Arc::clone(&stop));
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                let handler = Arc::clone(&handler);
                thread::spawn(move || handler(conn));
            }
        });
        Backend {
            addr,
            accepted,
            stop,
        }
    }

    /// Echoes everything back; after the client's end of stream, closes its own side.
    pub fn echo() -> Backend {
        Backend::start(echo_handler)
    }

    /// Sends `name` and closes, to each connection.
    pub fn named(name: &'static str) -> Backend {
        Backend::start(move |mut s| {
            let _ = s.write_all(name.as_bytes());
            let _ = s.shutdown(Shutdown::Both);
        })
    }

    /// Accepts and keeps each connection open, silent, until the peer closes.
    pub fn silent() -> Backend {
        Backend::start(|mut s| {
            let mut buf = [0u8; 4096];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// The echo server's connection handler.
pub fn echo_handler(mut s: TcpStream) {
    let mut buf = vec![0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// A `defaults` section for `mode tcp` with generous timeouts, to put before proxies.
pub const TCP_DEFAULTS: &str = "\
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
";
