//! A fixed-capacity input buffer: the bytes read from one side that are not consumed yet.
//!
//! Heads are parsed in place (the parser returns offsets into [`InBuf::filled`]), bodies pass
//! through it in pieces, and bytes past the end of a message (a pipelined request) stay in it
//! for the next one. Its capacity is `tune.bufsize` and never grows: a head that does not fit
//! is an error answered with 414/431, never a reason to allocate more.
//!
//! Memory comes from a per-thread pool of buffers, as HAProxy's buffers do: a buffer is taken
//! when bytes arrive and given back as soon as the buffer is empty (an idle keep-alive
//! connection holds none), so a busy thread reuses the same few buffers for every request
//! instead of asking the allocator each time. The pool keeps what the thread's traffic keeps
//! needing and lets go of the rest: each [`TRIM_PERIOD`] the thread's standing timer
//! ([`super::upkeep`]) calls [`trim_idle_buffers`], which frees the buffers that sat unused
//! for the whole period (beyond [`POOL_LOW_WATER`]); if that freed a lot, the upkeep then
//! asks the C allocator to give free pages back to the system. A steady load takes and
//! returns the same buffers without touching the allocator; the burst of an
//! idle-connection storm leaves no resident high-water mark behind.

use bytes::BufMut;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Unconsumed input bytes, `data[start..]`, in a buffer of fixed capacity that holds memory
/// only while it has bytes: an idle keep-alive connection costs no buffer (as in HAProxy), and
/// reading goes into uninitialised spare capacity, so no 16 KiB memset per request.
#[derive(Debug)]
pub struct InBuf {
    data: Vec<u8>,
    start: usize,
    capacity: usize,
}

/// Why reading more input failed.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed its side (end of stream).
    Closed,
    /// Nothing arrived within the allowed time.
    Timeout,
    /// The socket failed.
    Io(io::Error),
    /// The buffer is full of unconsumed bytes.
    Full,
}

/// Free buffers a thread keeps even when its traffic did not need them lately.
pub const POOL_LOW_WATER: usize = 8;

/// Free buffers a thread keeps at most; beyond, a returned buffer goes to the allocator.
/// What the traffic leaves unused for a whole [`TRIM_PERIOD`] is freed anyway: this bounds
/// only the burst between two looks. It must cover what one turn of the event loop gives
/// back before the next takes it again: a turn over thousands of kept-alive connections
/// reads into hundreds of buffers, those of bodies held until the turn's sends
/// (`crate::batch`), and gives them back at once. A pool of 256 let the rest go to the
/// allocator, which unmapped them, to map them again the next turn (2,000 connections: 1.5
/// mappings made and undone per request).
const POOL_MAX: usize = 4096;

/// How often a thread looks for buffers its traffic did not need: one that stayed free for
/// a whole period is let go at the end of the next.
///
/// A second, not less: traffic that comes in waves (clients polling, or paced, at the same
/// moments) must find the last wave's buffers still there. With 2,000 connections each sending
/// 2 requests a second in step, a quarter-second period let every wave's buffers and request
/// states go between two waves, to be mapped again by the next: 1.1 mappings made and undone
/// per request, 46 µs of proxy CPU per request against 29 for HAProxy (`cpu-sparse`).
pub const TRIM_PERIOD: Duration = Duration::from_secs(1);

/// A thread's free buffers.
#[derive(Default)]
struct Pool {
    free: Vec<Vec<u8>>,
    /// The fewest free buffers there were since the last look: that many went unused.
    fewest_free: usize,
}

impl Pool {
    /// Frees the buffers that went unused since the last look (keeping [`POOL_LOW_WATER`]);
    /// returns the bytes freed.
    fn let_go_of_unused(&mut self) -> usize {
        let unused = self.fewest_free.min(self.free.len());
        let surplus = unused.saturating_sub(POOL_LOW_WATER);
        // Found unused for a whole period: to the system now, not to the allocator's cache.
        let freed = sluice_heap::freeing_at_once(|| {
            self.free
                .drain(..surplus)
                .map(|buffer| buffer.capacity())
                .sum()
        });
        self.fewest_free = self.free.len();
        freed
    }
}

thread_local! {
    static POOL: std::cell::RefCell<Pool> = std::cell::RefCell::default();
}

/// An empty buffer of at least `capacity` bytes, from the thread's pool if it has one.
pub(crate) fn take_buffer(capacity: usize) -> Vec<u8> {
    let pooled = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let at = pool.free.iter().rposition(|b| b.capacity() >= capacity)?;
        let buffer = pool.free.swap_remove(at);
        pool.fewest_free = pool.fewest_free.min(pool.free.len());
        Some(buffer)
    });
    pooled.unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// How many free buffers the thread's pool holds (tests check who holds buffers).
#[cfg(test)]
pub(crate) fn free_buffers() -> usize {
    POOL.with(|pool| pool.borrow().free.len())
}

/// Gives a buffer back to the thread's pool (to the allocator when the pool is full).
pub(crate) fn give_buffer(mut buffer: Vec<u8>) {
    if buffer.capacity() == 0 {
        return;
    }
    buffer.clear();
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.free.len() < POOL_MAX {
            pool.free.push(buffer);
        }
    });
}

/// Frees the buffers the thread's traffic did not need since the last call (one
/// [`TRIM_PERIOD`] ago); returns how many bytes.
pub fn trim_idle_buffers() -> usize {
    POOL.with(|pool| pool.borrow_mut().let_go_of_unused())
}

impl Drop for InBuf {
    fn drop(&mut self) {
        give_buffer(std::mem::take(&mut self.data));
    }
}

impl InBuf {
    /// An empty buffer that will hold at most `capacity` bytes (nothing is allocated yet).
    pub fn new(capacity: usize) -> Self {
        InBuf {
            data: Vec::new(),
            start: 0,
            capacity,
        }
    }

    /// The unconsumed bytes.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..]
    }

    /// Number of unconsumed bytes.
    pub fn len(&self) -> usize {
        self.data.len() - self.start
    }

    /// The most bytes the buffer holds (`tune.bufsize`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// True when the bytes read reach the capacity: the last read stopped for want of room,
    /// not of data, so the sender likely has more at hand.
    pub fn reached_capacity(&self) -> bool {
        self.data.len() >= self.capacity
    }

    /// True when nothing is left to consume.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks `n` bytes as consumed (at most what is there).
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.data.len());
        if self.start == self.data.len() {
            self.start = 0;
            self.data.clear();
        }
    }

    /// Replaces the first `old_len` unconsumed bytes (a head being rewritten by rules) with
    /// `new`. Returns false, changing nothing, if the result would not fit in the capacity:
    /// the room `tune.maxrewrite` keeps free is what rewrites grow into.
    #[must_use]
    pub fn replace_prefix(&mut self, old_len: usize, new: &[u8]) -> bool {
        let old_len = old_len.min(self.len());
        let needed = self.len() - old_len + new.len();
        if needed > self.capacity {
            return false;
        }
        if self.start + needed > self.capacity {
            self.data.drain(..self.start);
            self.start = 0;
        }
        let start = self.start;
        self.data
            .splice(start..start + old_len, new.iter().copied());
        true
    }

    /// Replaces `old_len` unconsumed bytes from offset `at` with the concatenation of
    /// `parts`, moving what follows (a field edited in place by a rule). Returns false,
    /// changing nothing, if the range is not there or the result would not fit in the
    /// capacity. No allocation: the bytes move within the buffer.
    #[must_use]
    pub fn replace_range(&mut self, at: usize, old_len: usize, parts: &[&[u8]]) -> bool {
        let new_len: usize = parts.iter().map(|p| p.len()).sum();
        let Some(end) = at.checked_add(old_len).filter(|&end| end <= self.len()) else {
            return false;
        };
        let needed = self.len() - old_len + new_len;
        if needed > self.capacity {
            return false;
        }
        if self.start + needed > self.capacity {
            self.data.drain(..self.start);
            self.start = 0;
        }
        let (from, tail_end) = (self.start + end, self.data.len());
        let to = self.start + at + new_len;
        if new_len > old_len {
            self.data.resize(tail_end + (new_len - old_len), 0);
        }
        self.data.copy_within(from..tail_end, to);
        self.data.truncate(to + (tail_end - from));
        let mut write = self.start + at;
        for part in parts {
            self.data[write..write + part.len()].copy_from_slice(part);
            write += part.len();
        }
        true
    }

    /// Gives the memory back while the buffer is empty (an idle connection holds none).
    pub fn release_if_empty(&mut self) {
        if self.is_empty() {
            give_buffer(std::mem::take(&mut self.data));
            self.start = 0;
        }
    }

    /// Reads what `stream` already received into an empty buffer, without waiting: the
    /// buffer is taken from the pool for the attempt and given back if nothing came
    /// (`WouldBlock`), so an idle connection still holds none. Ok(0) is the end of stream.
    pub fn try_fill(&mut self, stream: &sluice_net::stream::Stream) -> std::io::Result<usize> {
        debug_assert!(self.is_empty());
        if self.data.capacity() == 0 {
            self.data = take_buffer(self.capacity);
        }
        if self.data.capacity() < self.capacity {
            self.data.reserve_exact(self.capacity - self.data.len());
        }
        let room = self.capacity - self.data.len();
        let result = stream.try_read_buf(&mut (&mut self.data).limit(room));
        if !matches!(result, Ok(1..)) {
            self.release_if_empty();
        }
        result
    }

    /// Reads more bytes from `reader`, waiting at most `limit` if one is given. Returns the
    /// number of bytes added (never 0: end of stream is [`ReadError::Closed`]).
    pub async fn read_more<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        reader: &mut R,
        limit: Option<Duration>,
    ) -> Result<usize, ReadError> {
        self.read_more_up_to(reader, limit, self.capacity).await
    }

    /// [`read_more`](Self::read_more), holding no more than `most` bytes afterwards
    /// ([`ReadError::Full`] once it does): a body read ahead of the rules leaves the rewrite
    /// reserve free.
    pub async fn read_more_up_to<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        reader: &mut R,
        limit: Option<Duration>,
        most: usize,
    ) -> Result<usize, ReadError> {
        let most = most.min(self.capacity);
        if self.len() >= most {
            return Err(ReadError::Full);
        }
        if self.data.len() >= self.capacity {
            if self.start == 0 {
                return Err(ReadError::Full);
            }
            // Slide the unconsumed bytes to the front to make room.
            self.data.drain(..self.start);
            self.start = 0;
        }
        if self.data.capacity() == 0 {
            self.data = take_buffer(self.capacity);
        }
        if self.data.capacity() < self.capacity {
            self.data.reserve_exact(self.capacity - self.data.len());
        }
        // Reading is limited to the room left, so the buffer never grows past `capacity`,
        // nor the unconsumed bytes past `most`.
        let room = (self.capacity - self.data.len()).min(most - self.len());
        let mut spare = (&mut self.data).limit(room);
        let read = reader.read_buf(&mut spare);
        let n = match limit {
            Some(limit) => match sluice_runtime::clock::timeout(limit, read).await {
                Ok(result) => result,
                Err(_) => return Err(ReadError::Timeout),
            },
            None => read.await,
        }
        .map_err(ReadError::Io)?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_consumes_and_slides() {
        let mut buf = InBuf::new(8);
        let mut input: &[u8] = b"abcdefgh";
        buf.read_more(&mut input, None).await.unwrap();
        assert_eq!(buf.filled(), b"abcdefgh");
        buf.consume(6);
        let mut more: &[u8] = b"XYZ";
        assert_eq!(buf.read_more(&mut more, None).await.unwrap(), 3);
        assert_eq!(buf.filled(), b"ghXYZ");
    }

    #[tokio::test]
    async fn memory_is_held_only_while_bytes_are() {
        let mut buf = InBuf::new(16);
        assert_eq!(buf.data.capacity(), 0);
        let mut input: &[u8] = b"abc";
        buf.read_more(&mut input, None).await.unwrap();
        assert!(buf.data.capacity() >= 16);
        buf.release_if_empty();
        assert!(buf.data.capacity() >= 16, "bytes are still unconsumed");
        buf.consume(3);
        buf.release_if_empty();
        assert_eq!(buf.data.capacity(), 0);
    }

    #[tokio::test]
    async fn a_prefix_is_replaced_within_the_capacity() {
        let mut buf = InBuf::new(10);
        let mut input: &[u8] = b"xxabcdef";
        buf.read_more(&mut input, None).await.unwrap();
        buf.consume(2);
        assert!(buf.replace_prefix(2, b"ABCD"));
        assert_eq!(buf.filled(), b"ABCDcdef");
        assert!(!buf.replace_prefix(1, b"12345678"));
        assert_eq!(buf.filled(), b"ABCDcdef");
    }

    #[tokio::test]
    async fn a_range_is_replaced_in_place_within_the_capacity() {
        let mut buf = InBuf::new(12);
        let mut input: &[u8] = b"xxabcdef";
        buf.read_more(&mut input, None).await.unwrap();
        buf.consume(2);
        // Growing, shrinking, inserting and removing, the bytes after the range follow.
        assert!(buf.replace_range(1, 2, &[b"12", b"345"]));
        assert_eq!(buf.filled(), b"a12345def");
        assert!(buf.replace_range(1, 5, &[b"Z"]));
        assert_eq!(buf.filled(), b"aZdef");
        assert!(buf.replace_range(5, 0, &[b"!"]));
        assert_eq!(buf.filled(), b"aZdef!");
        assert!(buf.replace_range(0, 2, &[]));
        assert_eq!(buf.filled(), b"def!");
        // Past the capacity (the consumed prefix slides away first) or past the bytes: no.
        assert!(buf.replace_range(0, 0, &[b"12345678"]));
        assert_eq!(buf.filled(), b"12345678def!");
        assert!(!buf.replace_range(0, 0, &[b"x"]));
        assert!(!buf.replace_range(11, 2, &[]));
        assert_eq!(buf.filled(), b"12345678def!");
    }

    #[tokio::test]
    async fn released_buffers_are_reused_by_the_next_reader() {
        let mut first = InBuf::new(4096);
        let mut input: &[u8] = b"abc";
        first.read_more(&mut input, None).await.unwrap();
        let address = first.data.as_ptr();
        first.consume(3);
        first.release_if_empty();
        let mut second = InBuf::new(4096);
        let mut more: &[u8] = b"xyz";
        second.read_more(&mut more, None).await.unwrap();
        assert_eq!(
            second.data.as_ptr(),
            address,
            "the pooled buffer was taken again"
        );
        assert_eq!(second.filled(), b"xyz");
    }

    #[test]
    fn buffers_in_steady_use_stay_and_unused_ones_go() {
        let mut pool = Pool::default();
        let burst: Vec<Vec<u8>> = (0..40).map(|_| Vec::with_capacity(1024)).collect();
        pool.free = burst;
        pool.fewest_free = 40;
        // A period in which 30 were in use at once: only the 10 left untouched are unused,
        // and the low-water mark keeps 8 of them.
        pool.fewest_free = 10;
        assert_eq!(pool.let_go_of_unused(), 2 * 1024);
        assert_eq!(pool.free.len(), 38);
        // A quiet period: everything beyond the low-water mark goes.
        assert_eq!(pool.let_go_of_unused(), 30 * 1024);
        assert_eq!(pool.free.len(), POOL_LOW_WATER);
        assert_eq!(pool.let_go_of_unused(), 0);
    }

    #[test]
    fn taking_a_buffer_lowers_the_count_of_unused_ones() {
        let burst: Vec<Vec<u8>> = (0..12).map(|_| take_buffer(2048)).collect();
        for buffer in burst {
            give_buffer(buffer);
        }
        POOL.with(|p| p.borrow_mut().let_go_of_unused());
        let free_before = POOL.with(|p| p.borrow().free.len());
        let taken: Vec<Vec<u8>> = (0..3).map(|_| take_buffer(2048)).collect();
        assert_eq!(
            POOL.with(|p| p.borrow().fewest_free),
            free_before.saturating_sub(3)
        );
        for buffer in taken {
            give_buffer(buffer);
        }
    }

    #[tokio::test]
    async fn full_and_closed_are_reported() {
        let mut buf = InBuf::new(4);
        let mut input: &[u8] = b"abcd";
        buf.read_more(&mut input, None).await.unwrap();
        assert!(matches!(
            buf.read_more(&mut input, None).await,
            Err(ReadError::Full)
        ));
        buf.consume(4);
        assert!(buf.is_empty());
        let mut empty: &[u8] = b"";
        assert!(matches!(
            buf.read_more(&mut empty, None).await,
            Err(ReadError::Closed)
        ));
    }
}
