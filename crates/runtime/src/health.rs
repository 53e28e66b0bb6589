//! A server's live health: what its health check, its agent and its administrative state say,
//! and how that becomes the [`ServerState`] its backend's balancer works with.
//!
//! The check engine (`sluice-check`) writes here; the data path never reads it, because the
//! result is pushed into the balancer with [`Backend::apply_health`] whenever it changes (the
//! "driven by server events" rule: a pick costs the same whatever the checks do). The state is
//! a small struct behind a mutex taken only by the checks and the CLI, a few times per check
//! interval at most.

use crate::dynamic::{Warmup, warming_weight};
use crate::proxy::Backend;
use sluice_balance::ServerState;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The administrative state (configuration `disabled`, agent `drain`/`maint`/`ready`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admin {
    /// Serving normally.
    Ready,
    /// No new traffic (weight 0), existing connections continue.
    Drain,
    /// Out of service.
    Maint,
}

/// The last check's result, kept for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LastCheck {
    /// HAProxy's status code (`L4OK`, `L7STS`...).
    pub status: &'static str,
    /// Its description (`Layer4 check passed`...): `check_desc` in `show stat`.
    pub description: &'static str,
    /// The HTTP status (or agent code) when there was one.
    pub code: Option<u16>,
    /// How long the check took, in milliseconds.
    pub duration_ms: u64,
    /// What the check found, in words (`Connection refused`, the reason phrase of an HTTP
    /// status...): the `last_chk` field of `show stat`.
    pub info: Option<String>,
}

/// Everything that decides whether a server takes traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthState {
    /// The health check (or the tracked server) says the server is up; true without checks.
    pub check_up: bool,
    /// The agent has not said `down`, `fail` or `stopped`; true without an agent.
    pub agent_up: bool,
    /// `http-check disable-on-404` saw a 404: running, but no new traffic ("stopping").
    pub stopping: bool,
    /// Administrative state.
    pub admin: Admin,
    /// Weight as a percentage of the configured one (agent `NN%`).
    pub weight_percent: u32,
    /// The last health check's result.
    pub last_check: Option<LastCheck>,
    /// `slowstart`: the server came back and its weight and limit are still ramping up.
    pub warmup: Option<Warmup>,
}

impl HealthState {
    /// Up as far as checks, agent and tracking go (maintenance aside).
    pub fn operational(&self) -> bool {
        self.check_up && self.agent_up
    }
}

/// A server's health, shared between the check engine and the CLI.
#[derive(Debug)]
pub struct ServerHealth {
    state: Mutex<HealthState>,
    /// Bumped to end the server's sessions (`on-marked-down shutdown-sessions`): a session's
    /// [`KillSignal`] remembers the value it started with.
    kill: AtomicU64,
    /// What the data path reports: 0 nothing, 4 connection attempts, 7 responses too.
    observing: AtomicU8,
    /// Consecutive errors seen by the data path.
    errors: AtomicU32,
    /// The last of them ([`Observed`] as a number).
    last_error: AtomicU8,
    /// Wakes the check engine after a failed attempt.
    observed: Notify,
}

/// An error the data path saw (`observe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A connection attempt failed.
    Connect,
    /// A 5xx status other than 501 and 505.
    WrongStatus,
    /// An invalid response, or none.
    InvalidResponse,
    /// The response did not come in time.
    Timeout,
}

impl Observed {
    /// HAProxy's words for it in the "Detected N consecutive errors" message.
    pub fn description(self) -> &'static str {
        match self {
            Observed::Connect => "L4 unsuccessful connection",
            Observed::WrongStatus => "Wrong http response",
            Observed::InvalidResponse => "Invalid http response",
            Observed::Timeout => "Read timeout (http)",
        }
    }

    fn from_u8(n: u8) -> Observed {
        match n {
            1 => Observed::WrongStatus,
            2 => Observed::InvalidResponse,
            3 => Observed::Timeout,
            _ => Observed::Connect,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Observed::Connect => 0,
            Observed::WrongStatus => 1,
            Observed::InvalidResponse => 2,
            Observed::Timeout => 3,
        }
    }
}

/// What a session waits on to learn that its server's sessions must end, or that its own
/// stream was killed (`shutdown session`).
///
/// No list of waiters per server: the signal compares the server's kill count with the one it
/// started with, and waits on its own stream's waker, which [`ServerHealth::kill_sessions`]
/// wakes through the stream registry. A list shared by every session of a server would take
/// its lock twice per request.
#[derive(Debug)]
pub struct KillSignal<'a> {
    health: &'a ServerHealth,
    epoch: u64,
    stream: Option<Arc<crate::streams::StreamInfo>>,
}

impl KillSignal<'_> {
    /// Completes when the sessions are told to end, or the stream is killed (never, if that
    /// never happens; a signal taken outside a registered stream sees a server's kill only
    /// when its task is polled for another reason).
    pub async fn wait(&mut self) {
        std::future::poll_fn(|cx| self.poll_wait(cx)).await
    }

    fn poll_wait(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.fired() {
            return std::task::Poll::Ready(());
        }
        let Some(stream) = &self.stream else {
            return std::task::Poll::Pending;
        };
        if stream.poll_killed(cx).is_ready() || self.fired() {
            // Checked again once the waker is registered: a kill in between woke no one.
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }

    fn fired(&self) -> bool {
        self.health.kill.load(Ordering::Acquire) != self.epoch
    }
}

impl ServerHealth {
    /// The state of a server at start-up: up, in maintenance if configured `disabled`.
    pub fn new(disabled: bool) -> Self {
        ServerHealth {
            state: Mutex::new(HealthState {
                check_up: true,
                agent_up: true,
                stopping: false,
                admin: if disabled { Admin::Maint } else { Admin::Ready },
                weight_percent: 100,
                last_check: None,
                warmup: None,
            }),
            kill: AtomicU64::new(0),
            observing: AtomicU8::new(0),
            errors: AtomicU32::new(0),
            last_error: AtomicU8::new(0),
            observed: Notify::new(),
        }
    }

    /// Turns on the data path's reports: `layer7` adds responses to connection attempts.
    pub fn set_observing(&self, on: bool, layer7: bool) {
        let level = match (on, layer7) {
            (false, _) => 0,
            (true, false) => 4,
            (true, true) => 7,
        };
        self.observing.store(level, Ordering::Relaxed);
    }

    /// The data path's report of one connection attempt to this server: one atomic load when
    /// the server is not observed.
    pub fn observe_connect(&self, ok: bool) {
        match (self.observing.load(Ordering::Relaxed), ok) {
            (0, _) => {}
            // In layer 7 a connection is only good once its response is: as in HAProxy, a
            // successful connect does not reset the count.
            (7, true) => {}
            (_, true) => self.record(Ok(())),
            (_, false) => self.record(Err(Observed::Connect)),
        }
    }

    /// The data path's report of one HTTP response (`observe layer7` only).
    pub fn observe_response(&self, result: Result<(), Observed>) {
        if self.observing.load(Ordering::Relaxed) != 7 {
            return;
        }
        self.record(result);
    }

    fn record(&self, result: Result<(), Observed>) {
        match result {
            Ok(()) => self.errors.store(0, Ordering::Relaxed),
            Err(kind) => {
                self.last_error.store(kind.to_u8(), Ordering::Relaxed);
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.observed.notify_one();
            }
        }
    }

    /// The last error the data path reported.
    pub fn last_observed(&self) -> Observed {
        Observed::from_u8(self.last_error.load(Ordering::Relaxed))
    }

    /// Completes after a failed attempt was reported.
    pub async fn observed(&self) {
        self.observed.notified().await;
    }

    /// The consecutive failures reported so far.
    pub fn observed_errors(&self) -> u32 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Starts counting consecutive failures again.
    pub fn reset_observed_errors(&self) {
        self.errors.store(0, Ordering::Relaxed);
    }

    /// A signal for a session starting now: it fires at the next [`ServerHealth::kill_sessions`],
    /// or when the stream of the task asking is killed.
    pub fn kill_signal(&self) -> KillSignal<'_> {
        KillSignal {
            health: self,
            epoch: self.kill.load(Ordering::Acquire),
            stream: crate::streams::current(),
        }
    }

    /// Ends every session that holds a [`KillSignal`] of this server, the server at `index`
    /// of the backend whose uid is `backend`: the streams using it are woken to see it.
    pub fn kill_sessions(&self, streams: &crate::streams::Streams, backend: u32, index: usize) {
        self.kill.fetch_add(1, Ordering::AcqRel);
        streams.wake_users_of(backend, index);
    }

    /// A copy of the current state.
    pub fn get(&self) -> HealthState {
        self.lock().clone()
    }

    /// Changes the state with `f`; returns the states before and after.
    pub fn update(&self, f: impl FnOnce(&mut HealthState)) -> (HealthState, HealthState) {
        let mut state = self.lock();
        let before = state.clone();
        f(&mut state);
        (before, state.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        // A panic elsewhere must not stop the checks: the state is plain data, still valid.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The balancer's view of a server of configured `weight` and `backup` in `state`.
pub fn server_state(weight: u32, backup: bool, state: &HealthState) -> ServerState {
    let usable = state.operational() && state.admin != Admin::Maint;
    let weight = if state.stopping || state.admin == Admin::Drain {
        0
    } else {
        // Rounded up, as HAProxy does, so a small percentage of a small weight is not 0.
        warming_weight((weight * state.weight_percent).div_ceil(100), state.warmup)
    };
    ServerState {
        weight,
        usable,
        backup,
        maxconn: None,
    }
}

/// How many servers of a backend take traffic, for the transition messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usable {
    /// Active servers that are usable with a weight above 0.
    pub active: usize,
    /// Backup servers likewise.
    pub backup: usize,
}

impl Backend {
    /// Changes server `index`'s administrative state (the CLI, the stats page) and pushes it
    /// into the balancer. A server leaving maintenance with `slowstart` ramps its weight up,
    /// driven by a task on the tokio runtime the caller runs on.
    pub fn set_admin(self: &Arc<Self>, index: usize, f: impl FnOnce(&mut Admin)) {
        self.set_health(index, |h| f(&mut h.admin));
    }

    /// Changes server `index`'s health from outside the checks (the CLI's `set server ...
    /// health|agent`, maintenance) and pushes it into the balancer, as [`Backend::set_admin`].
    pub fn set_health(self: &Arc<Self>, index: usize, f: impl FnOnce(&mut HealthState)) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        let (before, after) = server.health.update(f);
        let warmup = crate::dynamic::warm_up(server, &before, &after);
        self.apply_health(index);
        if let Some(warmup) = warmup
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(crate::dynamic::ramp(Arc::clone(self), index, warmup));
        }
    }

    /// Pushes server `index`'s health into the balancer; returns the usable servers after it
    /// and the server's current connections.
    pub fn apply_health(&self, index: usize) -> (Usable, u32) {
        let Some(server) = self.servers.get(index) else {
            return (self.usable(), 0);
        };
        // Read under the backend's lock, so that two changes applied at once reach the
        // balancer in the order the health state took them.
        let mut shared = self.lock();
        let health = server.health.get();
        let mut state = server_state(server.stats.weight(), server.conf.backup, &health);
        let (code, up) = crate::stats::server_state_code(&health);
        server.stats.note_state(code, up);
        shared.warming.set(index, health.warmup);
        // The limit too: the load may have moved, and slowstart ramps it.
        state.maxconn = self.compute_limit(&shared, index);
        shared.balancer.update(index, state);
        let connections = shared.balancer.connections(index);
        // The serving tier may have changed (a backup taking over, an active server taking
        // back): every server with room takes the requests it may now serve.
        for other in 0..self.servers.len() {
            self.hand_over(&mut shared, other);
        }
        drop(shared);
        let usable = self.usable();
        let backend_up = usable.active + usable.backup > 0;
        self.stats.note_state(1 + u8::from(backend_up), backend_up);
        (usable, connections)
    }

    /// Counts the servers taking traffic.
    pub fn usable(&self) -> Usable {
        let shared = self.lock();
        let balancer = &shared.balancer;
        let mut usable = Usable::default();
        for i in 0..balancer.server_count() {
            if let Some(s) = balancer.state(i)
                && s.usable
                && s.weight > 0
            {
                if s.backup {
                    usable.backup += 1;
                } else {
                    usable.active += 1;
                }
            }
        }
        usable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_to_balancer_view() {
        let h = ServerHealth::new(false);
        assert_eq!(server_state(10, false, &h.get()), ServerState::new(10));
        h.update(|s| s.weight_percent = 50);
        assert_eq!(server_state(3, false, &h.get()).weight, 2);
        h.update(|s| s.admin = Admin::Drain);
        let s = server_state(3, false, &h.get());
        assert!(s.usable && s.weight == 0);
        h.update(|s| {
            s.admin = Admin::Ready;
            s.check_up = false;
        });
        assert!(!server_state(3, true, &h.get()).usable);
        let disabled = ServerHealth::new(true);
        assert!(!server_state(3, false, &disabled.get()).usable);
    }

    #[tokio::test]
    async fn observed_errors_are_consecutive_and_wake_the_engine() {
        let h = ServerHealth::new(false);
        h.observe_connect(false);
        assert_eq!(h.observed_errors(), 0, "not observing");
        h.set_observing(true, false);
        h.observe_connect(false);
        h.observe_connect(false);
        h.observe_response(Ok(()));
        assert_eq!(h.observed_errors(), 2, "responses count in layer7 only");
        h.set_observing(true, true);
        h.observe_response(Err(Observed::WrongStatus));
        h.observe_connect(true);
        assert_eq!(h.observed_errors(), 3);
        assert_eq!(h.last_observed(), Observed::WrongStatus);
        tokio::time::timeout(std::time::Duration::from_secs(1), h.observed())
            .await
            .expect("woken");
        h.observe_response(Ok(()));
        assert_eq!(h.observed_errors(), 0);
    }

    #[tokio::test]
    async fn kill_signal_fires_for_sessions_started_before() {
        let h = ServerHealth::new(false);
        let streams = crate::streams::Streams::default();
        let mut signal = h.kill_signal();
        h.kill_sessions(&streams, 1, 0);
        tokio::time::timeout(std::time::Duration::from_secs(1), signal.wait())
            .await
            .expect("the signal fires");
    }
}
