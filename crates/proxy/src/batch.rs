//! Sends held back until the sessions that the same poll woke have read their input: each
//! event-loop round receives first and sends after, as HAProxy's loop does.
//!
//! A session task reads a request and would write it to the server at once, then the next
//! task reads and writes, and so on: the peers (clients, servers) then see their answers
//! trickle in, and a peer waiting in `epoll_wait` wakes more often for fewer of them. Measured
//! with 50 kept-alive connections (BENCHMARKS.md, sixth session), the load generator took 4.8
//! events per `epoll_wait` against 12 through HAProxy, and its CPU, the ceiling on a 2-core
//! machine, spent 3% more per request. Holding each head write until the tasks already woken
//! have run once gives the peers their answers in one burst per round.
//!
//! The hold costs one more poll of the waiting task, so it is made only when another exchange
//! is in progress on the thread ([`Carrying`]): a lone connection sends at once. A thread
//! without a [`run_rounds`] task (tests, the control thread) never holds.

use std::cell::{Cell, RefCell};
use std::task::{Poll, Waker};

/// The thread's waiting sends and its round task.
#[derive(Default)]
struct Round {
    /// Tasks whose send waits for the end of the round.
    waiting: Vec<Waker>,
    /// The task that ends rounds; none on a thread that does not batch.
    ender: Option<Waker>,
    /// Whether the ender is already woken for the current round.
    ending: bool,
}

thread_local! {
    static ROUND: RefCell<Round> = RefCell::new(Round::default());
    /// Exchanges in progress on this thread.
    static CARRYING: Cell<u32> = const { Cell::new(0) };
}

/// One exchange in progress on this thread, for as long as the value lives.
pub struct Carrying(());

impl Carrying {
    /// Counts an exchange in until the value is dropped.
    pub fn start() -> Carrying {
        CARRYING.set(CARRYING.get().saturating_add(1));
        Carrying(())
    }
}

impl Drop for Carrying {
    fn drop(&mut self) {
        CARRYING.set(CARRYING.get().saturating_sub(1));
    }
}

/// Waits until the tasks already woken on this thread have run once, when there is anything
/// to batch with (another exchange in progress, a round task on the thread).
pub async fn after_reads() {
    if CARRYING.get() < 2 {
        return;
    }
    let mut queued = false;
    std::future::poll_fn(|cx| {
        if queued {
            return Poll::Ready(());
        }
        ROUND.with_borrow_mut(|round| {
            let Some(ender) = &round.ender else {
                return Poll::Ready(());
            };
            if !round.ending {
                round.ending = true;
                // Queued behind every task woken so far: it runs once they have.
                ender.wake_by_ref();
            }
            round.waiting.push(cx.waker().clone());
            queued = true;
            Poll::Pending
        })
    })
    .await
}

/// The thread's round task: each time it runs, every task that was already woken has run,
/// so it wakes the sends waiting for that. Runs until the thread's event loop ends; on the
/// way out it lets every waiting send go and the thread stops batching.
pub async fn run_rounds() {
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            let waiting = ROUND.with_borrow_mut(|round| {
                round.ender = None;
                std::mem::take(&mut round.waiting)
            });
            waiting.into_iter().for_each(Waker::wake);
        }
    }
    let _stop = Stop;
    // Kept between rounds so its room is reused (no allocation per round).
    let mut due = Vec::new();
    std::future::poll_fn(|cx| {
        ROUND.with_borrow_mut(|round| {
            std::mem::swap(&mut due, &mut round.waiting);
            round.ending = false;
            // The one replaced, if any, was this task's own: dropping it frees nothing.
            let _ = sluice_runtime::wakers::keep(&mut round.ender, cx.waker());
        });
        due.drain(..).for_each(Waker::wake);
        Poll::<()>::Pending
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Runs `body` in a fresh single-threaded runtime and local set, so every test starts
    /// with the thread's own state.
    fn local<F: std::future::Future<Output = ()>>(body: F) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&runtime, body);
    }

    /// The order in which two exchange tasks, woken in one round, read and send: with or
    /// without a round task on the thread, and with or without a third exchange in progress
    /// all along (as when one poll wakes both).
    fn order(with_rounds: bool, another_in_progress: bool) -> Vec<&'static str> {
        let events = Rc::new(RefCell::new(Vec::new()));
        let seen = Rc::clone(&events);
        local(async move {
            if with_rounds {
                tokio::task::spawn_local(run_rounds());
                tokio::task::yield_now().await;
            }
            let _another = another_in_progress.then(Carrying::start);
            let exchanges = [
                ("first reads", "first sends"),
                ("second reads", "second sends"),
            ]
            .map(|(read, send)| {
                let events = Rc::clone(&seen);
                tokio::task::spawn_local(async move {
                    let _carrying = Carrying::start();
                    events.borrow_mut().push(read);
                    after_reads().await;
                    events.borrow_mut().push(send);
                })
            });
            for exchange in exchanges {
                exchange.await.unwrap();
            }
        });
        events.take()
    }

    const ONE_AFTER_THE_OTHER: [&str; 4] =
        ["first reads", "first sends", "second reads", "second sends"];

    #[test]
    fn a_lone_exchange_sends_at_once() {
        // The first exchange is the only one in progress when it sends, and has ended when
        // the second starts.
        assert_eq!(order(true, false), ONE_AFTER_THE_OTHER);
    }

    #[test]
    fn a_send_waits_for_the_reads_woken_in_the_same_round() {
        assert_eq!(
            order(true, true),
            ["first reads", "second reads", "first sends", "second sends"]
        );
    }

    #[test]
    fn without_a_round_task_nothing_waits() {
        assert_eq!(order(false, true), ONE_AFTER_THE_OTHER);
    }

    #[test]
    fn stopping_the_round_task_releases_the_waiting_sends() {
        local(async {
            let rounds = tokio::task::spawn_local(run_rounds());
            tokio::task::yield_now().await;
            let _outer = Carrying::start();
            let _inner = Carrying::start();
            let mut waiting = std::pin::pin!(after_reads());
            let waker = Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
            rounds.abort();
            let _ = rounds.await;
            assert!(ROUND.with_borrow(|round| round.ender.is_none() && round.waiting.is_empty()));
            // Polled again (as the wake asks), the send goes.
            assert!(waiting.as_mut().poll(&mut cx).is_ready());
            // And later sends on the thread go at once.
            assert!(std::pin::pin!(after_reads()).poll(&mut cx).is_ready());
        });
    }
}
