//! Raw operating-system calls that need `unsafe`: adopting an inherited listening socket
//! (`bind "fd@N"`, how test harnesses and supervisors hand sockets over), owning the
//! descriptors another process passed in an `SCM_RIGHTS` message (`-x`), ending the
//! process by a signal's default action (a master stopped by SIGINT or SIGTERM, as HAProxy's),
//! registering an epoll instance with tokio's event loop, receiving into a buffer's
//! uninitialised room (a socket read outside tokio, for connections not yet in its event
//! loop: see [`crate::stream::LazyTcp`]; any reader's read appending to a `Vec`), and
//! reading what the kernel measures of a TCP connection (TCP_INFO, for the `fc_rtt`
//! fetches).
//!
//! With the allocator (`sluice-heap`), this is the only code of the project allowed to use
//! `unsafe`; each block says why it is sound. Everything else goes through safe wrappers from
//! std, socket2 and tokio.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Takes ownership of the inherited descriptor `fd` after checking that it is an open socket
/// in the listening state.
///
/// The descriptor must not be used elsewhere in the process; `fd@N` in the configuration is
/// the promise that it was inherited for us. Each `fd@N` may be adopted only once per process:
/// the caller ensures that (a second `bind "fd@N"` of the same N is rejected).
pub fn adopt_listening_socket(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "negative file descriptor",
        ));
    }
    let mut accepting: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt only writes `len` bytes into `accepting`, a local c_int whose size we
    // pass; an invalid or non-socket fd makes it fail with EBADF/ENOTSOCK, which we report.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut accepting as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if accepting == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "inherited socket is not listening",
        ));
    }
    // SAFETY: the fd is open (getsockopt succeeded) and is a listening socket; the caller
    // guarantees nothing else in this process owns it, so taking ownership cannot cause a
    // double close.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Takes ownership of a descriptor `recvmsg` just installed in this process from an
/// `SCM_RIGHTS` message, so that it is closed if it is not used.
pub fn own_received(fd: RawFd) -> OwnedFd {
    // SAFETY: the kernel created this descriptor for us while receiving the message and
    // nothing else in the process knows its number yet, so this is its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Ends the process by `signal`'s default action, as if the signal had not been caught: its
/// parent sees "killed by SIGINT", not an exit status. Falls back to exiting with 128 + the
/// signal's number if the process survives it.
pub fn exit_by_signal(signal: libc::c_int) -> ! {
    // SAFETY: installing SIG_DFL takes no pointer from us and cannot break memory safety;
    // the handler it replaces (tokio's) is never needed again on this exit path. raise only
    // delivers the signal to this thread.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::exit(128 + signal)
}

/// Sets TCP_DEFER_ACCEPT on a listening socket: the kernel completes `accept` only once the
/// client has sent data (or after `seconds`), sparing a wake-up for idle connections.
pub fn set_defer_accept(socket: std::os::fd::BorrowedFd<'_>, seconds: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(seconds).unwrap_or(libc::c_int::MAX);
    set_tcp_option(socket, libc::TCP_DEFER_ACCEPT, value)
}

/// Takes a listening TCP socket out of the listening state (HAProxy's pause, `disable
/// frontend`, SIGTTOU): connecting it to an `AF_UNSPEC` address disconnects it, which for a
/// listening socket means closing its queue (the connections waiting there are reset) and
/// leaving the address, so that new clients are refused and another process may bind it. The
/// socket stays bound and open; `listen` makes it listen again.
pub fn stop_listening(socket: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let unspec = libc::sockaddr {
        sa_family: libc::AF_UNSPEC as libc::sa_family_t,
        sa_data: [0; 14],
    };
    let len = std::mem::size_of::<libc::sockaddr>() as libc::socklen_t;
    // SAFETY: connect reads at most `len` bytes from `unspec`, a local of that size; the fd
    // is borrowed for the duration of the call, so it is open.
    let rc = unsafe { libc::connect(socket.as_raw_fd(), &unspec, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the integer TCP-level option `name` (the socket options socket2 and nix lack).
fn set_tcp_option(
    socket: std::os::fd::BorrowedFd<'_>,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads exactly size_of::<c_int>() bytes from `value`, a local; the fd
    // is borrowed for the duration of the call, so it is open.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What the kernel measures of a TCP connection (TCP_INFO), as the `fc_rtt` family of
/// fetches reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpMeasures {
    /// The smoothed round-trip time, in microseconds.
    pub rtt_us: u32,
    /// Its variance, in microseconds.
    pub rttvar_us: u32,
    /// Segments sent and not acknowledged yet.
    pub unacked: u32,
    /// Segments selectively acknowledged.
    pub sacked: u32,
    /// Segments retransmitted and not acknowledged yet.
    pub retrans: u32,
    /// Segments forward-acknowledged.
    pub fackets: u32,
    /// Segments deemed lost.
    pub lost: u32,
    /// How far segments may arrive out of order before one counts as lost.
    pub reordering: u32,
}

/// The TCP_INFO figures of the socket numbered `fd`, which the caller holds open (a session
/// its client connection); any other number only reads another socket's figures or fails,
/// the kernel writing nothing but the local structure given. Fails for a socket that is not
/// TCP.
pub fn tcp_measures(fd: RawFd) -> io::Result<TcpMeasures> {
    // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes (the size of `info`, a local) and stores
    // the size written in `len`, a local too; a descriptor that is not an open socket makes
    // it fail without writing.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpMeasures {
        rtt_us: info.tcpi_rtt,
        rttvar_us: info.tcpi_rttvar,
        unacked: info.tcpi_unacked,
        sacked: info.tcpi_sacked,
        retrans: info.tcpi_retrans,
        fackets: info.tcpi_fackets,
        lost: info.tcpi_lost,
        reordering: info.tcpi_reordering,
    })
}

/// Sets TCP_FASTOPEN on a listening socket: clients that know the server may send their
/// first data in their SYN, saving a round trip; `queue` bounds the fast opens pending.
pub fn set_fast_open(socket: std::os::fd::BorrowedFd<'_>, queue: i32) -> io::Result<()> {
    set_tcp_option(socket, libc::TCP_FASTOPEN, queue.max(1))
}

/// The TCP_FASTOPEN queue of a listening socket (0: fast open off).
pub fn fast_open_queue(socket: std::os::fd::BorrowedFd<'_>) -> io::Result<i32> {
    use std::os::fd::AsRawFd;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes (the size of `value`, a local) and
    // stores the size written in `len`, a local too; the fd is borrowed, so it is open.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An epoll instance, as tokio's `AsyncFd` wants it (see [`register_epoll`]).
pub struct EpollFd(nix::sys::epoll::Epoll);

impl EpollFd {
    /// The instance.
    pub fn epoll(&self) -> &nix::sys::epoll::Epoll {
        &self.0
    }
}

impl std::os::fd::AsRawFd for EpollFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.0.as_raw_fd()
    }
}

/// Registers an epoll instance with the current tokio runtime's event loop, which then says
/// when the instance has ready events (`crate::readiness`).
pub fn register_epoll(
    epoll: nix::sys::epoll::Epoll,
) -> io::Result<tokio::io::unix::AsyncFd<EpollFd>> {
    // SAFETY: tokio requires the descriptor to stay open and the same for the `AsyncFd`'s
    // whole life. `EpollFd` owns it (an `OwnedFd` no other code can reach: the field is
    // private and `epoll()` lends the instance only by reference), so it is closed only
    // when the `AsyncFd` drops it, and `as_raw_fd` always returns that one descriptor.
    Ok(unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            EpollFd(epoll),
            tokio::io::Interest::READABLE,
        )
    }?)
}

/// Receives what has arrived on `socket` into the unfilled part of `buf`, without zeroing it
/// first (16 KiB per read otherwise), and marks the bytes received as filled.
pub fn recv_into_read_buf(
    socket: &std::net::TcpStream,
    buf: &mut tokio::io::ReadBuf<'_>,
) -> io::Result<usize> {
    // SAFETY: `recv` only writes into the slice, never de-initialises it.
    let room = unsafe { buf.unfilled_mut() };
    let n = socket2::SockRef::from(socket).recv(room)?;
    // SAFETY: the kernel wrote the first `n` bytes of the unfilled part.
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Ok(n)
}

/// Receives what has arrived on `socket` into the spare room of `buf` (its first chunk),
/// without zeroing it first, and advances `buf` past the bytes received.
pub fn recv_into_buf_mut<B: bytes::BufMut>(
    socket: &std::net::TcpStream,
    buf: &mut B,
) -> io::Result<usize> {
    // SAFETY: `recv` only writes into the slice, never de-initialises it.
    let room = unsafe { buf.chunk_mut().as_uninit_slice_mut() };
    let n = socket2::SockRef::from(socket).recv(room)?;
    // SAFETY: the kernel wrote the first `n` bytes of the chunk.
    unsafe { buf.advance_mut(n) };
    Ok(n)
}

/// Reads from `reader` into the spare room of `buf`, at most `most` bytes, without zeroing the
/// room first (a relay taking a pooled buffer per read would otherwise zero 16 KiB each time),
/// and lengthens `buf` by the bytes read.
pub fn poll_read_appending<R: tokio::io::AsyncRead + ?Sized>(
    reader: std::pin::Pin<&mut R>,
    cx: &mut std::task::Context<'_>,
    buf: &mut Vec<u8>,
    most: usize,
) -> std::task::Poll<io::Result<usize>> {
    let spare = buf.spare_capacity_mut();
    let room = most.min(spare.len());
    let mut read = tokio::io::ReadBuf::uninit(&mut spare[..room]);
    std::task::ready!(reader.poll_read(cx, &mut read))?;
    let n = read.filled().len();
    // SAFETY: a `ReadBuf`'s filled part is initialised (the reader wrote it, or vouched for it
    // through `ReadBuf`'s own unsafe contract), and it is the start of `buf`'s spare room, so
    // the first `len + n` bytes of `buf` are initialised and within its capacity.
    unsafe { buf.set_len(buf.len() + n) };
    std::task::Poll::Ready(Ok(n))
}

/// A listening socket registered with the current tokio event loop for readability, so that
/// connections can be accepted outside tokio's own listeners (tokio's `TcpListener` registers
/// every accepted socket at once) and a connection's arrival can be awaited without taking it.
pub fn register_listener<L: std::os::fd::AsRawFd>(
    listener: L,
) -> io::Result<tokio::io::unix::AsyncFd<L>> {
    // SAFETY: the `AsyncFd` owns the listener (a std listener, which owns its descriptor): it
    // stays open, and `as_raw_fd` keeps returning it, until the `AsyncFd` drops the listener.
    Ok(unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(listener, tokio::io::Interest::READABLE)
    }?)
}

/// A TCP socket and, once asked for, its registrations with the thread's tokio event loop:
/// what `crate::stream::LazyTcp` is built on.
///
/// The socket is registered for reading only. It is written at once, as HAProxy does, and
/// waits for room only after a write that would block: only then is a duplicate of its
/// descriptor registered for writability (epoll tells registrations apart by descriptor).
/// A registration for both would report "writable" as soon as it is made, an event (and
/// often a wake-up of the loop) that no one waits for, on every connection.
#[derive(Debug)]
pub struct DeferredRegistration {
    // Declared first, so dropped first: the registrations go while the socket is open.
    readable: std::sync::OnceLock<tokio::io::unix::AsyncFd<RawFd>>,
    writable: std::sync::OnceLock<tokio::io::unix::AsyncFd<std::net::TcpStream>>,
    socket: std::net::TcpStream,
}

impl DeferredRegistration {
    /// A socket not in the event loop yet.
    pub fn new(socket: std::net::TcpStream) -> DeferredRegistration {
        DeferredRegistration {
            readable: std::sync::OnceLock::new(),
            writable: std::sync::OnceLock::new(),
            socket,
        }
    }

    /// The socket.
    pub fn socket(&self) -> &std::net::TcpStream {
        &self.socket
    }

    /// The registration for reading, if the socket has one.
    pub fn registered(&self) -> Option<&tokio::io::unix::AsyncFd<RawFd>> {
        self.readable.get()
    }

    /// The registration for reading, made now if the socket has none yet.
    pub fn register(&self) -> io::Result<&tokio::io::unix::AsyncFd<RawFd>> {
        if let Some(registration) = self.readable.get() {
            return Ok(registration);
        }
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is the one of `self.socket`, which this value owns and never
        // lends mutably nor gives away while the registration lives: the registration is
        // dropped before the socket (field order), and `into_socket` drops it first too. So
        // the descriptor stays open, and the same, for the registration's whole life.
        let registration = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                self.socket.as_raw_fd(),
                tokio::io::Interest::READABLE,
            )
        }?;
        Ok(self.readable.get_or_init(|| registration))
    }

    /// The registration for writing, if a write ever had to wait.
    pub fn write_registered(&self) -> Option<&tokio::io::unix::AsyncFd<std::net::TcpStream>> {
        self.writable.get()
    }

    /// The registration for writing (of a duplicate descriptor), made now if there is none.
    pub fn register_writes(&self) -> io::Result<&tokio::io::unix::AsyncFd<std::net::TcpStream>> {
        if let Some(registration) = self.writable.get() {
            return Ok(registration);
        }
        let duplicate = self.socket.try_clone()?;
        // SAFETY: the `AsyncFd` owns the duplicate (a std socket, which owns its descriptor):
        // it stays open, and `as_raw_fd` keeps returning it, until the `AsyncFd` drops it.
        let registration = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                duplicate,
                tokio::io::Interest::WRITABLE,
            )
        }?;
        Ok(self.writable.get_or_init(|| registration))
    }

    /// The socket, out of the event loop.
    pub fn into_socket(self) -> std::net::TcpStream {
        let DeferredRegistration {
            readable,
            writable,
            socket,
        } = self;
        drop(readable);
        drop(writable);
        socket
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Polls one read appending to `buf`, from a reader that is always ready.
    fn read_appending(reader: &mut &[u8], buf: &mut Vec<u8>, most: usize) -> usize {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match poll_read_appending(std::pin::Pin::new(reader), &mut cx, buf, most) {
            std::task::Poll::Ready(read) => read.unwrap(),
            std::task::Poll::Pending => panic!("a slice is always ready"),
        }
    }

    #[test]
    fn a_read_appends_after_the_bytes_held_within_the_room_and_the_limit() {
        let mut source: &[u8] = b"cdefghijkl";
        let mut buf = Vec::with_capacity(8);
        buf.extend_from_slice(b"ab");
        // At most `most` bytes...
        assert_eq!(read_appending(&mut source, &mut buf, 3), 3);
        assert_eq!(buf, b"abcde");
        // ...and never past the capacity: the buffer is not grown.
        let capacity = buf.capacity();
        let room = capacity - buf.len();
        assert_eq!(read_appending(&mut source, &mut buf, 100), room);
        assert_eq!(buf.capacity(), capacity);
        assert_eq!(buf[..], b"abcdefghijkl"[..buf.len()]);
        // The end of the stream reads nothing and leaves the buffer as it was.
        let mut ended: &[u8] = b"";
        let mut buf = Vec::with_capacity(8);
        buf.extend_from_slice(b"ab");
        assert_eq!(read_appending(&mut ended, &mut buf, 4), 0);
        assert_eq!(buf, b"ab");
    }

    #[test]
    fn tcp_measures_read_a_tcp_connection_and_refuse_other_sockets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        for socket in [client.as_raw_fd(), accepted.as_raw_fd()] {
            let measures = tcp_measures(socket).unwrap();
            // Nothing sent yet: nothing in flight, lost or retransmitted.
            assert_eq!(
                (measures.unacked, measures.lost, measures.retrans),
                (0, 0, 0)
            );
        }
        let (unix, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(tcp_measures(unix.as_raw_fd()).is_err());
        assert!(tcp_measures(-1).is_err());
    }
}
