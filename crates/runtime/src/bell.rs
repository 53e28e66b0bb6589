//! A bell the accept loops listen for: rung when what they obey changes (the process's
//! listening state, a frontend's `disable frontend`).
//!
//! An accept loop waits for its next connection and for such a change at the same time, and
//! in the close-per-request load it does so once per connection or so. A watch channel's
//! `changed()` joins and leaves a list of waiters under a lock at each of those waits; a
//! bell is joined once, when the loop starts, with its task's waker (the same for every poll
//! of a task), and a wait is then one atomic load: the count of rings against the one seen.
//! Ringing is rare (signals, CLI commands) and wakes every loop listening.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};

/// The rings so far and the tasks listening.
#[derive(Debug, Default)]
pub struct Bell {
    rings: AtomicU64,
    /// Listening tasks' wakers, by slot; `None` for a slot whose listener left.
    listeners: Mutex<Vec<Option<Waker>>>,
}

/// One task listening to a [`Bell`] until dropped.
#[derive(Debug)]
pub struct Listening<'b> {
    bell: &'b Bell,
    slot: usize,
    heard: u64,
}

impl Bell {
    /// Wakes every listening task; their next [`Listening::rang`] says so.
    pub fn ring(&self) {
        self.rings.fetch_add(1, Ordering::SeqCst);
        for waker in self.lock().iter().flatten() {
            waker.wake_by_ref();
        }
    }

    /// Listens with `waker`, the waker of the task that will wait (a task's waker stays the
    /// same for its whole life). Rings before this call are not heard.
    pub fn listen(&self, waker: &Waker) -> Listening<'_> {
        let mut listeners = self.lock();
        let slot = match listeners.iter().position(Option::is_none) {
            Some(free) => {
                listeners[free] = Some(waker.clone());
                free
            }
            None => {
                listeners.push(Some(waker.clone()));
                listeners.len() - 1
            }
        };
        Listening {
            bell: self,
            slot,
            heard: self.rings.load(Ordering::SeqCst),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Waker>>> {
        // A list of wakers cannot be left inconsistent by a panic.
        self.listeners.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Listening<'_> {
    /// Whether the bell rang since the last call (or since listening began).
    pub fn rang(&mut self) -> bool {
        let rings = self.bell.rings.load(Ordering::SeqCst);
        let rang = rings != self.heard;
        self.heard = rings;
        rang
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.bell.lock().get_mut(self.slot) {
            *slot = None;
        }
    }
}

/// Completes once either bell rang since its last [`Listening::rang`]; both are marked heard.
/// Polled only by the task whose waker listens.
pub async fn either_rang(a: &mut Listening<'_>, b: &mut Listening<'_>) {
    std::future::poll_fn(|_| {
        // Both marked, so a ring of each is heard once.
        if a.rang() | b.rang() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct Counting(AtomicUsize);
    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_ring_wakes_each_listener_and_is_heard_once() {
        let bell = Bell::default();
        bell.ring();
        let (one, two) = (Arc::new(Counting::default()), Arc::new(Counting::default()));
        let mut first = bell.listen(&Waker::from(Arc::clone(&one)));
        let mut second = bell.listen(&Waker::from(Arc::clone(&two)));
        assert!(!first.rang(), "a ring before listening is not heard");
        bell.ring();
        assert_eq!(one.0.load(Ordering::SeqCst), 1);
        assert_eq!(two.0.load(Ordering::SeqCst), 1);
        assert!(first.rang());
        assert!(!first.rang(), "heard once");
        assert!(second.rang());
    }

    #[test]
    fn a_listener_that_left_is_not_woken_and_its_slot_is_reused() {
        let bell = Bell::default();
        let gone = Arc::new(Counting::default());
        drop(bell.listen(&Waker::from(Arc::clone(&gone))));
        let stays = Arc::new(Counting::default());
        let _listening = bell.listen(&Waker::from(Arc::clone(&stays)));
        assert_eq!(bell.lock().len(), 1, "the free slot was taken again");
        bell.ring();
        assert_eq!(gone.0.load(Ordering::SeqCst), 0);
        assert_eq!(stays.0.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn either_rang_completes_for_a_ring_of_either_bell() {
        let (a, b) = (Bell::default(), Bell::default());
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let (mut on_a, mut on_b) = (a.listen(&waker), b.listen(&waker));
        {
            let mut waiting = std::pin::pin!(either_rang(&mut on_a, &mut on_b));
            let noop = &mut std::task::Context::from_waker(Waker::noop());
            assert!(waiting.as_mut().poll(noop).is_pending());
            b.ring();
            waiting.await;
        }
        assert!(!on_a.rang() && !on_b.rang(), "both marked heard");
    }
}
