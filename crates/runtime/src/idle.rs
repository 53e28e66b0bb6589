//! How many idle server connections each event-loop thread keeps, per server, for `show
//! servers conn` (management.txt §9.3).
//!
//! The pools themselves are thread-local (`sluice_proxy::http::pool`) and cannot be read from
//! the CLI's thread. Each pool publishes its counts here after every change: one table per
//! thread behind its own mutex, which only that thread and a rare CLI command ever lock, so
//! the data path never waits on another thread.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A server: its backend's uid and its id in the backend.
pub type ServerId = (u32, u32);

/// Idle connections of one server on one thread: (never reused, reused).
pub type Counts = (usize, usize);

type Table = Arc<Mutex<HashMap<ServerId, Counts>>>;

/// Every thread's table, with the thread's event-loop index.
static THREADS: Mutex<Vec<(usize, Table)>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: OnceCell<Table> = const { OnceCell::new() };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Tables only hold plain counts: a panic cannot leave one inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The event-loop index of the current thread (`sluice-loop-N`), 0 for any other thread.
fn thread_index() -> usize {
    std::thread::current()
        .name()
        .and_then(|n| n.strip_prefix("sluice-loop-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Publishes the current thread's idle connections to `server`.
pub fn publish(server: ServerId, counts: Counts) {
    MINE.with(|mine| {
        let table = mine.get_or_init(|| {
            let table = Table::default();
            lock(&THREADS).push((thread_index(), Arc::clone(&table)));
            table
        });
        let mut table = lock(table);
        if counts == (0, 0) {
            table.remove(&server);
        } else {
            table.insert(server, counts);
        }
    });
}

/// The idle connections to `server` on each of `threads` threads.
pub fn per_thread(server: ServerId, threads: usize) -> Vec<Counts> {
    let mut out = vec![(0, 0); threads];
    for (index, table) in lock(&THREADS).iter() {
        if let (Some(slot), Some(counts)) = (out.get_mut(*index), lock(table).get(&server)) {
            slot.0 += counts.0;
            slot.1 += counts.1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_publish_their_own_counts() {
        let server = (900, 1);
        std::thread::Builder::new()
            .name("sluice-loop-1".to_string())
            .spawn(move || publish(server, (2, 1)))
            .and_then(|t| t.join().map_err(|_| std::io::Error::other("panicked")))
            .unwrap_or_else(|e| panic!("{e}"));
        publish(server, (1, 0));
        assert_eq!(per_thread(server, 2), [(1, 0), (2, 1)]);
        publish(server, (0, 0));
        assert_eq!(per_thread(server, 2), [(0, 0), (2, 1)]);
        assert_eq!(per_thread((900, 2), 2), [(0, 0), (0, 0)]);
    }
}
