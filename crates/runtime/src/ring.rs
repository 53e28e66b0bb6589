//! A `ring` section's buffer of events in memory (configuration.txt §3.10), filled by the log
//! writer thread and read by the CLI's `show events`.
//!
//! The ring keeps whole events, oldest first, within its `size` in bytes: storing an event
//! evicts as many of the oldest ones as it takes to make room, so writing never waits for a
//! reader. Events are numbered from 0 so that a reader following the ring (`show events -w`)
//! asks for "everything from number N on" and learns, through a watch channel, when a new
//! event arrives; a reader that fell behind simply resumes at the oldest event still held.

use crate::counters::Counter;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::watch;

/// Bytes an event costs beyond its text (its length and number), so that a ring of tiny
/// events is bounded too.
const EVENT_OVERHEAD: usize = 16;

/// One ring buffer.
#[derive(Debug)]
pub struct Ring {
    /// The section's name.
    pub name: String,
    /// Its `description`.
    pub description: String,
    size: usize,
    events: Mutex<Events>,
    /// Events too large to fit even in an empty ring.
    pub dropped: Counter,
    /// The number the next event will get; changes wake followers.
    next: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Events {
    /// (number, text) of the events held, oldest first.
    queue: VecDeque<(u64, Box<[u8]>)>,
    used: usize,
    next: u64,
}

impl Ring {
    /// An empty ring holding up to `size` bytes of events.
    pub fn new(name: &str, description: &str, size: usize) -> Ring {
        Ring {
            name: name.to_owned(),
            description: description.to_owned(),
            size,
            events: Mutex::new(Events::default()),
            dropped: Counter::default(),
            next: watch::channel(0).0,
        }
    }

    fn events(&self) -> MutexGuard<'_, Events> {
        // A panic while holding the lock cannot leave the queue inconsistent: keep going.
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `event`, evicting the oldest events to make room.
    pub fn push(&self, event: &[u8]) {
        let cost = event.len() + EVENT_OVERHEAD;
        if cost > self.size {
            self.dropped.incr();
            return;
        }
        let next = {
            let mut events = self.events();
            while events.used + cost > self.size {
                match events.queue.pop_front() {
                    Some((_, old)) => events.used -= old.len() + EVENT_OVERHEAD,
                    None => break,
                }
            }
            let number = events.next;
            events.queue.push_back((number, event.into()));
            events.used += cost;
            events.next += 1;
            events.next
        };
        self.next.send_replace(next);
    }

    /// Appends every event numbered `from` or later to `out`, each followed by a newline;
    /// returns the number to ask for next time.
    pub fn read_from(&self, from: u64, out: &mut Vec<u8>) -> u64 {
        let events = self.events();
        for (_, event) in events.queue.iter().filter(|(n, _)| *n >= from) {
            out.extend_from_slice(event);
            out.push(b'\n');
        }
        events.next
    }

    /// The number the next event will get: where a reader of new events only starts.
    pub fn next_number(&self) -> u64 {
        self.events().next
    }

    /// A receiver woken each time an event is stored.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.next.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(ring: &Ring, from: u64) -> (String, u64) {
        let mut out = Vec::new();
        let next = ring.read_from(from, &mut out);
        (String::from_utf8_lossy(&out).into_owned(), next)
    }

    #[test]
    fn oldest_events_make_room_for_new_ones() {
        // Room for two 10-byte events (26 bytes each with the overhead), not three.
        let ring = Ring::new("r", "r", 60);
        ring.push(b"aaaaaaaaaa");
        ring.push(b"bbbbbbbbbb");
        assert_eq!(contents(&ring, 0), ("aaaaaaaaaa\nbbbbbbbbbb\n".into(), 2));
        ring.push(b"cccccccccc");
        assert_eq!(contents(&ring, 0), ("bbbbbbbbbb\ncccccccccc\n".into(), 3));
        // A follower asks for what it has not seen.
        assert_eq!(contents(&ring, 2), ("cccccccccc\n".into(), 3));
        assert_eq!(contents(&ring, 3), (String::new(), 3));
        assert_eq!(ring.dropped.get(), 0);
    }

    #[test]
    fn an_event_larger_than_the_ring_is_dropped_and_counted() {
        let ring = Ring::new("r", "r", 40);
        ring.push(b"kept");
        ring.push(&[b'x'; 100]);
        assert_eq!(contents(&ring, 0), ("kept\n".into(), 1));
        assert_eq!(ring.dropped.get(), 1);
    }

    #[test]
    fn followers_are_woken_by_new_events() {
        let ring = Ring::new("r", "r", 1000);
        let mut watch = ring.watch();
        assert!(!watch.has_changed().unwrap_or(true));
        ring.push(b"one");
        assert!(watch.has_changed().unwrap_or(false));
        assert_eq!(*watch.borrow_and_update(), 1);
        assert_eq!(ring.next_number(), 1);
    }
}
