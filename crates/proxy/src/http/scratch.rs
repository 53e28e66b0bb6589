//! Per-thread byte buffers for what a request writes and then drops: the head re-encoded for
//! the server, the response head written to the client, the values rule actions render.
//!
//! Each of these used to be a new `Vec` per request. A [`Scratch`] is taken from the thread's
//! spares and given back when dropped, so a busy thread reuses the same few buffers for every
//! request and allocates only while warming up. Only buffers up to a head's size are kept,
//! and no more than the thread's busiest moment held at once ([`Spares`]).

use sluice_http::spares::Spares;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// The largest buffer kept: a head is at most `tune.bufsize` (16 KiB by default).
const KEPT_CAPACITY: usize = 16 * 1024;

thread_local! {
    static SPARE: RefCell<Spares<Vec<u8>>> = const { RefCell::new(Spares::new()) };
}

/// A byte buffer that goes back to the thread's spares when dropped.
#[derive(Debug, Default)]
pub struct Scratch(Vec<u8>);

impl Scratch {
    /// An empty buffer, a spare one if the thread has one.
    pub fn take() -> Scratch {
        let spare = SPARE.try_with(|s| s.borrow_mut().take()).ok().flatten();
        Scratch(spare.unwrap_or_default())
    }
}

impl From<Vec<u8>> for Scratch {
    fn from(bytes: Vec<u8>) -> Self {
        Scratch(bytes)
    }
}

impl Deref for Scratch {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0);
        if bytes.capacity() == 0 || bytes.capacity() > KEPT_CAPACITY {
            return;
        }
        bytes.clear();
        // During the thread's own teardown there is nowhere to keep it: it is freed.
        let _ = SPARE.try_with(|s| s.borrow_mut().give(bytes));
    }
}

/// Frees the buffers this thread's spares have not used since the last call (see
/// [`Spares::trim`]); called on a period by the thread's upkeep.
pub fn trim_spares() {
    let _ = SPARE.try_with(|s| s.borrow_mut().trim());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_empty() {
        let mut first = Scratch::take();
        first.extend_from_slice(b"a head");
        let address = first.as_ptr();
        drop(first);
        let second = Scratch::take();
        assert!(second.is_empty());
        assert_eq!(second.as_ptr(), address, "the spare was taken again");
        // A large buffer is not kept.
        drop(second);
        let mut large = Scratch::take();
        large.reserve(KEPT_CAPACITY * 2);
        drop(large);
        assert_eq!(Scratch::take().capacity(), 0);
    }
}
