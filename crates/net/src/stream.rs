//! One byte stream to a client or a server, TCP or unix, behind a single type.
//!
//! The data path is written once against [`Stream`], which forwards `AsyncRead`/`AsyncWrite`
//! to the socket it holds. `poll_shutdown` sends a FIN (a half-close), which is what the TCP
//! forwarder needs to pass an end of stream from one side to the other. Accepted TCP
//! connections join the event loop only when they first have to wait ([`LazyTcp`]).

use sluice_config::global::SocketBuffers;
use sluice_config::proxy::KeepaliveProbes;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// A connected stream socket.
#[derive(Debug)]
pub enum Stream {
    /// TCP, in the event loop.
    Tcp(TcpStream),
    /// TCP, accepted: in the event loop once it had to wait.
    Lazy(LazyTcp),
    /// Unix stream.
    Unix(UnixStream),
}

/// An accepted TCP connection that joins the event loop (`epoll_ctl` ADD) only when an
/// operation would block, as HAProxy polls a new connection only once a read finds nothing.
///
/// Most clients send their request with or right after the handshake, so it is there when the
/// connection is accepted: a connection that is read, answered and closed without ever
/// waiting then costs neither the registration nor its removal (two system calls and a heap
/// allocation). A connection that has to wait for its request is registered for reading
/// only, and keeps writing at once (see [`crate::fd::DeferredRegistration`]).
#[derive(Debug)]
pub struct LazyTcp(crate::fd::DeferredRegistration);

impl LazyTcp {
    /// Wraps a non-blocking socket, not in the event loop yet.
    pub fn new(socket: std::net::TcpStream) -> LazyTcp {
        LazyTcp(crate::fd::DeferredRegistration::new(socket))
    }

    /// Polls until the socket is ready for `interest` (registering it for that).
    pub fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<()>> {
        // The guards are dropped without clearing: only a "would block" clears readiness.
        if interest.is_readable() {
            self.0.register()?.poll_read_ready(cx).map_ok(|_| ())
        } else {
            self.0
                .register_writes()?
                .poll_write_ready(cx)
                .map_ok(|_| ())
        }
    }

    /// Runs `op` once: at once while the socket has no registration for `interest` (nothing
    /// is known of that readiness), else only if the event loop saw it ready, a "would block"
    /// clearing that readiness (as `TcpStream::try_io`).
    pub fn try_io<R>(
        &self,
        interest: Interest,
        op: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        if interest.is_readable() {
            match self.0.registered() {
                None => op(),
                Some(registration) => registration.try_io(interest, |_| op()),
            }
        } else {
            match self.0.write_registered() {
                None => op(),
                Some(registration) => registration.try_io(interest, |_| op()),
            }
        }
    }

    /// Runs `op`, a read or write of up to `room` bytes, until it does not "would block",
    /// waiting for readiness (and registering the socket for `interest`) only after a first
    /// "would block".
    fn poll_io(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        room: usize,
        mut op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let registered = if interest.is_readable() {
            self.0.registered().is_some()
        } else {
            self.0.write_registered().is_some()
        };
        if !registered {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
        if interest.is_readable() {
            poll_registered_io(self.0.register()?, cx, interest, room, op)
        } else {
            poll_registered_io(self.0.register_writes()?, cx, interest, room, op)
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        self.poll_io(cx, Interest::READABLE, room, || {
            crate::fd::recv_into_read_buf(self.socket(), buf)
        })
        .map_ok(|_| ())
    }

    fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_io(cx, Interest::WRITABLE, buf.len(), || {
            (&mut self.socket()).write(buf)
        })
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let room = bufs.iter().map(|b| b.len()).sum();
        self.poll_io(cx, Interest::WRITABLE, room, || {
            (&mut self.socket()).write_vectored(bufs)
        })
    }

    fn shutdown(&self) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket().shutdown(std::net::Shutdown::Write))
    }

    /// The socket itself, for socket options.
    pub fn socket(&self) -> &std::net::TcpStream {
        self.0.socket()
    }
}

/// Runs `op` on a registered socket as soon as the event loop reports it ready for
/// `interest`, until it does not "would block".
///
/// As tokio's own sockets do, a read or write that moved less than `room` (but not nothing)
/// shows the socket drained or full: the readiness is cleared then, so the next call waits
/// for the event loop instead of trying a system call bound to "would block".
fn poll_registered_io<T: AsRawFd>(
    registration: &tokio::io::unix::AsyncFd<T>,
    cx: &mut Context<'_>,
    interest: Interest,
    room: usize,
    mut op: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    loop {
        let mut guard = ready!(if interest.is_readable() {
            registration.poll_read_ready(cx)
        } else {
            registration.poll_write_ready(cx)
        })?;
        if let Ok(done) = guard.try_io(|_| op()) {
            if matches!(done, Ok(n) if 0 < n && n < room) {
                guard.clear_ready();
            }
            return Poll::Ready(done);
        }
    }
}

/// Where to connect a server: an inet address or a unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A resolved inet address.
    Inet(SocketAddr),
    /// A unix socket path.
    Unix(String),
    /// A unix socket in the abstract namespace.
    Abstract(sluice_config::addr::AbstractName),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Inet(addr) => write!(f, "{addr}"),
            Target::Unix(path) => write!(f, "unix@{path}"),
            Target::Abstract(name) => write!(f, "{name}"),
        }
    }
}

/// Socket options for a new connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamOptions {
    /// Enable SO_KEEPALIVE (`option tcpka` and friends), with these probes
    /// (`srvtcpka-cnt|idle|intvl`).
    pub keepalive: Option<KeepaliveProbes>,
    /// Bind TCP connections to this local address before connecting (`source`); port 0 lets
    /// the kernel choose the port.
    pub source: Option<SocketAddr>,
    /// The handshake's last ACK waits to ride on the request (`option tcp-smart-connect`).
    pub delayed_ack: bool,
    /// Close with a reset (SO_LINGER 0, `option nolinger`).
    pub nolinger: bool,
    /// The kernel's buffer sizes (`tune.rcvbuf.server`, `tune.sndbuf.server`), set before
    /// the connection is made, when the window it announces depends on them.
    pub buffers: SocketBuffers,
    /// TCP_USER_TIMEOUT (`tcp-ut`): how long sent data may stay unacknowledged before the
    /// kernel gives up on the connection.
    pub user_timeout: Option<Duration>,
    /// Keep the address the connection's socket took when the attempt started, for a log
    /// line that prints a failed attempt's own end (`%bi`, `%bp`): one more system call.
    pub note_local_end: bool,
}

/// A connection attempt that failed, and where it was made from when the options asked
/// ([`StreamOptions::note_local_end`]): the kernel chooses the socket's address when the
/// attempt starts, and it stays the socket's after a refusal or a timeout.
#[derive(Debug)]
pub struct ConnectFailure {
    /// Why the attempt failed.
    pub error: io::Error,
    /// The socket's own address, if noted.
    pub local: Option<SocketAddr>,
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Lazy(s) => s.socket().as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Stream {
    /// Connects to `target`, giving up after `timeout` if one is set.
    pub async fn connect(
        target: &Target,
        timeout: Option<Duration>,
        opts: StreamOptions,
    ) -> Result<Stream, ConnectFailure> {
        let mut local = None;
        let connecting = async {
            io::Result::Ok(match target {
                Target::Inet(addr)
                    if opts.source.is_none()
                        && !opts.delayed_ack
                        && !opts.note_local_end
                        && opts.buffers == SocketBuffers::default() =>
                {
                    Stream::Tcp(TcpStream::connect(addr).await?)
                }
                Target::Inet(addr) => Stream::Tcp(connect_socket(*addr, opts, &mut local).await?),
                Target::Unix(path) => Stream::Unix(UnixStream::connect(path).await?),
                Target::Abstract(name) => Stream::Unix(connect_abstract(name)?),
            })
        };
        let connected = match timeout {
            Some(limit) => tokio::time::timeout(limit, connecting)
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))
                }),
            None => connecting.await,
        };
        connected
            .and_then(|stream| stream.configure(opts).map(|()| stream))
            .map_err(|error| ConnectFailure { error, local })
    }

    /// Applies per-connection socket options to a server connection. Small writes are sent
    /// at once (TCP_NODELAY): the forwarder writes what it read, so coalescing would only add
    /// latency.
    pub fn configure(&self, opts: StreamOptions) -> io::Result<()> {
        if let Stream::Tcp(tcp) = self {
            tcp.set_nodelay(true)?;
            if let Some(probes) = opts.keepalive {
                keep_alive(socket2::SockRef::from(tcp), probes)?;
            }
            if opts.nolinger {
                socket2::SockRef::from(tcp).set_linger(Some(Duration::ZERO))?;
            }
            if opts.user_timeout.is_some() {
                socket2::SockRef::from(tcp).set_tcp_user_timeout(opts.user_timeout)?;
            }
        }
        Ok(())
    }

    /// Readies the connection to disappear when it is dropped (`silent-drop`): a reset
    /// rather than an orderly close (SO_LINGER of 0), sent with a time-to-live of 1 so that
    /// it dies at the first router on its way (the client keeps a connection it believes
    /// open, and stops using resources to reach us). HAProxy first tries TCP_REPAIR, which
    /// needs privileges, and falls back to the same.
    pub fn abort_silently(&self) -> io::Result<()> {
        let socket = match self {
            Stream::Tcp(tcp) => socket2::SockRef::from(tcp),
            Stream::Lazy(tcp) => socket2::SockRef::from(tcp.socket()),
            Stream::Unix(_) => return Ok(()),
        };
        match socket.local_addr()?.as_socket() {
            Some(std::net::SocketAddr::V6(_)) => {
                socket.set_unicast_hops_v6(1)?;
                // An IPv4 client of a dual-stack socket: its packets take the IPv4 TTL.
                let _ = socket.set_ttl(1);
            }
            _ => socket.set_ttl(1)?,
        }
        socket.set_linger(Some(Duration::ZERO))
    }

    /// SO_LINGER 0 on an accepted connection (`option nolinger`): its close sends a reset
    /// and frees the socket at once, whatever is still unsent.
    pub fn set_nolinger(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(tcp) => socket2::SockRef::from(tcp).set_linger(Some(Duration::ZERO)),
            Stream::Lazy(tcp) => {
                socket2::SockRef::from(tcp.socket()).set_linger(Some(Duration::ZERO))
            }
            Stream::Unix(_) => Ok(()),
        }
    }

    /// SO_KEEPALIVE on an accepted connection (`option clitcpka`), with these probes
    /// (`clitcpka-cnt|idle|intvl`); the rest of its options come from the listening socket
    /// ([`crate::listen::BoundListener::tune_accepted`]).
    pub fn set_keepalive(&self, probes: KeepaliveProbes) -> io::Result<()> {
        match self {
            Stream::Tcp(tcp) => keep_alive(socket2::SockRef::from(tcp), probes),
            Stream::Lazy(tcp) => keep_alive(socket2::SockRef::from(tcp.socket()), probes),
            Stream::Unix(_) => Ok(()),
        }
    }
}

/// The connection `socket`'s own address and its peer's (see [`local_end`] and
/// [`peer_end`]): two system calls, for a log line that prints a server connection's ends
/// (`%bi`, `%si`, `bc_src`...).
pub fn socket_ends(socket: &impl AsFd) -> (Option<SocketAddr>, Option<SocketAddr>) {
    (local_end(socket), peer_end(socket))
}

/// The connection `socket`'s own address; `None` for a unix socket or when the system cannot
/// tell (a connection already reset).
pub fn local_end(socket: &impl AsFd) -> Option<SocketAddr> {
    socket2::SockRef::from(socket)
        .local_addr()
        .ok()?
        .as_socket()
}

/// The address of the connection `socket`'s peer; `None` as for [`local_end`].
pub fn peer_end(socket: &impl AsFd) -> Option<SocketAddr> {
    socket2::SockRef::from(socket).peer_addr().ok()?.as_socket()
}

/// Sets the TOS byte (IPv6: the traffic class) and the firewall mark of the packets the
/// connection `socket` sends from now on (`set-fc-tos`, `set-fc-mark`); `None` leaves a field
/// as it is. A UNIX socket has neither. As in HAProxy, a refusal (a mark needs CAP_NET_ADMIN)
/// is the caller's to ignore.
pub fn mark_packets(socket: &impl AsFd, tos: Option<u8>, mark: Option<u32>) -> io::Result<()> {
    let socket = socket2::SockRef::from(socket);
    let Some(peer) = socket.peer_addr()?.as_socket() else {
        return Ok(());
    };
    if let Some(tos) = tos {
        // An IPv4 client of a dual-stack socket is reached by IPv4 packets: IP_TOS.
        match peer {
            SocketAddr::V6(peer) if peer.ip().to_ipv4_mapped().is_none() => {
                socket.set_tclass_v6(u32::from(tos))?
            }
            _ => socket.set_tos(u32::from(tos))?,
        }
    }
    if let Some(mark) = mark {
        socket.set_mark(mark)?;
    }
    Ok(())
}

/// SO_KEEPALIVE, and the probes' count, idle time and interval where the configuration sets
/// them (TCP_KEEPCNT, TCP_KEEPIDLE, TCP_KEEPINTVL); the system's settings otherwise.
fn keep_alive(socket: socket2::SockRef<'_>, probes: KeepaliveProbes) -> io::Result<()> {
    socket.set_keepalive(true)?;
    if probes == KeepaliveProbes::default() {
        return Ok(());
    }
    let mut settings = socket2::TcpKeepalive::new();
    if let Some(idle) = probes.idle {
        settings = settings.with_time(idle);
    }
    if let Some(interval) = probes.interval {
        settings = settings.with_interval(interval);
    }
    if let Some(count) = probes.count {
        settings = settings.with_retries(count);
    }
    socket.set_tcp_keepalive(&settings)
}

/// Connects to `to` through a socket prepared first: bound to `source` when there is one
/// (SO_REUSEADDR lets a fixed source port be reused as soon as the previous connection from it
/// is closed, as HAProxy sets it), with quick ACKs off under `tcp-smart-connect`, so the
/// kernel sends the request with the handshake's last ACK instead of an empty ACK first, and
/// with the configured buffer sizes.
async fn connect_socket(
    to: SocketAddr,
    opts: StreamOptions,
    local: &mut Option<SocketAddr>,
) -> io::Result<TcpStream> {
    let kind = socket2::Type::STREAM.nonblocking().cloexec();
    let socket = socket2::Socket::new(socket2::Domain::for_address(to), kind, None)?;
    if let Some(from) = opts.source {
        if from.is_ipv4() != to.is_ipv4() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("source address {from} and server address {to} are of different families"),
            ));
        }
        socket.set_reuse_address(true)?;
        socket.bind(&from.into())?;
    }
    if opts.delayed_ack {
        socket.set_quickack(false)?;
    }
    size_buffers(socket2::SockRef::from(&socket), opts.buffers)?;
    let started = match socket.connect(&to.into()) {
        Err(e) if e.raw_os_error() != Some(libc::EINPROGRESS) => Err(e),
        _ => Ok(()),
    };
    if opts.note_local_end {
        *local = local_end(&socket);
    }
    started?;
    // What tokio's own connect does from here: wait until the socket is writable, then
    // read how the attempt ended.
    let stream = TcpStream::from_std(socket.into())?;
    stream.writable().await?;
    match stream.take_error()? {
        Some(error) => Err(error),
        None => Ok(stream),
    }
}

/// Connects to a socket in the abstract namespace. A unix connection is made or refused at
/// once: a full queue is `EAGAIN` on a socket that does not block, which counts as a failed
/// attempt, as a refused TCP connection does.
pub fn connect_abstract(name: &sluice_config::addr::AbstractName) -> io::Result<UnixStream> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    socket.connect(&crate::listen::abstract_address(name)?)?;
    UnixStream::from_std(std::os::unix::net::UnixStream::from(
        std::os::fd::OwnedFd::from(socket),
    ))
}

/// Forces the kernel's receive and send buffer sizes where `buffers` sets them (which Linux
/// doubles, for its own bookkeeping, as it does for HAProxy's).
pub(crate) fn size_buffers(socket: socket2::SockRef<'_>, buffers: SocketBuffers) -> io::Result<()> {
    if let Some(size) = buffers.receive {
        socket.set_recv_buffer_size(size as usize)?;
    }
    if let Some(size) = buffers.send {
        socket.set_send_buffer_size(size as usize)?;
    }
    Ok(())
}

impl Stream {
    /// False for an accepted connection not registered for reading yet ([`LazyTcp`]):
    /// reading before waiting may spare it the registration.
    pub fn is_registered(&self) -> bool {
        match self {
            Stream::Lazy(s) => s.0.registered().is_some(),
            Stream::Tcp(_) | Stream::Unix(_) => true,
        }
    }

    /// True if an idle connection can still carry a request: the peer has neither closed it
    /// nor sent anything unasked (either would mean the connection's state is unknown).
    ///
    /// The event loop's own knowledge comes first, at no cost: when no readiness was reported
    /// since the socket was last drained (a short read or "would block" clears it), nothing
    /// arrived as of the last poll, as HAProxy trusts for its idle connections. Only a socket
    /// flagged readable is probed with a one-byte peek (a system call).
    pub fn is_idle_usable(&self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if self.poll_read_ready(&mut cx).is_pending() {
            return true;
        }
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let result = match self {
            Stream::Tcp(s) => socket2::SockRef::from(s).peek(&mut probe),
            Stream::Lazy(s) => socket2::SockRef::from(s.socket()).peek(&mut probe),
            Stream::Unix(s) => socket2::SockRef::from(s).peek(&mut probe),
        };
        // The socket is non-blocking: "would block" means open and silent.
        matches!(result, Err(ref e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Polls until the socket has something to read (or is closed), without reading, so a
    /// forwarder can wait without holding a buffer.
    pub fn poll_read_ready(&self, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Stream::Tcp(s) => s.poll_read_ready(cx),
            Stream::Lazy(s) => s.poll_ready(cx, Interest::READABLE),
            Stream::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Reads what has already arrived into a buffer's spare room, without waiting (and
    /// without zeroing the room first): `WouldBlock` when nothing has.
    ///
    /// A read that does not fill the room drained the socket, so the event loop is told the
    /// socket is no longer readable (as tokio's own `poll_read` does): the next wait for the
    /// client's next request then waits for the poller's event instead of trying a read that
    /// can only fail with "would block", one system call per keep-alive request saved.
    pub fn try_read_buf<B: bytes::BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        let room = buf.remaining_mut();
        let mut drained = None;
        let mut read_once = |read: &mut dyn FnMut(&mut B) -> io::Result<usize>| {
            let n = read(buf)?;
            if 0 < n && n < room {
                drained = Some(n);
                // "Would block" is what makes the registration forget its readiness.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        };
        let result = match self {
            Stream::Tcp(s) => {
                s.try_io(Interest::READABLE, || read_once(&mut |b| s.try_read_buf(b)))
            }
            Stream::Lazy(s) => s.try_io(Interest::READABLE, || {
                read_once(&mut |b| crate::fd::recv_into_buf_mut(s.socket(), b))
            }),
            Stream::Unix(s) => {
                s.try_io(Interest::READABLE, || read_once(&mut |b| s.try_read_buf(b)))
            }
        };
        drained.map_or(result, Ok)
    }

    /// Takes the socket out of the event loop, for a connection that will sit idle in a
    /// [`crate::readiness::ReadinessSet`] instead of a task of its own.
    pub fn park(self) -> io::Result<ParkedStream> {
        Ok(match self {
            Stream::Tcp(s) => ParkedStream::Tcp(s.into_std()?),
            Stream::Lazy(s) => ParkedStream::Tcp(s.0.into_socket()),
            Stream::Unix(s) => ParkedStream::Unix(s.into_std()?),
        })
    }

    /// Waits until the socket has something to read (or is closed), without reading: lets an
    /// idle connection wait without holding a buffer.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Lazy(s) => {
                std::future::poll_fn(|cx| s.poll_ready(cx, Interest::READABLE)).await
            }
            Stream::Unix(s) => s.readable().await,
        }
    }

    /// Waits until the socket has data (or is closed) and copies it into `buf` without
    /// consuming it: 0 means the peer ended its side.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.readable().await?;
            // `try_io` clears the readiness when the peek would block, so the next
            // `readable` waits for new data.
            let result = match self {
                Stream::Tcp(s) => s.try_io(Interest::READABLE, || recv_peek(s.as_raw_fd(), buf)),
                Stream::Lazy(s) => s.try_io(Interest::READABLE, || {
                    recv_peek(s.socket().as_raw_fd(), buf)
                }),
                Stream::Unix(s) => s.try_io(Interest::READABLE, || recv_peek(s.as_raw_fd(), buf)),
            };
            match result {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                other => return other,
            }
        }
    }

    /// Borrows the read and write sides separately, so one task can read a request body from
    /// the client while it reads the response head from the server (no lock: the halves are
    /// plain borrows of the socket).
    pub fn split(&mut self) -> (ReadSide<'_>, WriteSide<'_>) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.split();
                (ReadSide::Tcp(r), WriteSide::Tcp(w))
            }
            Stream::Lazy(s) => (ReadSide::Lazy(s), WriteSide::Lazy(s)),
            Stream::Unix(s) => {
                let (r, w) = s.split();
                (ReadSide::Unix(r), WriteSide::Unix(w))
            }
        }
    }
}

/// A [`Stream`] taken out of the event loop by [`Stream::park`]: a plain non-blocking socket,
/// with no readiness state on the heap.
#[derive(Debug)]
pub enum ParkedStream {
    /// TCP.
    Tcp(std::net::TcpStream),
    /// Unix stream.
    Unix(std::os::unix::net::UnixStream),
}

impl ParkedStream {
    /// Registers the socket with the current event loop again.
    pub fn resume(self) -> io::Result<Stream> {
        Ok(match self {
            ParkedStream::Tcp(s) => Stream::Tcp(TcpStream::from_std(s)?),
            ParkedStream::Unix(s) => Stream::Unix(UnixStream::from_std(s)?),
        })
    }
}

impl std::os::fd::AsFd for ParkedStream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            ParkedStream::Tcp(s) => s.as_fd(),
            ParkedStream::Unix(s) => s.as_fd(),
        }
    }
}

/// The read side of a borrowed [`Stream`].
#[derive(Debug)]
pub enum ReadSide<'a> {
    /// TCP.
    Tcp(tokio::net::tcp::ReadHalf<'a>),
    /// TCP, accepted (both sides borrow the whole connection: its operations take `&self`).
    Lazy(&'a LazyTcp),
    /// Unix stream.
    Unix(tokio::net::unix::ReadHalf<'a>),
}

/// The write side of a borrowed [`Stream`].
#[derive(Debug)]
pub enum WriteSide<'a> {
    /// TCP.
    Tcp(tokio::net::tcp::WriteHalf<'a>),
    /// TCP, accepted.
    Lazy(&'a LazyTcp),
    /// Unix stream.
    Unix(tokio::net::unix::WriteHalf<'a>),
}

impl std::os::fd::AsFd for ReadSide<'_> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            ReadSide::Tcp(s) => s.as_ref().as_fd(),
            ReadSide::Lazy(s) => s.socket().as_fd(),
            ReadSide::Unix(s) => s.as_ref().as_fd(),
        }
    }
}

impl std::os::fd::AsFd for WriteSide<'_> {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            WriteSide::Tcp(s) => s.as_ref().as_fd(),
            WriteSide::Lazy(s) => s.socket().as_fd(),
            WriteSide::Unix(s) => s.as_ref().as_fd(),
        }
    }
}

impl AsyncRead for ReadSide<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadSide::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ReadSide::Lazy(s) => s.poll_read(cx, buf),
            ReadSide::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteSide<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            WriteSide::Lazy(s) => s.poll_write(cx, buf),
            WriteSide::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            WriteSide::Lazy(s) => s.poll_write_vectored(cx, bufs),
            WriteSide::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(s) => Pin::new(s).poll_flush(cx),
            WriteSide::Lazy(_) => Poll::Ready(Ok(())),
            WriteSide::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            WriteSide::Lazy(s) => s.shutdown(),
            WriteSide::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl WriteSide<'_> {
    /// Writes `bufs` as `poll_write_vectored` does, but with `more` tells a TCP socket that
    /// more bytes follow at once (MSG_MORE): the kernel holds a segment smaller than the
    /// path allows until the next write fills it, instead of sending every write as its own
    /// segment. A stream copied 16 KiB at a time then leaves in segments of the path's full
    /// size (64 KiB on loopback) and wakes its reader a quarter as often. Bytes held this
    /// way leave with the next write without `more`, with [`WriteSide::push`], or with a
    /// shutdown. Unix sockets write as `poll_write_vectored` does.
    pub fn poll_write_vectored_more(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
        more: bool,
    ) -> Poll<io::Result<usize>> {
        if !more {
            return Pin::new(self).poll_write_vectored(cx, bufs);
        }
        match self {
            WriteSide::Tcp(half) => {
                let s = half.as_ref();
                loop {
                    ready!(s.poll_write_ready(cx))?;
                    match s.try_io(Interest::WRITABLE, || {
                        send_vectored_more(socket2::SockRef::from(s), bufs)
                    }) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        done => return Poll::Ready(done),
                    }
                }
            }
            WriteSide::Lazy(s) => {
                let room = bufs.iter().map(|b| b.len()).sum();
                s.poll_io(cx, Interest::WRITABLE, room, || {
                    send_vectored_more(socket2::SockRef::from(s.socket()), bufs)
                })
            }
            WriteSide::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    /// Sends at once what writes with `more` left held. Setting TCP_NODELAY, already on for
    /// every connection, pushes the pending bytes.
    pub fn push(&self) -> io::Result<()> {
        match self {
            WriteSide::Tcp(half) => half.as_ref().set_nodelay(true),
            WriteSide::Lazy(s) => s.socket().set_nodelay(true),
            WriteSide::Unix(_) => Ok(()),
        }
    }
}

/// The port a server is reached on, given the port the client connected to (configuration.txt
/// §5.2 "server": no port means the same port, `+N`/`-N` an offset from it).
pub fn server_port(
    port: &sluice_config::addr::ServerPort,
    client_dst_port: Option<u16>,
) -> Option<u16> {
    use sluice_config::addr::ServerPort;
    match *port {
        ServerPort::Fixed(p) => Some(p),
        ServerPort::SameAsClient => client_dst_port,
        ServerPort::Offset(delta) => {
            let p = i32::from(client_dst_port?) + delta;
            u16::try_from(p).ok().filter(|&p| p != 0)
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Lazy(s) => s.poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Lazy(s) => s.socket().as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Lazy(s) => s.poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Lazy(s) => s.poll_write_vectored(cx, bufs),
            Stream::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Lazy(_) => Poll::Ready(Ok(())),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Lazy(s) => s.shutdown(),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// One `send` with MSG_MORE (the socket is non-blocking).
pub(crate) fn send_more(socket: socket2::SockRef<'_>, buf: &[u8]) -> io::Result<usize> {
    socket.send_with_flags(buf, libc::MSG_MORE | libc::MSG_NOSIGNAL)
}

/// One `sendmsg` of `bufs` with MSG_MORE (the socket is non-blocking).
fn send_vectored_more(socket: socket2::SockRef<'_>, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    socket.send_vectored_with_flags(bufs, libc::MSG_MORE | libc::MSG_NOSIGNAL)
}

fn recv_peek(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    nix::sys::socket::recv(fd, buf, nix::sys::socket::MsgFlags::MSG_PEEK).map_err(io::Error::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_config::addr::ServerPort;
    use tokio::io::AsyncWriteExt;

    fn known_readable(stream: &Stream) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        stream.poll_read_ready(&mut cx).is_ready()
    }

    #[tokio::test]
    async fn a_short_read_tells_the_event_loop_the_socket_is_drained() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let stream = Stream::Tcp(listener.accept().await.unwrap().0);
        peer.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        stream.readable().await.unwrap();
        let mut buf = Vec::with_capacity(64);
        assert_eq!(stream.try_read_buf(&mut buf).unwrap(), 18);
        assert_eq!(buf, b"GET / HTTP/1.1\r\n\r\n");
        assert!(!known_readable(&stream));
        // New bytes make it readable again, and a read that fills the room leaves it so.
        peer.write_all(b"0123456789").await.unwrap();
        stream.readable().await.unwrap();
        let mut small = Vec::with_capacity(4);
        let mut limited = bytes::BufMut::limit(&mut small, 4);
        assert_eq!(stream.try_read_buf(&mut limited).unwrap(), 4);
        assert!(known_readable(&stream));
    }

    #[tokio::test]
    async fn server_connections_get_their_buffer_sizes_and_probes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = Target::Inet(listener.local_addr().unwrap());
        let opts = StreamOptions {
            keepalive: Some(KeepaliveProbes {
                count: Some(3),
                idle: Some(Duration::from_secs(40)),
                interval: None,
            }),
            buffers: SocketBuffers {
                receive: Some(32 * 1024),
                send: None,
            },
            user_timeout: Some(Duration::from_millis(2500)),
            ..StreamOptions::default()
        };
        let Stream::Tcp(tcp) = Stream::connect(&target, None, opts).await.unwrap() else {
            panic!("expected tcp")
        };
        let socket = socket2::SockRef::from(&tcp);
        // Linux reports the buffer size doubled.
        assert_eq!(socket.recv_buffer_size().unwrap(), 2 * 32 * 1024);
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.keepalive_time().unwrap(), Duration::from_secs(40));
        assert_eq!(socket.keepalive_retries().unwrap(), 3);
        assert_eq!(
            socket.tcp_user_timeout().unwrap(),
            Some(Duration::from_millis(2500))
        );
    }

    #[tokio::test]
    async fn a_refused_connection_keeps_its_own_address_when_asked() {
        // A port just freed: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let target = Target::Inet(port);
        let noting = StreamOptions {
            note_local_end: true,
            ..StreamOptions::default()
        };
        let failure = Stream::connect(&target, None, noting).await.unwrap_err();
        assert_eq!(failure.error.kind(), io::ErrorKind::ConnectionRefused);
        let local = failure.local.expect("the socket's own address");
        assert_eq!(local.ip(), port.ip());
        assert_ne!(local.port(), 0);
        let failure = Stream::connect(&target, None, StreamOptions::default())
            .await
            .unwrap_err();
        assert_eq!(failure.local, None, "noted only when asked");
    }

    /// A connection accepted by a [`crate::listen::Listener`], and its client's end.
    async fn accepted() -> (Stream, TcpStream) {
        let bound = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = bound.local_addr().unwrap();
        let listener = crate::listen::BoundListener::Tcp(bound)
            .into_async()
            .unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        (stream, client)
    }

    #[tokio::test]
    async fn a_connection_whose_request_is_there_is_served_outside_the_event_loop() {
        let (mut stream, mut client) = accepted().await;
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        // Loopback delivers at once; reads that would block do not register the socket.
        let mut buf = Vec::with_capacity(64);
        let n = loop {
            match stream.try_read_buf(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => tokio::task::yield_now().await,
                read => break read.unwrap(),
            }
        };
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        assert!(!stream.is_registered());
        stream
            .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .unwrap();
        stream.shutdown().await.unwrap();
        assert!(!stream.is_registered(), "nothing had to wait");
        let mut answer = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut answer)
            .await
            .unwrap();
        assert_eq!(answer, b"HTTP/1.1 204 No Content\r\n\r\n");
    }

    #[tokio::test]
    async fn a_connection_that_has_to_wait_joins_the_event_loop_and_is_woken() {
        let (stream, mut client) = accepted().await;
        let mut buf = Vec::with_capacity(64);
        assert_eq!(
            stream.try_read_buf(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert!(!stream.is_registered());
        let waiting = tokio::spawn(async move {
            stream.readable().await.unwrap();
            let mut buf = Vec::with_capacity(64);
            let n = stream.try_read_buf(&mut buf).unwrap();
            (stream.is_registered(), buf[..n].to_vec())
        });
        tokio::task::yield_now().await;
        client.write_all(b"late").await.unwrap();
        let (registered, got) = waiting.await.unwrap();
        assert!(registered);
        assert_eq!(got, b"late");
    }

    #[tokio::test]
    async fn a_short_read_of_a_registered_connection_waits_for_the_event_loop_next() {
        let (mut stream, mut client) = accepted().await;
        client.write_all(b"first").await.unwrap();
        stream.readable().await.unwrap();
        assert!(stream.is_registered());
        let mut buf = [0u8; 64];
        let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"first");
        // The read did not fill the buffer: the socket is known drained, no system call is
        // tried for the next read before the event loop reports new bytes.
        assert!(!known_readable(&stream));
        client.write_all(b"second").await.unwrap();
        let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"second");
    }

    #[tokio::test]
    async fn a_write_that_would_block_joins_the_event_loop_and_completes() {
        let (mut stream, mut client) = accepted().await;
        // More than the two sockets' buffers can hold: the writer has to wait for room.
        let data: Vec<u8> = (0..32_000_000u32).map(|i| (i % 251) as u8).collect();
        let sending = data.clone();
        let writer = tokio::spawn(async move {
            stream.write_all(&sending).await.unwrap();
            stream.shutdown().await.unwrap();
            stream
        });
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut client, &mut got)
            .await
            .unwrap();
        assert!(got == data, "the bytes arrived altered or incomplete");
        let Stream::Lazy(lazy) = writer.await.unwrap() else {
            unreachable!("accepted connections are lazy")
        };
        assert!(lazy.0.write_registered().is_some(), "waited for room");
        assert!(lazy.0.registered().is_none(), "never had to wait to read");
    }

    #[tokio::test]
    async fn a_connection_waiting_to_read_still_writes_at_once() {
        let (mut stream, mut client) = accepted().await;
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        stream.readable().await.unwrap();
        let mut buf = [0u8; 64];
        let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        // A write polled once, with a waker that must not be needed: it goes out at once, not
        // after an event from the poller, and the socket is not registered for writes.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let answer = b"HTTP/1.1 204 No Content\r\n\r\n";
        let written = Pin::new(&mut stream).poll_write(&mut cx, answer);
        assert!(matches!(written, Poll::Ready(Ok(n)) if n == answer.len()));
        let Stream::Lazy(lazy) = &stream else {
            unreachable!("accepted connections are lazy")
        };
        assert!(lazy.0.registered().is_some());
        assert!(lazy.0.write_registered().is_none());
        let mut got = [0u8; 64];
        let n = tokio::io::AsyncReadExt::read(&mut client, &mut got)
            .await
            .unwrap();
        assert_eq!(&got[..n], answer);
    }

    #[test]
    fn server_port_follows_the_client_port_when_asked() {
        assert_eq!(server_port(&ServerPort::Fixed(80), Some(8080)), Some(80));
        assert_eq!(
            server_port(&ServerPort::SameAsClient, Some(8080)),
            Some(8080)
        );
        assert_eq!(server_port(&ServerPort::SameAsClient, None), None);
        assert_eq!(server_port(&ServerPort::Offset(1000), Some(80)), Some(1080));
        assert_eq!(server_port(&ServerPort::Offset(-80), Some(80)), None);
        assert_eq!(server_port(&ServerPort::Offset(1), Some(65535)), None);
    }

    /// Both sides of a fresh IPv4 loopback connection: (accepted, client).
    fn loopback_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener.accept().unwrap().0, client)
    }

    #[test]
    fn packet_marks_set_the_ipv4_tos_or_the_ipv6_traffic_class() {
        let (v4, _client) = loopback_pair();
        mark_packets(&v4, Some(0x48), None).unwrap();
        assert_eq!(socket2::SockRef::from(&v4).tos().unwrap(), 0x48);
        // No field given: nothing changes.
        mark_packets(&v4, None, None).unwrap();
        assert_eq!(socket2::SockRef::from(&v4).tos().unwrap(), 0x48);

        let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
            return; // A host without IPv6 on loopback.
        };
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let v6 = listener.accept().unwrap().0;
        mark_packets(&v6, Some(0x28), None).unwrap();
        assert_eq!(socket2::SockRef::from(&v6).tclass_v6().unwrap(), 0x28);
        assert_eq!(socket2::SockRef::from(&v6).tos().unwrap(), 0);
    }

    #[test]
    fn a_mark_needs_the_privilege_haproxy_needs() {
        let (v4, _client) = loopback_pair();
        match mark_packets(&v4, None, Some(7)) {
            Ok(()) => assert_eq!(socket2::SockRef::from(&v4).mark().unwrap(), 7),
            Err(err) => assert_eq!(err.kind(), io::ErrorKind::PermissionDenied),
        }
    }

    #[test]
    fn a_unix_socket_has_no_packet_marks_to_set() {
        let (one, _two) = std::os::unix::net::UnixStream::pair().unwrap();
        mark_packets(&one, Some(0x20), Some(1)).unwrap();
    }
}
