//! The last invalid request of each frontend and the last invalid response of each backend,
//! kept for `show errors` (management.txt §9.3).
//!
//! The data path records a [`Capture`] (a copy of the buffer as it was when parsing failed,
//! the offset of the offending byte, who was involved) only when a message is refused, so
//! keeping them costs nothing on valid traffic. Each proxy keeps the latest capture per
//! direction; the process numbers every capture (`event #N`) and counts them all.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// One refused message.
#[derive(Debug)]
pub struct Capture {
    /// When it was refused.
    pub when: SystemTime,
    /// Its number among the process's captures, from 0.
    pub event: u64,
    /// The client's address (`None` on a unix socket).
    pub client: Option<SocketAddr>,
    /// The other proxy: the backend of a request (if one was chosen), the frontend of a
    /// response, as name and statistics id.
    pub peer: Option<(String, u32)>,
    /// The server (name and id), if one was chosen.
    pub server: Option<(String, u32)>,
    /// The size of the buffer the message was read into.
    pub bufsize: usize,
    /// The bytes received so far.
    pub data: Vec<u8>,
    /// The offset of the byte where parsing failed.
    pub error_at: usize,
}

/// A proxy's latest capture in one direction.
#[derive(Debug, Default)]
pub struct Captured(Mutex<Option<Arc<Capture>>>);

impl Captured {
    /// Replaces the latest capture.
    pub fn record(&self, capture: Capture) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(capture));
    }

    /// The latest capture, if any.
    pub fn latest(&self) -> Option<Arc<Capture>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The process's capture counter.
#[derive(Debug, Default)]
pub struct ErrorEvents(AtomicU64);

impl ErrorEvents {
    /// Takes the next event number.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }

    /// How many captures were made.
    pub fn total(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
