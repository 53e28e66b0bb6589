//! Binding listening sockets from `bind` and `stats socket` addresses.
//!
//! [`bind`] runs at start-up, before any event loop exists, and returns blocking-mode std
//! sockets wrapped in [`BoundListener`] (one per port of a range). Each event-loop thread then
//! gets its own [`Listener`], registered with its own reactor ([`BoundListener::into_async`]):
//! a TCP socket this process bound has a shard per thread ([`BoundListener::shards`]), so the
//! kernel hands each new connection to one thread's queue and wakes that thread alone (a
//! master binds them and hands them to its workers, `-x` takes them all over); an inherited
//! `fd@` socket, or a unix one, is shared by all threads ([`BoundListener::try_clone`]), which
//! then accept from the same queue. An abstract unix socket (`abns@`) this process bound is
//! accepted by one thread, which closes it while paused and binds it again on resume
//! ([`Listener::releasing_on_pause`]): only closing frees its name for a process replacing
//! this one.

use crate::fd;
use crate::stream::{LazyTcp, Stream};
use sluice_config::addr::{AbstractName, Family, Host, ListenAddr};
use sluice_config::global::SocketBuffers;
use socket2::{Domain, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener as StdUnixListener;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// Socket options of a `bind` line that matter when creating the socket.
#[derive(Clone, Debug, Default)]
pub struct BindOptions {
    /// Length of the kernel's queue of pending connections.
    pub backlog: u32,
    /// An IPv6 wildcard also accepts IPv4 (`v4v6`).
    pub v4v6: bool,
    /// An IPv6 wildcard accepts only IPv6 (`v6only`).
    pub v6only: bool,
    /// TCP_DEFER_ACCEPT (`defer-accept`).
    pub defer_accept: bool,
    /// TCP_FASTOPEN (`tfo`), with the backlog as its queue of pending fast opens.
    pub tfo: bool,
    /// Permissions of a unix socket file (`mode`).
    pub unix_mode: Option<u32>,
    /// Owner and group of a unix socket file (`uid`/`user`, `gid`/`group`), when set.
    pub unix_owner: (Option<u32>, Option<u32>),
    /// Bound without `SO_REUSEPORT` (`noreuseport`): no other socket may listen on the
    /// address meanwhile, another process's included.
    pub no_reuseport: bool,
    /// TCP_USER_TIMEOUT of the accepted connections (`tcp-ut`), which take it from the
    /// listening socket.
    pub user_timeout: Option<Duration>,
    /// `mss`: the TCP maximum segment size the accepted connections announce; a negative
    /// value lowers the system's by that much.
    pub mss: Option<i32>,
    /// `interface`: only packets that came through this network interface reach the
    /// socket (SO_BINDTODEVICE).
    pub interface: Option<String>,
}

/// A bound, listening socket not yet attached to any event loop.
#[derive(Debug)]
pub enum BoundListener {
    /// A TCP socket (IPv4 or IPv6).
    Tcp(std::net::TcpListener),
    /// A unix stream socket.
    Unix(StdUnixListener),
}

impl BoundListener {
    /// Its address and port (the path and no port for a unix socket), as an external check
    /// is told its proxy's.
    pub fn address_parts(&self) -> (String, Option<u16>) {
        match self {
            BoundListener::Tcp(l) => l.local_addr().map_or_else(
                |_| (String::new(), None),
                |a| (a.ip().to_string(), Some(a.port())),
            ),
            BoundListener::Unix(l) => (
                l.local_addr()
                    .map(|a| unix_address_text(&a))
                    .unwrap_or_default(),
                None,
            ),
        }
    }

    /// Its address as HAProxy's statistics show a listener's: `ip:port` (`[ip]:port` for
    /// IPv6), or `unix`.
    pub fn address_text(&self) -> String {
        match self {
            BoundListener::Tcp(l) => l
                .local_addr()
                .map_or_else(|_| String::new(), |a| a.to_string()),
            BoundListener::Unix(_) => "unix".to_owned(),
        }
    }

    /// A second handle on the same kernel socket, for another thread.
    pub fn try_clone(&self) -> io::Result<BoundListener> {
        Ok(match self {
            BoundListener::Tcp(l) => BoundListener::Tcp(l.try_clone()?),
            BoundListener::Unix(l) => BoundListener::Unix(l.try_clone()?),
        })
    }

    /// `count` more sockets listening on the same TCP address with the same options, in the
    /// same `SO_REUSEPORT` group: the kernel spreads new connections over the group's sockets
    /// by a hash of their addresses, and wakes only the thread whose socket got one. Given
    /// one each, event-loop threads do not all wake for every connection to race for it
    /// (the thundering herd of a shared socket, where all but one `accept` fail), as nginx's
    /// `reuseport` and HAProxy's per-thread `shards` do. None for a unix socket, which has no
    /// such group. Connections queued on a shard are lost when it closes: a master hands its
    /// workers every shard, and `-x` takes every one over.
    pub fn shards(&self, count: usize, opts: &BindOptions) -> io::Result<Vec<BoundListener>> {
        match self {
            BoundListener::Tcp(l) => {
                // The address bound, with the port a `:0` bind was given.
                let addr = l.local_addr()?;
                (0..count)
                    .map(|_| bind_tcp(addr, opts).map(BoundListener::Tcp))
                    .collect()
            }
            BoundListener::Unix(_) => Ok(Vec::new()),
        }
    }

    /// Sets, on a TCP listening socket, the options its accepted connections start with:
    /// Linux copies them to each connection it accepts, which then needs no system call of its
    /// own. TCP_NODELAY always (responses leave as soon as they are written); quick ACKs off
    /// when `delayed_ack` (`option tcp-smart-accept`: the ACK of a request rides on the
    /// response, as HAProxy asks on its HTTP listeners); the buffer sizes `buffers` forces
    /// (`tune.rcvbuf.client`, `tune.sndbuf.client`, which HAProxy sets on its listeners too).
    pub fn tune_accepted(&self, delayed_ack: bool, buffers: SocketBuffers) -> io::Result<()> {
        if let BoundListener::Tcp(l) = self {
            let socket = socket2::SockRef::from(l);
            socket.set_nodelay(true)?;
            socket.set_quickack(!delayed_ack)?;
            crate::stream::size_buffers(socket, buffers)?;
        }
        Ok(())
    }

    /// Registers the socket with the calling thread's tokio reactor.
    pub fn into_async(self) -> io::Result<Listener> {
        Ok(match self {
            BoundListener::Tcp(l) => {
                l.set_nonblocking(true)?;
                // Bound to one address, every connection's local end is that address: no
                // `getsockname` per connection then, only for wildcard binds.
                let local = l.local_addr().ok().filter(|a| !a.ip().is_unspecified());
                Listener::Tcp(fd::register_listener(l)?, local)
            }
            BoundListener::Unix(l) => {
                l.set_nonblocking(true)?;
                Listener::Unix(fd::register_listener(l)?)
            }
        })
    }

    /// The address it listens on, for messages and `show info`.
    pub fn describe(&self) -> String {
        match self {
            BoundListener::Tcp(l) => match l.local_addr() {
                Ok(addr) => addr.to_string(),
                Err(_) => "tcp socket".into(),
            },
            BoundListener::Unix(l) => match l.local_addr() {
                Ok(addr) => match addr.as_pathname() {
                    Some(path) => format!("unix@{}", path.display()),
                    None => "unix socket".into(),
                },
                Err(_) => "unix socket".into(),
            },
        }
    }
}

impl AsFd for BoundListener {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            BoundListener::Tcp(l) => l.as_fd(),
            BoundListener::Unix(l) => l.as_fd(),
        }
    }
}

/// A listening socket attached to one thread's event loop.
#[derive(Debug)]
pub enum Listener {
    /// TCP, with the local address of its connections when it is always the same.
    Tcp(AsyncFd<std::net::TcpListener>, Option<SocketAddr>),
    /// Unix stream.
    Unix(AsyncFd<StdUnixListener>),
    /// A unix socket in the abstract namespace that this process bound itself and gives up
    /// while paused (see [`Listener::releasing_on_pause`]): `None` meanwhile.
    Abstract {
        /// The socket, while it is bound.
        socket: Option<AsyncFd<StdUnixListener>>,
        /// Its name, to bind it again.
        name: AbstractName,
    },
}

/// Waits until `listener` is readable. Through the socket's single reader slot (one task
/// waits on a listener), where `AsyncFd::readable` would join and leave a list of waiters
/// under its lock at every wait.
async fn read_ready<T: AsRawFd>(
    listener: &AsyncFd<T>,
) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, T>> {
    std::future::poll_fn(|cx| listener.poll_read_ready(cx)).await
}

/// Runs `accept` once `listener` is readable, again after each wait while it would block.
async fn accept_when_ready<T: AsRawFd, R>(
    listener: &AsyncFd<T>,
    mut accept: impl FnMut(&T) -> io::Result<R>,
) -> io::Result<R> {
    loop {
        let mut ready = read_ready(listener).await?;
        // `try_io` clears the readiness when the accept would block, so the wait above
        // sleeps until the next connection.
        if let Ok(result) = ready.try_io(|l| accept(l.get_ref())) {
            return result;
        }
    }
}

/// Who connected, and to which of our addresses (the `src` and `dst` of HAProxy's fetches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The client's address; `None` for unix sockets.
    pub client: Option<SocketAddr>,
    /// Our address the client connected to; `None` for unix sockets.
    pub local: Option<SocketAddr>,
}

impl Listener {
    /// This listener, made to give its name up while paused if it is a unix socket in the
    /// abstract namespace, for a process that binds its own sockets (not one a master or an
    /// older process handed over, which keeps it). A paused TCP socket leaves the listening
    /// state, which frees its address; an abstract name is freed only when its socket closes,
    /// as HAProxy closes its own. One thread must own the socket: every descriptor of it
    /// holds the name.
    pub fn releasing_on_pause(self) -> Listener {
        let Listener::Unix(socket) = self else {
            return self;
        };
        match socket
            .get_ref()
            .local_addr()
            .ok()
            .as_ref()
            .and_then(abstract_name_of)
        {
            Some(name) => Listener::Abstract {
                socket: Some(socket),
                name,
            },
            None => Listener::Unix(socket),
        }
    }

    /// Whether a pause closes this listener ([`Listener::releasing_on_pause`]).
    pub fn closes_on_pause(&self) -> bool {
        matches!(self, Listener::Abstract { .. })
    }

    /// Takes a TCP socket out of the listening state while its frontend is paused, as HAProxy
    /// pauses its own: the address refuses new clients (and may be bound by a process
    /// replacing this one) until [`Listener::listen_again`]. An abstract socket this process
    /// bound is closed, which frees its name. Another unix socket keeps listening: its
    /// clients wait in its queue.
    pub fn stop_listening(&mut self) -> io::Result<()> {
        match self {
            // A socket the threads share may have been stopped by another thread already.
            Listener::Tcp(l, _) if !socket2::SockRef::from(l.get_ref()).is_listener()? => Ok(()),
            Listener::Tcp(l, _) => fd::stop_listening(l.get_ref().as_fd()),
            Listener::Unix(_) => Ok(()),
            Listener::Abstract { socket, .. } => {
                *socket = None;
                Ok(())
            }
        }
    }

    /// Makes a socket listen again with a queue of `backlog`, after
    /// [`Listener::stop_listening`] (a socket that listens already only gets its queue
    /// length set); binds an abstract socket a pause closed again (one still bound keeps its
    /// queue length).
    ///
    /// A socket taken out of the listening state reported a hang-up to the event loop, and
    /// tokio keeps a hang-up for good (it never clears the closed states of a registration),
    /// so the old registration would report the socket readable forever and the accept loop
    /// would spin. The socket is registered afresh, through a duplicate of its descriptor
    /// (epoll tells registrations apart by descriptor); dropping the old one deregisters and
    /// closes only the old descriptor. Always, not only when this call made it listen: a
    /// socket several threads share (`noreuseport`, `fd@`) is made to listen by the first of
    /// them, and every thread's registration saw the hang-up.
    pub fn listen_again(&mut self, backlog: u32) -> io::Result<()> {
        match self {
            Listener::Tcp(l, _) => {
                let socket = socket2::SockRef::from(l.get_ref());
                socket.listen(i32::try_from(backlog.max(1)).unwrap_or(i32::MAX))?;
                *l = fd::register_listener(l.get_ref().try_clone()?)?;
                Ok(())
            }
            Listener::Unix(_) => Ok(()),
            Listener::Abstract { socket, name } => {
                if socket.is_none() {
                    let opts = BindOptions {
                        backlog,
                        ..BindOptions::default()
                    };
                    let bound = bind_abstract(name, &opts)?;
                    bound.set_nonblocking(true)?;
                    *socket = Some(fd::register_listener(bound)?);
                }
                Ok(())
            }
        }
    }

    /// Waits until a connection is queued (or the socket has an error to report), without
    /// taking it: a thread waits for one holding no connection slot (`maxconn`), so that a
    /// slot goes to a thread that has a connection to accept.
    pub async fn readable(&self) -> io::Result<()> {
        // The guard is dropped without clearing the readiness: the accept that follows
        // finds it, and clears it only if it finds no connection.
        match self {
            Listener::Tcp(l, _) => read_ready(l).await.map(drop),
            Listener::Unix(l)
            | Listener::Abstract {
                socket: Some(l), ..
            } => read_ready(l).await.map(drop),
            // Closed while paused: nothing to wait for until it is bound again.
            Listener::Abstract { socket: None, .. } => std::future::pending().await,
        }
    }

    /// Waits for the next connection.
    pub async fn accept(&self) -> io::Result<(Stream, Endpoints)> {
        match self {
            Listener::Tcp(l, fixed) => {
                // Accepted outside tokio, so that the connection joins the event loop only
                // if it has to wait (see `LazyTcp`).
                let (socket, client) = accept_when_ready(l, |l| {
                    socket2::SockRef::from(l).accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
                })
                .await?;
                let stream = std::net::TcpStream::from(socket);
                let local = fixed.or_else(|| stream.local_addr().ok());
                Ok((
                    Stream::Lazy(LazyTcp::new(stream)),
                    Endpoints {
                        client: client.as_socket(),
                        local,
                    },
                ))
            }
            Listener::Unix(l)
            | Listener::Abstract {
                socket: Some(l), ..
            } => {
                let (stream, _) = accept_when_ready(l, |l| l.accept()).await?;
                stream.set_nonblocking(true)?;
                Ok((
                    Stream::Unix(tokio::net::UnixStream::from_std(stream)?),
                    Endpoints {
                        client: None,
                        local: None,
                    },
                ))
            }
            Listener::Abstract { socket: None, .. } => std::future::pending().await,
        }
    }
}

/// The abstract name a unix socket is bound to, if it is one: HAProxy's padded form when the
/// address fills `sun_path` (the name then ends at the first NUL byte), else the short form.
fn abstract_name_of(addr: &std::os::unix::net::SocketAddr) -> Option<AbstractName> {
    use std::os::linux::net::SocketAddrExt;
    let bytes = addr.as_abstract_name()?;
    let padded = bytes.len() == sluice_config::addr::ABSTRACT_NAME_MAX;
    let end = if padded {
        bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())
    } else {
        bytes.len()
    };
    Some(AbstractName {
        name: String::from_utf8(bytes[..end].to_vec()).ok()?,
        padded,
    })
}

/// One listening socket an address stands for: what identifies it when a master process
/// hands its sockets to a worker, reload after reload (`Display` gives the key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP address (one port of a range).
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(String),
    /// A unix socket in the abstract namespace.
    Abstract(AbstractName),
    /// An inherited descriptor.
    Fd(i32),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(path) => write!(f, "unix@{path}"),
            Endpoint::Abstract(name) => write!(f, "{name}"),
            Endpoint::Fd(n) => write!(f, "fd@{n}"),
        }
    }
}

/// The sockets `addr` stands for (one per port of a range), host names resolved.
pub fn endpoints(addr: &ListenAddr) -> io::Result<Vec<Endpoint>> {
    Ok(match addr {
        ListenAddr::Inet {
            family,
            host,
            ports,
        } => {
            let ip = resolve_listen_host(*family, host)?;
            ports
                .clone()
                .map(|port| Endpoint::Tcp(SocketAddr::new(ip, port)))
                .collect()
        }
        ListenAddr::Unix(path) => vec![Endpoint::Unix(path.clone())],
        ListenAddr::Abstract(name) => vec![Endpoint::Abstract(name.clone())],
        ListenAddr::Fd(n) => vec![Endpoint::Fd(*n)],
    })
}

/// Binds (or, for `fd@N`, adopts) one endpoint.
pub fn bind_endpoint(endpoint: &Endpoint, opts: &BindOptions) -> io::Result<BoundListener> {
    match endpoint {
        Endpoint::Tcp(addr) => bind_tcp(*addr, opts).map(BoundListener::Tcp),
        Endpoint::Unix(path) => bind_unix(path, opts).map(BoundListener::Unix),
        Endpoint::Abstract(name) => bind_abstract(name, opts).map(BoundListener::Unix),
        Endpoint::Fd(n) => adopt(*n),
    }
}

/// Binds every socket `addr` stands for (one per port of a range).
pub fn bind(addr: &ListenAddr, opts: &BindOptions) -> io::Result<Vec<BoundListener>> {
    endpoints(addr)?
        .iter()
        .map(|e| bind_endpoint(e, opts))
        .collect()
}

fn resolve_listen_host(family: Family, host: &Host) -> io::Result<IpAddr> {
    match host {
        Host::Any(Family::V6) => Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        Host::Any(_) if family == Family::V6 => Ok(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        Host::Any(_) => Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        Host::Ip(ip) => Ok(*ip),
        Host::Name(name) => resolve_name(name, family),
    }
}

/// Resolves a host name with the system resolver, keeping the first address of `family`.
pub fn resolve_name(name: &str, family: Family) -> io::Result<IpAddr> {
    (name, 0)
        .to_socket_addrs()?
        .map(|sa| sa.ip())
        .find(|ip| match family {
            Family::Unspec => true,
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no address for '{name}'")))
}

fn bind_tcp(addr: SocketAddr, opts: &BindOptions) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if let Some(name) = &opts.interface {
        socket.bind_device(Some(name.as_bytes()))?;
    }
    // As HAProxy does on Linux: a new process started with `-sf`/`-st` binds the same address
    // while the old one still listens, so a reload never refuses a connection.
    socket.set_reuse_port(!opts.no_reuseport)?;
    if addr.is_ipv6() {
        if opts.v6only {
            socket.set_only_v6(true)?;
        } else if opts.v4v6 {
            socket.set_only_v6(false)?;
        }
    }
    socket.bind(&addr.into())?;
    // Set on the listening socket, these go to every connection it accepts.
    match opts.mss {
        Some(mss) if mss > 0 => socket.set_mss(mss.unsigned_abs())?,
        Some(less) if less < 0 => {
            let system = socket.mss()?;
            socket.set_mss(system.saturating_sub(less.unsigned_abs()).max(1))?;
        }
        _ => {}
    }
    if opts.user_timeout.is_some() {
        socket.set_tcp_user_timeout(opts.user_timeout)?;
    }
    socket.listen(backlog(opts))?;
    if opts.defer_accept {
        fd::set_defer_accept(socket.as_fd(), 1)?;
    }
    if opts.tfo {
        fd::set_fast_open(socket.as_fd(), backlog(opts))?;
    }
    Ok(socket.into())
}

fn backlog(opts: &BindOptions) -> i32 {
    i32::try_from(opts.backlog.max(1)).unwrap_or(i32::MAX)
}

fn bind_unix(path: &str, opts: &BindOptions) -> io::Result<StdUnixListener> {
    // A socket file left by a previous run would make bind fail; replace it (but never a
    // regular file, which is more likely a mistake in the configuration).
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_socket()
    {
        std::fs::remove_file(path)?;
    }
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    if let Some(mode) = opts.unix_mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    if opts.unix_owner != (None, None) {
        std::os::unix::fs::chown(path, opts.unix_owner.0, opts.unix_owner.1)?;
    }
    socket.listen(backlog(opts))?;
    Ok(StdUnixListener::from(OwnedFd::from(socket)))
}

/// A unix socket's address as text: its path, or `abns@NAME` (`abnsz@NAME`) for an
/// abstract one.
fn unix_address_text(addr: &std::os::unix::net::SocketAddr) -> String {
    if let Some(path) = addr.as_pathname() {
        return path.display().to_string();
    }
    abstract_name_of(addr).map_or_else(String::new, |name| name.to_string())
}

/// Binds a socket in the abstract namespace. There is no file to replace, chmod or chown:
/// the name is free once no socket holds it, and anyone may connect.
fn bind_abstract(name: &AbstractName, opts: &BindOptions) -> io::Result<StdUnixListener> {
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.bind(&abstract_address(name)?)?;
    socket.listen(backlog(opts))?;
    Ok(StdUnixListener::from(OwnedFd::from(socket)))
}

/// The socket address of an abstract name: a NUL byte, the name, and for HAProxy's padded
/// form (`abns@`) NUL bytes up to the end of `sun_path`, all of which belong to the address.
pub fn abstract_address(name: &AbstractName) -> io::Result<socket2::SockAddr> {
    use std::os::unix::ffi::OsStrExt;
    /// The size of `sun_path` on Linux.
    const SUN_PATH_LEN: usize = 108;
    let mut bytes = Vec::with_capacity(SUN_PATH_LEN);
    bytes.push(0);
    bytes.extend_from_slice(name.name.as_bytes());
    if name.padded {
        bytes.resize(SUN_PATH_LEN.max(bytes.len()), 0);
    }
    // socket2 takes a leading NUL byte as the abstract namespace's mark and sizes the
    // address by the bytes given, trailing NULs included.
    socket2::SockAddr::unix(std::ffi::OsStr::from_bytes(&bytes))
}

fn adopt(fd_number: i32) -> io::Result<BoundListener> {
    adopt_owned(fd::adopt_listening_socket(fd_number)?)
}

/// Makes a [`BoundListener`] of a socket another process handed over (`-x`, a master's
/// worker), after checking that it listens.
pub fn adopt_owned(owned: OwnedFd) -> io::Result<BoundListener> {
    let listening = nix::sys::socket::getsockopt(&owned, nix::sys::socket::sockopt::AcceptConn)
        .map_err(io::Error::from)?;
    if !listening {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "handed-over socket is not listening",
        ));
    }
    let socket = Socket::from(owned);
    let is_unix = socket
        .local_addr()
        .map(|a| a.domain() == Domain::UNIX)
        .unwrap_or(false);
    socket.set_cloexec(true)?;
    Ok(if is_unix {
        BoundListener::Unix(StdUnixListener::from(OwnedFd::from(socket)))
    } else {
        BoundListener::Tcp(socket.into())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn opts() -> BindOptions {
        BindOptions {
            backlog: 16,
            ..BindOptions::default()
        }
    }

    #[tokio::test]
    async fn abstract_sockets_in_haproxy_s_padded_form_and_the_short_one() {
        use sluice_config::addr::AbstractName;
        let unique = format!("sluice-test-{}", std::process::id());
        let name = |padded| AbstractName {
            name: unique.clone(),
            padded,
        };
        let padded = bind_endpoint(&Endpoint::Abstract(name(true)), &opts()).unwrap();
        assert_eq!(padded.address_parts().0, format!("abns@{unique}"));
        // The padding is part of the address: 108 bytes of `sun_path`, the name's NUL first.
        let BoundListener::Unix(l) = &padded else {
            unreachable!()
        };
        let local = socket2::SockRef::from(l).local_addr().unwrap();
        let bytes = local.as_abstract_namespace().unwrap();
        assert_eq!(bytes.len(), 107);
        assert!(bytes.starts_with(unique.as_bytes()));
        assert!(bytes[unique.len()..].iter().all(|&b| b == 0));
        // The same name twice is refused, as a path or a port is.
        let again = bind_endpoint(&Endpoint::Abstract(name(true)), &opts());
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::AddrInUse);
        // The short form is another address: nobody listens there yet.
        let refused = crate::stream::connect_abstract(&name(false)).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        let short = bind_endpoint(&Endpoint::Abstract(name(false)), &opts()).unwrap();
        assert_eq!(short.address_parts().0, format!("abnsz@{unique}"));
        for (listener, padded) in [(padded, true), (short, false)] {
            let listener = listener.into_async().unwrap();
            let mut client = crate::stream::connect_abstract(&name(padded)).unwrap();
            let (mut accepted, endpoints) = listener.accept().await.unwrap();
            assert_eq!(endpoints.client, None);
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            client.write_all(b"ping").await.unwrap();
            let mut got = [0; 4];
            accepted.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"ping");
        }
    }

    #[test]
    fn tfo_turns_tcp_fast_open_on_with_the_backlog_as_its_queue() {
        use std::os::fd::AsFd;
        let any_port = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let queue = |l: &BoundListener| match l {
            BoundListener::Tcp(l) => fd::fast_open_queue(l.as_fd()).unwrap(),
            BoundListener::Unix(_) => unreachable!(),
        };
        let plain = bind_endpoint(&any_port, &opts()).unwrap();
        assert_eq!(queue(&plain), 0);
        let fast = BindOptions {
            tfo: true,
            ..opts()
        };
        let listener = bind_endpoint(&any_port, &fast).unwrap();
        assert_eq!(queue(&listener), 16);
        // Its shards too.
        assert_eq!(queue(&listener.shards(1, &fast).unwrap()[0]), 16);
    }

    #[tokio::test]
    async fn accepted_connections_take_the_listener_s_segment_size_and_user_timeout() {
        let any_port = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let tuned = BindOptions {
            mss: Some(1200),
            user_timeout: Some(Duration::from_secs(7)),
            ..opts()
        };
        let bound = bind_endpoint(&any_port, &tuned).unwrap();
        let BoundListener::Tcp(l) = &bound else {
            unreachable!()
        };
        let addr = l.local_addr().unwrap();
        let listener = bound.into_async().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let (Stream::Lazy(accepted), _) = listener.accept().await.unwrap() else {
            panic!("a TCP connection")
        };
        let accepted = socket2::SockRef::from(accepted.socket());
        assert_eq!(
            accepted.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(7))
        );
        // The segment size in use is at most the one announced.
        assert!(accepted.mss().unwrap() <= 1200);
        // A negative value lowers the system's: a listener's is 536 until it learns better.
        let lowered = BindOptions {
            mss: Some(-36),
            ..opts()
        };
        let BoundListener::Tcp(l) = bind_endpoint(&any_port, &lowered).unwrap() else {
            unreachable!()
        };
        assert_eq!(socket2::SockRef::from(&l).mss().unwrap(), 500);
    }

    #[test]
    fn interface_binds_the_listener_to_a_device() {
        let any_port = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let on_lo = BindOptions {
            interface: Some("lo".to_owned()),
            ..opts()
        };
        // Binding to a device takes CAP_NET_RAW: without it, the bind fails (as HAProxy's
        // does) rather than listening on every interface.
        match bind_endpoint(&any_port, &on_lo) {
            Ok(BoundListener::Tcp(l)) => {
                let device = socket2::SockRef::from(&l).device().unwrap();
                assert_eq!(device.as_deref(), Some(&b"lo"[..]));
            }
            Ok(BoundListener::Unix(_)) => unreachable!(),
            Err(err) => assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied),
        }
        let nowhere = BindOptions {
            interface: Some("no-such-if0".to_owned()),
            ..opts()
        };
        assert!(bind_endpoint(&any_port, &nowhere).is_err());
    }

    #[tokio::test]
    async fn a_listener_that_stops_listening_refuses_clients_and_frees_its_address() {
        let exclusive = BindOptions {
            no_reuseport: true,
            ..opts()
        };
        // A port given, as configurations give them: a socket bound to port 0 would give
        // its port back when it stops listening.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let port_of = Endpoint::Tcp(addr);
        let bound = bind_endpoint(&port_of, &exclusive).unwrap();
        // Without SO_REUSEPORT, nobody else may bind the address while it listens.
        assert!(bind_endpoint(&port_of, &opts()).is_err());
        let mut listener = bound.into_async().unwrap();
        listener.stop_listening().unwrap();
        let refused = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // Another socket may now listen there, and must leave before this one comes back.
        let other = bind_endpoint(&port_of, &exclusive).unwrap();
        drop(other);
        listener.listen_again(16).unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let (_, endpoints) = listener.accept().await.unwrap();
        assert_eq!(endpoints.local, Some(addr));
    }

    #[test]
    fn shards_share_the_address_and_each_has_its_own_queue() {
        // Each queue takes all the clients, however they are spread.
        let roomy = BindOptions {
            backlog: 64,
            ..BindOptions::default()
        };
        let any_port = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let primary = bind_endpoint(&any_port, &roomy).unwrap();
        let shards = primary.shards(2, &roomy).unwrap();
        assert_eq!(shards.len(), 2);
        let port = |l: &BoundListener| match l {
            BoundListener::Tcp(l) => l.local_addr().unwrap(),
            BoundListener::Unix(_) => unreachable!(),
        };
        let all: Vec<_> = std::iter::once(&primary).chain(&shards).collect();
        assert!(all.iter().all(|l| port(l) == port(&primary)));
        // Connections land in the group's queues, each in one only: every client is accepted
        // exactly once over the three, and they are spread (the kernel hashes each client's
        // port: 48 all in one queue would be a chance of 3 in 10^23).
        let clients: Vec<_> = (0..48)
            .map(|_| std::net::TcpStream::connect(port(&primary)).unwrap())
            .collect();
        let mut accepted = Vec::new();
        for listener in &all {
            let BoundListener::Tcp(l) = listener else {
                unreachable!()
            };
            l.set_nonblocking(true).unwrap();
            accepted.push(std::iter::from_fn(|| l.accept().ok()).count());
        }
        assert_eq!(accepted.iter().sum::<usize>(), clients.len());
        assert!(
            accepted.iter().filter(|&&n| n > 0).count() > 1,
            "{accepted:?}"
        );
        // A unix socket has no shards.
        let dir = std::env::temp_dir().join(format!("sluice-shards-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let unix = bind_endpoint(&Endpoint::Unix(path.to_string_lossy().into()), &opts()).unwrap();
        assert!(unix.shards(2, &opts()).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn binds_a_port_range_to_one_socket_per_port() {
        // Find two free adjacent ports by binding port 0 first.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = probe.local_addr().unwrap().port();
        drop(probe);
        let addr = ListenAddr::Inet {
            family: Family::Unspec,
            host: Host::Ip("127.0.0.1".parse().unwrap()),
            ports: base..=base.saturating_add(1),
        };
        match bind(&addr, &opts()) {
            Ok(listeners) => assert_eq!(listeners.len(), 2),
            // The second port may be taken by another process: only that error is acceptable.
            Err(err) => assert_eq!(err.kind(), io::ErrorKind::AddrInUse),
        }
    }

    #[test]
    fn unix_socket_replaces_a_stale_socket_file_and_sets_mode() {
        let dir = std::env::temp_dir().join(format!("sluice-net-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let path_str = path.to_str().unwrap().to_owned();
        let mut o = opts();
        o.unix_mode = Some(0o600);
        let first = bind(&ListenAddr::Unix(path_str.clone()), &o).unwrap();
        drop(first);
        let second = bind(&ListenAddr::Unix(path_str.clone()), &o).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let BoundListener::Unix(listener) = &second[0] else {
            panic!("expected a unix listener")
        };
        let mut client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn regular_file_in_the_way_is_not_removed() {
        let dir = std::env::temp_dir().join(format!("sluice-net-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("not-a-socket");
        std::fs::write(&path, b"keep me").unwrap();
        let err = bind(
            &ListenAddr::Unix(path.to_str().unwrap().to_owned()),
            &opts(),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn accepted_connections_start_with_the_listeners_options() {
        let addr = ListenAddr::Inet {
            family: Family::Unspec,
            host: Host::Ip("127.0.0.1".parse().unwrap()),
            ports: 0..=0,
        };
        let bound = bind(&addr, &opts()).unwrap().remove(0);
        let buffers = SocketBuffers {
            receive: Some(64 * 1024),
            send: Some(48 * 1024),
        };
        bound.tune_accepted(true, buffers).unwrap();
        let BoundListener::Tcp(l) = &bound else {
            panic!("expected tcp")
        };
        let addr = l.local_addr().unwrap();
        assert!(!socket2::SockRef::from(l).quickack().unwrap());
        let listener = bound.into_async().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (Stream::Lazy(accepted), _) = listener.accept().await.unwrap() else {
            panic!("expected tcp")
        };
        // No setsockopt on the accepted socket: TCP_NODELAY came with it, and the buffer
        // sizes (which Linux reports doubled).
        let socket = socket2::SockRef::from(accepted.socket());
        assert!(socket.nodelay().unwrap());
        assert_eq!(socket.recv_buffer_size().unwrap(), 2 * 64 * 1024);
        assert_eq!(socket.send_buffer_size().unwrap(), 2 * 48 * 1024);
    }

    #[tokio::test]
    async fn readable_leaves_the_connection_queued_and_accept_waits_when_none_is() {
        let addr = ListenAddr::Inet {
            family: Family::Unspec,
            host: Host::Ip("127.0.0.1".parse().unwrap()),
            ports: 0..=0,
        };
        let bound = bind(&addr, &opts()).unwrap().remove(0);
        let BoundListener::Tcp(l) = &bound else {
            panic!("expected tcp")
        };
        let addr = l.local_addr().unwrap();
        let listener = bound.into_async().unwrap();
        let noop = &mut std::task::Context::from_waker(std::task::Waker::noop());
        let mut first = std::pin::pin!(listener.accept());
        assert!(first.as_mut().poll(noop).is_pending(), "nothing queued yet");
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        listener.readable().await.unwrap();
        listener.readable().await.unwrap();
        let (_, endpoints) = first.await.unwrap();
        assert_eq!(endpoints.client, Some(client.local_addr().unwrap()));
        let mut second = std::pin::pin!(listener.accept());
        assert!(
            second.as_mut().poll(noop).is_pending(),
            "the one queued was taken"
        );
        let other = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_, endpoints) = second.await.unwrap();
        assert_eq!(endpoints.client, Some(other.local_addr().unwrap()));
    }

    #[test]
    fn adopting_a_non_listening_descriptor_fails() {
        let file = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::IntoRawFd;
        let raw = file.into_raw_fd();
        let err = adopt(raw).unwrap_err();
        // ENOTSOCK: /dev/null is not a socket. A failed adoption leaves the descriptor with
        // the caller; this test lets it close when the test process exits.
        assert_eq!(err.raw_os_error(), Some(libc::ENOTSOCK));
    }

    #[test]
    fn adopts_an_inherited_listening_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        use std::os::fd::IntoRawFd;
        let raw = listener.into_raw_fd();
        let adopted = adopt(raw).unwrap();
        assert_eq!(adopted.describe(), addr.to_string());
        let BoundListener::Tcp(l) = adopted else {
            panic!("expected tcp")
        };
        let _client = std::net::TcpStream::connect(addr).unwrap();
        assert!(l.accept().is_ok());
    }
}
