//! What each event-loop thread's pool of idle server connections shows of itself to `show
//! servers conn` (management.txt §9.3): per server, the connections in use, the most in use
//! since the last purge, the estimate of those needed, and the idle ones.
//!
//! The pools themselves are thread-local (`sluice_proxy::http::pool`) and cannot be read from
//! the CLI's thread, so each pool entry owns a [`Published`] set of atomics that its thread
//! stores its figures into after every change: plain relaxed stores, no lock on the data
//! path. The thread's table of those sets is behind a mutex that only that thread (when it
//! starts or stops keeping figures for a server) and a rare CLI command ever lock.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A server: its backend's uid and its id in the backend.
pub type ServerId = (u32, u32);

/// One thread's figures for one server, as `show servers conn` names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Connections carrying a request now (`used_cur`).
    pub used_cur: u32,
    /// The most carrying requests at once since the last purge (`used_max`).
    pub used_max: u32,
    /// The estimate of the connections the traffic needs (`need_est`).
    pub need_est: u32,
    /// Idle connections that never served more than one request (`unsafe_nb`).
    pub idle_unsafe: u32,
    /// Idle connections that already served several (`safe_nb`).
    pub idle_safe: u32,
}

impl Figures {
    /// Adds `other`'s figures to these (a server's figures over several pools).
    pub fn add(&mut self, other: Figures) {
        self.used_cur = self.used_cur.saturating_add(other.used_cur);
        self.used_max = self.used_max.saturating_add(other.used_max);
        self.need_est = self.need_est.saturating_add(other.need_est);
        self.idle_unsafe = self.idle_unsafe.saturating_add(other.idle_unsafe);
        self.idle_safe = self.idle_safe.saturating_add(other.idle_safe);
    }
}

/// The atomics behind one pool's [`Figures`].
#[derive(Default)]
struct Shared {
    used_cur: AtomicU32,
    used_max: AtomicU32,
    need_est: AtomicU32,
    idle_unsafe: AtomicU32,
    idle_safe: AtomicU32,
}

impl Shared {
    fn load(&self) -> Figures {
        Figures {
            used_cur: self.used_cur.load(Ordering::Relaxed),
            used_max: self.used_max.load(Ordering::Relaxed),
            need_est: self.need_est.load(Ordering::Relaxed),
            idle_unsafe: self.idle_unsafe.load(Ordering::Relaxed),
            idle_safe: self.idle_safe.load(Ordering::Relaxed),
        }
    }
}

type Table = Arc<Mutex<Vec<(ServerId, Arc<Shared>)>>>;

/// Every thread's table, with the thread's event-loop index.
static THREADS: Mutex<Vec<(usize, Table)>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: OnceCell<Table> = const { OnceCell::new() };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Tables only hold plain counts: a panic cannot leave one inconsistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The current thread's table, registered on first use.
fn my_table() -> Table {
    MINE.with(|mine| {
        Arc::clone(mine.get_or_init(|| {
            let table = Table::default();
            lock(&THREADS).push((crate::process::event_loop_index(), Arc::clone(&table)));
            table
        }))
    })
}

/// One pool's figures for one server on the current thread, listed for the CLI until
/// dropped.
pub struct Published {
    table: Table,
    shared: Arc<Shared>,
}

impl Published {
    /// Starts publishing the current thread's figures for `server` (all zero).
    pub fn new(server: ServerId) -> Published {
        let table = my_table();
        let shared = Arc::new(Shared::default());
        lock(&table).push((server, Arc::clone(&shared)));
        Published { table, shared }
    }

    /// Shows `figures` from now on.
    pub fn set(&self, figures: Figures) {
        let shared = &self.shared;
        shared.used_cur.store(figures.used_cur, Ordering::Relaxed);
        shared.used_max.store(figures.used_max, Ordering::Relaxed);
        shared.need_est.store(figures.need_est, Ordering::Relaxed);
        shared
            .idle_unsafe
            .store(figures.idle_unsafe, Ordering::Relaxed);
        shared.idle_safe.store(figures.idle_safe, Ordering::Relaxed);
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        lock(&self.table).retain(|(_, shared)| !Arc::ptr_eq(shared, &self.shared));
    }
}

/// `server`'s figures on every thread together (`show stat`'s idle and used connections).
pub fn total(server: ServerId) -> Figures {
    let mut sum = Figures::default();
    for (_, table) in lock(&THREADS).iter() {
        for (_, shared) in lock(table).iter().filter(|(id, _)| *id == server) {
            sum.add(shared.load());
        }
    }
    sum
}

/// `server`'s figures on each of `threads` threads (a thread may publish several pools for
/// one server, one per address the server had: they add up).
pub fn per_thread(server: ServerId, threads: usize) -> Vec<Figures> {
    let mut out = vec![Figures::default(); threads];
    for (index, table) in lock(&THREADS).iter() {
        let Some(slot) = out.get_mut(*index) else {
            continue;
        };
        for (_, shared) in lock(table).iter().filter(|(id, _)| *id == server) {
            slot.add(shared.load());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(idle_unsafe: u32, idle_safe: u32) -> Figures {
        Figures {
            idle_unsafe,
            idle_safe,
            ..Figures::default()
        }
    }

    #[test]
    fn threads_publish_their_own_figures() {
        let server = (900, 1);
        let (ready, go) = std::sync::mpsc::channel();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let other = std::thread::Builder::new()
            .name("sluice-loop-1".to_string())
            .spawn(move || {
                let published = Published::new(server);
                published.set(idle(2, 1));
                let _ = ready.send(());
                let _ = finish.recv();
            })
            .unwrap_or_else(|e| panic!("{e}"));
        go.recv().unwrap_or_else(|e| panic!("{e}"));
        let mine = Published::new(server);
        mine.set(Figures {
            used_cur: 1,
            used_max: 2,
            need_est: 3,
            ..idle(1, 0)
        });
        // A second pool of the same server (an older address) adds up.
        let older = Published::new(server);
        older.set(idle(0, 1));
        let both = Figures {
            used_cur: 1,
            used_max: 2,
            need_est: 3,
            ..idle(1, 1)
        };
        assert_eq!(per_thread(server, 2), [both, idle(2, 1)]);
        drop(older);
        mine.set(Figures::default());
        assert_eq!(per_thread(server, 2), [Figures::default(), idle(2, 1)]);
        assert_eq!(per_thread((900, 2), 2), [Figures::default(); 2]);
        // A pool that goes away is no longer listed.
        let _ = done.send(());
        other
            .join()
            .unwrap_or_else(|_| panic!("the other thread panicked"));
        assert_eq!(per_thread(server, 2), [Figures::default(); 2]);
    }
}
