//! The live streams of the process, for `show sess` and `shutdown session` (management.txt
//! §9.3).
//!
//! Every client connection (and every CLI connection, as HAProxy lists its own) registers
//! one [`StreamInfo`] when it starts and removes it when it ends, through the
//! [`Registered`] guard: one allocation and two short lock holds per connection, nothing
//! per request. The registry is split into shards chosen by the stream's id so threads
//! accepting at the same time rarely meet on one lock. The data path reports the backend
//! and server a stream uses through [`note_server`], which finds the current stream in a
//! task-local set by [`Registered::scope`]; the CLI reads the entries and can ask a stream
//! to end ([`StreamInfo::kill`]), which its session task waits on.

use crate::proxy::Frontend;
use rustc_hash::FxHashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Poll, Waker};
use std::time::{Instant, SystemTime};

const SHARDS: usize = 16;

/// How long a killed session may take to end by itself before it is dropped.
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

tokio::task_local! {
    static CURRENT: Arc<StreamInfo>;
}

/// Where a stream comes from.
#[derive(Debug)]
pub enum Origin {
    /// A client of a frontend.
    Client(Arc<Frontend>),
    /// A CLI connection on a `stats socket`.
    Cli,
}

/// One live stream.
#[derive(Debug)]
pub struct StreamInfo {
    /// The stream's number in the process, from 0 (`id=` in `show sess <id>`).
    pub uniq: u64,
    /// Who accepted it.
    pub origin: Origin,
    /// The client's address (`None` on a unix socket).
    pub client: Option<SocketAddr>,
    /// The address the client reached (`None` on a unix socket).
    pub local: Option<SocketAddr>,
    /// The client connection's descriptor.
    pub fd: i32,
    /// When it was accepted.
    pub started: Instant,
    /// The `uid` of the backend in use, 0 for none yet.
    backend: AtomicU32,
    /// The index of the server in use plus one, 0 for none yet.
    server: AtomicUsize,
    /// Requests or connections handed to a server so far (`calls=`).
    calls: AtomicU64,
    /// Set by [`StreamInfo::kill`].
    dead: AtomicBool,
    /// The stream's task, once it waits for a kill.
    killer: OnceLock<Waker>,
}

impl StreamInfo {
    /// The id `show sess` prints and `shutdown session` takes (`0x...`).
    pub fn id(&self) -> u64 {
        // Distinct, never zero, and shaped like the addresses HAProxy prints.
        0x1000 + (self.uniq << 4)
    }

    /// The backend `uid` and server index in use, if a server was chosen.
    pub fn target(&self) -> (Option<u32>, Option<usize>) {
        let be = self.backend.load(Ordering::Relaxed);
        let srv = self.server.load(Ordering::Relaxed);
        ((be != 0).then_some(be), srv.checked_sub(1))
    }

    /// When it was accepted, on the wall clock: derived from the monotonic start when asked
    /// (`show sess all`), which keeps every connection's entry 16 bytes smaller.
    pub fn started_at(&self) -> SystemTime {
        SystemTime::now()
            .checked_sub(self.started.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// How many times the stream took a server.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Asks the stream to end now: a relay in progress ends as `on-marked-down
    /// shutdown-sessions` ends it (logged with termination `K`), anything else is dropped.
    pub fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
        // Paired with the fence in `poll_killed`: either the task sees `dead`, or this sees
        // its waker.
        fence(Ordering::SeqCst);
        self.wake();
    }

    /// Wakes the stream's task, if it waits.
    fn wake(&self) {
        if let Some(waker) = self.killer.get() {
            waker.wake_by_ref();
        }
    }

    /// Ready once [`StreamInfo::kill`] was called, before or after this call.
    ///
    /// Only the stream's own task waits (its session, and a relay within it), where a list
    /// of waiters would take a lock at every wake-up of every session. That task's waker
    /// stays the same for the stream's life (a session resumed from the parking lot is a new
    /// task, and registers a new stream), so it is kept at the first wait and never
    /// replaced, and waking it does not use it up: the session polls this at each of its
    /// waits, and then only reads two words, where re-registering a waker would take two
    /// locked instructions.
    pub fn poll_killed(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.dead.load(Ordering::Acquire) {
            return std::task::Poll::Ready(());
        }
        if self.killer.get().is_none() {
            let _ = self.killer.set(cx.waker().clone());
            // Paired with the fence in `kill`.
            fence(Ordering::SeqCst);
        }
        // Checked again once the waker is kept: a kill in between woke no one.
        if self.dead.load(Ordering::Acquire) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }

    /// Completes once [`StreamInfo::kill`] was called, before or after this call.
    pub fn killed(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| self.poll_killed(cx))
    }
}

/// The registry (one per process).
#[derive(Debug)]
pub struct Streams {
    next: AtomicU64,
    // Stream ids are the process's own sequence numbers: a fast non-keyed hash is enough.
    shards: Vec<Mutex<FxHashMap<u64, Arc<StreamInfo>>>>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams {
            next: AtomicU64::new(0),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
        }
    }
}

/// A stream's place in the registry; dropping it removes the stream.
#[derive(Debug)]
pub struct Registered<'a> {
    streams: &'a Streams,
    info: Arc<StreamInfo>,
}

impl Registered<'_> {
    /// The registered stream.
    pub fn info(&self) -> &Arc<StreamInfo> {
        &self.info
    }

    /// Runs `session` as this stream: [`note_server`] calls inside it report to it, and it
    /// stops when the stream is killed. A session relaying data learns of the kill by
    /// itself (its server's `KillSignal` fires too) and ends with its log line; one in
    /// another phase is dropped after [`KILL_GRACE`]. The session's output, unless it was
    /// killed.
    ///
    /// The session is boxed here, once: an `async` wrapper holding it by value would keep
    /// two or three copies of its state (the argument, the pinned local), and this future
    /// lives as long as the connection, idle keep-alive time included.
    pub fn scope<'s, T: 's, F: Future<Output = T> + 's>(
        &'s self,
        session: F,
    ) -> impl Future<Output = Option<T>> + 's {
        let mut session = Box::pin(session);
        let info = &self.info;
        // After a kill, the grace period's timer (boxed: only needed then).
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
        CURRENT.scope(
            Arc::clone(info),
            // The session first: a kill is rare, and fixed order costs no random draw. A
            // plain poll of both, not `select!`: this wait is in every connection's task for
            // its whole life, and this way it holds three pointers, and never the session's
            // output. Each poll of the session sees one moment of the clock (`clock`).
            std::future::poll_fn(move |cx| {
                if let Poll::Ready(output) = crate::clock::polling(|| session.as_mut().poll(cx)) {
                    return Poll::Ready(grace.is_none().then_some(output));
                }
                if let Some(timer) = grace.as_mut() {
                    return timer.as_mut().poll(cx).map(|()| None);
                }
                if info.poll_killed(cx).is_pending() {
                    return Poll::Pending;
                }
                let timer = grace.insert(Box::pin(tokio::time::sleep(KILL_GRACE)));
                timer.as_mut().poll(cx).map(|()| None)
            }),
        )
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.streams.shard(self.info.id()).remove(&self.info.id());
    }
}

impl Streams {
    fn shard(&self, id: u64) -> MutexGuard<'_, FxHashMap<u64, Arc<StreamInfo>>> {
        let shard = &self.shards[((id >> 4) as usize) % SHARDS];
        // The maps are only inserted into and removed from; a panic cannot leave one
        // half-changed.
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new stream.
    pub fn register(
        &self,
        origin: Origin,
        client: Option<SocketAddr>,
        local: Option<SocketAddr>,
        fd: i32,
    ) -> Registered<'_> {
        let info = Arc::new(StreamInfo {
            uniq: self.next.fetch_add(1, Ordering::Relaxed),
            origin,
            client,
            local,
            fd,
            started: crate::clock::now_std(),
            backend: AtomicU32::new(0),
            server: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            killer: OnceLock::new(),
        });
        self.shard(info.id()).insert(info.id(), Arc::clone(&info));
        Registered {
            streams: self,
            info,
        }
    }

    /// Wakes the streams that use server `index` of the backend whose uid is `backend`, for
    /// their [`crate::health::KillSignal`] to see that the server's sessions must end. A
    /// stream between two requests is woken for nothing and waits again.
    pub fn wake_users_of(&self, backend: u32, index: usize) {
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            for info in shard.values() {
                if info.target() == (Some(backend), Some(index)) {
                    info.wake();
                }
            }
        }
    }

    /// Every live stream, oldest first.
    pub fn list(&self) -> Vec<Arc<StreamInfo>> {
        let mut all: Vec<Arc<StreamInfo>> = (0..SHARDS)
            .flat_map(|i| {
                let shard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
                shard.values().cloned().collect::<Vec<_>>()
            })
            .collect();
        all.sort_by_key(|s| s.uniq);
        all
    }

    /// The stream `id` designates, if it is alive.
    pub fn get(&self, id: u64) -> Option<Arc<StreamInfo>> {
        self.shard(id).get(&id).cloned()
    }
}

/// The stream the current task runs, if any.
pub fn current() -> Option<Arc<StreamInfo>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Records that the current stream (if any) now uses server `server` of the backend whose
/// `uid` is `backend`.
///
/// Only the stream's own task writes its entry (the CLI reads it), so these are plain loads
/// and stores, not locked read-modify-write instructions.
pub fn note_server(backend: u32, server: usize) {
    let _ = CURRENT.try_with(|info| {
        info.backend.store(backend, Ordering::Relaxed);
        info.server.store(server + 1, Ordering::Relaxed);
        let calls = info.calls.load(Ordering::Relaxed);
        info.calls.store(calls + 1, Ordering::Relaxed);
    });
}

/// Records that the current stream (if any) now goes to the backend whose `uid` is
/// `backend`, before a server is chosen (written as [`note_server`] writes).
pub fn note_backend(backend: u32) {
    let _ = CURRENT.try_with(|info| {
        if info.backend.load(Ordering::Relaxed) != backend {
            info.backend.store(backend, Ordering::Relaxed);
            info.server.store(0, Ordering::Relaxed);
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn streams_register_report_and_leave() {
        let streams = Streams::default();
        let a = streams.register(Origin::Cli, None, None, 3);
        let b = streams.register(Origin::Cli, None, None, 4);
        assert_eq!(
            streams.list().iter().map(|s| s.uniq).collect::<Vec<_>>(),
            [0, 1]
        );
        a.scope(async { note_server(7, 2) }).await;
        assert_eq!(a.info().target(), (Some(7), Some(2)));
        assert_eq!(b.info().target(), (None, None));
        // Outside a scope nothing is recorded, and nothing fails.
        note_server(1, 1);
        let id = b.info().id();
        assert!(streams.get(id).is_some());
        // A killed stream's session stops, and a relay's kill signal fires.
        let info = Arc::clone(b.info());
        b.scope(async move {
            let health = crate::health::ServerHealth::new(false);
            // A kill of another server's sessions does not end this one.
            health.kill_sessions(&Streams::default(), 9, 9);
            let mut signal = health.kill_signal();
            info.kill();
            signal.wait().await;
            std::future::pending::<()>().await;
        })
        .await;
        drop(b);
        assert!(streams.get(id).is_none());
        assert_eq!(streams.list().len(), 1);
    }

    #[tokio::test]
    async fn a_stream_woken_for_another_servers_sake_can_still_be_killed() {
        use std::task::{Context, Wake};
        struct Count(std::sync::atomic::AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let streams = Streams::default();
        let stream = streams.register(Origin::Cli, None, None, 3);
        let woken = Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        let mut session = std::pin::pin!(stream.scope(async {
            note_server(7, 2);
            std::future::pending::<()>().await
        }));
        assert!(session.as_mut().poll(&mut cx).is_pending());
        // Its server's sessions are shut down: the stream is woken to look, and waits again.
        streams.wake_users_of(7, 2);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert!(session.as_mut().poll(&mut cx).is_pending());
        // Being woken did not use the waker up: `shutdown session` still reaches it, from
        // another thread, and the session ends.
        let info = Arc::clone(stream.info());
        std::thread::spawn(move || info.kill()).join().unwrap();
        assert_eq!(woken.0.load(Ordering::SeqCst), 2);
        // The kill's grace timer runs on tokio's clock, paused here.
        tokio::time::pause();
        assert!(session.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(2 * KILL_GRACE).await;
        assert_eq!(session.as_mut().poll(&mut cx), Poll::Ready(None));
    }
}
