//! Accept loops: one per listening socket per event-loop thread.
//!
//! Before accepting, a loop takes one slot from each limit that applies (the bind line's
//! `maxconn`, the frontend's, the process's), so when a limit is reached it simply stops
//! accepting and new connections wait in the kernel's queue, as HAProxy's do; nothing is
//! accepted only to be dropped. The slots travel with the session and are released when it
//! ends. Every loop follows the process's [`ListenState`]: paused loops stop accepting (and a
//! TCP socket this process owns stops listening, so clients are refused, as HAProxy's are),
//! stopped loops return and drop their socket.
//!
//! On an `accept-proxy` bind line, a session first reads the client's PROXY protocol header
//! ([`sluice_net::proxy_io::read_header`]); its addresses replace the connection's for the rest
//! of the session (balance source, X-Forwarded-For, logs). The wait is bounded by `timeout
//! client`: HAProxy bounds handshakes with `timeout client-hs` (not in 2.6, and not in Sluice)
//! and falls back to `timeout client` when it is not set, which is this case. A missing,
//! invalid or late header closes the connection without a word to the client, counted as a
//! request error of the frontend (HAProxy's `ereq` for a failed embryonic session) before the
//! session is counted as one, and logged with the frontend's `error-log-format` or HAProxy's
//! short error line.

use crate::http::rules::{Scope, TcpVerdict, run_tcp_rules};
use crate::http::session::Start;
use crate::park::{self, Parked, Parking};
use crate::report::report_connection_error;
use crate::track::Stage;
use crate::vars::Vars;
use crate::{http, tcp};
use sluice_config::proxy::Mode;
use sluice_net::listen::{Endpoints, Listener};
use sluice_net::proxy_io;
use sluice_net::stream::Stream;
use sluice_runtime::bell::either_rang;
use sluice_runtime::clock;
use sluice_runtime::counters::Counter;
use sluice_runtime::listener::ListenerStats;
use sluice_runtime::process::{ListenState, Process};
use sluice_runtime::proxy::Frontend;
use sluice_runtime::slots::{ConnSlots, Slot};
use sluice_runtime::streams::Origin;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait before accepting again after the process ran out of descriptors or
/// memory: long enough to let sessions end, short enough to be invisible to clients.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The slots a session holds while it lives.
struct Slots {
    _bind: Option<Slot>,
    _frontend: Slot,
    _process: Slot,
}

/// Accepts connections on `listener` for `frontend` until the process stops listening;
/// `accept_proxy` is the bind line's option: each connection starts with a PROXY header;
/// `bind_name` names the socket in error logs; `socket_id` is its number in its frontend
/// (from 1, `so_id`), `listener_stats` its counters under `option socket-stats`. While
/// paused, a socket that has a `release_backlog` (a TCP one this process bound or was
/// handed, not an inherited `fd@`; an abstract unix one this process bound) stops
/// listening, as HAProxy's do: new clients are refused rather than queued, and a process
/// replacing this one may bind the address (an abstract socket is closed for that); it
/// listens again with that queue length when resumed.
pub async fn run_listener(
    process: Arc<Process>,
    frontend: Arc<Frontend>,
    (mut listener, release_backlog): (Listener, Option<u32>),
    bind_slots: Option<Arc<ConnSlots>>,
    (accept_proxy, bind_name): (bool, Arc<str>),
    (listener_stats, socket_id): (Option<Arc<ListenerStats>>, u32),
) {
    // Joined once with this task's waker: a wait below is then one load per bell, where a
    // watch channel's `changed()` would join and leave a list under a lock every time.
    let task = std::future::poll_fn(|cx| std::task::Poll::Ready(cx.waker().clone())).await;
    let mut stopping = process.listen_bell.listen(&task);
    // `disable frontend` pauses this frontend alone, like SIGTTOU pauses them all.
    let mut pausing = frontend.stats.pause_bell.listen(&task);
    let mut batch = AcceptBatch::new(process.global.maxaccept());
    // A socket handed over may have been left out of the listening state by the pause of
    // the process that held it (a master's worker): it listens again here.
    let mut released = release_backlog.is_some();
    loop {
        // What was rung so far is read below; a ring from now on ends the waits.
        stopping.rang();
        pausing.rang();
        let paused = match process.listen_state() {
            ListenState::Stopped => return,
            ListenState::Paused => true,
            ListenState::Active => frontend.stats.paused(),
        };
        match (paused, release_backlog) {
            (true, Some(_)) if !released => released = listener.stop_listening().is_ok(),
            (false, Some(backlog)) if released => match listener.listen_again(backlog) {
                Ok(()) => released = false,
                // Another process took the address meanwhile: paused until the next change.
                Err(err) => {
                    eprintln!(
                        "[WARNING] frontend '{}': cannot listen again on socket {bind_name}: {err}",
                        frontend.name()
                    );
                    either_rang(&mut stopping, &mut pausing).await;
                    continue;
                }
            },
            _ => {}
        }
        if paused {
            either_rang(&mut stopping, &mut pausing).await;
            continue;
        }
        // Slots are usually free: taken at once, without the select below.
        let mut taking = std::pin::pin!(take_slots(&process, &frontend, bind_slots.as_ref()));
        let slots = match ready_now(taking.as_mut()) {
            Some(slots) => slots,
            None => tokio::select! {
                slots = taking => slots,
                () = either_rang(&mut stopping, &mut pausing) => continue,
            },
        };
        let mut accepting = std::pin::pin!(listener.accept());
        let Some(accepted) = ready_now(accepting.as_mut()) else {
            // No connection queued: wait for one without the slots, so that a thread whose
            // own queue is empty (each has its own socket, `listen::BoundListener::shards`)
            // holds none while another thread has a connection waiting for one.
            batch.waited();
            drop(slots);
            tokio::select! {
                // An error shows in the accept that follows.
                _ = listener.readable() => {}
                () = either_rang(&mut stopping, &mut pausing) => {}
            }
            continue;
        };
        match accepted {
            Ok((stream, endpoints)) => {
                // `set rate-limit connections|sessions global`: this connection waits for
                // its turn and the loop accepts no other meanwhile, so the next clients
                // wait in the kernel's queue, as with a full `maxconn`.
                process.accept_limits.admit().await;
                // `rate-limit sessions`: the frontend's own rate, likewise.
                frontend.session_rate_limit.wait_turn().await;
                // Sessions stay on this thread (its LocalSet): no Send bound, no migration.
                let held = Held::accepted(
                    (Arc::clone(&process), Arc::clone(&frontend)),
                    endpoints,
                    Vars::through((listener_stats.clone(), socket_id), stream.as_raw_fd()),
                    slots,
                );
                tokio::task::spawn_local(session(
                    held,
                    stream,
                    (accept_proxy, Arc::clone(&bind_name)),
                ));
                if batch.accepted() {
                    tokio::task::yield_now().await;
                }
            }
            Err(err) if is_resource_exhaustion(&err) => {
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await
            }
            // ECONNABORTED and friends concern one connection only.
            Err(_) => {}
        }
    }
}

/// `tune.maxaccept`: how many connections a listener takes in a row, while more are
/// waiting, before the sessions it started and the other listeners get their turn.
struct AcceptBatch {
    /// `None`: no limit.
    max: Option<u32>,
    in_a_row: u32,
}

impl AcceptBatch {
    fn new(max: Option<u32>) -> Self {
        AcceptBatch { max, in_a_row: 0 }
    }

    /// The listener had to wait for a connection: the other tasks ran meanwhile.
    fn waited(&mut self) {
        self.in_a_row = 0;
    }

    /// Counts one accepted connection; true when the listener must now yield.
    fn accepted(&mut self) -> bool {
        self.in_a_row += 1;
        if self.max.is_some_and(|max| self.in_a_row >= max) {
            self.in_a_row = 0;
            return true;
        }
        false
    }
}

/// The result of `waiting` if it is already there (a connection waiting to be accepted, free
/// slots), polled with a waker that wakes nothing; `None` if it would have to wait (the same
/// future is then awaited, which hands it the task's real waker).
fn ready_now<F: std::future::Future>(waiting: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match waiting.poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

async fn take_slots(
    process: &Process,
    frontend: &Frontend,
    bind: Option<&Arc<ConnSlots>>,
) -> Slots {
    let bind = match bind {
        Some(slots) => Some(slots.take().await),
        None => None,
    };
    Slots {
        _bind: bind,
        _frontend: frontend.slots.take().await,
        _process: process.slots.take().await,
    }
}

fn is_resource_exhaustion(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// What a session owns from its accept to its end, whether it runs in a task or waits
/// parked between two requests ([`crate::park`]): its proxies, its addresses (those of the
/// PROXY header once read), its variables and stick counters, its connection slots. Once
/// counted as a session, dropping it ends the session in the counters.
pub(crate) struct Held {
    process: Arc<Process>,
    frontend: Arc<Frontend>,
    endpoints: Endpoints,
    vars: Vars,
    _slots: Slots,
    counted: bool,
}

impl Held {
    /// A connection just accepted, counted on its listening socket (`dst_conn`) until it
    /// ends.
    fn accepted(
        (process, frontend): (Arc<Process>, Arc<Frontend>),
        endpoints: Endpoints,
        vars: Vars,
        slots: Slots,
    ) -> Held {
        if let Some(open) = frontend.socket_connections(vars.socket_id()) {
            open.incr();
        }
        Held {
            process,
            frontend,
            endpoints,
            vars,
            _slots: slots,
            counted: false,
        }
    }

    /// The session's parts that rules, logs and views read.
    pub(crate) fn scope(&self) -> Scope<'_> {
        Scope {
            process: &self.process,
            frontend: &self.frontend,
            endpoints: &self.endpoints,
            vars: &self.vars,
        }
    }

    /// Counts the session on the process, its frontend and its listener, for as long as
    /// this lives.
    fn count(&mut self) {
        self.process.traffic.open_session();
        self.frontend.traffic.open_session();
        if let Some(listener) = self.vars.listener() {
            listener.traffic.open_session();
        }
        self.counted = true;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(open) = self.frontend.socket_connections(self.vars.socket_id()) {
            open.decr();
        }
        if self.counted {
            self.process.traffic.close_session();
            self.frontend.traffic.close_session();
            if let Some(listener) = self.vars.listener() {
                listener.traffic.close_session();
            }
        }
    }
}

/// A session from its accept to its end, or to its first parked wait, as one task.
///
/// Written as a function returning an `async move` block rather than as an `async fn`: an
/// `async fn` keeps a second copy of every argument it still uses after an `await`, and this
/// future lives as long as the connection, idle keep-alive time included.
// Not an `async fn`: it would keep a second copy of the arguments it uses after an `await`.
#[allow(clippy::manual_async_fn)]
fn session(
    mut held: Held,
    mut client: Stream,
    (accept_proxy, bind_name): (bool, Arc<str>),
) -> impl std::future::Future<Output = ()> {
    async move {
        held.frontend.connections.incr();
        held.frontend.connection_rate.incr();
        held.process.connection_rate.incr();
        // `tcp-request connection` rules see the connection as it is, before any PROXY header
        // (configuration.txt §4.2: they run before the handshakes).
        let connection_rules = &held.frontend.plan.rules.tcp_connection;
        if !connection_rules.is_empty() {
            let view = held.scope().view(None, None);
            let verdict = run_tcp_rules(
                &view,
                &held.vars,
                connection_rules,
                Stage::Connection,
                &mut 0,
            );
            held.vars.apply_client_marks(&client);
            if let Some(refusal) = refusal(verdict, &client) {
                let listener = held.vars.listener().map(|l| &l.denied_connections);
                refusal.count(
                    held.scope().front(),
                    (&held.frontend.denied_connections, listener),
                );
                return;
            }
        }
        if accept_proxy || held.vars.expects_proxy() {
            // For the error log, should the header fail.
            let accepted = (clock::wall_now(), clock::now_std());
            // Boxed: the header's reading state is only needed at the start of the session. The
            // future is built inside `Box::pin`: bound to a local first, it would keep its size
            // in this future's state for the whole session.
            let timeout = held.frontend.plan.timeouts.client;
            match Box::pin(proxy_io::read_header(&mut client, held.endpoints, timeout)).await {
                Ok(announced) => {
                    held.endpoints = announced.endpoints;
                    held.vars.proxy_header_received(announced.tlvs);
                }
                // A connection error, logged, not a request error (`ereq`), as in HAProxy.
                Err(err) => {
                    let view = held.scope().view(None, None);
                    report_connection_error(view, accepted, &bind_name, &err);
                    return;
                }
            }
        }
        // `tcp-request session` rules: after the PROXY header, before any content.
        let session_rules = &held.frontend.plan.rules.tcp_session;
        if !session_rules.is_empty() {
            let view = held.scope().view(None, None);
            let verdict = run_tcp_rules(&view, &held.vars, session_rules, Stage::Session, &mut 0);
            held.vars.apply_client_marks(&client);
            if let Some(refusal) = refusal(verdict, &client) {
                let listener = held.vars.listener().map(|l| &l.denied_sessions);
                refusal.count(
                    held.scope().front(),
                    (&held.frontend.denied_sessions, listener),
                );
                return;
            }
        }
        held.vars.trackers.session_accepted();
        held.count();
        if let Some(parking) = live(&held, &mut client, Start::New).await {
            park::park(held, client, parking);
        }
    }
}

/// How a `tcp-request connection|session` rule ended the connection.
enum Refusal {
    Reject,
    SilentDrop,
}

impl Refusal {
    /// Counts it: a `reject` on the stage's own counter (`dcon`, `dses`), a `silent-drop` as
    /// a denied request (`dreq`), as HAProxy counts them.
    fn count(
        self,
        front: (&Frontend, Option<&ListenerStats>),
        (stage, listener_stage): (&Counter, Option<&Counter>),
    ) {
        match self {
            Refusal::Reject => {
                stage.incr();
                if let Some(counter) = listener_stage {
                    counter.incr();
                }
            }
            Refusal::SilentDrop => sluice_runtime::proxy::count_denied_request(front, None),
        }
    }
}

/// Whether a `tcp-request connection|session` verdict ends the connection, and how; a
/// `silent-drop` also arranges for its close to go unnoticed by the client.
fn refusal(verdict: Option<TcpVerdict>, client: &Stream) -> Option<Refusal> {
    match verdict {
        Some(TcpVerdict::Reject) => Some(Refusal::Reject),
        Some(TcpVerdict::SilentDrop) => {
            // Should the socket refuse the options, it still closes, only less quietly.
            let _ = client.abort_silently();
            Some(Refusal::SilentDrop)
        }
        Some(TcpVerdict::Accept | TcpVerdict::Wait | TcpVerdict::SwitchHttp) | None => None,
    }
}

/// A parked session woken by its client's next request (or its leaving), as a new task that
/// runs until the session ends or parks again.
// Not an `async fn`: see `session`.
#[allow(clippy::manual_async_fn)]
pub(crate) fn resumed(parked: Parked) -> impl std::future::Future<Output = ()> {
    async move {
        let Ok(mut client) = parked.client.resume() else {
            return;
        };
        if let Some(parking) =
            live(&parked.held, &mut client, Start::Resumed(&parked.parking)).await
        {
            park::park(parked.held, client, parking);
        }
    }
}

/// One stretch of a session in a task, registered as a stream for `show sess`: until the
/// session ends (or is killed), or until it is idle long enough to be parked (the wait to
/// park is returned).
async fn live(held: &Held, client: &mut Stream, start: Start<'_>) -> Option<Parking> {
    let registered = held.process.streams.register(
        Origin::Client(Arc::clone(&held.frontend)),
        held.endpoints.client,
        held.endpoints.local,
        std::os::fd::AsRawFd::as_raw_fd(client),
    );
    // `shutdown session` ends the stream by dropping it here, closing both sides.
    registered
        .scope(established(held, client, start))
        .await
        .flatten()
}

/// The rest of a session once its connection is accepted and registered (or woken).
///
/// This future lives as long as the connection, idle keep-alive time included, so it holds
/// what the session owns by reference, and the scope it makes from it (boxed with it by
/// [`Registered::scope`](sluice_runtime::streams::Registered::scope), not in the task).
// Not an `async fn`: it would keep a second copy of its arguments (see `session`).
#[allow(clippy::manual_async_fn)]
fn established<'a>(
    held: &'a Held,
    client: &'a mut Stream,
    start: Start<'a>,
) -> impl std::future::Future<Output = Option<Parking>> + 'a {
    async move {
        let scope = held.scope();
        let (process, frontend) = (scope.process, scope.frontend);
        let global = &process.global;
        let buffers = http::settings::BufferSizes {
            bufsize: global.bufsize(),
            maxrewrite: global.maxrewrite(),
            maxhdr: global.http_maxhdr(),
            any_method_payload: global.h1_any_method_payload,
        };
        // The TCP session's state is boxed, and the HTTP session boxes what it needs while a
        // request is in flight (`http::session::run`): an idle HTTP connection holds neither.
        let input = if matches!(start, Start::New) {
            frontend.log_connection(scope.endpoints.client, scope.endpoints.local);
            // TCP_NODELAY and the ACK policy came with the socket from its listener.
            if frontend.plan.clitcpka && client.set_keepalive(frontend.plan.client_probes).is_err()
            {
                return None;
            }
            if frontend.plan.nolinger && client.set_nolinger().is_err() {
                return None;
            }
            match frontend.plan.mode {
                Mode::Tcp => Box::pin(tcp::serve(&scope, client)).await?,
                Mode::Http => http::buffer::InBuf::new(buffers.bufsize as usize),
            }
        } else {
            http::buffer::InBuf::new(buffers.bufsize as usize)
        };
        http::session::run(&scope, client, buffers, input, start).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_yields_after_max_accepts_in_a_row() {
        let mut batch = AcceptBatch::new(Some(3));
        assert_eq!(
            [batch.accepted(), batch.accepted(), batch.accepted()],
            [false, false, true]
        );
        // The count starts again after a yield, and after a wait.
        assert!(!batch.accepted());
        batch.waited();
        assert!(!batch.accepted());
        assert!(!batch.accepted());
        assert!(batch.accepted());
    }

    #[test]
    fn without_a_limit_a_batch_never_yields() {
        let mut batch = AcceptBatch::new(None);
        assert!((0..10_000).all(|_| !batch.accepted()));
    }

    #[tokio::test]
    async fn a_slot_missed_at_once_is_taken_when_one_frees() {
        let slots = ConnSlots::new(0);
        let mut taking = std::pin::pin!(slots.take());
        assert!(ready_now(taking.as_mut()).is_none());
        // The wait the first poll started (with a waker that wakes nothing) still gets the
        // slot once the future is awaited with the task's own.
        slots.set_limit(1);
        let slot = taking.await;
        assert_eq!(slots.taken(), 1);
        drop(slot);
        assert_eq!(slots.taken(), 0);
    }

    #[tokio::test]
    async fn ready_now_tells_a_waiting_connection_from_none() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accepting = std::pin::pin!(listener.accept());
        assert!(ready_now(accepting.as_mut()).is_none());
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        // The same future, awaited after a miss, still completes.
        let (_, peer) = accepting.await.unwrap();
        assert_eq!(peer.ip(), addr.ip());
        let _second = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut again = std::pin::pin!(listener.accept());
        let mut found = None;
        // The kernel queues the connection as soon as the handshake completes; readiness
        // reaches the reactor on its next turn.
        for _ in 0..100 {
            found = ready_now(again.as_mut());
            if found.is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(matches!(found, Some(Ok(_))));
    }
}
