//! The data path's timeouts: one queue per duration on each event-loop thread, and one tokio
//! timer per thread for all of them, as HAProxy keeps its tasks' expiry dates in one tree per
//! thread.
//!
//! Nearly every wait of a request has a timeout (the client's next request, the server's
//! answer), and nearly every one ends before it: each tokio timer made for one took the time
//! driver's lock and its wheel twice (set, then cancelled), and woke the driver through its
//! eventfd whenever it was the earliest (with this queue, `http-close` does 1.9% more
//! connections per CPU-second, BENCHMARKS.md, ninth session). Here
//! a wait whose limit is the same as others' (a timeout of the configuration) joins the tail
//! of that limit's queue, its deadlines in order since the clock only moves forward, and
//! leaves it, wherever it is, when it ends: a few words written, no lock, no system call. The
//! thread's timer task ([`run`]) sleeps until the earliest head of the queues, wakes the
//! waits whose deadline passed, and sleeps again. On a thread without that task (the control
//! thread, health checks, tests), a wait uses a tokio timer of its own.

use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// Distinct limits a thread keeps a queue for; a wait with yet another limit (a remaining
/// time, a rare setting) uses a tokio timer of its own.
const MOST_QUEUES: usize = 16;

/// Slots a thread keeps however few waits it has: beyond, the slots of a burst of waits are
/// freed once none is left (so the high-water mark of a burst does not stay).
const SLOTS_KEPT: usize = 64;

/// A wait in a queue: its place in the thread's slots.
struct Slot {
    deadline: Instant,
    /// Neighbours in its queue (slot indices).
    prev: Option<u32>,
    next: Option<u32>,
    queue: u16,
    /// Bumped each time the slot is freed, so a stale ticket is never taken for a new wait.
    generation: u32,
    waker: Option<Waker>,
    fired: bool,
    live: bool,
}

/// The waits of one limit, oldest (earliest deadline) first.
struct Queue {
    limit: Duration,
    head: Option<u32>,
    tail: Option<u32>,
}

#[derive(Default)]
struct Timers {
    /// Whether the thread runs [`run`]; without it, waits use tokio timers.
    served: bool,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots in use.
    live: usize,
    queues: Vec<Queue>,
    /// The deadline the timer task sleeps until, if it sleeps on a timer.
    armed: Option<Instant>,
    /// The timer task, to wake when a wait's deadline comes before `armed`.
    task: Option<Waker>,
}

thread_local! {
    static TIMERS: RefCell<Timers> = RefCell::default();
}

/// A wait's place in its thread's queues; dropping it takes the wait out.
struct Ticket {
    slot: u32,
    generation: u32,
    /// Tied to the thread whose queues hold it.
    _thread: PhantomData<*const ()>,
}

impl Timers {
    /// The queue of `limit`: its own, else an empty one taken over, else a new one (up to
    /// [`MOST_QUEUES`]).
    fn queue_for(&mut self, limit: Duration) -> Option<u16> {
        if let Some(at) = self.queues.iter().position(|q| q.limit == limit) {
            return u16::try_from(at).ok();
        }
        if let Some(at) = self.queues.iter().position(|q| q.head.is_none()) {
            self.queues[at].limit = limit;
            return u16::try_from(at).ok();
        }
        if self.queues.len() >= MOST_QUEUES {
            return None;
        }
        self.queues.push(Queue {
            limit,
            head: None,
            tail: None,
        });
        u16::try_from(self.queues.len() - 1).ok()
    }

    /// Queues a wait of `limit` until `deadline`; `None` if it cannot join a queue. With the
    /// ticket, the timer task's waker if it must set its timer earlier (to wake once the
    /// queues are no longer borrowed).
    fn add(
        &mut self,
        limit: Duration,
        deadline: Instant,
        waker: &Waker,
    ) -> Option<(Ticket, Option<Waker>)> {
        let queue = self.queue_for(limit)?;
        let tail = self.queues[usize::from(queue)].tail;
        // Deadlines of one limit come in order, as waits are mostly first polled in the turn
        // they were made; one earlier than the tail (made before it, first polled after)
        // waits on a timer of its own rather than break the order.
        if tail.is_some_and(|t| self.slots[t as usize].deadline > deadline) {
            return None;
        }
        let fresh = Slot {
            deadline,
            prev: tail,
            next: None,
            queue,
            generation: 0,
            waker: Some(waker.clone()),
            fired: false,
            live: true,
        };
        let (slot, generation) = match self.free.pop() {
            Some(slot) => {
                // A freed slot keeps counting its generations.
                let generation = self.slots[slot as usize].generation;
                self.slots[slot as usize] = Slot {
                    generation,
                    ..fresh
                };
                (slot, generation)
            }
            None => {
                let slot = u32::try_from(self.slots.len()).ok()?;
                self.slots.push(fresh);
                (slot, 0)
            }
        };
        self.live += 1;
        match tail {
            Some(t) => self.slots[t as usize].next = Some(slot),
            None => self.queues[usize::from(queue)].head = Some(slot),
        }
        self.queues[usize::from(queue)].tail = Some(slot);
        // Earlier than what the timer task sleeps until: it must set its timer again.
        let rearm = if self.armed.is_none_or(|armed| deadline < armed) {
            self.task.clone()
        } else {
            None
        };
        let ticket = Ticket {
            slot,
            generation,
            _thread: PhantomData,
        };
        Some((ticket, rearm))
    }

    fn entry(&mut self, ticket: &Ticket) -> Option<&mut Slot> {
        self.slots
            .get_mut(ticket.slot as usize)
            .filter(|s| s.live && s.generation == ticket.generation)
    }

    /// Takes a slot out of its queue (unless it fired, which took it out already) and frees
    /// it; returns its waker, to drop once the queues are no longer borrowed.
    fn remove(&mut self, slot: u32) -> Option<Waker> {
        let entry = &mut self.slots[slot as usize];
        let (prev, next, queue, fired) = (entry.prev, entry.next, entry.queue, entry.fired);
        let waker = entry.waker.take();
        entry.live = false;
        entry.prev = None;
        entry.next = None;
        entry.generation = entry.generation.wrapping_add(1);
        if !fired {
            let queue = usize::from(queue);
            match prev {
                Some(p) => self.slots[p as usize].next = next,
                None => self.queues[queue].head = next,
            }
            match next {
                Some(n) => self.slots[n as usize].prev = prev,
                None => self.queues[queue].tail = prev,
            }
        }
        self.free.push(slot);
        self.live -= 1;
        if self.live == 0 && self.slots.len() > SLOTS_KEPT {
            // Every queue is empty: the burst's slots go.
            self.slots = Vec::new();
            self.free = Vec::new();
        }
        waker
    }

    /// Fires every wait whose deadline is at or before `now`; returns their wakers and the
    /// earliest deadline left.
    fn fire_due(&mut self, now: Instant, due: &mut Vec<Waker>) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        for q in 0..self.queues.len() {
            while let Some(head) = self.queues[q].head {
                let entry = &mut self.slots[head as usize];
                if entry.deadline > now {
                    earliest = Some(earliest.map_or(entry.deadline, |e| e.min(entry.deadline)));
                    break;
                }
                entry.fired = true;
                let next = entry.next.take();
                entry.prev = None;
                due.extend(entry.waker.take());
                self.queues[q].head = next;
                match next {
                    Some(n) => self.slots[n as usize].prev = None,
                    None => self.queues[q].tail = None,
                }
            }
        }
        earliest
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // During the thread's teardown the queues may be gone: nothing to take out then.
        // The waker is dropped after the queues' borrow (dropping one may free a task).
        let _waker = TIMERS
            .try_with(|timers| {
                let mut timers = timers.borrow_mut();
                timers.entry(self)?;
                timers.remove(self.slot)
            })
            .ok()
            .flatten();
    }
}

/// The thread's timer task: fires the waits whose deadline passed, sleeping until the
/// earliest one left. Runs until the thread's event loop ends.
pub async fn run() {
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = TIMERS.try_with(|timers| {
                let mut timers = timers.borrow_mut();
                timers.served = false;
                timers.task = None;
                timers.armed = None;
            });
        }
    }
    TIMERS.with(|timers| timers.borrow_mut().served = true);
    let _stop = Stop;
    let mut sleep = std::pin::pin!(tokio::time::sleep_until(Instant::now()));
    let mut due = Vec::new();
    std::future::poll_fn(|cx| {
        // The clock itself, not the turn's moment: this task fires what tokio's timer says
        // is due, which may be later than the moment the turn started.
        let mut through = Instant::now();
        loop {
            let earliest = TIMERS.with(|timers| {
                let mut timers = timers.borrow_mut();
                let earliest = timers.fire_due(through, &mut due);
                timers.armed = earliest;
                // The one replaced, if any, was this task's own: dropping it frees nothing.
                let _ = crate::wakers::keep(&mut timers.task, cx.waker());
                earliest
            });
            // Woken outside the borrow: a woken task may add or end waits of its own.
            due.drain(..).for_each(Waker::wake);
            let Some(earliest) = earliest else {
                return Poll::<()>::Pending;
            };
            if sleep.deadline() != earliest {
                sleep.as_mut().reset(earliest);
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The timer fired: what it was set for is due whatever the clock says.
            through = Instant::now().max(earliest);
        }
    })
    .await
}

/// Why a wait ended without its future's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

pin_project_lite::pin_project! {
    /// A future run until a deadline: [`within`]'s.
    pub struct Within<F> {
        #[pin]
        future: F,
        limit: Duration,
        // `None`: too far to represent, never.
        deadline: Option<Instant>,
        // Armed when the future first has to wait: a place in the thread's queues, or, on a
        // thread without the timer task (or with no queue free for `limit`), a tokio timer
        // of its own, boxed: only threads off the data path make one.
        ticket: Option<Ticket>,
        own_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

/// Runs `future` until `deadline`, which is `limit` after the moment it was computed (`None`:
/// too far to represent, never): its output, or [`Elapsed`] if the deadline comes first.
pub fn within<F: Future>(limit: Duration, deadline: Option<Instant>, future: F) -> Within<F> {
    Within {
        future,
        limit,
        deadline,
        ticket: None,
        own_timer: None,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        let Some(deadline) = *this.deadline else {
            return Poll::Pending;
        };
        if let Some(ticket) = this.ticket {
            // A replaced waker is dropped after the queues' borrow.
            let (fired, _replaced) = TIMERS.with(|timers| {
                let mut timers = timers.borrow_mut();
                match timers.entry(ticket) {
                    Some(entry) if entry.fired => (true, None),
                    Some(entry) => (false, crate::wakers::keep(&mut entry.waker, cx.waker())),
                    None => (true, None),
                }
            });
            return if fired || crate::clock::now() >= deadline {
                Poll::Ready(Err(Elapsed))
            } else {
                Poll::Pending
            };
        }
        if let Some(timer) = this.own_timer {
            return timer.as_mut().poll(cx).map(|()| Err(Elapsed));
        }
        if crate::clock::now() >= deadline {
            return Poll::Ready(Err(Elapsed));
        }
        let queued = TIMERS.with(|timers| {
            let mut timers = timers.borrow_mut();
            if timers.served {
                timers.add(*this.limit, deadline, cx.waker())
            } else {
                None
            }
        });
        if let Some((ticket, rearm)) = queued {
            *this.ticket = Some(ticket);
            if let Some(task) = rearm {
                task.wake();
            }
        }
        if this.ticket.is_none() {
            let timer = this
                .own_timer
                .insert(Box::pin(tokio::time::sleep_until(deadline)));
            return timer.as_mut().poll(cx).map(|()| Err(Elapsed));
        }
        Poll::Pending
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Runs `body` on a fresh thread's runtime, with paused time (it jumps to the next timer
    /// whenever every task waits) and, if `served`, the thread's timer task.
    fn on_a_thread<F: Future<Output = ()> + 'static>(
        served: bool,
        body: impl FnOnce() -> F + Send + 'static,
    ) {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            tokio::task::LocalSet::new().block_on(&runtime, async move {
                if served {
                    tokio::task::spawn_local(run());
                    tokio::task::yield_now().await;
                }
                body().await;
            });
        })
        .join()
        .unwrap();
    }

    /// Starts a wait of `limit` on a future that never ends; records when it ended.
    fn never_ending_wait(
        limit: Duration,
        ended: &Rc<RefCell<Vec<(&'static str, Duration)>>>,
        name: &'static str,
        start: Instant,
    ) {
        let ended = Rc::clone(ended);
        tokio::task::spawn_local(async move {
            let result = within(
                limit,
                Some(Instant::now() + limit),
                std::future::pending::<()>(),
            )
            .await;
            assert_eq!(result, Err(Elapsed));
            ended.borrow_mut().push((name, Instant::now() - start));
        });
    }

    fn nothing_queued() -> bool {
        TIMERS.with(|timers| {
            let timers = timers.borrow();
            timers
                .queues
                .iter()
                .all(|q| q.head.is_none() && q.tail.is_none())
                && timers.slots.iter().all(|slot| !slot.live)
        })
    }

    #[test]
    fn waits_of_one_limit_end_at_their_deadlines() {
        on_a_thread(true, || async {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            let limit = Duration::from_millis(10);
            never_ending_wait(limit, &ended, "first", start);
            tokio::time::sleep(Duration::from_millis(3)).await;
            never_ending_wait(limit, &ended, "second", start);
            tokio::time::sleep(Duration::from_millis(3)).await;
            never_ending_wait(limit, &ended, "third", start);
            tokio::time::sleep(Duration::from_millis(20)).await;
            let ms = Duration::from_millis;
            assert_eq!(
                *ended.borrow(),
                [("first", ms(10)), ("second", ms(13)), ("third", ms(16))]
            );
            assert!(nothing_queued());
            // One queue served them all.
            assert_eq!(TIMERS.with(|t| t.borrow().queues.len()), 1);
        });
    }

    #[test]
    fn a_wait_that_ends_first_leaves_its_queue_and_the_others_keep_their_order() {
        on_a_thread(true, || async {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            let limit = Duration::from_millis(10);
            never_ending_wait(limit, &ended, "first", start);
            tokio::time::sleep(Duration::from_millis(1)).await;
            // The middle one's future ends after 2 ms: its output, and out of the queue.
            let middle =
                tokio::task::spawn_local(within(limit, Some(Instant::now() + limit), async {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    7
                }));
            tokio::time::sleep(Duration::from_millis(1)).await;
            never_ending_wait(limit, &ended, "last", start);
            assert_eq!(middle.await.unwrap(), Ok(7));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let ms = Duration::from_millis;
            assert_eq!(*ended.borrow(), [("first", ms(10)), ("last", ms(12))]);
            assert!(nothing_queued());
        });
    }

    #[test]
    fn a_shorter_limit_wakes_the_timer_task_to_an_earlier_deadline() {
        on_a_thread(true, || async {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            never_ending_wait(Duration::from_secs(30), &ended, "long", start);
            tokio::time::sleep(Duration::from_millis(1)).await;
            never_ending_wait(Duration::from_millis(10), &ended, "short", start);
            tokio::time::sleep(Duration::from_secs(31)).await;
            assert_eq!(
                *ended.borrow(),
                [
                    ("short", Duration::from_millis(11)),
                    ("long", Duration::from_secs(30))
                ]
            );
            assert_eq!(TIMERS.with(|t| t.borrow().queues.len()), 2);
        });
    }

    #[test]
    fn without_the_timer_task_a_wait_has_a_timer_of_its_own() {
        on_a_thread(false, || async {
            let start = Instant::now();
            let ended = Rc::new(RefCell::new(Vec::new()));
            never_ending_wait(Duration::from_millis(10), &ended, "alone", start);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(*ended.borrow(), [("alone", Duration::from_millis(10))]);
            assert_eq!(TIMERS.with(|t| t.borrow().slots.len()), 0, "nothing queued");
        });
    }

    #[test]
    fn a_bursts_slots_are_freed_once_no_wait_is_left() {
        on_a_thread(true, || async {
            let limit = Duration::from_secs(5);
            let (release, hold) = tokio::sync::watch::channel(false);
            let waits: Vec<_> = (0..SLOTS_KEPT + 10)
                .map(|_| {
                    let mut hold = hold.clone();
                    tokio::task::spawn_local(within(
                        limit,
                        Some(Instant::now() + limit),
                        async move {
                            hold.wait_for(|go| *go).await.unwrap();
                        },
                    ))
                })
                .collect();
            // A tick of the task set runs at most 61 tasks: yield until every wait is queued.
            while TIMERS.with(|t| t.borrow().live) < SLOTS_KEPT + 10 {
                tokio::task::yield_now().await;
            }
            assert!(TIMERS.with(|t| t.borrow().slots.len()) > SLOTS_KEPT);
            release.send(true).unwrap();
            for wait in waits {
                assert_eq!(wait.await.unwrap(), Ok(()));
            }
            assert!(nothing_queued());
            assert_eq!(TIMERS.with(|t| t.borrow().slots.capacity()), 0);
        });
    }

    #[test]
    fn an_empty_queue_is_taken_over_by_another_limit() {
        on_a_thread(true, || async {
            for n in 1..=(MOST_QUEUES as u64 + 4) {
                let limit = Duration::from_millis(n);
                let done = within(limit, Some(Instant::now() + limit), async {}).await;
                assert_eq!(done, Ok(()));
                // Each limit waits once, then its queue is empty again.
                let waited = within(
                    limit,
                    Some(Instant::now() + limit),
                    std::future::pending::<()>(),
                )
                .await;
                assert_eq!(waited, Err(Elapsed));
            }
            assert_eq!(TIMERS.with(|t| t.borrow().queues.len()), 1);
            assert!(nothing_queued());
        });
    }
}
