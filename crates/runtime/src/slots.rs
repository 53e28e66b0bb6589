//! Connection slots: the `maxconn` limits of the process, of each frontend and of each bind
//! line, which every session holds one of from its accept to its end.
//!
//! Taking and giving back a slot happens once per connection on every thread, so both are a
//! single atomic operation on the path every connection takes: a slot is free when fewer are
//! taken than the limit allows, and giving one back wakes somebody only when a listener waits
//! for one (the limit was reached). The limit can change at run time (`set maxconn global`,
//! `set maxconn frontend`): lowering it leaves the sessions that hold slots alone and refuses
//! new ones until enough have ended, as HAProxy does; raising it lets waiting listeners in at
//! once. A soft stop waits for every slot to come back ([`ConnSlots::all_free`]).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A limit of concurrent connections and the slots taken under it.
#[derive(Debug)]
pub struct ConnSlots {
    limit: AtomicUsize,
    taken: AtomicUsize,
    /// Tasks waiting in [`ConnSlots::wait_until`]: slots given back wake them only then.
    waiters: AtomicUsize,
    changed: Notify,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub struct Slot(Arc<ConnSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

impl ConnSlots {
    /// `limit` slots, all free.
    pub fn new(limit: u32) -> Arc<Self> {
        Arc::new(ConnSlots {
            limit: AtomicUsize::new(limit as usize),
            taken: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            changed: Notify::new(),
        })
    }

    /// The limit in force.
    pub fn limit(&self) -> u32 {
        u32::try_from(self.limit.load(Ordering::Relaxed)).unwrap_or(u32::MAX)
    }

    /// Slots held now.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }

    /// Changes the limit; sessions holding slots keep them.
    pub fn set_limit(&self, limit: u32) {
        self.limit.store(limit as usize, Ordering::SeqCst);
        self.wake_waiters();
    }

    /// A slot if one is free now.
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let limit = self.limit.load(Ordering::SeqCst);
        self.taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |taken| {
                (taken < limit).then_some(taken + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }

    /// A slot, once one is free.
    pub async fn take(self: &Arc<Self>) -> Slot {
        if let Some(slot) = self.try_take() {
            return slot;
        }
        self.wait_until(|| self.try_take()).await
    }

    /// Completes once no slot is held.
    pub fn all_free(&self) -> impl Future<Output = ()> + '_ {
        self.wait_until(|| (self.taken() == 0).then_some(()))
    }

    /// Polls `ready` until it gives a value, sleeping between tries until a slot comes back
    /// or the limit changes.
    async fn wait_until<T>(&self, mut ready: impl FnMut() -> Option<T>) -> T {
        loop {
            if let Some(out) = ready() {
                return out;
            }
            // Listening for a change before saying so, and trying again after: a slot given
            // back between the try above and the count below is seen by the try below, and
            // one given back after the count wakes this wait (both are SeqCst).
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            let _waiting = Waiting::count(&self.waiters);
            if let Some(out) = ready() {
                return out;
            }
            changed.await;
        }
    }

    fn give_back(&self) {
        self.taken.fetch_sub(1, Ordering::SeqCst);
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        // Only when the limit was reached or a soft stop waits: otherwise this load is all a
        // connection's end costs.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.changed.notify_waiters();
        }
    }
}

/// Counts a waiting task for as long as it waits (its future may be dropped mid-wait).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn count(waiters: &'a AtomicUsize) -> Self {
        waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll, Waker};

    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn slots_are_taken_up_to_the_limit_and_given_back_when_dropped() {
        let slots = ConnSlots::new(2);
        let a = slots.try_take().expect("first");
        let _b = slots.try_take().expect("second");
        assert!(slots.try_take().is_none(), "limit reached");
        assert_eq!(slots.taken(), 2);
        drop(a);
        assert_eq!(slots.taken(), 1);
        assert!(
            slots.try_take().is_some(),
            "a slot given back is free again"
        );
    }

    #[tokio::test]
    async fn a_waiting_take_completes_when_a_slot_comes_back() {
        let slots = ConnSlots::new(1);
        let held = slots.try_take().expect("free");
        let mut waiting = pin!(slots.take());
        assert!(poll_once(waiting.as_mut()).is_pending());
        assert_eq!(slots.waiters.load(Ordering::SeqCst), 1);
        drop(held);
        let _slot = waiting.await;
        assert_eq!(slots.taken(), 1);
        assert_eq!(slots.waiters.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_dropped_wait_is_no_longer_counted() {
        let slots = ConnSlots::new(0);
        {
            let mut waiting = pin!(slots.take());
            assert!(poll_once(waiting.as_mut()).is_pending());
            assert_eq!(slots.waiters.load(Ordering::SeqCst), 1);
        }
        assert_eq!(slots.waiters.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn lowering_the_limit_keeps_held_slots_and_raising_it_lets_waiters_in() {
        let slots = ConnSlots::new(4);
        let held: Vec<Slot> = (0..3).map(|_| slots.try_take().expect("free")).collect();
        slots.set_limit(1);
        assert!(slots.try_take().is_none(), "three held, one allowed");
        assert_eq!(slots.taken(), 3, "nobody lost a slot");
        drop(held);
        let one = slots.try_take().expect("all ended: one allowed again");
        assert!(slots.try_take().is_none());
        let mut waiting = pin!(slots.take());
        assert!(poll_once(waiting.as_mut()).is_pending());
        slots.set_limit(2);
        let _two = waiting.await;
        assert_eq!(slots.limit(), 2);
        drop(one);
    }

    #[tokio::test]
    async fn all_free_waits_for_the_last_slot() {
        let slots = ConnSlots::new(3);
        let first = slots.try_take().expect("free");
        let second = slots.try_take().expect("free");
        // Even under a lowered limit, which left fewer slots than are held.
        slots.set_limit(1);
        let mut empty = pin!(slots.all_free());
        assert!(poll_once(empty.as_mut()).is_pending());
        drop(first);
        assert!(poll_once(empty.as_mut()).is_pending(), "one still held");
        drop(second);
        empty.await;
    }
}
