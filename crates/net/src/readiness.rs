//! A set of sockets watched for "something to read" outside tokio's own registrations: one
//! epoll instance, itself registered with the event loop, whose ready sockets are reported as
//! the tokens they were added with.
//!
//! It lets a thread keep thousands of idle connections for the cost of one epoll entry each
//! (kernel memory), where a socket registered with tokio also holds a readiness record on the
//! heap and a task to wake. Each socket reported is meant to be removed at once (it goes back
//! to a task of its own): the event loop says when the set has newly ready sockets, and one
//! left in it would only be reported again beside a later one.

use crate::fd::{EpollFd, register_epoll};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use std::io;
use std::os::fd::BorrowedFd;
use tokio::io::unix::AsyncFd;

/// How many ready sockets one look at the set takes at most.
const BATCH: usize = 64;

/// Sockets watched for readability, each known by a token.
pub struct ReadinessSet {
    epoll: AsyncFd<EpollFd>,
}

impl ReadinessSet {
    /// A new empty set, registered with the current tokio runtime's event loop.
    pub fn new() -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        Ok(ReadinessSet {
            epoll: register_epoll(epoll)?,
        })
    }

    /// Watches `fd`: [`ReadinessSet::ready`] reports `token` while it has something to read,
    /// has been closed by its peer, or failed.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let event = EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP, token);
        Ok(self.epoll.get_ref().epoll().add(fd, event)?)
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(self.epoll.get_ref().epoll().delete(fd)?)
    }

    /// Waits until at least one watched socket is ready, then appends the tokens of the ready
    /// ones (at most a batch: the next call reports the rest) to `tokens`.
    pub async fn ready(&self, tokens: &mut Vec<u64>) -> io::Result<()> {
        let mut events = [EpollEvent::empty(); BATCH];
        loop {
            let mut guard = self.epoll.readable().await?;
            let count = match guard
                .get_inner()
                .epoll()
                .wait(&mut events, EpollTimeout::ZERO)
            {
                Ok(count) => count,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            };
            // Fewer than a batch: the set had no more ready sockets, so its readiness is
            // spent; the event loop reports the next one that becomes ready.
            if count < BATCH {
                guard.clear_ready();
            }
            if count > 0 {
                tokens.extend(events[..count].iter().map(EpollEvent::data));
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[tokio::test]
    async fn reports_the_tokens_of_readable_and_closed_sockets() {
        let set = ReadinessSet::new().unwrap();
        let (quiet, quiet_peer) = UnixStream::pair().unwrap();
        let (talking, mut talking_peer) = UnixStream::pair().unwrap();
        set.add(quiet.as_fd(), 1).unwrap();
        set.add(talking.as_fd(), 2).unwrap();
        talking_peer.write_all(b"GET").unwrap();
        let mut tokens = Vec::new();
        set.ready(&mut tokens).await.unwrap();
        assert_eq!(tokens, [2]);
        set.remove(talking.as_fd()).unwrap();
        // The quiet socket's peer leaves: a closed socket is ready too.
        drop(quiet_peer);
        tokens.clear();
        set.ready(&mut tokens).await.unwrap();
        assert_eq!(tokens, [1]);
    }

    #[tokio::test]
    async fn more_ready_sockets_than_a_batch_are_all_reported() {
        let set = ReadinessSet::new().unwrap();
        let pairs: Vec<_> = (0..BATCH + 3)
            .map(|_| UnixStream::pair().unwrap())
            .collect();
        for (token, (socket, peer)) in pairs.iter().enumerate() {
            set.add(socket.as_fd(), token as u64).unwrap();
            (&*peer).write_all(b"x").unwrap();
        }
        let mut tokens = Vec::new();
        while tokens.len() < pairs.len() {
            let seen = tokens.len();
            set.ready(&mut tokens).await.unwrap();
            for &token in &tokens[seen..] {
                set.remove(pairs[token as usize].0.as_fd()).unwrap();
            }
        }
        tokens.sort_unstable();
        assert_eq!(tokens, (0..pairs.len() as u64).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_socket_added_with_data_waiting_is_reported() {
        let set = ReadinessSet::new().unwrap();
        let (socket, mut peer) = UnixStream::pair().unwrap();
        peer.write_all(b"x").unwrap();
        set.add(socket.as_fd(), 7).unwrap();
        let mut tokens = Vec::new();
        set.ready(&mut tokens).await.unwrap();
        assert_eq!(tokens, [7]);
    }
}
