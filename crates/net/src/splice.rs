//! Zero-copy forwarding with `splice(2)` (configuration.txt §4.2 `option splice-auto`,
//! `option splice-request`, `option splice-response`, §3.2 `tune.pipesize`, `maxpipes`).
//!
//! A [`Pipe`] is a kernel pipe between two sockets: bytes are spliced from the reading socket
//! into the pipe, then from the pipe into the writing socket, and never enter user space. The
//! pipe is filled only when it is empty, so an `EAGAIN` while filling always means "the
//! socket has nothing to read" (never "the pipe is full"), and readiness is waited for on the
//! socket through tokio's registration (`poll_read_ready`/`poll_write_ready` then `try_io`,
//! which clears a stale readiness). The number of pipes alive in the process is bounded by
//! [`PipeBudget`]: when none is left, callers fall back to copying through a buffer.

use crate::stream::{ReadSide, Stream, WriteSide};
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use nix::unistd::pipe2;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::Interest;

/// The pipes the process may hold at once (`maxpipes`); unlimited when `None`.
#[derive(Debug)]
pub struct PipeBudget {
    max: Option<usize>,
    used: AtomicUsize,
    /// Bytes that left a pipe of this budget for a socket (`TotalSplicdedBytesOut`).
    spliced_out: std::sync::atomic::AtomicU64,
}

impl PipeBudget {
    /// A budget of `max` pipes.
    pub fn new(max: Option<usize>) -> Arc<PipeBudget> {
        Arc::new(PipeBudget {
            max,
            used: AtomicUsize::new(0),
            spliced_out: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The limit, if any.
    pub fn max(&self) -> Option<usize> {
        self.max
    }

    /// Pipes currently in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes spliced out to sockets since start.
    pub fn spliced_out(&self) -> u64 {
        self.spliced_out.load(Ordering::Relaxed)
    }

    fn take(&self) -> bool {
        let taken = self.used.fetch_add(1, Ordering::AcqRel);
        if self.max.is_some_and(|max| taken >= max) {
            self.used.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }
}

/// A kernel pipe and the bytes it holds.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Bytes spliced in and not yet out.
    held: usize,
    /// How much one fill may move (the pipe's capacity).
    capacity: usize,
    budget: Arc<PipeBudget>,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Pipe {
    /// A new pipe of `size` bytes (`tune.pipesize`; the kernel's default when `None`), or
    /// `None` when the budget is spent or the system refuses one.
    pub fn new(size: Option<usize>, budget: &Arc<PipeBudget>) -> Option<Pipe> {
        if !budget.take() {
            return None;
        }
        let Ok((read, write)) = pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) else {
            budget.used.fetch_sub(1, Ordering::AcqRel);
            return None;
        };
        let capacity = match size {
            // The kernel rounds the size up to pages and may refuse large ones: keep what it
            // reports.
            Some(size) => fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(size as i32)).ok(),
            None => fcntl(write.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).ok(),
        }
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(65536);
        Some(Pipe {
            read,
            write,
            held: 0,
            capacity,
            budget: Arc::clone(budget),
        })
    }

    /// Bytes waiting in the pipe.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Moves at most `max` bytes from `from` into the (empty) pipe. `Ok(0)` is the end of
    /// stream.
    pub fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        from: &impl SpliceEnd,
        max: usize,
    ) -> Poll<io::Result<usize>> {
        debug_assert_eq!(self.held, 0, "a pipe is filled only when empty");
        loop {
            ready!(from.poll_io_ready(cx, Interest::READABLE))?;
            let moved = from.try_io_once(Interest::READABLE, || {
                splice(
                    from.as_fd(),
                    None,
                    self.write.as_fd(),
                    None,
                    self.capacity.min(max),
                    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
                )
                .map_err(io::Error::from)
            });
            match moved {
                Ok(n) => {
                    self.held += n;
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Moves bytes from the pipe into `to`; returns how many left the pipe.
    pub fn poll_drain(
        &mut self,
        cx: &mut Context<'_>,
        to: &impl SpliceEnd,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(to.poll_io_ready(cx, Interest::WRITABLE))?;
            let moved = to.try_io_once(Interest::WRITABLE, || {
                splice(
                    self.read.as_fd(),
                    None,
                    to.as_fd(),
                    None,
                    self.held,
                    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
                )
                .map_err(io::Error::from)
            });
            match moved {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.held = self.held.saturating_sub(n);
                    self.budget
                        .spliced_out
                        .fetch_add(n as u64, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// The tokio socket behind a [`SpliceEnd`].
pub enum SocketRef<'a> {
    /// TCP.
    Tcp(&'a tokio::net::TcpStream),
    /// TCP, accepted (in the event loop once it had to wait).
    Lazy(&'a crate::stream::LazyTcp),
    /// Unix stream.
    Unix(&'a tokio::net::UnixStream),
}

impl SocketRef<'_> {
    /// Sends `bytes`, the last this side will send, without waiting, and holds them in the
    /// socket (`MSG_MORE`) for the end of stream the caller sends next (a `shutdown`): the
    /// FIN then leaves in the same segment as the bytes, one packet less for both ends to
    /// carry than a send followed by a separate FIN. Returns how many bytes were taken; the
    /// caller writes the rest as usual (a "would block" is `Ok(0)`), and those push out what
    /// is held, as any write does.
    ///
    /// The caller must end the stream at once after this: until then, the bytes wait.
    pub fn send_before_end(&self, bytes: &[u8]) -> io::Result<usize> {
        let socket = match self {
            SocketRef::Tcp(s) => socket2::SockRef::from(*s),
            SocketRef::Lazy(s) => socket2::SockRef::from(s.socket()),
            // A unix socket has no segments to share.
            SocketRef::Unix(_) => return Ok(0),
        };
        match crate::stream::send_more(socket, bytes) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// A socket, or one half of a split one, that a pipe can splice from or into: its descriptor
/// and its event-loop readiness (waited for, then cleared by a "would block").
pub trait SpliceEnd: AsFd {
    /// The socket.
    fn socket(&self) -> SocketRef<'_>;

    /// Polls until the socket is ready for `interest`.
    fn poll_io_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<()>> {
        match (self.socket(), interest.is_readable()) {
            (SocketRef::Tcp(s), true) => s.poll_read_ready(cx),
            (SocketRef::Tcp(s), false) => s.poll_write_ready(cx),
            (SocketRef::Lazy(s), _) => s.poll_ready(cx, interest),
            (SocketRef::Unix(s), true) => s.poll_read_ready(cx),
            (SocketRef::Unix(s), false) => s.poll_write_ready(cx),
        }
    }

    /// Runs `f` if the socket is ready for `interest`; a "would block" from `f` clears the
    /// readiness.
    fn try_io_once<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        match self.socket() {
            SocketRef::Tcp(s) => s.try_io(interest, f),
            SocketRef::Lazy(s) => s.try_io(interest, f),
            SocketRef::Unix(s) => s.try_io(interest, f),
        }
    }
}

impl SpliceEnd for Stream {
    fn socket(&self) -> SocketRef<'_> {
        match self {
            Stream::Tcp(s) => SocketRef::Tcp(s),
            Stream::Lazy(s) => SocketRef::Lazy(s),
            Stream::Unix(s) => SocketRef::Unix(s),
        }
    }
}

impl SpliceEnd for ReadSide<'_> {
    fn socket(&self) -> SocketRef<'_> {
        match self {
            ReadSide::Tcp(s) => SocketRef::Tcp(s.as_ref()),
            ReadSide::Lazy(s) => SocketRef::Lazy(s),
            ReadSide::Unix(s) => SocketRef::Unix(s.as_ref()),
        }
    }
}

impl SpliceEnd for WriteSide<'_> {
    fn socket(&self) -> SocketRef<'_> {
        match self {
            WriteSide::Tcp(s) => SocketRef::Tcp(s.as_ref()),
            WriteSide::Lazy(s) => SocketRef::Lazy(s),
            WriteSide::Unix(s) => SocketRef::Unix(s.as_ref()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (a.unwrap(), b.unwrap().0)
    }

    #[tokio::test]
    async fn bytes_go_through_the_pipe_untouched() {
        let (mut writer, from) = pair().await;
        let (to, mut reader) = pair().await;
        let (from, to) = (Stream::Tcp(from), Stream::Tcp(to));
        let budget = PipeBudget::new(Some(1));
        let mut pipe = Pipe::new(Some(4096), &budget).unwrap();
        assert!(
            Pipe::new(None, &budget).is_none(),
            "maxpipes 1: no second pipe"
        );
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let sending = data.clone();
        let sender = tokio::spawn(async move {
            writer.write_all(&sending).await.unwrap();
            writer.shutdown().await.unwrap();
        });
        let receiver = tokio::spawn(async move {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).await.unwrap();
            got
        });
        loop {
            let n = poll_fn(|cx| pipe.poll_fill(cx, &from, usize::MAX))
                .await
                .unwrap();
            if n == 0 {
                break;
            }
            while pipe.held() > 0 {
                poll_fn(|cx| pipe.poll_drain(cx, &to)).await.unwrap();
            }
        }
        drop(to);
        sender.await.unwrap();
        assert_eq!(receiver.await.unwrap(), data);
        drop(pipe);
        assert_eq!(budget.used(), 0, "a dropped pipe returns to the budget");
    }

    #[tokio::test]
    async fn the_last_bytes_leave_with_the_end_of_stream() {
        let (ours, mut peer) = pair().await;
        let mut ours = Stream::Tcp(ours);
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
        assert_eq!(ours.socket().send_before_end(answer).unwrap(), answer.len());
        ours.shutdown().await.unwrap();
        // The peer gets the bytes, then the end of stream, while our socket is still open.
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, answer);
    }
}
