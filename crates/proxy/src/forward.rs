//! Relaying bytes both ways between a client and a server, with half-close and timeouts.
//!
//! Each direction is a mover: read, write it out, and once the reader has seen an end of
//! stream, pass it on with a shutdown of the writer (a half-close), so a client that sends its
//! request and then `shutdown(SHUT_WR)` still gets the whole answer. A direction either copies
//! through a buffer it holds only while bytes are in flight (`LazyPump`: an idle direction
//! costs no buffer) or splices through a kernel pipe (`SplicePump`, `option splice-*`). Both
//! directions run in one task, polled together by [`forward_streams`], which also enforces
//! the inactivity timeouts of configuration.txt §4.2: `timeout client`/`server` (or
//! `tunnel`), and `client-fin`/`server-fin` once a direction is closed. Buffers are
//! fixed-size (`tune.bufsize`, 16 KiB by default): a slow reader stops the other side's reads
//! instead of growing memory.

use crate::http::buffer::{give_buffer, take_buffer};
use crate::live_bytes::LiveBytes;
use sluice_net::splice::Pipe;
use sluice_net::stream::Stream;
use sluice_runtime::clock;
use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
#[cfg(test)]
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The inactivity limits of one session; `None` means no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdleTimeouts {
    /// Client side while both directions are open (`timeout client`, or `tunnel`).
    pub client: Option<Duration>,
    /// Server side while both directions are open (`timeout server`, or `tunnel`).
    pub server: Option<Duration>,
    /// Client side once a direction is closed (`timeout client-fin`), if set.
    pub client_fin: Option<Duration>,
    /// Server side once a direction is closed (`timeout server-fin`), if set.
    pub server_fin: Option<Duration>,
}

/// Which end of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The client's connection.
    Client,
    /// The server's connection.
    Server,
}

/// Why forwarding stopped.
#[derive(Debug)]
pub enum Finish {
    /// Both directions reached their end of stream and were passed on.
    Closed,
    /// No activity on that end for its timeout.
    Timeout(End),
    /// A read or write on that end failed (reset, broken pipe...).
    Error(End, io::Error),
}

/// What happened during forwarding.
#[derive(Debug)]
pub struct Outcome {
    /// Why it stopped.
    pub finish: Finish,
    /// Bytes read from the client and written to the server.
    pub client_to_server: u64,
    /// Bytes read from the server and written to the client.
    pub server_to_client: u64,
}

/// Writes all of `bytes` within `limit` (`None`: no limit, as with an unset timeout). False
/// when the peer failed or was too slow; the stream is then broken and must be closed, since
/// an unknown part of `bytes` may have been written.
pub async fn write_within(stream: &mut Stream, bytes: &[u8], limit: Option<Duration>) -> bool {
    use tokio::io::AsyncWriteExt;
    match limit {
        Some(limit) => matches!(
            tokio::time::timeout(limit, stream.write_all(bytes)).await,
            Ok(Ok(()))
        ),
        None => stream.write_all(bytes).await.is_ok(),
    }
}

/// One direction over any reader and writer, with a buffer held for the whole session: the
/// in-memory mover the tests drive the relay's timeouts and half-closes with (tokio's
/// `duplex` pipes have no readiness to wait on without a buffer, unlike sockets, which
/// [`LazyPump`] serves).
#[cfg(test)]
struct Pump {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The reader reported end of stream.
    eof: bool,
    /// The end of stream was passed on to the writer.
    shut: bool,
    copied: u64,
}

/// Activity seen during one poll of a pump.
#[derive(Default)]
struct Activity {
    read: bool,
    wrote: bool,
}

impl Activity {
    /// What two polls in a row saw.
    fn and(self, next: Activity) -> Activity {
        Activity {
            read: self.read || next.read,
            wrote: self.wrote || next.wrote,
        }
    }
}

/// A failed pump operation, by the side it failed on.
enum PumpError {
    Read(io::Error),
    Write(io::Error),
}

/// One direction of a session: moves bytes from a reader to a writer.
trait Mover<R: ?Sized, W: ?Sized> {
    /// Moves as many bytes as possible without blocking; returns what moved.
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Result<Activity, PumpError>;
    /// The end of stream was passed on to the writer.
    fn shut(&self) -> bool;
    /// Bytes moved so far.
    fn copied(&self) -> u64;
}

#[cfg(test)]
impl<R, W> Mover<R, W> for Pump
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Result<Activity, PumpError> {
        Pump::poll_move(self, cx, Pin::new(reader), Pin::new(writer))
    }

    fn shut(&self) -> bool {
        self.shut
    }

    fn copied(&self) -> u64 {
        self.copied
    }
}

/// One direction through a kernel pipe (`splice(2)`): the bytes never enter user space.
struct SplicePump {
    pipe: Pipe,
    eof: bool,
    shut: bool,
    copied: u64,
}

impl SplicePump {
    fn new(pipe: Pipe) -> Self {
        SplicePump {
            pipe,
            eof: false,
            shut: false,
            copied: 0,
        }
    }
}

impl Mover<Stream, Stream> for SplicePump {
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut Stream,
        writer: &mut Stream,
    ) -> Result<Activity, PumpError> {
        let mut activity = Activity::default();
        loop {
            if self.pipe.held() > 0 {
                match self.pipe.poll_drain(cx, writer) {
                    Poll::Ready(Ok(n)) => {
                        self.copied += n as u64;
                        activity.wrote = true;
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Err(PumpError::Write(err)),
                    Poll::Pending => return Ok(activity),
                }
            }
            if !self.eof {
                match self.pipe.poll_fill(cx, reader, usize::MAX) {
                    Poll::Ready(Ok(0)) => self.eof = true,
                    Poll::Ready(Ok(_)) => activity.read = true,
                    Poll::Ready(Err(err)) => return Err(PumpError::Read(err)),
                    Poll::Pending => return Ok(activity),
                }
                continue;
            }
            if !self.shut {
                match Pin::new(&mut *writer).poll_shutdown(cx) {
                    Poll::Ready(_) => self.shut = true,
                    Poll::Pending => return Ok(activity),
                }
            }
            return Ok(activity);
        }
    }

    fn shut(&self) -> bool {
        self.shut
    }

    fn copied(&self) -> u64 {
        self.copied
    }
}

/// How one direction of a [`forward_streams`] session moves its bytes.
pub enum Direction {
    /// Through a user-space buffer of this many bytes.
    Copy(usize),
    /// Through a kernel pipe.
    Splice(Pipe),
    /// Through a buffer of `size` bytes until the direction streams fast, then through a
    /// pipe of `pipesize` from `budget` if one is left (`option splice-auto`).
    SpliceWhenStreaming {
        /// The buffer's size.
        size: usize,
        /// `tune.pipesize`.
        pipesize: Option<usize>,
        /// The process's pipes (`maxpipes`).
        budget: std::sync::Arc<sluice_net::splice::PipeBudget>,
    },
}

/// Reads in a row that filled the whole buffer after which a direction counts as a fast
/// streamer, worth splicing (`option splice-auto`, HAProxy's heuristic: a buffer filled by
/// every read means the sender outpaces what one buffer per wake-up can carry).
const FAST_STREAMER_READS: u32 = 3;

/// One direction between two sockets that holds a buffer only while bytes are in flight: it
/// waits for the reader's readiness without one, takes one from the thread's pool to read,
/// and gives it back once everything read was written. An idle tunnel (a quiet WebSocket, a
/// TCP session between exchanges) then costs no buffer, as in HAProxy.
struct LazyPump {
    buf: Vec<u8>,
    size: usize,
    start: usize,
    end: usize,
    eof: bool,
    shut: bool,
    copied: u64,
    /// Reads in a row that filled the whole buffer.
    full_reads: u32,
    /// Stop moving as soon as the direction may go on through a pipe (`splice-auto`): the
    /// caller switches, then polls the pipe.
    stop_when_streaming: bool,
}

impl LazyPump {
    fn new(size: usize) -> Self {
        LazyPump {
            buf: Vec::new(),
            size,
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            copied: 0,
            full_reads: 0,
            stop_when_streaming: false,
        }
    }

    /// A pump that stops as soon as the direction may go on through a pipe.
    fn streaming_watch(size: usize) -> Self {
        let mut pump = LazyPump::new(size);
        pump.stop_when_streaming = true;
        pump
    }

    /// True when the direction streams fast and holds nothing unwritten: it may go on
    /// through a pipe from here without reordering a byte.
    fn may_switch_to_splice(&self) -> bool {
        self.full_reads >= FAST_STREAMER_READS && self.start >= self.end && !self.eof
    }

    fn release(&mut self) {
        self.start = 0;
        self.end = 0;
        give_buffer(std::mem::take(&mut self.buf));
    }
}

impl Drop for LazyPump {
    fn drop(&mut self) {
        give_buffer(std::mem::take(&mut self.buf));
    }
}

impl Mover<Stream, Stream> for LazyPump {
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut Stream,
        writer: &mut Stream,
    ) -> Result<Activity, PumpError> {
        self.move_until_blocked(cx, reader, writer)
    }

    fn shut(&self) -> bool {
        self.shut
    }

    fn copied(&self) -> u64 {
        self.copied
    }
}

impl LazyPump {
    /// Copies until a read or a write would block (or the stream ends).
    fn move_until_blocked(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut Stream,
        writer: &mut Stream,
    ) -> Result<Activity, PumpError> {
        let mut activity = Activity::default();
        loop {
            if self.start < self.end {
                // Each read leaves at once, as HAProxy writes it: holding a full read for the
                // next one (MSG_MORE) made fewer segments but cost more CPU per byte, on both
                // sides of loopback (BENCHMARKS.md, thirtieth session).
                match Pin::new(&mut *writer).poll_write(cx, &self.buf[self.start..self.end]) {
                    Poll::Ready(Ok(0)) => {
                        return Err(PumpError::Write(io::ErrorKind::WriteZero.into()));
                    }
                    Poll::Ready(Ok(n)) => {
                        self.start += n;
                        self.copied += n as u64;
                        activity.wrote = true;
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Err(PumpError::Write(err)),
                    Poll::Pending => return Ok(activity),
                }
            }
            if self.stop_when_streaming && self.may_switch_to_splice() {
                return Ok(activity);
            }
            if !self.eof {
                // Wait without a buffer; take one only when there is something to read. While
                // data keeps coming the buffer is kept (no pool round trip per read).
                match reader.poll_read_ready(cx) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(err)) => return Err(PumpError::Read(err)),
                    Poll::Pending => {
                        self.release();
                        return Ok(activity);
                    }
                }
                if self.buf.capacity() == 0 {
                    self.buf = take_buffer(self.size);
                }
                // Everything read before was written: the next read starts the buffer over,
                // into its room as it is (zeroing it first would write 16 KiB per read, and a
                // pooled buffer is taken for every read that follows a wait).
                self.buf.clear();
                let read = sluice_net::fd::poll_read_appending(
                    Pin::new(&mut *reader),
                    cx,
                    &mut self.buf,
                    self.size,
                );
                match read {
                    Poll::Ready(Ok(n)) => {
                        self.start = 0;
                        self.end = n;
                        self.full_reads = if n == self.size {
                            self.full_reads.saturating_add(1)
                        } else {
                            0
                        };
                        if n == 0 {
                            self.eof = true;
                            self.release();
                        } else {
                            activity.read = true;
                        }
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Err(PumpError::Read(err)),
                    Poll::Pending => {
                        // The readiness was stale: wait again, without the buffer.
                        self.release();
                        return Ok(activity);
                    }
                }
            }
            if !self.shut {
                match Pin::new(&mut *writer).poll_shutdown(cx) {
                    Poll::Ready(_) => self.shut = true,
                    Poll::Pending => return Ok(activity),
                }
            }
            return Ok(activity);
        }
    }
}

/// A direction of a stream-to-stream session, either way.
enum StreamMover {
    Copy(LazyPump),
    Splice(SplicePump),
    /// Copying until the direction streams fast, then splicing (`option splice-auto`).
    Auto(Box<AutoPump>),
}

/// `option splice-auto`: copies through a buffer, and once the direction streams fast (and
/// all it read was written) goes on through a pipe, if the budget has one left.
struct AutoPump {
    copy: LazyPump,
    splice: Option<SplicePump>,
    pipesize: Option<usize>,
    budget: std::sync::Arc<sluice_net::splice::PipeBudget>,
}

impl AutoPump {
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut Stream,
        writer: &mut Stream,
    ) -> Result<Activity, PumpError> {
        if let Some(splice) = &mut self.splice {
            return splice.poll_move(cx, reader, writer);
        }
        let copied = self.copy.poll_move(cx, reader, writer)?;
        if !(self.copy.stop_when_streaming && self.copy.may_switch_to_splice()) {
            return Ok(copied);
        }
        let Some(pipe) = Pipe::new(self.pipesize, &self.budget) else {
            // No pipe left (`maxpipes`): this direction copies to its end, polled on until
            // it waits.
            self.copy.stop_when_streaming = false;
            let more = self.copy.poll_move(cx, reader, writer)?;
            return Ok(copied.and(more));
        };
        self.copy.release();
        let mut splice = SplicePump::new(pipe);
        splice.copied = self.copy.copied;
        // Go on at once: the reader may have more already, and the pipe must register its
        // own interest before this poll returns.
        let spliced = splice.poll_move(cx, reader, writer)?;
        self.splice = Some(splice);
        Ok(copied.and(spliced))
    }

    fn shut(&self) -> bool {
        self.splice.as_ref().map_or(self.copy.shut, |s| s.shut)
    }

    fn copied(&self) -> u64 {
        self.splice.as_ref().map_or(self.copy.copied, |s| s.copied)
    }
}

impl StreamMover {
    fn new(direction: Direction) -> Self {
        match direction {
            Direction::Copy(size) => StreamMover::Copy(LazyPump::new(size)),
            Direction::Splice(pipe) => StreamMover::Splice(SplicePump::new(pipe)),
            Direction::SpliceWhenStreaming {
                size,
                pipesize,
                budget,
            } => StreamMover::Auto(Box::new(AutoPump {
                copy: LazyPump::streaming_watch(size),
                splice: None,
                pipesize,
                budget,
            })),
        }
    }
}

impl Mover<Stream, Stream> for StreamMover {
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut Stream,
        writer: &mut Stream,
    ) -> Result<Activity, PumpError> {
        match self {
            StreamMover::Copy(p) => p.poll_move(cx, reader, writer),
            StreamMover::Splice(p) => p.poll_move(cx, reader, writer),
            StreamMover::Auto(p) => p.poll_move(cx, reader, writer),
        }
    }

    fn shut(&self) -> bool {
        match self {
            StreamMover::Copy(p) => p.shut,
            StreamMover::Splice(p) => p.shut,
            StreamMover::Auto(p) => p.shut(),
        }
    }

    fn copied(&self) -> u64 {
        match self {
            StreamMover::Copy(p) => p.copied,
            StreamMover::Splice(p) => p.copied,
            StreamMover::Auto(p) => p.copied(),
        }
    }
}

#[cfg(test)]
impl Pump {
    fn new(size: usize) -> Self {
        Pump {
            buf: vec![0; size].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            copied: 0,
        }
    }

    /// Moves as many bytes as possible without blocking; returns what moved.
    fn poll_move<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
    ) -> Result<Activity, PumpError>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        let mut activity = Activity::default();
        loop {
            if self.start < self.end {
                match writer
                    .as_mut()
                    .poll_write(cx, &self.buf[self.start..self.end])
                {
                    Poll::Ready(Ok(0)) => {
                        return Err(PumpError::Write(io::ErrorKind::WriteZero.into()));
                    }
                    Poll::Ready(Ok(n)) => {
                        self.start += n;
                        self.copied += n as u64;
                        activity.wrote = true;
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Err(PumpError::Write(err)),
                    Poll::Pending => return Ok(activity),
                }
            }
            if !self.eof {
                let mut rb = ReadBuf::new(&mut self.buf);
                match reader.as_mut().poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        self.start = 0;
                        self.end = n;
                        if n == 0 {
                            self.eof = true;
                        } else {
                            activity.read = true;
                        }
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Err(PumpError::Read(err)),
                    Poll::Pending => return Ok(activity),
                }
            }
            if !self.shut {
                match writer.as_mut().poll_shutdown(cx) {
                    // The peer may already be gone (ENOTCONN): the end of stream is passed on
                    // either way.
                    Poll::Ready(_) => self.shut = true,
                    Poll::Pending => return Ok(activity),
                }
            }
            return Ok(activity);
        }
    }
}

/// Relays `client` ⇄ `server` until both directions are closed, a timeout fires or an error
/// occurs, with buffers of `buffer_size` bytes per direction (tests only; the data path uses
/// [`forward_streams`]).
#[cfg(test)]
async fn forward<C, S>(
    client: &mut C,
    server: &mut S,
    timeouts: IdleTimeouts,
    buffer_size: usize,
) -> Outcome
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    relay(
        client,
        server,
        (Pump::new(buffer_size), Pump::new(buffer_size)),
        timeouts,
        (),
    )
    .await
}

/// What a relay reports as it goes: the bytes moved each way so far, updated each time it
/// waits and at its end, so that a caller whose relay was dropped (a killed session) still
/// knows them; and, under `option contstats`, the statistics, counted along.
#[derive(Debug, Default)]
pub struct Progress<'a> {
    moved: Cell<(u64, u64)>,
    live: Option<&'a LiveBytes<'a>>,
}

impl<'a> Progress<'a> {
    /// Reports to `live` as well, if any.
    pub fn new(live: Option<&'a LiveBytes<'a>>) -> Self {
        Progress {
            moved: Cell::new((0, 0)),
            live,
        }
    }

    /// The bytes moved so far: client to server, server to client.
    pub fn moved(&self) -> (u64, u64) {
        self.moved.get()
    }
}

/// Where a relay reports the running totals of both directions each time it waits, and once
/// more at its end.
trait Report {
    /// Takes the totals `moved`; `reported` holds what the statistics already counted.
    fn report(&self, reported: &mut (u64, u64), moved: (u64, u64));
}

impl Report for &Progress<'_> {
    fn report(&self, reported: &mut (u64, u64), moved: (u64, u64)) {
        self.moved.set(moved);
        if let Some(live) = self.live {
            live.catch_up(reported, moved);
        }
    }
}

/// Reporting nothing, for the tests' relays, which run on any thread.
#[cfg(test)]
impl Report for () {
    fn report(&self, _: &mut (u64, u64), _: (u64, u64)) {}
}

/// Relays `client` ⇄ `server` until both directions are closed, a timeout fires or an error
/// occurs, each direction copying or splicing as given
/// (`option splice-request` is the client-to-server direction, `splice-response` the other).
/// What moved is reported to `progress` each time the relay waits, and at its end.
///
/// Not an `async fn`, nor is [`relay`]: each would keep a copy of its arguments beside the
/// copy its body works on (about 360 bytes more in every TCP session and tunnel, for as
/// long as it lasts).
pub fn forward_streams<'a>(
    client: &'a mut Stream,
    server: &'a mut Stream,
    timeouts: IdleTimeouts,
    (up, down): (Direction, Direction),
    progress: &'a Progress<'a>,
) -> impl Future<Output = Outcome> + 'a {
    relay(
        client,
        server,
        (StreamMover::new(up), StreamMover::new(down)),
        timeouts,
        progress,
    )
}

#[allow(clippy::manual_async_fn)]
fn relay<'a, C, S, U, D, P>(
    client: &'a mut C,
    server: &'a mut S,
    (mut up, mut down): (U, D),
    timeouts: IdleTimeouts,
    progress: P,
) -> impl Future<Output = Outcome> + 'a
where
    C: ?Sized,
    S: ?Sized,
    U: Mover<C, S> + 'a,
    D: Mover<S, C> + 'a,
    P: Report + 'a,
{
    // An `async move` block, not an `async fn`: see `forward_streams`.
    async move {
        let now = clock::now();
        let mut client_seen = now;
        let mut server_seen = now;
        let mut timer: Pin<Box<Sleep>> = Box::pin(tokio::time::sleep_until(now));
        let mut armed_for: Option<Instant> = None;
        let mut reported = (0, 0);

        let finish = poll_fn(|cx| {
            loop {
                match up.poll_move(cx, &mut *client, &mut *server) {
                    Ok(a) => {
                        if a.read {
                            client_seen = clock::now();
                        }
                        if a.wrote {
                            server_seen = clock::now();
                        }
                    }
                    Err(PumpError::Read(e)) => return Poll::Ready(Finish::Error(End::Client, e)),
                    Err(PumpError::Write(e)) => return Poll::Ready(Finish::Error(End::Server, e)),
                }
                match down.poll_move(cx, &mut *server, &mut *client) {
                    Ok(a) => {
                        if a.read {
                            server_seen = clock::now();
                        }
                        if a.wrote {
                            client_seen = clock::now();
                        }
                    }
                    Err(PumpError::Read(e)) => return Poll::Ready(Finish::Error(End::Server, e)),
                    Err(PumpError::Write(e)) => return Poll::Ready(Finish::Error(End::Client, e)),
                }
                if up.shut() && down.shut() {
                    return Poll::Ready(Finish::Closed);
                }

                // `client-fin` applies once the server's end of stream was passed on to the client
                // (only the client's close is awaited there), `server-fin` once the client's was
                // passed on to the server, as HAProxy arms them.
                let client_limit = pick_limit(timeouts.client, timeouts.client_fin, down.shut());
                let server_limit = pick_limit(timeouts.server, timeouts.server_fin, up.shut());
                let client_deadline = client_limit.map(|d| client_seen + d);
                let server_deadline = server_limit.map(|d| server_seen + d);
                let now = clock::now();
                if client_deadline.is_some_and(|d| d <= now) {
                    return Poll::Ready(Finish::Timeout(End::Client));
                }
                if server_deadline.is_some_and(|d| d <= now) {
                    return Poll::Ready(Finish::Timeout(End::Server));
                }
                let next = match (client_deadline, server_deadline) {
                    (Some(c), Some(s)) => Some(c.min(s)),
                    (c, s) => c.or(s),
                };
                // About to wait: a good time to report what moved.
                progress.report(&mut reported, (up.copied(), down.copied()));
                let Some(next) = next else {
                    return Poll::Pending;
                };
                // Re-arming a timer costs a trip through the timer wheel, and traffic pushes
                // the deadline back at every exchange: the timer is set again only for an
                // earlier deadline (a `client-fin` or `server-fin` taking over). One armed
                // earlier than the deadline fires, and the loop then sets it for the
                // deadline as it stands, as HAProxy requeues a task only once it wakes.
                if armed_for.is_none_or(|armed| next < armed) {
                    timer.as_mut().reset(next);
                    armed_for = Some(next);
                }
                match timer.as_mut().poll(cx) {
                    // Fired: the deadline passed (the loop reports the timeout), or traffic
                    // pushed it back since the timer was set (the loop sets it again).
                    Poll::Ready(()) => {
                        armed_for = None;
                        continue;
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;

        let moved = (up.copied(), down.copied());
        progress.report(&mut reported, moved);
        Outcome {
            finish,
            client_to_server: moved.0,
            server_to_client: moved.1,
        }
    }
}

fn pick_limit(
    normal: Option<Duration>,
    fin: Option<Duration>,
    half_closed: bool,
) -> Option<Duration> {
    if half_closed { fin.or(normal) } else { normal }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    #[tokio::test]
    async fn relays_both_ways_and_passes_half_close_on() {
        let (mut client_app, mut client_proxy) = duplex(64);
        let (mut server_proxy, mut server_app) = duplex(64);
        let relay = tokio::spawn(async move {
            forward(
                &mut client_proxy,
                &mut server_proxy,
                IdleTimeouts::default(),
                8,
            )
            .await
        });
        client_app.write_all(b"hello, server").await.unwrap();
        client_app.shutdown().await.unwrap();
        let mut got = Vec::new();
        server_app.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello, server");
        // The client half-closed; the answer still reaches it.
        server_app.write_all(b"hi back").await.unwrap();
        server_app.shutdown().await.unwrap();
        let mut answer = Vec::new();
        client_app.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"hi back");
        let outcome = relay.await.unwrap();
        assert!(
            matches!(outcome.finish, Finish::Closed),
            "{:?}",
            outcome.finish
        );
        assert_eq!(
            (outcome.client_to_server, outcome.server_to_client),
            (13, 7)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn client_inactivity_times_out() {
        let (_client_app, mut client_proxy) = duplex(64);
        let (mut server_proxy, _server_app) = duplex(64);
        let timeouts = IdleTimeouts {
            client: Some(Duration::from_secs(5)),
            server: Some(Duration::from_secs(30)),
            ..IdleTimeouts::default()
        };
        let start = Instant::now();
        let outcome = forward(&mut client_proxy, &mut server_proxy, timeouts, 8).await;
        assert!(matches!(outcome.finish, Finish::Timeout(End::Client)));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    /// Relays under 5 s idle timeouts, a byte from the client after each of `pauses` (in
    /// seconds), the relay still going after each; returns when the relay timed out.
    async fn timed_out_after(pauses: &[u64]) -> Duration {
        let (mut client_app, mut client_proxy) = duplex(64);
        let (mut server_proxy, mut server_app) = duplex(64);
        let timeouts = IdleTimeouts {
            client: Some(Duration::from_secs(5)),
            server: Some(Duration::from_secs(5)),
            ..IdleTimeouts::default()
        };
        let start = Instant::now();
        let relay = tokio::spawn(async move {
            forward(&mut client_proxy, &mut server_proxy, timeouts, 8).await
        });
        let mut one = [0u8; 1];
        for &pause in pauses {
            tokio::time::sleep(Duration::from_secs(pause)).await;
            client_app.write_all(b"x").await.unwrap();
            server_app.read_exact(&mut one).await.unwrap();
            assert!(!relay.is_finished(), "ended at {:?}", start.elapsed());
        }
        let outcome = relay.await.unwrap();
        assert!(matches!(outcome.finish, Finish::Timeout(_)));
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn activity_postpones_the_timeout() {
        assert_eq!(timed_out_after(&[4]).await, Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn steady_traffic_keeps_the_relay_and_silence_ends_it_one_timeout_after() {
        // The timer is not set again at each exchange: it fires at the deadline it was set
        // for, finds traffic pushed it back, and waits again for the rest.
        assert_eq!(timed_out_after(&[3; 10]).await, Duration::from_secs(35));
    }

    #[tokio::test(start_paused = true)]
    async fn client_fin_applies_once_the_server_end_reached_the_client() {
        let (_client_app, mut client_proxy) = duplex(64);
        let (mut server_proxy, mut server_app) = duplex(64);
        let timeouts = IdleTimeouts {
            client: Some(Duration::from_secs(60)),
            server: Some(Duration::from_secs(60)),
            client_fin: Some(Duration::from_secs(2)),
            server_fin: None,
        };
        let start = Instant::now();
        let relay = tokio::spawn(async move {
            forward(&mut client_proxy, &mut server_proxy, timeouts, 8).await
        });
        server_app.shutdown().await.unwrap();
        let outcome = relay.await.unwrap();
        assert!(matches!(outcome.finish, Finish::Timeout(End::Client)));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn client_fin_does_not_apply_when_the_client_half_closed() {
        let (mut client_app, mut client_proxy) = duplex(64);
        let (mut server_proxy, _server_app) = duplex(64);
        let timeouts = IdleTimeouts {
            client: Some(Duration::from_secs(60)),
            server: Some(Duration::from_secs(30)),
            client_fin: Some(Duration::from_secs(2)),
            server_fin: None,
        };
        let start = Instant::now();
        let relay = tokio::spawn(async move {
            forward(&mut client_proxy, &mut server_proxy, timeouts, 8).await
        });
        client_app.shutdown().await.unwrap();
        let outcome = relay.await.unwrap();
        // Only the server is awaited now, under its own timeout.
        assert!(matches!(outcome.finish, Finish::Timeout(End::Server)));
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn bytes_a_full_read_brings_leave_before_the_pump_waits() {
        // A read that fills the buffer is followed by nothing here: its bytes must be on their
        // way once the pump waits, not held for a write that never comes (the kernel's
        // corking limit is 200 ms).
        fn loopback_pair() -> (std::net::TcpStream, Stream) {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let app = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (proxy_side, _) = listener.accept().unwrap();
            proxy_side.set_nonblocking(true).unwrap();
            let proxy_side = Stream::Tcp(tokio::net::TcpStream::from_std(proxy_side).unwrap());
            proxy_side
                .configure(sluice_net::stream::StreamOptions::default())
                .unwrap();
            (app, proxy_side)
        }
        const SIZE: usize = 4096;
        let (mut client_app, mut client_proxy) = loopback_pair();
        let (server_app, mut server_proxy) = loopback_pair();
        // On loopback the bytes are in the proxy side's queue once the write returns.
        std::io::Write::write_all(&mut client_app, &[7u8; SIZE]).unwrap();
        let mut pump = LazyPump::new(SIZE);
        std::future::poll_fn(
            |cx| match pump.poll_move(cx, &mut client_proxy, &mut server_proxy) {
                Ok(_) if pump.copied == SIZE as u64 => Poll::Ready(()),
                Ok(_) => Poll::Pending,
                Err(_) => panic!("the pump failed"),
            },
        )
        .await;
        server_app.set_nonblocking(true).unwrap();
        let mut got = [0u8; SIZE];
        let n = std::io::Read::read(&mut &server_app, &mut got)
            .expect("the bytes were held back after the pump stopped");
        assert_eq!(n, SIZE);
    }

    #[tokio::test(start_paused = true)]
    async fn slow_reader_is_bounded_by_the_buffer() {
        // The server side never reads: the relay must stop reading from the client once its
        // buffer and the pipe are full, instead of buffering without limit.
        let (mut client_app, mut client_proxy) = duplex(16);
        let (mut server_proxy, _server_app) = duplex(16);
        let relay = tokio::spawn(async move {
            forward(
                &mut client_proxy,
                &mut server_proxy,
                IdleTimeouts::default(),
                8,
            )
            .await
        });
        let big = vec![7u8; 4096];
        // With the clock paused, the timeout fires only once every task is blocked.
        let written =
            tokio::time::timeout(Duration::from_secs(1), client_app.write_all(&big)).await;
        assert!(
            written.is_err(),
            "the client could write everything: nothing bounded it"
        );
        relay.abort();
    }
}
