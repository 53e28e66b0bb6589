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
//! instead of asking the allocator each time. The pool keeps a few free buffers
//! ([`POOL_LOW_WATER`]) and frees the rest; once a burst has freed a lot, the thread's
//! [`trim_after_bursts`] task asks the C allocator to give the free pages back to the system
//! (rate-limited), so a burst's high-water mark does not stay resident.

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

/// Free buffers kept per thread for reuse; beyond this, released buffers go back to the
/// allocator. A thread rarely needs more at once between two requests' worth of traffic,
/// and each one kept costs `tune.bufsize` of resident memory for good.
pub const POOL_LOW_WATER: usize = 8;

/// Buffer bytes freed past the low-water mark after which the allocator is asked to give
/// its free memory back (a burst of 64 buffers of 16 KiB).
const TRIM_AFTER_BYTES: usize = 1 << 20;

/// How long after a burst has freed enough the trim runs: buffers come back over a moment,
/// one trim after the burst releases them all.
const TRIM_DELAY: Duration = Duration::from_millis(100);

/// Least time between two trims of one thread: a trim walks the allocator's heaps.
const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// A thread's free buffers and what it freed since its last trim.
#[derive(Default)]
struct Pool {
    free: Vec<Vec<u8>>,
    /// Bytes freed past the low-water mark since the last trim.
    released: usize,
    /// The thread's trim task was woken and has not trimmed yet.
    trim_pending: bool,
}

thread_local! {
    static POOL: std::cell::RefCell<Pool> = std::cell::RefCell::default();
    /// Wakes the thread's [`trim_after_bursts`] task.
    static TRIM: std::rc::Rc<tokio::sync::Notify> = std::rc::Rc::default();
}

/// An empty buffer of at least `capacity` bytes, from the thread's pool if it has one.
pub(crate) fn take_buffer(capacity: usize) -> Vec<u8> {
    let pooled = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let at = pool.free.iter().rposition(|b| b.capacity() >= capacity)?;
        Some(pool.free.swap_remove(at))
    });
    pooled.unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// Gives a buffer back to the thread's pool, or to the allocator when the pool already holds
/// [`POOL_LOW_WATER`] buffers (then wakes the trim task once enough was freed).
pub(crate) fn give_buffer(mut buffer: Vec<u8>) {
    if buffer.capacity() == 0 {
        return;
    }
    buffer.clear();
    let wake = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.free.len() < POOL_LOW_WATER {
            pool.free.push(buffer);
            return false;
        }
        pool.released += buffer.capacity();
        drop(buffer);
        if pool.released < TRIM_AFTER_BYTES || pool.trim_pending {
            return false;
        }
        pool.trim_pending = true;
        true
    });
    if wake {
        TRIM.with(|trim| trim.notify_one());
    }
}

/// Runs for the life of an event-loop thread: after a burst has freed more than
/// [`TRIM_AFTER_BYTES`] of buffers, asks the C allocator to give its free pages back to the
/// system, at most once per [`TRIM_INTERVAL`].
pub async fn trim_after_bursts() {
    let wanted = TRIM.with(std::rc::Rc::clone);
    loop {
        wanted.notified().await;
        tokio::time::sleep(TRIM_DELAY).await;
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            pool.released = 0;
            pool.trim_pending = false;
        });
        sluice_net::fd::release_free_memory();
        tokio::time::sleep(TRIM_INTERVAL).await;
    }
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
        // Reading is limited to the room left, so the buffer never grows past `capacity`.
        let room = self.capacity - self.data.len();
        let mut spare = (&mut self.data).limit(room);
        let read = reader.read_buf(&mut spare);
        let n = match limit {
            Some(limit) => match tokio::time::timeout(limit, read).await {
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

    #[tokio::test(start_paused = true)]
    async fn the_pool_keeps_its_low_water_mark_and_a_burst_wakes_the_trim() {
        let wanted = TRIM.with(std::rc::Rc::clone);
        let count = POOL_LOW_WATER + TRIM_AFTER_BYTES / 16384 + 1;
        let burst: Vec<Vec<u8>> = (0..count).map(|_| take_buffer(16384)).collect();
        for buffer in burst {
            give_buffer(buffer);
        }
        assert_eq!(POOL.with(|p| p.borrow().free.len()), POOL_LOW_WATER);
        // The wake-up waits for the trim task (none runs in this test).
        let woken = tokio::time::timeout(Duration::from_secs(1), wanted.notified()).await;
        assert!(woken.is_ok(), "the trim task was woken");
        assert!(POOL.with(|p| p.borrow().trim_pending));
    }

    #[tokio::test(start_paused = true)]
    async fn a_small_burst_does_not_wake_the_trim() {
        let wanted = TRIM.with(std::rc::Rc::clone);
        let burst: Vec<Vec<u8>> = (0..POOL_LOW_WATER + 4)
            .map(|_| take_buffer(16384))
            .collect();
        for buffer in burst {
            give_buffer(buffer);
        }
        let woken = tokio::time::timeout(Duration::from_secs(1), wanted.notified()).await;
        assert!(woken.is_err(), "nothing to trim yet");
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
