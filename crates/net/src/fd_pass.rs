//! Handing listening sockets from a running process to its replacement over a unix socket
//! (management.txt §4: `-x <socket>` and `stats socket ... expose-fd listeners`).
//!
//! The new process connects to the old one's stats socket and sends `_getsocks`; the old one
//! answers with every listening socket it holds, as `SCM_RIGHTS` control messages of at most
//! [`MAX_FDS_PER_MESSAGE`] descriptors, the data of each message being the sockets' keys (the
//! [`crate::listen::Endpoint`] text), one per line, in the same order. The old process then
//! closes the connection; the new one reads to the end and pairs keys and descriptors in
//! order. Both processes then hold the same kernel sockets: whatever the old one stops
//! accepting waits in the queue for the new one, so no connection is refused. The format is
//! Sluice's own (HAProxy's carries more per socket); both ends are Sluice.

use crate::fd;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use std::io::{self, IoSlice, IoSliceMut, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The kernel's limit of descriptors in one `SCM_RIGHTS` message (`SCM_MAX_FD`).
pub const MAX_FDS_PER_MESSAGE: usize = 253;

/// The command a new process sends to ask for the sockets.
pub const GETSOCKS: &str = "_getsocks";

/// Sends `listeners` (key, socket) on `socket`, a connected unix stream in blocking mode.
pub fn send_listeners(
    socket: BorrowedFd<'_>,
    listeners: &[(String, BorrowedFd<'_>)],
) -> io::Result<()> {
    for batch in listeners.chunks(MAX_FDS_PER_MESSAGE) {
        let mut keys = String::new();
        for (key, _) in batch {
            keys.push_str(key);
            keys.push('\n');
        }
        let fds: Vec<RawFd> = batch.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
        let sent = sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(keys.as_bytes())],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(io::Error::from)?;
        // The descriptors travel with the first byte; the rest of a cut message follows.
        let mut rest = &keys.as_bytes()[sent..];
        while !rest.is_empty() {
            match nix::unistd::write(socket, rest) {
                Ok(n) => rest = &rest[n..],
                Err(nix::errno::Errno::EINTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
    Ok(())
}

/// Connects to the stats socket at `path`, asks for the listening sockets and returns them
/// with their keys. Waits at most `limit` for each step.
pub fn receive_listeners(path: &Path, limit: Duration) -> io::Result<Vec<(String, OwnedFd)>> {
    let mut socket = UnixStream::connect(path)?;
    socket.set_read_timeout(Some(limit))?;
    socket.set_write_timeout(Some(limit))?;
    socket.write_all(format!("{GETSOCKS}\n").as_bytes())?;
    let mut data = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut buf = vec![0u8; 16384];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_MESSAGE]);
    loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let received = msg.bytes;
        for cmsg in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                fds.extend(raw.into_iter().map(fd::own_received));
            }
        }
        if received == 0 {
            break;
        }
        data.extend_from_slice(&buf[..received]);
    }
    let text = String::from_utf8(data)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "socket keys are not text"))?;
    let keys: Vec<&str> = text.lines().collect();
    if keys.len() != fds.len() {
        // An answer that is not ours (an old Sluice, or HAProxy): nothing can be trusted.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the old process sent {} socket names for {} sockets",
                keys.len(),
                fds.len()
            ),
        ));
    }
    Ok(keys.into_iter().map(str::to_owned).zip(fds).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixListener;

    #[test]
    fn listeners_cross_a_unix_socket_with_their_keys() {
        let dir = std::env::temp_dir().join(format!("sluice-fdpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixListener::bind(&path).unwrap();
        // More sockets than one message carries.
        let listeners: Vec<std::net::TcpListener> = (0..300)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let keys: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        let old = std::thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            let mut asked = [0u8; 10];
            conn.read_exact(&mut asked).unwrap();
            assert_eq!(&asked, b"_getsocks\n");
            let pairs: Vec<(String, BorrowedFd<'_>)> = listeners
                .iter()
                .map(|l| (l.local_addr().unwrap().to_string(), l.as_fd()))
                .collect();
            send_listeners(conn.as_fd(), &pairs).unwrap();
        });
        let got = receive_listeners(&path, Duration::from_secs(5)).unwrap();
        old.join().unwrap();
        assert_eq!(got.len(), 300);
        for ((key, fd), expected) in got.into_iter().zip(&keys) {
            assert_eq!(&key, expected);
            // The descriptor is the same socket: it accepts a connection made to the key.
            let listener = std::net::TcpListener::from(fd);
            assert_eq!(listener.local_addr().unwrap().to_string(), key);
            let _client = std::net::TcpStream::connect(&key).unwrap();
            listener.accept().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
