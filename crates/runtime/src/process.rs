//! The process: every live object, the process-wide limits, and the listening state that
//! signals and the CLI change.
//!
//! [`Process::build`] is the "plan → live objects" step of the start-up sequence. Server host
//! names are resolved here, once, as HAProxy does with `init-addr libc`: a name that does not
//! resolve is a start-up error (and a `-c` error), never a runtime surprise.

use crate::counters::Traffic;
use crate::health::Admin;
use crate::logging::{LogHub, ProxyLogger};
use crate::proxy::{Backend, Frontend, FrontendLog};
use crate::record::StreamLog;
use crate::ring::Ring;
use sluice_config::addr::{Family, Host, ServerAddr};
use sluice_config::checks::InitAddr;
use sluice_config::global::CloseSpread;
use sluice_config::global::GlobalConf;
use sluice_config::logging::{LineFormat, LogAddr, LogTarget};
use sluice_config::plan::Plan;
use sluice_config::plan::{BackendChoice, FrontendPlan};
use sluice_config::proxy::Mode;
use sluice_config::proxy::ServerConf;
use sluice_config::ring::RingConf;
use sluice_net::splice::PipeBudget;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use tokio::sync::watch;

/// What the listeners should be doing; every accept loop follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenState {
    /// Accepting connections.
    Active,
    /// Not accepting for now (SIGTTOU); new connections wait in the kernel's queue.
    Paused,
    /// Closed for good (soft stop): live sessions finish, then the process exits.
    Stopped,
}

/// The event-loop index of the current thread (`sluice-loop-N`), 0 for any other thread
/// (the first event loop runs on the main thread).
pub fn event_loop_index() -> usize {
    std::thread::current()
        .name()
        .and_then(|n| n.strip_prefix("sluice-loop-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Settings from the command line that override or complete the configuration.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions {
    /// Process-wide connection limit (from `-n`, `maxconn`, or the file-descriptor limit).
    pub maxconn: u32,
    /// Per-frontend limit for frontends without `maxconn` (`-N`); the global one otherwise.
    pub default_frontend_maxconn: Option<u32>,
    /// Number of event-loop threads.
    pub nbthread: usize,
    /// The file-descriptor limit the process runs with.
    pub ulimit_n: u64,
}

/// Everything running in this process.
#[derive(Debug)]
pub struct Process {
    /// The `global` settings.
    pub global: GlobalConf,
    /// Frontends (and the frontend side of listen sections), in declaration order.
    pub frontends: Vec<Arc<Frontend>>,
    /// Backends (and the backend side of listen sections), in declaration order.
    pub backends: Vec<Arc<Backend>>,
    /// Process-wide connection limit.
    pub maxconn: u32,
    /// Process-wide concurrent connections: every open session holds a slot, under the
    /// limit `set maxconn global` sets (`maxconn` at start).
    pub slots: Arc<crate::slots::ConnSlots>,
    /// Event-loop threads.
    pub nbthread: usize,
    /// The file-descriptor limit the process runs with.
    pub ulimit_n: u64,
    /// Wall-clock start time, for `show info`.
    pub started_at: SystemTime,
    /// Monotonic start time, for uptime.
    pub started: Instant,
    /// All client connections of the process.
    pub traffic: Traffic,
    /// The connections of the runtime API (`stats socket`), which HAProxy counts among its
    /// connections (`CumConns`) and jobs.
    pub cli_connections: Traffic,
    /// Client connections accepted per second, before any rule or PROXY header (`ConnRate`
    /// and `MaxConnRate` in `show info`; as in HAProxy, the runtime API's are not counted).
    pub connection_rate: crate::freq::Rate,
    /// What compression may use (`maxcomprate`...), and its rates (`CompressBpsIn`,
    /// `CompressBpsOut` in `show info`).
    pub compression: crate::compression::CompressionBudget,
    /// The kernel pipes splicing may use (`maxpipes`, by default a quarter of what the
    /// splicing proxies may hold, as in HAProxy: see [`default_maxpipes`]).
    pub pipes: Arc<PipeBudget>,
    /// Where finished streams are reported (the `-d` debug output for now).
    pub stream_log: Option<Box<dyn StreamLog>>,
    /// The `ring` sections' buffers (`show events`).
    pub rings: Vec<Arc<Ring>>,
    /// The `cache` sections' stores (`cache-use`, `cache-store`, `show cache`).
    pub caches: Vec<crate::cache::Cache>,
    /// The log writer, when some proxy logs (`DroppedLogs` in `show info`).
    pub log_hub: Option<Arc<LogHub>>,
    /// The stick tables.
    pub tables: crate::tables::Tables,
    /// The pattern references (`show map`, `add acl`...), shared with the compiled rules.
    pub maps: sluice_sample::MapStore,
    /// The live streams (`show sess`).
    pub streams: crate::streams::Streams,
    /// Numbers the captures of invalid messages (`show errors`).
    pub error_events: crate::errors::ErrorEvents,
    /// The accept rate limits (`set rate-limit connections|sessions global`).
    pub accept_limits: crate::rate::AcceptLimits,
    /// Numbers the streams that print theirs (`%rt`), from 0 ([`Process::next_stream_number`]).
    stream_numbers: std::sync::atomic::AtomicU64,
    /// What `setenv` and the like did to the environment, over the process's own.
    env: sluice_config::environment::EnvChanges,
    listen_state: watch::Sender<ListenState>,
    /// Rung when `listen_state` changes, for the accept loops.
    pub listen_bell: crate::bell::Bell,
    /// Set once a soft stop was asked for (`stopping`), `grace` before the listeners stop.
    stopping: std::sync::atomic::AtomicBool,
    /// When the state became `Stopped`: kept-alive client connections end from then on.
    /// Read by every response, so a cell rather than the channel's lock.
    stopped_at: Arc<std::sync::OnceLock<Instant>>,
}

/// Whether a frontend's default backend or one of its `use_backend` rules may lead to an HTTP
/// backend (a rule naming its backend by a log-format may lead anywhere).
fn may_reach_http_backend(frontend: &FrontendPlan, backends: &[Arc<Backend>]) -> bool {
    let http = |i: usize| backends.get(i).is_some_and(|b| b.plan.mode == Mode::Http);
    frontend.default_backend.is_some_and(http)
        || frontend.use_backend.iter().any(|r| match &r.action {
            BackendChoice::Index(i) => http(*i),
            BackendChoice::Dynamic(_) => true,
        })
}

/// Whether a proxy's `option splice-*` may splice either way.
fn splices(options: sluice_config::proxy::SpliceOptions) -> bool {
    [options.auto, options.request, options.response].contains(&Some(true))
}

/// HAProxy's `maxpipes` when none is set: a quarter of the connections the splicing proxies
/// may hold at once (the larger of their frontends' `maxconn` and their backends' explicit
/// `fullconn`, else `maxconn`, as HAProxy reads it before computing its default), at most
/// the process's `maxconn`; none when no proxy splices.
fn default_maxpipes(frontends: &[Arc<Frontend>], backends: &[Arc<Backend>], maxconn: u32) -> usize {
    let front: u64 = frontends
        .iter()
        .filter(|f| splices(f.plan.splice))
        .map(|f| u64::from(f.slots.limit()))
        .sum();
    let back: u64 = backends
        .iter()
        .filter(|b| splices(b.plan.splice))
        .map(|b| u64::from(b.plan.fullconn.unwrap_or(maxconn)))
        .sum();
    let pipes = front.max(back).min(u64::from(maxconn));
    let pipes = if pipes >= 4 { pipes / 4 } else { pipes };
    usize::try_from(pipes).unwrap_or(usize::MAX)
}

impl Process {
    /// A number for a stream (an HTTP request or a TCP session) that shows its own (`%rt`,
    /// "request_counter"), unique in the process. HAProxy numbers every stream as it starts;
    /// Sluice numbers a stream when a format first asks, which keeps a shared counter off the
    /// path of the streams that never print one.
    pub fn next_stream_number(&self) -> u64 {
        self.stream_numbers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Builds the live objects of `plan`, reporting finished streams to `stream_log`; the
    /// errors are start-up alerts (unresolvable names).
    pub fn build(
        plan: Plan,
        opts: BuildOptions,
        stream_log: Option<Box<dyn StreamLog>>,
    ) -> Result<Process, Vec<String>> {
        let mut errors = Vec::new();
        let frontend_limit = |fp: &FrontendPlan| {
            fp.maxconn
                .or(opts.default_frontend_maxconn)
                .unwrap_or(opts.maxconn)
        };
        let fullconn = crate::dynamic::default_fullconn(&plan, |f| {
            plan.frontends.get(f).map_or(0, frontend_limit)
        });
        let backends: Vec<Arc<Backend>> = plan
            .backends
            .into_iter()
            .zip(fullconn)
            .map(|(bp, fullconn)| {
                let mut unresolved = Vec::new();
                let resolved = bp
                    .servers
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match resolve_with_init_addr(s) {
                        Ok(Some(ip)) => ip,
                        Ok(None) => {
                            unresolved.push(i);
                            None
                        }
                        Err(err) => {
                            errors.push(format!(
                                "{}: server '{}/{}': {err}",
                                s.span, bp.id.name, s.name
                            ));
                            None
                        }
                    })
                    .collect();
                let backend = Backend::new(bp, resolved).with_fullconn(fullconn);
                // `init-addr ... none`: no address, so the server starts in maintenance.
                for i in unresolved {
                    if let Some(server) = backend.servers.get(i) {
                        server.health.update(|h| h.admin = Admin::Maint);
                        backend.apply_health(i);
                    }
                }
                backend.note_initial_states();
                Arc::new(backend)
            })
            .collect();
        let plan_maxpipes = plan.global.maxpipes;
        let rings: Vec<Arc<Ring>> = plan
            .rings
            .iter()
            .map(|r| Arc::new(Ring::new(&r.name, &r.description, r.size)))
            .collect();
        let logging = Logging::plan(&plan.global, &plan.frontends);
        let hub = match logging.start(&rings, plan.global.log_send_hostname.clone()) {
            Ok(hub) => hub,
            Err(err) => {
                errors.push(format!("cannot open the log targets: {err}"));
                None
            }
        };
        let frontends: Vec<Arc<Frontend>> = plan
            .frontends
            .into_iter()
            .map(|fp| {
                let backend = fp.default_backend.and_then(|i| backends.get(i)).cloned();
                let limit = frontend_limit(&fp);
                let logger = hub
                    .as_ref()
                    .and_then(|hub| logging.logger_for(hub, &plan.global, &plan.rings, &fp));
                let may_reach_http_backend = may_reach_http_backend(&fp, &backends);
                let mut frontend = Frontend::new(fp, backend, limit);
                frontend.logger = logger;
                frontend.may_reach_http_backend = may_reach_http_backend;
                Arc::new(frontend)
            })
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        let maxpipes =
            plan_maxpipes.unwrap_or_else(|| default_maxpipes(&frontends, &backends, opts.maxconn));
        let accept_limits = crate::rate::AcceptLimits::default();
        accept_limits
            .connections
            .set_limit(plan.global.maxconnrate.unwrap_or(0));
        accept_limits
            .sessions
            .set_limit(plan.global.maxsessrate.unwrap_or(0));
        let compression = crate::compression::CompressionBudget::new(
            plan.global.maxcomprate,
            plan.global.maxcompcpuusage,
            plan.global.maxzlibmem,
            plan.global.comp_maxlevel,
        );
        Ok(Process {
            global: plan.global,
            frontends,
            backends,
            maxconn: opts.maxconn,
            slots: crate::slots::ConnSlots::new(opts.maxconn),
            nbthread: opts.nbthread,
            ulimit_n: opts.ulimit_n,
            started_at: SystemTime::now(),
            started: Instant::now(),
            traffic: Traffic::default(),
            cli_connections: Traffic::default(),
            connection_rate: crate::freq::Rate::default(),
            compression,
            pipes: PipeBudget::new(Some(maxpipes)),
            stream_log,
            rings,
            caches: plan
                .caches
                .iter()
                .map(|c| crate::cache::Cache::new(c.clone()))
                .collect(),
            log_hub: hub,
            tables: crate::tables::Tables::new(plan.tables),
            maps: plan.maps,
            streams: crate::streams::Streams::default(),
            error_events: crate::errors::ErrorEvents::default(),
            accept_limits,
            stream_numbers: std::sync::atomic::AtomicU64::new(0),
            env: plan.env,
            listen_state: watch::channel(ListenState::Active).0,
            listen_bell: crate::bell::Bell::default(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            stopped_at: Arc::default(),
        })
    }

    /// The environment variable `name` as the configuration left the environment (`env()`).
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env.lookup(name, &|name| std::env::var(name).ok())
    }

    /// The whole environment as the configuration left it (`setenv`, `unsetenv`...), for
    /// the programs the process runs.
    pub fn environment(&self) -> Vec<(String, String)> {
        self.env.environment(std::env::vars())
    }

    /// Changes what the listeners do. A stopped process never resumes.
    pub fn set_listen_state(&self, state: ListenState) {
        // Set before the watchers hear of the stop, so they read its moment.
        if state == ListenState::Stopped {
            self.begin_stopping();
            self.stopped_at.get_or_init(Instant::now);
        }
        let changed = self.listen_state.send_if_modified(|current| {
            let change = *current != state && *current != ListenState::Stopped;
            if change {
                *current = state;
            }
            change
        });
        if changed {
            self.listen_bell.ring();
        }
    }

    /// Marks the process stopping (the `stopping` fetch) while its listeners may still
    /// accept: SIGUSR1 under `grace`, until the grace period ends.
    pub fn begin_stopping(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a soft stop was asked for (`stopping`).
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// When the listeners stopped for good, if they did.
    pub fn stopped_at(&self) -> Option<Instant> {
        self.stopped_at.get().copied()
    }

    /// The cell [`Process::stopped_at`] reads, for a task that outlives any borrow of the
    /// process (a thread's parking lot).
    pub fn stop_moment(&self) -> Arc<std::sync::OnceLock<Instant>> {
        Arc::clone(&self.stopped_at)
    }

    /// Whether a kept-alive client connection should end now, after its answer or while
    /// idle, because of a soft stop: always once the listeners stopped, as HAProxy does
    /// without `close-spread-time`; never under `close-spread-time infinite`; over a window,
    /// with a chance that grows from none at its start to certain at its end, so the
    /// connections end spread over it.
    pub fn ends_kept_alive(&self) -> bool {
        let Some(since) = self.stopped_at() else {
            return false;
        };
        match self.global.close_spread_time {
            None => true,
            Some(CloseSpread::Infinite) => false,
            Some(CloseSpread::Window(window)) => {
                let elapsed = since.elapsed();
                if elapsed >= window || window.is_zero() {
                    return true;
                }
                let window_us = window.as_micros().max(1) as u64;
                let elapsed_us = elapsed.as_micros() as u64;
                crate::proxy::next_random() % window_us < elapsed_us
            }
        }
    }

    /// What the listeners do now.
    pub fn listen_state(&self) -> ListenState {
        *self.listen_state.borrow()
    }

    /// A receiver that sees every change of the listening state.
    pub fn watch_listen_state(&self) -> watch::Receiver<ListenState> {
        self.listen_state.subscribe()
    }
}

/// The log targets of the whole process, each opened once however many proxies use it.
struct Logging {
    targets: Vec<LogAddr>,
}

impl Logging {
    fn plan(global: &GlobalConf, frontends: &[FrontendPlan]) -> Logging {
        let mut targets: Vec<LogAddr> = Vec::new();
        let used = frontends.iter().filter(|f| f.log.enabled());
        for fp in used {
            let global_targets = if fp.log.use_global {
                &global.logs[..]
            } else {
                &[]
            };
            for t in global_targets.iter().chain(&fp.log.targets) {
                if !targets.contains(&t.addr) {
                    targets.push(t.addr.clone());
                }
            }
        }
        Logging { targets }
    }

    fn start(
        &self,
        rings: &[Arc<Ring>],
        send_hostname: Option<Option<String>>,
    ) -> std::io::Result<Option<Arc<LogHub>>> {
        if self.targets.is_empty() {
            return Ok(None);
        }
        LogHub::start(self.targets.clone(), rings, send_hostname).map(Some)
    }

    fn logger_for(
        &self,
        hub: &Arc<LogHub>,
        global: &GlobalConf,
        rings: &[RingConf],
        fp: &FrontendPlan,
    ) -> Option<FrontendLog> {
        if !fp.log.enabled() {
            return None;
        }
        let global_targets = if fp.log.use_global {
            &global.logs[..]
        } else {
            &[]
        };
        let targets: Vec<(usize, LogTarget)> = global_targets
            .iter()
            .chain(&fp.log.targets)
            .filter_map(|t| {
                let id = self.targets.iter().position(|a| *a == t.addr)?;
                let mut t = t.clone();
                // A ring stores events in its own format, cut to its own `maxlen`.
                if let LogAddr::Ring(name) = &t.addr
                    && let Some(ring) = rings.iter().find(|r| &r.name == name)
                {
                    t.format = ring.format;
                    t.max_len = t.max_len.min(ring.maxlen);
                }
                Some((id, t))
            })
            .collect();
        let tag = fp
            .log
            .tag
            .clone()
            .or_else(|| global.log_tag.clone())
            .unwrap_or_else(program_name);
        let custom = match &fp.log.format {
            LineFormat::Https(format) | LineFormat::Custom(format) => Some(format),
            _ => None,
        };
        let logs_server_ends = custom
            .into_iter()
            .chain(&fp.log.structured_format)
            .any(|format| format.uses_server_connection());
        Some(FrontendLog {
            out: ProxyLogger::new(Arc::clone(hub), targets, tag),
            conf: fp.log.clone(),
            logs_server_ends,
            lines: crate::counters::LoopCounter::default(),
        })
    }
}

/// The default syslog tag: the name the program was started as (configuration.txt `log-tag`).
fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|arg0| {
            std::path::Path::new(&arg0)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "sluice".to_owned())
}

/// Resolves a server's address with its `init-addr` methods (`last,libc` by default; Sluice
/// keeps no state file, so `last` never answers). `Ok(None)` means `none` was reached: the
/// server starts without an address.
fn resolve_with_init_addr(s: &ServerConf) -> std::io::Result<Option<Option<IpAddr>>> {
    let named = matches!(
        &s.addr,
        ServerAddr::Inet {
            host: Host::Name(_),
            ..
        }
    );
    if !named || s.checks.init_addr.is_empty() {
        return resolve_server(&s.addr).map(Some);
    }
    let mut last_error = None;
    for method in &s.checks.init_addr {
        match method {
            InitAddr::Last => {}
            InitAddr::Libc => match resolve_server(&s.addr) {
                Ok(ip) => return Ok(Some(ip)),
                Err(err) => last_error = Some(err),
            },
            InitAddr::None => return Ok(None),
            InitAddr::Ip(ip) => return Ok(Some(Some(*ip))),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no 'init-addr' method gave an address",
        )
    }))
}

fn resolve_server(addr: &ServerAddr) -> std::io::Result<Option<IpAddr>> {
    match addr {
        ServerAddr::Unix(_) | ServerAddr::Abstract(_) => Ok(None),
        ServerAddr::Inet { family, host, .. } => match host {
            Host::Ip(ip) => Ok(Some(*ip)),
            Host::Name(name) => sluice_net::listen::resolve_name(name, *family).map(Some),
            // `0.0.0.0` or `::`: the connection goes where the client's went (`Server::target`).
            Host::Any(Family::V6) => Ok(Some(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED))),
            Host::Any(_) => Ok(Some(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))),
        },
    }
}
