//! The parking lot: idle HTTP client connections, waiting for their first request or between
//! two, held outside any task.
//!
//! A session waits for its client's next request in its own task, its socket registered with
//! the event loop. That costs about 1.2 KB of heap per connection (tokio's task cell, the
//! session's boxed state, its `show sess` entry, tokio's readiness record), which is what a
//! thousand idle browser connections (or preconnections that have not spoken yet) would hold
//! for minutes. So a connection still idle after [`PARK_AFTER`] ends its task: what the
//! session owns ([`Held`]: its proxies, addresses, variables, stick counters and connection
//! slots) moves here with the bare socket, taken out of the event loop, and the socket goes
//! into the thread's [`ReadinessSet`]. When the client sends its next request (or leaves),
//! the connection gets a new task and a new stream (HAProxy likewise makes a new stream per
//! request, and `show sess` does not list its idle connections either). When its wait limit
//! (`timeout http-keep-alive`, else `http-request`, else `client`; `http-request`, else
//! `client`, for a first request) passes first, the lot closes it without a word, as the task
//! would have; a first request that never came is handed back to a task, which answers and
//! logs the 408 `cR` as it would have.
//!
//! Parking and waking cost four `epoll_ctl` calls and a task: small beside what
//! [`PARK_AFTER`] of idleness means, and nothing to a client that speaks at once and whose
//! requests follow each other closely, which never parks. A session still counts as one while parked, and keeps its
//! slots, so `maxconn`, `show stat` and a soft stop see no difference. Each event-loop
//! thread has its own lot, made on first use.

use crate::accept::{self, Held};
use sluice_config::global::CloseSpread;
use sluice_net::readiness::ReadinessSet;
use sluice_net::stream::{ParkedStream, Stream};
use sluice_runtime::process::{ListenState, Process};
use std::cell::{OnceCell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, watch};

/// How long an idle connection waits for its first or next request in its task before it is
/// parked.
///
/// A second: a client that pauses less between its requests (a paced or polling client) would
/// pay a park and a wake-up for each request, four `epoll_ctl` calls and a new task: with
/// 2,000 connections sending 2 requests a second each, a tenth of a second made 35.6 µs of
/// proxy CPU per request, a second 31.0 (HAProxy 29.4; `cpu-sparse`, BENCHMARKS.md,
/// twenty-eighth session). A connection idle for a second is most often one that stays idle
/// (a browser's, between pages), which parking is for.
pub const PARK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How a session waits parked: the wait's start, for the next request's log (as if the task
/// had waited), when the wait ends (none: it never does), and whether the request awaited is
/// the connection's first.
#[derive(Clone, Copy, Debug)]
pub struct Parking {
    /// When the wait for the next request started (monotonic, and the wall clock).
    pub since: (Instant, SystemTime),
    /// When the wait ends without a request.
    pub deadline: Option<Instant>,
    /// Whether no request came yet on the connection: its wait ending is then answered and
    /// logged (a 408 `cR`, as HAProxy does), where a kept-alive connection closes without a
    /// word.
    pub first: bool,
}

/// What each parked session takes in its thread's table (the table holds no other memory per
/// session).
pub const ENTRY_BYTES: usize = std::mem::size_of::<Slot<Parked>>();

/// A parked session.
pub(crate) struct Parked {
    pub(crate) held: Held,
    pub(crate) client: ParkedStream,
    pub(crate) parking: Parking,
}

/// Connections parked since [`parked_since_last_look`] last looked, over every thread.
static PARKED_SINCE_LOOK: AtomicUsize = AtomicUsize::new(0);

/// How many connections were parked since the last call: each left the heap memory of its
/// task free, in blocks the allocator may only give back to the system when asked
/// (`sluice_heap::release_free_memory`), since the tasks of connections that came later
/// or stay busy are interleaved with them.
pub fn parked_since_last_look() -> usize {
    PARKED_SINCE_LOOK.swap(0, Ordering::Relaxed)
}

/// One thread's parked sessions.
struct Lot {
    set: ReadinessSet,
    entries: RefCell<Entries<Parked>>,
    /// Told when a parked session's deadline comes before every other.
    sooner: Notify,
}

/// The parked sessions by token (their place in `slots`), and their deadlines in order.
///
/// Both tables are plain vectors, with no allocation per session: once large they are
/// mapped apart from the heap (`sluice_heap::map_buffers_apart`), so the heap memory the
/// sessions' tasks held becomes wholly free when they park, and can be given back (see
/// [`parked_since_last_look`]); a table's spare room is address space, not memory.
struct Entries<T> {
    slots: Vec<Slot<T>>,
    vacant: Vec<usize>,
    /// Earliest first, by (deadline, token, generation). A session woken before its
    /// deadline leaves its entry behind (a slot's generation changes when it is emptied,
    /// so the entry is known stale); the heap is rebuilt when such entries outnumber live
    /// ones, which keeps it within twice the parked sessions.
    deadlines: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    stale: usize,
}

/// A place for one parked session.
struct Slot<T> {
    generation: u32,
    item: Option<T>,
    deadline: Option<Instant>,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            slots: Vec::new(),
            vacant: Vec::new(),
            deadlines: BinaryHeap::new(),
            stale: 0,
        }
    }
}

impl<T> Entries<T> {
    /// Adds `item`, due at `deadline`; returns its token.
    fn insert(&mut self, item: T, deadline: Option<Instant>) -> usize {
        let token = self.vacant.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                item: None,
                deadline: None,
            });
            self.slots.len() - 1
        });
        let slot = &mut self.slots[token];
        slot.item = Some(item);
        slot.deadline = deadline;
        if let Some(at) = deadline {
            self.deadlines.push(Reverse((at, token, slot.generation)));
        }
        token
    }

    /// The item under `token`.
    fn get(&self, token: usize) -> Option<&T> {
        self.slots.get(token)?.item.as_ref()
    }

    /// Takes out the item under `token`; its deadline's entry stays in the heap, stale.
    fn remove(&mut self, token: usize) -> Option<T> {
        let (item, deadline) = self.vacate(token)?;
        if deadline.is_some() {
            self.stale += 1;
            if self.stale > self.deadlines.len() / 2 {
                let slots = &self.slots;
                self.deadlines.retain(|Reverse((_, token, generation))| {
                    slots[*token].generation == *generation
                });
                self.stale = 0;
            }
        }
        Some(item)
    }

    fn vacate(&mut self, token: usize) -> Option<(T, Option<Instant>)> {
        let slot = self.slots.get_mut(token)?;
        let item = slot.item.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.vacant.push(token);
        Some((item, slot.deadline))
    }

    /// The earliest deadline.
    fn earliest(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, token, generation))) = self.deadlines.peek().copied() {
            if self.slots[token].generation == generation {
                return Some(at);
            }
            self.deadlines.pop();
            self.stale -= 1;
        }
        None
    }

    /// The first item whose deadline is `now` or past, taken out.
    fn take_due(&mut self, now: Instant) -> Option<T> {
        if self.earliest()? > now {
            return None;
        }
        let Reverse((_, token, _)) = self.deadlines.pop()?;
        self.vacate(token).map(|(item, _)| item)
    }

    /// How many items there are.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len() - self.vacant.len()
    }

    /// Every item `pick` chooses, taken out.
    fn take_picked(&mut self, pick: impl Fn(&T) -> bool) -> Vec<T> {
        let tokens: Vec<usize> = (0..self.slots.len())
            .filter(|&token| self.get(token).is_some_and(&pick))
            .collect();
        tokens
            .into_iter()
            .filter_map(|token| self.remove(token))
            .collect()
    }

    /// Every item, taken out.
    fn take_all(&mut self) -> Vec<T> {
        let all = self
            .slots
            .iter_mut()
            .filter_map(|slot| slot.item.take())
            .collect();
        *self = Entries::default();
        all
    }
}

thread_local! {
    /// This thread's lot; `None` if it could not be made (no epoll instance to be had).
    static LOT: OnceCell<Option<Rc<Lot>>> = const { OnceCell::new() };
}

/// This thread's lot, made (and its task started, following `process`'s soft stop) on
/// first use.
fn lot(process: &Process) -> Option<Rc<Lot>> {
    LOT.with(|lot| {
        lot.get_or_init(|| {
            let set = ReadinessSet::new().ok()?;
            let lot = Rc::new(Lot {
                set,
                entries: RefCell::default(),
                sooner: Notify::new(),
            });
            let stop = StopWatch {
                state: process.watch_listen_state(),
                spread: process.global.close_spread_time,
                at: process.stop_moment(),
            };
            tokio::task::spawn_local(watch(Rc::clone(&lot), stop));
            Some(lot)
        })
        .clone()
    })
}

/// Whether this thread can park connections.
pub fn available(process: &Process) -> bool {
    lot(process).is_some()
}

/// Parks an idle session. Should the event loop or the kernel refuse to let the socket go
/// or to watch it (out of memory), the connection is closed as at the end of its wait.
pub(crate) fn park(held: Held, client: Stream, parking: Parking) {
    let Some(lot) = lot(held.scope().process) else {
        return;
    };
    let Ok(client) = client.park() else {
        return;
    };
    let earliest = lot.entries.borrow_mut().earliest();
    let parked = Parked {
        held,
        client,
        parking,
    };
    if lot.insert(parked)
        && parking
            .deadline
            .is_some_and(|at| earliest.is_none_or(|earliest| at < earliest))
    {
        lot.sooner.notify_one();
    }
}

impl Lot {
    /// Parks a session and watches its socket; false (the session dropped, its connection
    /// closed) if the socket cannot be watched.
    fn insert(&self, parked: Parked) -> bool {
        let mut entries = self.entries.borrow_mut();
        let deadline = parked.parking.deadline;
        let token = entries.insert(parked, deadline);
        let watched = entries
            .get(token)
            .is_some_and(|parked| self.set.add(parked.client.as_fd(), token as u64).is_ok());
        if !watched {
            let refused = entries.remove(token);
            drop(entries);
            drop(refused);
            return false;
        }
        PARKED_SINCE_LOOK.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Takes out a parked session and stops watching its socket.
    fn unwatched(&self, parked: Option<Parked>) -> Option<Parked> {
        let parked = parked?;
        // Removing a socket this set holds cannot fail; were it to, closing or resuming
        // the socket takes it out of the set anyway.
        let _ = self.set.remove(parked.client.as_fd());
        Some(parked)
    }
}

/// What the lot follows of a soft stop: the listening state, and `close-spread-time`.
struct StopWatch {
    state: watch::Receiver<ListenState>,
    spread: Option<CloseSpread>,
    /// When the stop came: a lot made after it spreads over what is left of the window.
    at: Arc<std::sync::OnceLock<Instant>>,
}

/// How often the kept-alive connections parked at a soft stop are looked at while
/// `close-spread-time` spreads their closing.
fn spread_step(window: Duration) -> Duration {
    (window / 16).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The lot's task: wakes the sessions whose clients send something, closes those whose wait
/// ends first, and at a soft stop (the listening state turning `Stopped`) closes the
/// kept-alive ones: at once, as HAProxy closes its idle connections then, or at moments
/// spread over `close-spread-time` (under `infinite`, at their own deadlines). Those still
/// waiting for their first request wait on, as in HAProxy, and are answered `Connection:
/// close` should it come.
async fn watch(lot: Rc<Lot>, mut stop: StopWatch) {
    let mut stopped = false;
    // Under `close-spread-time`, when the window ends; the kept-alive connections close
    // spread over it.
    let mut spreading: Option<Instant> = None;
    let spread_tick = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(spread_tick);
    let mut ready = Vec::new();
    let sleep = tokio::time::sleep(PARK_AFTER);
    tokio::pin!(sleep);
    loop {
        let next = lot.entries.borrow_mut().earliest();
        if let Some(at) = next {
            sleep.as_mut().reset(at.into());
        }
        tokio::select! {
            woke = lot.set.ready(&mut ready) => {
                if woke.is_err() {
                    // Not expected of epoll with valid arguments; were it to happen, the
                    // parked connections close rather than wait unwatched.
                    drop(lot.entries.borrow_mut().take_all());
                    return;
                }
                for token in ready.drain(..) {
                    let taken = lot.entries.borrow_mut().remove(token as usize);
                    if let Some(parked) = lot.unwatched(taken) {
                        tokio::task::spawn_local(accept::resumed(parked));
                    }
                }
            }
            () = &mut sleep, if next.is_some() => {
                // Each one due is closed as its task would have done: a kept-alive one without
                // a word; one whose first request never came gets a task again, which finds
                // its wait over and answers the 408.
                let now = Instant::now();
                loop {
                    let due = lot.entries.borrow_mut().take_due(now);
                    let Some(parked) = lot.unwatched(due) else {
                        break;
                    };
                    if parked.parking.first {
                        tokio::task::spawn_local(accept::resumed(parked));
                    }
                }
            }
            () = lot.sooner.notified() => {}
            waited = stop.state.wait_for(|state| *state == ListenState::Stopped), if !stopped => {
                // Should the process's side of the channel be gone, nothing stops any more.
                stopped = true;
                let reached = waited.is_ok();
                // The channel's value stays locked while borrowed.
                drop(waited);
                match stop.spread {
                    _ if !reached => {}
                    None => close_kept_alive(&lot, |_| true),
                    Some(CloseSpread::Infinite) => {}
                    Some(CloseSpread::Window(window)) => {
                        let stopped = stop.at.get().copied().unwrap_or_else(Instant::now);
                        spreading = Some(stopped + window);
                        spread_tick.as_mut().reset((Instant::now() + spread_step(window)).into());
                    }
                }
            }
            () = &mut spread_tick, if spreading.is_some() => {
                let (Some(end), Some(CloseSpread::Window(window))) = (spreading, stop.spread) else {
                    continue;
                };
                let step = spread_step(window);
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    close_kept_alive(&lot, |_| true);
                    spreading = None;
                } else {
                    // Each closes now with the chance this step is of what is left, so the
                    // closings fall evenly over the window.
                    let (step_us, left_us) = (step.as_micros() as u64, left.as_micros() as u64);
                    close_kept_alive(&lot, |random| random % left_us.max(1) < step_us);
                    spread_tick.as_mut().reset((Instant::now() + step.min(left)).into());
                }
            }
        }
    }
}

/// Closes the parked kept-alive connections `pick` chooses, given a random number for each.
fn close_kept_alive(lot: &Lot, pick: impl Fn(u64) -> bool) {
    // `option idle-close-on-response`: those wait for their next request instead.
    let closing = lot.entries.borrow_mut().take_picked(|parked| {
        !parked.parking.first
            && !parked
                .held
                .scope()
                .frontend
                .plan
                .http
                .idle_close_on_response
            && pick(sluice_runtime::proxy::next_random())
    });
    for parked in closing {
        drop(lot.unwatched(Some(parked)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_due_in_deadline_order_and_removed_ones_never() {
        let start = Instant::now();
        let at = |ms| Some(start + Duration::from_millis(ms));
        let mut entries = Entries::default();
        let late = entries.insert("late", at(30));
        let early = entries.insert("early", at(10));
        let never = entries.insert("never", None);
        let woken = entries.insert("woken", at(5));
        assert_eq!(entries.remove(woken), Some("woken"));
        assert_eq!(entries.earliest(), at(10));
        assert_eq!(entries.take_due(start + Duration::from_millis(9)), None);
        let all_due = start + Duration::from_millis(100);
        assert_eq!(entries.take_due(all_due), Some("early"));
        assert_eq!(entries.take_due(all_due), Some("late"));
        assert_eq!(entries.take_due(all_due), None);
        assert_eq!(entries.get(never), Some(&"never"));
        assert_eq!((entries.get(early), entries.get(late)), (None, None));
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn a_reused_slot_is_not_due_at_its_previous_deadline() {
        let start = Instant::now();
        let mut entries = Entries::default();
        let first = entries.insert(1, Some(start));
        entries.remove(first);
        let second = entries.insert(2, Some(start + Duration::from_secs(60)));
        assert_eq!(first, second, "the vacant slot is reused");
        assert_eq!(entries.take_due(start + Duration::from_secs(1)), None);
        assert_eq!(entries.earliest(), Some(start + Duration::from_secs(60)));
    }

    #[test]
    fn stale_deadlines_never_outnumber_live_ones() {
        let start = Instant::now();
        let mut entries = Entries::default();
        let kept: Vec<usize> = (0..10)
            .map(|i| entries.insert(i, Some(start + Duration::from_secs(i))))
            .collect();
        // A connection parked and woken over and over leaves an entry each time.
        for round in 0..1000 {
            let token = entries.insert(100 + round, Some(start + Duration::from_secs(500)));
            entries.remove(token);
            assert!(entries.deadlines.len() <= 2 * entries.len() + 2);
        }
        assert_eq!(entries.len(), kept.len());
        let all_due = start + Duration::from_secs(1000);
        let due: Vec<u64> = std::iter::from_fn(|| entries.take_due(all_due)).collect();
        assert_eq!(due, (0..10).collect::<Vec<_>>());
    }
}
