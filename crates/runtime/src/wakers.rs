//! Keeping the waker of a task that polls again and again (a thread's timer task, its round
//! ender, a wait in a timeout queue): the one kept is replaced only when the new one would
//! wake another task, since cloning a waker and dropping the old one are atomic operations on
//! the task, for nothing when it is the same task.

use std::task::Waker;

/// Keeps `waker` in `slot` unless the waker there already wakes the same task; returns the
/// one it replaced, for the caller to drop where that is safe (dropping a waker may free a
/// task, whose own drop may need what the caller holds borrowed).
pub fn keep(slot: &mut Option<Waker>, waker: &Waker) -> Option<Waker> {
    match slot {
        Some(kept) if kept.will_wake(waker) => None,
        _ => slot.replace(waker.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Task;
    impl Wake for Task {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn a_waker_of_the_same_task_is_not_replaced() {
        let (first, second) = (Waker::from(Arc::new(Task)), Waker::from(Arc::new(Task)));
        let mut slot = None;
        assert!(keep(&mut slot, &first).is_none(), "an empty slot takes it");
        assert!(keep(&mut slot, &first.clone()).is_none(), "same task: kept");
        let replaced = keep(&mut slot, &second).expect("another task: replaced");
        assert!(replaced.will_wake(&first));
        assert!(slot.as_ref().is_some_and(|w| w.will_wake(&second)));
    }
}
