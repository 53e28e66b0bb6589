//! Serving the CLI on a `stats socket`: reading command lines and writing answers.
//!
//! A connection reads one line at a time, bounded by [`MAX_LINE`] so a client cannot make the
//! process buffer without limit, and is closed after `stats timeout` of inactivity (10 s by
//! default, as in HAProxy). Each line runs through [`crate::commands::execute_line`]. On a
//! socket with `expose-fd listeners`, the hidden `_getsocks` command hands the process's
//! listening sockets to a new process started with `-x` ([`Exposed`]).

use crate::commands::{self, CliMode, CliState, Flow};
use sluice_config::global::CliLevel;
use sluice_net::fd_pass;
use sluice_net::listen::{BoundListener, Listener};
use sluice_runtime::counters::SessionMark;
use sluice_runtime::process::{ListenState, Process};
use sluice_runtime::streams::Origin;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// HAProxy's default `stats timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The queue length of a stats socket's pending connections.
pub const STATS_SOCKET_BACKLOG: u32 = 10;

/// The longest command line accepted (HAProxy bounds it by `tune.bufsize`).
pub const MAX_LINE: usize = 16384;

/// The listening sockets a process lets a successor take (`expose-fd listeners`), by key.
#[derive(Debug, Default)]
pub struct Exposed {
    listeners: Mutex<Vec<(String, BoundListener)>>,
}

impl Exposed {
    /// Exposes `listeners` (key, a handle on the socket).
    pub fn new(listeners: Vec<(String, BoundListener)>) -> Exposed {
        Exposed {
            listeners: Mutex::new(listeners),
        }
    }

    /// Closes the handles: a stopping process must not keep a socket nobody accepts on.
    pub fn clear(&self) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Sends the sockets on `socket` (`_getsocks`).
    fn send(&self, socket: OwnedFd) -> std::io::Result<()> {
        // The sending is short and the peer is waiting for it: done in blocking mode on a
        // handle of its own, then the connection closes.
        let socket = std::os::unix::net::UnixStream::from(socket);
        socket.set_nonblocking(false)?;
        socket.set_write_timeout(Some(DEFAULT_TIMEOUT))?;
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        let pairs: Vec<_> = listeners
            .iter()
            .map(|(key, l)| (key.clone(), l.as_fd()))
            .collect();
        fd_pass::send_listeners(socket.as_fd(), &pairs)
    }
}

/// How one CLI socket behaves.
#[derive(Clone, Debug)]
pub struct CliOptions {
    /// Its access level.
    pub level: CliLevel,
    /// Idle connections are closed after this.
    pub idle_timeout: Duration,
    /// Set on a socket with `expose-fd listeners`.
    pub exposed: Option<Arc<Exposed>>,
    /// A master's way into its worker: it stays open while the worker stops, so that the
    /// master can still reach an old worker finishing its sessions.
    pub stays_while_stopping: bool,
}

/// Accepts CLI connections on `listener` until the process stops.
pub async fn serve(process: Arc<Process>, mut listener: Listener, options: CliOptions) {
    let CliOptions {
        level,
        idle_timeout,
        exposed,
        stays_while_stopping,
    } = options;
    let mut state = process.watch_listen_state();
    loop {
        let now = *state.borrow_and_update();
        if now == ListenState::Stopped && !stays_while_stopping {
            return;
        }
        // An abstract socket is closed while the process is paused, so that a process
        // replacing this one may bind its name, and bound again when it resumes.
        if listener.closes_on_pause() {
            let changed = match now {
                ListenState::Paused => listener.stop_listening(),
                _ => listener.listen_again(STATS_SOCKET_BACKLOG),
            };
            if let Err(err) = changed {
                eprintln!("[WARNING] cannot bind the stats socket again: {err}");
            }
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        if let Ok((stream, endpoints)) = accepted {
            let process = Arc::clone(&process);
            // `_getsocks` needs the connection itself to carry descriptors: a second handle.
            let exposure = match (&exposed, &stream) {
                (Some(exposed), sluice_net::stream::Stream::Unix(unix)) => unix
                    .as_fd()
                    .try_clone_to_owned()
                    .ok()
                    .map(|fd| (Arc::clone(exposed), fd)),
                _ => None,
            };
            tokio::spawn(async move {
                let _counted = SessionMark::open(&process.cli_connections);
                // HAProxy lists CLI connections among its streams; so does `show sess`.
                let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                let registered =
                    process
                        .streams
                        .register(Origin::Cli, endpoints.client, endpoints.local, fd);
                registered
                    .scope(async {
                        // A client that goes away mid-answer is no error of ours.
                        let _ = session(&process, stream, level, idle_timeout, exposure).await;
                    })
                    .await;
            });
        }
    }
}

/// Runs one CLI connection over any byte stream; `exposure` (the exposed sockets and a handle
/// on the connection) allows `_getsocks`.
pub async fn session<S>(
    process: &Process,
    stream: S,
    level: CliLevel,
    idle_timeout: Duration,
    mut exposure: Option<(Arc<Exposed>, OwnedFd)>,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (reader, mut writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(reader);
    let mut state = CliState {
        mode: CliMode::NonInteractive,
        level,
        payload: None,
        expert: false,
        experimental: false,
    };
    let mut line = Vec::new();
    let mut out = String::new();
    loop {
        line.clear();
        let read = tokio::time::timeout(idle_timeout, read_line(&mut reader, &mut line)).await;
        let Ok(read) = read else {
            break;
        };
        match read? {
            LineRead::Eof if line.is_empty() => break,
            LineRead::TooLong => {
                writer.write_all(b"Command line too long\n\n").await?;
                break;
            }
            LineRead::Line | LineRead::Eof => {}
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        if text.trim() == fd_pass::GETSOCKS
            && let Some((exposed, socket)) = exposure.take()
        {
            writer.flush().await?;
            return exposed.send(socket);
        }
        // A line ending with `<<` is followed by a payload, up to an empty line.
        let text = match payload_command(&text) {
            Some(command) => {
                let Some(payload) =
                    read_payload(&mut reader, &mut writer, &state, idle_timeout).await?
                else {
                    writer.write_all(b"Payload too long\n\n").await?;
                    break;
                };
                state.payload = Some(payload);
                command.to_string()
            }
            None => text,
        };
        out.clear();
        let flow = commands::execute_line(process, &text, &mut state, &mut out);
        state.payload = None;
        if flow == Flow::Continue && state.mode == CliMode::Prompt {
            out.push_str("> ");
        }
        writer.write_all(out.as_bytes()).await?;
        writer.flush().await?;
        match flow {
            Flow::Close => break,
            Flow::Follow { ring, next } => {
                follow(process, ring, next, &mut reader, &mut writer).await?;
                break;
            }
            Flow::Continue => {}
        }
    }
    writer.shutdown().await
}

/// `show events NAME -w`: sends each new event of the ring as it arrives, until the client
/// sends anything ("any key to stop") or goes away. A reader too slow for the ring misses the
/// events evicted meanwhile; the writer never waits for it.
async fn follow<R, W>(
    process: &Process,
    ring: usize,
    mut next: u64,
    reader: &mut R,
    writer: &mut W,
) -> std::io::Result<()>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(ring) = process.rings.get(ring) else {
        return Ok(());
    };
    let mut changed = ring.watch();
    let mut events = Vec::new();
    loop {
        events.clear();
        next = ring.read_from(next, &mut events);
        if !events.is_empty() {
            writer.write_all(&events).await?;
            writer.flush().await?;
        }
        tokio::select! {
            woke = changed.changed() => if woke.is_err() { return Ok(()) },
            _ = reader.fill_buf() => return Ok(()),
        }
    }
}

/// The longest payload accepted after `<<`.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// The command of a line that announces a payload (`add map m <<`), without the `<<`.
fn payload_command(line: &str) -> Option<&str> {
    let trimmed = line.trim_end_matches([' ', '\t', '\r']);
    let command = trimmed.strip_suffix("<<")?;
    (command.is_empty() || command.ends_with([' ', '\t'])).then_some(command)
}

/// Reads payload lines up to an empty line or the end of the input; `None` when they pass
/// [`MAX_PAYLOAD`]. In prompt mode each line is invited by `+ `, as in HAProxy.
async fn read_payload<R, W>(
    reader: &mut R,
    writer: &mut W,
    state: &CliState,
    idle_timeout: Duration,
) -> std::io::Result<Option<String>>
where
    R: AsyncBufReadExt + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut payload = String::new();
    let mut line = Vec::new();
    loop {
        if state.mode == CliMode::Prompt {
            writer.write_all(b"+ ").await?;
            writer.flush().await?;
        }
        line.clear();
        let Ok(read) = tokio::time::timeout(idle_timeout, read_line(reader, &mut line)).await
        else {
            return Ok(Some(payload));
        };
        let read = read?;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        if matches!(read, LineRead::TooLong) || payload.len() + text.len() >= MAX_PAYLOAD {
            return Ok(None);
        }
        if text.is_empty() {
            return Ok(Some(payload));
        }
        payload.push_str(text);
        payload.push('\n');
        if matches!(read, LineRead::Eof) {
            return Ok(Some(payload));
        }
    }
}

enum LineRead {
    Line,
    Eof,
    TooLong,
}

/// Reads up to and excluding the next `\n`, refusing lines over [`MAX_LINE`].
async fn read_line<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(LineRead::Eof);
        }
        if let Some(pos) = available.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&available[..pos]);
            reader.consume(pos + 1);
            return Ok(if line.len() > MAX_LINE {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        let n = available.len();
        line.extend_from_slice(available);
        reader.consume(n);
        if line.len() > MAX_LINE {
            return Ok(LineRead::TooLong);
        }
    }
}
