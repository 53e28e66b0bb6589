//! Server limits and weights that change while the process runs (configuration.txt §5.2
//! `minconn`, `slowstart`; §4.2 `fullconn`): the connection limit of a server with `minconn`
//! follows its backend's load, and a server coming back up with `slowstart` ramps its weight
//! and its limit up to the configured ones. The formulas are HAProxy's (`srv_dynamic_maxconn`,
//! `server_recalc_eweight`) and live here as pure functions; [`Backend`] applies them under its
//! lock and tells the balancer only when a server's limit really moves, so a backend without
//! `minconn` servers pays nothing per request. The slowstart ramp is stepped by a timer task
//! ([`ramp`], spawned by the check engine), never per request.

use crate::health::{Admin, HealthState};
use crate::proxy::{Backend, Server, Shared};
use sluice_config::plan::{BackendChoice, Plan};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// HAProxy's weight scale (`BE_WEIGHT_SCALE`): the slowstart ramp moves in sixteenths of the
/// configured weight.
const WEIGHT_SCALE: u64 = 16;

/// A server warming up after it came back (`slowstart`), in whole seconds as HAProxy counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warmup {
    /// When the server came back; a new comeback restarts the ramp with a new instant.
    pub since: Instant,
    /// Whole seconds elapsed since then, as of the last step.
    pub elapsed: u32,
    /// The `slowstart` time in seconds (rounded up, never 0).
    pub total: u32,
}

impl Warmup {
    /// A ramp starting now for a `slowstart` of `total` (rounded up to whole seconds).
    pub fn start(total: std::time::Duration) -> Warmup {
        let ms = total.as_millis().min(u128::from(u32::MAX));
        Warmup {
            since: Instant::now(),
            elapsed: 0,
            total: (ms as u32).div_ceil(1000).max(1),
        }
    }

    /// Whether the ramp is over.
    pub fn done(&self) -> bool {
        self.elapsed >= self.total
    }
}

/// A server's connection limit at backend load `beconn` (HAProxy's `srv_dynamic_maxconn`
/// without slowstart): `maxconn` once the backend reaches `fullconn` or when `minconn` is not
/// below `maxconn`, else max(`minconn`, `maxconn` × `beconn` / `fullconn`).
pub fn load_limit(minconn: u32, maxconn: u32, beconn: u64, fullconn: u32) -> u32 {
    if fullconn == 0 || beconn >= u64::from(fullconn) || minconn >= maxconn {
        return maxconn;
    }
    let ramp = beconn * u64::from(maxconn) / u64::from(fullconn);
    minconn.max(ramp as u32)
}

/// A limit during slowstart: from 1 up to `limit`, in whole percents of the elapsed time.
pub fn warming_limit(limit: u32, warmup: Option<Warmup>) -> u32 {
    match warmup {
        Some(w) if !w.done() => {
            let ratio = 100 * u64::from(w.elapsed) / u64::from(w.total.max(1));
            ((u64::from(limit) * ratio / 100) as u32).max(1)
        }
        _ => limit,
    }
}

/// A weight during slowstart: HAProxy's step (`WEIGHT_SCALE` × elapsed + total) / total
/// sixteenths of the weight, starting at one sixteenth. The balancer counts whole weight units,
/// so the step is rounded up, as HAProxy rounds the weight it reports; a weight stays above 0.
pub fn warming_weight(weight: u32, warmup: Option<Warmup>) -> u32 {
    match warmup {
        Some(w) if !w.done() => {
            let total = u64::from(w.total.max(1));
            let step = ((WEIGHT_SCALE * u64::from(w.elapsed) + total) / total).min(WEIGHT_SCALE);
            (u64::from(weight) * step).div_ceil(WEIGHT_SCALE) as u32
        }
        _ => weight,
    }
}

/// HAProxy's default `fullconn` for each backend of `plan`: 10% (rounded up, at least 1) of the
/// connection limits of the frontends that may send it traffic (`default_backend`, static
/// `use_backend` rules, or a `listen` section's own servers). `frontend_limit` gives each
/// frontend's effective `maxconn`.
pub fn default_fullconn(plan: &Plan, frontend_limit: impl Fn(usize) -> u32) -> Vec<u32> {
    let mut sums = vec![0u64; plan.backends.len()];
    for (f, fp) in plan.frontends.iter().enumerate() {
        let mut reached: HashSet<usize> = fp.default_backend.into_iter().collect();
        for rule in &fp.use_backend {
            if let BackendChoice::Index(b) = rule.action {
                reached.insert(b);
            }
        }
        for b in reached {
            if let Some(sum) = sums.get_mut(b) {
                *sum += u64::from(frontend_limit(f));
            }
        }
    }
    plan.backends
        .iter()
        .zip(sums)
        .map(|(bp, sum)| {
            bp.fullconn
                .unwrap_or_else(|| (sum.div_ceil(10).min(u64::from(u32::MAX)) as u32).max(1))
        })
        .collect()
}

/// Whether a server in `h` may take traffic (up, not in maintenance).
fn in_service(h: &HealthState) -> bool {
    h.operational() && h.admin != Admin::Maint
}

/// `slowstart` after a change of `server`'s health from `before` to `after` (call it before
/// [`Backend::apply_health`]): a server coming back into service (checks up again, or out of
/// maintenance) starts warming up, and the ramp it returns must then be driven with [`ramp`];
/// one going out of service stops warming. Never at start-up: servers start in service.
pub fn warm_up(server: &Server, before: &HealthState, after: &HealthState) -> Option<Warmup> {
    let total = server.conf.slowstart?;
    if !in_service(before) && in_service(after) {
        let warmup = Warmup::start(total);
        server.health.update(|h| h.warmup = Some(warmup));
        Some(warmup)
    } else {
        if !in_service(after) {
            server.health.update(|h| h.warmup = None);
        }
        None
    }
}

/// Steps the ramp `warmup` of server `index`: every 1/20 of the slowstart time, at least every
/// second (HAProxy's warm-up task), the elapsed seconds go into the server's health and the
/// balancer, until the ramp is over or a new comeback replaced it. Runs on any tokio runtime
/// with a timer (the check thread's).
pub async fn ramp(backend: Arc<Backend>, index: usize, warmup: Warmup) {
    let step = Duration::from_millis((u64::from(warmup.total) * 1000 / 20).max(1000));
    let Some(server) = backend.servers.get(index) else {
        return;
    };
    loop {
        tokio::time::sleep(step).await;
        let elapsed = warmup.since.elapsed().as_secs().min(u64::from(u32::MAX)) as u32;
        let (before, after) = server.health.update(|h| {
            if let Some(w) = h.warmup.as_mut()
                && w.since == warmup.since
            {
                w.elapsed = elapsed;
                if w.done() {
                    h.warmup = None;
                }
            }
        });
        if before.warmup.is_none_or(|w| w.since != warmup.since) {
            return;
        }
        backend.apply_health(index);
        if after.warmup.is_none() {
            return;
        }
    }
}

/// What a backend keeps to compute its servers' limits.
#[derive(Debug)]
pub(crate) struct Limits {
    /// `fullconn`.
    pub(crate) fullconn: u32,
}

impl Limits {
    pub(crate) fn new(fullconn: Option<u32>) -> Limits {
        Limits {
            fullconn: fullconn.unwrap_or(1).max(1),
        }
    }
}

/// Whether a server's limit follows the backend's load: a `minconn` below its `maxconn`.
pub(crate) fn follows_load(conf: &sluice_config::proxy::ServerConf) -> bool {
    matches!((conf.minconn, conf.maxconn), (Some(a), Some(b)) if a < b)
}

/// The warm-up state of each server, kept under the backend's lock beside the balancer so a
/// limit is computed without taking the server's health lock.
#[derive(Debug, Default)]
pub(crate) struct Warming {
    warmups: Vec<Option<Warmup>>,
}

impl Warming {
    pub(crate) fn new(servers: usize) -> Warming {
        Warming {
            warmups: vec![None; servers],
        }
    }

    /// Makes room for a server added at run time.
    pub(crate) fn push(&mut self) {
        self.warmups.push(None);
    }

    pub(crate) fn set(&mut self, index: usize, warmup: Option<Warmup>) {
        if let Some(slot) = self.warmups.get_mut(index) {
            *slot = warmup;
        }
    }

    fn get(&self, index: usize) -> Option<Warmup> {
        self.warmups.get(index).copied().flatten()
    }
}

impl Backend {
    /// Sets `fullconn` (HAProxy's default, computed from the frontends, when not configured).
    pub fn with_fullconn(mut self, fullconn: u32) -> Backend {
        self.limits.fullconn = fullconn.max(1);
        self
    }

    /// The backend's `fullconn`.
    pub fn fullconn(&self) -> u32 {
        self.limits.fullconn
    }

    /// The current connection limit of server `index` (`None`: unlimited), as the balancer
    /// applies it.
    pub fn server_limit(&self, index: usize) -> Option<u32> {
        self.lock().balancer.state(index).and_then(|s| s.maxconn)
    }

    /// The weight the balancer currently gives server `index` (after slowstart, agent
    /// percentages and draining).
    pub fn effective_weight(&self, index: usize) -> u32 {
        self.lock().balancer.state(index).map_or(0, |s| s.weight)
    }

    /// The sum of the effective weights of the usable servers.
    pub fn total_weight(&self) -> u32 {
        let shared = self.lock();
        (0..self.servers.len())
            .filter_map(|i| shared.balancer.state(i))
            .filter(|s| s.usable)
            .map(|s| s.weight)
            .sum()
    }

    /// The limit server `index` should have now: its `maxconn` following the backend's load
    /// (connections plus queued requests, HAProxy's `beconn`) between `minconn` and `maxconn`,
    /// ramped during slowstart.
    pub(crate) fn compute_limit(&self, shared: &Shared, index: usize) -> Option<u32> {
        let conf = &self.servers.get(index)?.conf;
        let maxconn = conf.maxconn.filter(|&n| n > 0)?;
        let minconn = conf.minconn.unwrap_or(maxconn);
        let beconn = shared.balancer.total_connections() + shared.queued_total() as u64;
        let limit = load_limit(minconn, maxconn, beconn, self.limits.fullconn);
        Some(warming_limit(limit, shared.warming.get(index)))
    }

    /// After the backend's load changed: moves the limits of the servers that follow it, and
    /// gives a raised limit's new slots to the waiting requests. Nothing to do (one branch)
    /// without `minconn` servers.
    pub(crate) fn follow_load(&self, shared: &mut Shared) {
        // By position: the list is in `shared`, which the loop changes.
        for k in 0..shared.following.len() {
            let index = shared.following[k];
            let limit = self.compute_limit(shared, index);
            let Some(mut state) = shared.balancer.state(index) else {
                continue;
            };
            if state.maxconn == limit {
                continue;
            }
            let raised =
                limit.unwrap_or(u32::MAX) > state.maxconn.unwrap_or(u32::MAX) || limit.is_none();
            state.maxconn = limit;
            shared.balancer.update(index, state);
            if raised {
                self.hand_over(shared, index);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_config::cond::CondContext;
    use sluice_config::reader::Source;

    fn plan(text: &str) -> Plan {
        let no_env = |_: &str| None;
        let ctx = CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let source = Source {
            name: Arc::from("t.cfg"),
            text: text.to_owned(),
        };
        sluice_config::plan::check(&[source], &ctx).plan.unwrap()
    }

    fn backend(text: &str) -> Backend {
        let bp = plan(text).backends.into_iter().next().unwrap();
        let resolved = bp.servers.iter().map(|_| None).collect();
        Backend::new(bp, resolved)
    }

    #[tokio::test(start_paused = true)]
    async fn a_minconn_limit_grows_with_the_backend_load() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let b = Arc::new(backend(
                    "backend b\n fullconn 10\n timeout queue 10s\n server a 127.0.0.1:1 minconn 1 maxconn 5\n",
                ));
                assert_eq!(b.server_limit(0), Some(1), "idle: minconn");
                let first = b.acquire_server(None, crate::proxy::QueuePriority::default()).await.unwrap();
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                for n in 0..9 {
                    let (b, tx) = (Arc::clone(&b), tx.clone());
                    tokio::task::spawn_local(async move {
                        let lease = b.acquire_server(None, crate::proxy::QueuePriority::default()).await;
                        tx.send(n).unwrap();
                        // Hold the slot for good.
                        std::future::pending::<()>().await;
                        drop(lease);
                    });
                    tokio::task::yield_now().await;
                }
                // Ten requests in the backend: 5 × 10 / 10, the limit is the full maxconn.
                let mut served = Vec::new();
                while let Ok(n) = rx.try_recv() {
                    served.push(n);
                }
                assert_eq!(b.server_limit(0), Some(5));
                assert_eq!(served, [0, 1, 2, 3], "served in arrival order as the limit rose");
                assert_eq!(b.queued(), 5);
                // Nine left in the backend: the limit falls to 4, which the server holds.
                drop(first);
                tokio::task::yield_now().await;
                assert_eq!(b.server_limit(0), Some(4));
                assert!(rx.try_recv().is_err(), "no slot for the queue");
            })
            .await;
    }

    #[test]
    fn a_health_change_keeps_the_server_limit() {
        let b = backend("backend b\n server a 127.0.0.1:1 maxconn 3\n");
        let server = &b.servers[0];
        server.health.update(|h| h.check_up = false);
        b.apply_health(0);
        server.health.update(|h| h.check_up = true);
        b.apply_health(0);
        assert_eq!(b.server_limit(0), Some(3));
    }

    #[test]
    fn a_warming_server_gets_a_ramped_weight_and_limit() {
        let b = backend("backend b\n server a 127.0.0.1:1 weight 32 maxconn 50 slowstart 4s\n");
        let step = |elapsed| {
            b.servers[0].health.update(|h| h.warmup = warm(elapsed, 4));
            b.apply_health(0);
            (b.effective_weight(0), b.server_limit(0))
        };
        assert_eq!(step(0), (2, Some(1)));
        assert_eq!(step(1), (10, Some(12)));
        assert_eq!(step(4), (32, Some(50)));
        b.servers[0].health.update(|h| h.warmup = None);
        b.apply_health(0);
        assert_eq!((b.effective_weight(0), b.server_limit(0)), (32, Some(50)));
    }

    #[test]
    fn default_fullconn_is_a_tenth_of_the_frontends_reaching_the_backend() {
        let p = plan(
            "frontend f\n maxconn 1000\n default_backend b\n use_backend c if TRUE\n\
             frontend g\n maxconn 95\n default_backend b\n\
             backend b\nbackend c\n fullconn 7\nbackend d\n",
        );
        let limits = [1000, 95];
        assert_eq!(default_fullconn(&p, |f| limits[f]), [110, 7, 1]);
    }

    fn warm(elapsed: u32, total: u32) -> Option<Warmup> {
        Some(Warmup {
            since: Instant::now(),
            elapsed,
            total,
        })
    }

    #[test]
    fn limit_follows_the_load_between_minconn_and_maxconn() {
        // configuration.txt §4.2 "fullconn": 100 to 1000, reached at 10000 connections.
        assert_eq!(load_limit(100, 1000, 0, 10000), 100);
        assert_eq!(load_limit(100, 1000, 5000, 10000), 500);
        assert_eq!(load_limit(100, 1000, 10000, 10000), 1000);
        assert_eq!(load_limit(100, 1000, 20000, 10000), 1000);
        assert_eq!(load_limit(10, 10, 0, 10000), 10, "a static limit");
    }

    #[test]
    fn slowstart_ramps_in_haproxy_steps() {
        assert_eq!(warming_weight(32, warm(0, 2)), 2, "one sixteenth at first");
        assert_eq!(
            warming_weight(32, warm(1, 2)),
            18,
            "(16 + 2) / 2 = 9 sixteenths"
        );
        assert_eq!(warming_weight(32, warm(2, 2)), 32);
        assert_eq!(warming_weight(1, warm(0, 10)), 1, "never 0");
        assert_eq!(warming_weight(7, None), 7);
        assert_eq!(warming_limit(50, warm(0, 4)), 1);
        assert_eq!(warming_limit(50, warm(1, 4)), 12);
        assert_eq!(warming_limit(50, warm(4, 4)), 50);
    }

    #[test]
    fn slowstart_is_counted_in_whole_seconds() {
        assert_eq!(Warmup::start(Duration::from_millis(1500)).total, 2);
        assert_eq!(Warmup::start(Duration::from_millis(1)).total, 1);
    }
}
