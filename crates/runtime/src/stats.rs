//! The statistics rows of `show stat`, the stats page and the exporters: one row per frontend
//! (`FRONTEND`), per server and per backend (`BACKEND`), with HAProxy 2.6's fields in its CSV
//! order (management.txt §9.1) up to `agg_check_status`.
//!
//! Values come from the live objects' counters; a field is left empty where HAProxy leaves it
//! empty for that kind of row, and also where Sluice does not measure the thing (rates, timings,
//! compression, caches): an empty field is honest, a zero would claim a measurement. The
//! [`StatsCounters`] here are the few counters only statistics need (responses by class, load
//! balancing picks, check failures, state changes); every object owns one, updated with relaxed
//! atomics like [`crate::counters`].

use crate::counters::{Counter, LoopCounter};
use crate::health::{Admin, HealthState};
use crate::listener::ListenerStats;
use crate::process::Process;
use crate::proxy::{Backend, Frontend, Server};
use sluice_config::addr::{ServerAddr, ServerPort};
use sluice_config::proxy::Mode;
use std::fmt::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

macro_rules! field_name {
    ($name:ident) => {
        stringify!($name)
    };
    ($name:ident, $text:literal) => {
        $text
    };
}

macro_rules! fields {
    ($($name:ident $(= $text:literal)?),* $(,)?) => {
        /// A field of `show stat`, in HAProxy's order.
        #[allow(non_camel_case_types, missing_docs)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Field { $($name),* }

        /// The fields' names, in the same order as [`Field`].
        pub const FIELDS: &[&str] = &[$(field_name!($name $(, $text)?)),*];
    };
}

fields!(
    pxname,
    svname,
    qcur,
    qmax,
    scur,
    smax,
    slim,
    stot,
    bin,
    bout,
    dreq,
    dresp,
    ereq,
    econ,
    eresp,
    wretr,
    wredis,
    status,
    weight,
    act,
    bck,
    chkfail,
    chkdown,
    lastchg,
    downtime,
    qlimit,
    pid,
    iid,
    sid,
    throttle,
    lbtot,
    tracked,
    type_ = "type",
    rate,
    rate_lim,
    rate_max,
    check_status,
    check_code,
    check_duration,
    hrsp_1xx,
    hrsp_2xx,
    hrsp_3xx,
    hrsp_4xx,
    hrsp_5xx,
    hrsp_other,
    hanafail,
    req_rate,
    req_rate_max,
    req_tot,
    cli_abrt,
    srv_abrt,
    comp_in,
    comp_out,
    comp_byp,
    comp_rsp,
    lastsess,
    last_chk,
    last_agt,
    qtime,
    ctime,
    rtime,
    ttime,
    agent_status,
    agent_code,
    agent_duration,
    check_desc,
    agent_desc,
    check_rise,
    check_fall,
    check_health,
    agent_rise,
    agent_fall,
    agent_health,
    addr,
    cookie,
    mode,
    algo,
    conn_rate,
    conn_rate_max,
    conn_tot,
    intercepted,
    dcon,
    dses,
    wrew,
    connect,
    reuse,
    cache_lookups,
    cache_hits,
    srv_icur,
    src_ilim,
    qtime_max,
    ctime_max,
    rtime_max,
    ttime_max,
    eint,
    idle_conn_cur,
    safe_conn_cur,
    used_conn_cur,
    need_conn_est,
    uweight,
    agg_server_status,
    agg_server_check_status,
    agg_check_status,
);

/// Seconds on a clock that starts with the first statistics object (start-up): `lastchg` and
/// `downtime` are differences on it, so the wall clock's jumps do not matter.
pub fn now_secs() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs()
}

/// The counters and runtime settings statistics need beyond [`crate::counters::Traffic`].
#[derive(Debug)]
pub struct StatsCounters {
    /// HTTP responses by class: 1xx, 2xx, 3xx, 4xx, 5xx, other.
    pub hrsp: [LoopCounter; 6],
    /// Times the object was chosen by load balancing (`lbtot`).
    pub lbtot: LoopCounter,
    /// Failed health checks (`chkfail`, servers).
    pub chkfail: Counter,
    /// Transitions from up to down (`chkdown`).
    pub chkdown: Counter,
    /// [`now_secs`] at the last state change.
    last_change: AtomicU64,
    /// [`now_secs`] when it went down, `u64::MAX` while up.
    down_since: AtomicU64,
    /// Seconds spent down before `down_since`.
    downtime: AtomicU64,
    /// The last state seen by [`StatsCounters::note_state`] (0: not seen yet).
    last_state: AtomicU8,
    /// The health check's counter (0 to rise+fall-1), for "UP 1/3" and `check_health`.
    check_health: AtomicU32,
    /// `disable health` clears it: check results are ignored until `enable health`.
    checks_enabled: AtomicBool,
    /// A health check is running (`show stat` marks the last status with `* `).
    check_running: AtomicBool,
    /// `disable agent` clears it likewise.
    agent_enabled: AtomicBool,
    /// HTTP requests per second (`req_rate`, frontends).
    pub request_rate: crate::freq::Rate,
    /// HTTP requests read whole, whatever their answer (a frontend's share of `show info`'s
    /// `CumReq`, which HAProxy counts in streams: not the invalid requests).
    pub requests_read: LoopCounter,
    /// HTTP requests received, invalid ones included (a frontend's `req_tot`): counted on
    /// arrival, as HAProxy counts them, so a request waiting for its answer is already in.
    pub requests: LoopCounter,
    /// Recent streams' times in the queue, to connect, to the response head, in all
    /// (`qtime`, `ctime`, `rtime`, `ttime` and their `_max`, backends and servers).
    pub times: [crate::freq::SlidingAverage; 4],
    /// The weight set at run time (`set weight`), the configured one at start.
    weight: AtomicU32,
    /// `compression`, frontends and backends: bytes into the compressor (`comp_in`),
    /// compressed bytes out (`comp_out`), responses compressed (`comp_rsp`).
    pub compressed: [LoopCounter; 3],
    /// HTTP frontends and backends: requests their `cache-use` rules looked up
    /// (`cache_lookups`) and answered from the cache (`cache_hits`).
    pub cache: [LoopCounter; 2],
    /// Responses refused by `http-response deny`, `tcp-response content reject` or `option
    /// checkcache` (`dresp`), counted by the frontend, the backend and the server alike.
    pub denied_responses: LoopCounter,
    /// Backends and servers: connection attempts to servers (`connect`), requests sent over
    /// a connection reused (`reuse`), requests moved to another server by `option
    /// redispatch` (`wredis`, counted on the server left too), and transfers the client or
    /// the server cut short (`cli_abrt`, `srv_abrt`).
    pub connects: LoopCounter,
    /// See `connects`.
    pub reuses: LoopCounter,
    /// See `connects`.
    pub redispatches: LoopCounter,
    /// See `connects`.
    pub client_aborts: LoopCounter,
    /// See `connects`.
    pub server_aborts: LoopCounter,
    /// Rewrites that did not fit (`wrew`), each also an internal error (`eint`).
    pub failed_rewrites: LoopCounter,
    /// The longest its own queue was (`qmax`): a server's, or a backend's (not counting its
    /// servers' queues), as HAProxy counts it.
    queue_max: AtomicU64,
    /// See `failed_rewrites`.
    pub internal_errors: LoopCounter,
    /// A frontend disabled with `disable frontend` stops accepting (true).
    paused: AtomicBool,
    /// Rung when `paused` changes, for the frontend's accept loops.
    pub pause_bell: crate::bell::Bell,
}

impl StatsCounters {
    /// Counters for an object of configured `weight` (0 for frontends and backends).
    pub fn new(weight: u32) -> Self {
        let now = now_secs();
        StatsCounters {
            request_rate: crate::freq::Rate::default(),
            requests_read: LoopCounter::default(),
            requests: LoopCounter::default(),
            times: Default::default(),
            hrsp: Default::default(),
            lbtot: LoopCounter::default(),
            chkfail: Counter::default(),
            chkdown: Counter::default(),
            last_change: AtomicU64::new(now),
            down_since: AtomicU64::new(u64::MAX),
            downtime: AtomicU64::new(0),
            last_state: AtomicU8::new(0),
            check_health: AtomicU32::new(u32::MAX),
            checks_enabled: AtomicBool::new(true),
            check_running: AtomicBool::new(false),
            agent_enabled: AtomicBool::new(true),
            weight: AtomicU32::new(weight),
            compressed: Default::default(),
            cache: Default::default(),
            denied_responses: LoopCounter::default(),
            connects: LoopCounter::default(),
            reuses: LoopCounter::default(),
            redispatches: LoopCounter::default(),
            client_aborts: LoopCounter::default(),
            server_aborts: LoopCounter::default(),
            failed_rewrites: LoopCounter::default(),
            queue_max: AtomicU64::new(0),
            internal_errors: LoopCounter::default(),
            paused: AtomicBool::new(false),
            pause_bell: crate::bell::Bell::default(),
        }
    }

    /// Adds a finished stream's times: the queue, the connection, the response head (after
    /// the request was sent) and the whole stream; a phase it did not reach is skipped.
    pub fn note_times(&self, timers: &crate::record::Timers) {
        let phases = [
            timers.queue,
            timers.connect,
            timers.response,
            Some(timers.total),
        ];
        for (average, phase) in self.times.iter().zip(phases) {
            if let Some(d) = phase {
                average.add(d.as_millis() as u64);
            }
        }
    }

    /// Counts one HTTP response of `status`.
    pub fn count_response(&self, status: u16) {
        let class = match status {
            100..=199 => 0,
            200..=299 => 1,
            300..=399 => 2,
            400..=499 => 3,
            500..=599 => 4,
            _ => 5,
        };
        self.hrsp[class].incr();
    }

    /// Records the object's state `code` (any non-zero number standing for what operators
    /// see) and whether it is `up`: a new code is a change (`lastchg`), up → down is counted
    /// (`chkdown`) and the time spent down is summed (`downtime`).
    pub fn note_state(&self, code: u8, up: bool) {
        let before = self.last_state.swap(code, Ordering::Relaxed);
        if before == code {
            return;
        }
        let now = now_secs();
        if before != 0 {
            self.last_change.store(now, Ordering::Relaxed);
        }
        let since = self.down_since.load(Ordering::Relaxed);
        match (since == u64::MAX, up) {
            (true, false) => {
                self.down_since.store(now, Ordering::Relaxed);
                // The state at start-up is not a transition.
                if before != 0 {
                    self.chkdown.incr();
                }
            }
            (false, true) => {
                self.downtime
                    .fetch_add(now.saturating_sub(since), Ordering::Relaxed);
                self.down_since.store(u64::MAX, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Seconds since the last state change.
    pub fn last_change_age(&self) -> u64 {
        now_secs().saturating_sub(self.last_change.load(Ordering::Relaxed))
    }

    /// Seconds spent down since start, including the current outage.
    pub fn downtime(&self) -> u64 {
        let since = self.down_since.load(Ordering::Relaxed);
        let current = if since == u64::MAX {
            0
        } else {
            now_secs().saturating_sub(since)
        };
        self.downtime.load(Ordering::Relaxed) + current
    }

    /// Records the health check's counter after a result.
    pub fn set_check_health(&self, health: u32) {
        self.check_health.store(health, Ordering::Relaxed);
    }

    /// The health check's counter, if a check ran.
    pub fn check_health(&self) -> Option<u32> {
        let h = self.check_health.load(Ordering::Relaxed);
        (h != u32::MAX).then_some(h)
    }

    /// Whether health check results count (`enable|disable health`).
    pub fn checks_enabled(&self) -> bool {
        self.checks_enabled.load(Ordering::Relaxed)
    }

    /// `enable|disable health`.
    pub fn set_checks_enabled(&self, on: bool) {
        self.checks_enabled.store(on, Ordering::Relaxed);
    }

    /// Whether a health check is running now.
    pub fn check_running(&self) -> bool {
        self.check_running.load(Ordering::Relaxed)
    }

    /// A health check starts (true) or ends (false).
    pub fn set_check_running(&self, running: bool) {
        self.check_running.store(running, Ordering::Relaxed);
    }

    /// Whether agent results count (`enable|disable agent`).
    pub fn agent_enabled(&self) -> bool {
        self.agent_enabled.load(Ordering::Relaxed)
    }

    /// `enable|disable agent`.
    pub fn set_agent_enabled(&self, on: bool) {
        self.agent_enabled.store(on, Ordering::Relaxed);
    }

    /// The weight set at run time (`uweight`).
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// `set weight`: the caller pushes the change into the balancer.
    pub fn set_weight(&self, weight: u32) {
        self.weight.store(weight, Ordering::Relaxed);
    }

    /// `disable|enable frontend`.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
        self.pause_bell.ring();
    }

    /// Notes a queue now `len` long (`qmax`).
    pub fn note_queued(&self, len: usize) {
        crate::counters::raise_max(&self.queue_max, len as u64);
    }

    /// Whether the frontend is disabled.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// `clear counters`: the maximums would be here; Sluice keeps them in the gauges, which
    /// the caller resets. `all` also zeroes the totals.
    pub fn clear(&self, all: bool) {
        self.request_rate.reset_max();
        self.queue_max.store(0, Ordering::Relaxed);
        for t in &self.times {
            if all {
                t.reset();
            } else {
                t.reset_max();
            }
        }
        if all {
            for c in &self.hrsp {
                c.reset();
            }
            self.lbtot.reset();
            self.chkfail.reset();
            self.chkdown.reset();
            for c in &self.compressed {
                c.reset();
            }
            for c in [
                &self.denied_responses,
                &self.connects,
                &self.reuses,
                &self.redispatches,
                &self.client_aborts,
                &self.server_aborts,
                &self.failed_rewrites,
                &self.internal_errors,
            ] {
                c.reset();
            }
        }
    }
}

/// What a row describes (the `type` field, and the `<type>` mask of `show stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// `FRONTEND`.
    Frontend,
    /// `BACKEND`.
    Backend,
    /// A server.
    Server,
    /// A listening socket of a frontend with `option socket-stats`.
    Listener,
}

impl RowKind {
    /// HAProxy's `type` number.
    pub fn number(self) -> u8 {
        match self {
            RowKind::Frontend => 0,
            RowKind::Backend => 1,
            RowKind::Server => 2,
            RowKind::Listener => 3,
        }
    }

    /// The bit of this kind in `show stat`'s type mask.
    pub fn mask(self) -> i64 {
        1 << self.number()
    }
}

/// One row: its kind and identifiers, and every field as text (empty: no value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// What it describes.
    pub kind: RowKind,
    /// The proxy's id (`iid`).
    pub iid: u32,
    /// The server's id, 0 for `FRONTEND`/`BACKEND` (`sid`).
    pub sid: u32,
    cells: Vec<String>,
}

impl Row {
    fn new(kind: RowKind, pxname: &str, svname: &str, iid: u32, sid: u32) -> Row {
        let mut row = Row {
            kind,
            iid,
            sid,
            cells: vec![String::new(); FIELDS.len()],
        };
        row.set(Field::pxname, pxname);
        row.set(Field::svname, svname);
        row.set(Field::pid, 1);
        row.set(Field::iid, iid);
        row.set(Field::sid, sid);
        row.set(Field::type_, kind.number());
        row
    }

    /// Sets a field.
    pub fn set(&mut self, field: Field, value: impl std::fmt::Display) {
        let cell = &mut self.cells[field as usize];
        cell.clear();
        let _ = write!(cell, "{value}");
    }

    /// A field's text (empty when it has no value).
    pub fn get(&self, field: Field) -> &str {
        &self.cells[field as usize]
    }

    /// Every field, in order.
    pub fn cells(&self) -> &[String] {
        &self.cells
    }

    /// The proxy's name.
    pub fn pxname(&self) -> &str {
        self.get(Field::pxname)
    }

    /// The server's name, or `FRONTEND`/`BACKEND`.
    pub fn svname(&self) -> &str {
        self.get(Field::svname)
    }
}

/// HAProxy's `iid` for a proxy: its ids start at 2, after its internal proxy.
pub fn proxy_iid(uid: u32) -> u32 {
    uid + 1
}

/// Every row, in HAProxy's order: by proxy in declaration order, the `FRONTEND` row, its
/// listeners (`option socket-stats`), then the servers, then the `BACKEND` row.
pub fn collect(process: &Process) -> Vec<Row> {
    let mut proxies: Vec<(u32, Option<&Frontend>, Option<&Backend>)> = Vec::new();
    for f in &process.frontends {
        proxies.push((f.plan.id.uid, Some(f), None));
    }
    // A `disabled` backend is not shown, as in HAProxy.
    for b in process.backends.iter().filter(|b| !b.plan.disabled) {
        match proxies.iter_mut().find(|(uid, _, _)| *uid == b.plan.id.uid) {
            Some(entry) => entry.2 = Some(b),
            None => proxies.push((b.plan.id.uid, None, Some(b))),
        }
    }
    proxies.sort_by_key(|(uid, _, _)| *uid);
    let mut rows = Vec::new();
    for (_, frontend, backend) in proxies {
        if let Some(f) = frontend {
            rows.push(frontend_row(f));
            rows.extend(f.listeners.iter().map(|l| listener_row(f, l)));
        }
        if let Some(b) = backend {
            for s in &b.servers {
                rows.push(server_row(b, s.index, s));
            }
            rows.push(backend_row(b));
        }
    }
    rows
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Http => "http",
        Mode::Tcp => "tcp",
    }
}

/// The failed rewrites and internal errors (frontends, backends, servers).
fn set_failures(row: &mut Row, stats: &StatsCounters) {
    row.set(Field::wrew, stats.failed_rewrites.get());
    row.set(Field::eint, stats.internal_errors.get());
}

/// The fields of connections to servers and of transfers cut short (backends and servers).
fn set_server_traffic(row: &mut Row, stats: &StatsCounters) {
    set_failures(row, stats);
    row.set(Field::connect, stats.connects.get());
    row.set(Field::reuse, stats.reuses.get());
    row.set(Field::wredis, stats.redispatches.get());
    row.set(Field::cli_abrt, stats.client_aborts.get());
    row.set(Field::srv_abrt, stats.server_aborts.get());
}

fn set_hrsp(row: &mut Row, stats: &StatsCounters) {
    const HRSP: [Field; 6] = [
        Field::hrsp_1xx,
        Field::hrsp_2xx,
        Field::hrsp_3xx,
        Field::hrsp_4xx,
        Field::hrsp_5xx,
        Field::hrsp_other,
    ];
    for (field, counter) in HRSP.iter().zip(&stats.hrsp) {
        row.set(*field, counter.get());
    }
}

/// `cache_lookups` and `cache_hits`, which HTTP frontends and backends show.
fn set_cache(row: &mut Row, stats: &StatsCounters) {
    let [lookups, hits] = &stats.cache;
    row.set(Field::cache_lookups, lookups.get());
    row.set(Field::cache_hits, hits.get());
}

fn frontend_row(f: &Frontend) -> Row {
    let mut row = Row::new(
        RowKind::Frontend,
        f.name(),
        "FRONTEND",
        proxy_iid(f.plan.id.uid),
        0,
    );
    let t = &f.traffic;
    row.set(Field::scur, t.sessions.get());
    row.set(Field::smax, t.sessions.max());
    row.set(Field::slim, f.slots.limit());
    row.set(Field::stot, t.total_sessions.get());
    row.set(Field::bin, t.bytes_in.get());
    row.set(Field::bout, t.bytes_out.get());
    set_compression(&mut row, &f.stats);
    row.set(Field::dreq, f.denied_requests.get());
    row.set(Field::dresp, f.stats.denied_responses.get());
    set_failures(&mut row, &f.stats);
    row.set(Field::ereq, f.request_errors.get());
    row.set(
        Field::status,
        if f.stats.paused() { "PAUSED" } else { "OPEN" },
    );
    // A TCP frontend that may switch to HTTP serves requests too.
    if f.plan.mode == Mode::Http || f.plan.rules.switches_to_http() {
        set_hrsp(&mut row, &f.stats);
        row.set(Field::req_tot, f.stats.requests.get());
        row.set(Field::intercepted, f.intercepted.get());
        set_cache(&mut row, &f.stats);
    } else {
        // A TCP frontend counts no request, and says so, as HAProxy's does.
        row.set(Field::req_tot, 0u64);
    }
    row.set(Field::mode, mode_name(f.plan.mode));
    row.set(Field::conn_tot, f.connections.get());
    set_rates(&mut row, t);
    // `rate-limit sessions`; 0 for "no limit", as HAProxy shows it.
    row.set(Field::rate_lim, u64::from(f.session_rate_limit.limit()));
    row.set(Field::conn_rate, f.connection_rate.get());
    row.set(Field::conn_rate_max, f.connection_rate.max());
    row.set(Field::req_rate, f.stats.request_rate.get());
    row.set(Field::req_rate_max, f.stats.request_rate.max());
    row.set(Field::dcon, f.denied_connections.get());
    row.set(Field::dses, f.denied_sessions.get());
    row
}

/// A listening socket's row: what the frontend counts, for its sessions only.
fn listener_row(f: &Frontend, l: &ListenerStats) -> Row {
    let mut row = Row::new(
        RowKind::Listener,
        f.name(),
        &l.name,
        proxy_iid(f.plan.id.uid),
        l.id,
    );
    let t = &l.traffic;
    let sessions = t.sessions.get();
    row.set(Field::scur, sessions);
    row.set(Field::smax, t.sessions.max());
    row.set(Field::slim, l.maxconn);
    row.set(Field::stot, t.total_sessions.get());
    row.set(Field::bin, t.bytes_in.get());
    row.set(Field::bout, t.bytes_out.get());
    row.set(Field::dreq, l.denied_requests.get());
    row.set(Field::dresp, l.denied_responses.get());
    row.set(Field::ereq, l.request_errors.get());
    let full = l.maxconn > 0 && sessions >= u64::from(l.maxconn);
    row.set(Field::status, if full { "FULL" } else { "OPEN" });
    if let Some(addr) = l.addr.get() {
        row.set(Field::addr, addr);
    }
    row.set(Field::mode, mode_name(f.plan.mode));
    row.set(Field::dcon, l.denied_connections.get());
    row.set(Field::dses, l.denied_sessions.get());
    row.set(Field::wrew, l.failed_rewrites.get());
    row.set(Field::eint, l.internal_errors.get());
    row
}

/// `qtime`, `ctime`, `rtime`, `ttime` and their maximums.
fn set_times(row: &mut Row, stats: &StatsCounters) {
    let fields = [
        (Field::qtime, Field::qtime_max),
        (Field::ctime, Field::ctime_max),
        (Field::rtime, Field::rtime_max),
        (Field::ttime, Field::ttime_max),
    ];
    for ((average, max), t) in fields.into_iter().zip(&stats.times) {
        row.set(average, t.get());
        row.set(max, t.max());
    }
}

/// `rate` and `rate_max`: new sessions per second.
fn set_rates(row: &mut Row, t: &crate::counters::Traffic) {
    row.set(Field::rate, t.session_rate.get());
    row.set(Field::rate_max, t.session_rate.max());
}

/// What operators see of a server's state (`status`), as HAProxy words it.
pub fn server_status(server: &Server, health: &HealthState) -> String {
    let checked = server.conf.checks.check;
    let tracked = server.conf.checks.track.is_some();
    if health.admin == Admin::Maint {
        return "MAINT".into();
    }
    if !health.operational() {
        if !health.agent_up && health.check_up {
            return "DOWN (agent)".into();
        }
        return match (checked, server.stats.check_health()) {
            (true, Some(h)) if h > 0 => format!("DOWN {h}/{}", server.conf.checks.rise()),
            _ => "DOWN".into(),
        };
    }
    if health.admin == Admin::Drain || server_weight(server, health) == 0 {
        return "DRAIN".into();
    }
    if health.stopping {
        return "NOLB".into();
    }
    if !checked && !tracked {
        return "no check".into();
    }
    let c = &server.conf.checks;
    // Before its first check, a server is up at the bottom of the range: "UP 1/3" with the
    // default `rise 2 fall 3`.
    match checked.then(|| server.check_health()) {
        Some(h) if h < c.rise() + c.fall() - 1 && h >= c.rise() => {
            format!("UP {}/{}", h - c.rise() + 1, c.fall())
        }
        _ => "UP".into(),
    }
}

/// The server's effective weight: the run-time weight scaled by the agent's percentage.
pub fn server_weight(server: &Server, health: &HealthState) -> u32 {
    (server.stats.weight() * health.weight_percent).div_ceil(100)
}

fn server_addr(server: &Server) -> String {
    match &server.conf.addr {
        ServerAddr::Unix(path) => return format!("unix@{path}"),
        ServerAddr::Abstract(name) => return name.to_string(),
        ServerAddr::Inet { .. } => {}
    }
    let here = server.location();
    let (Some(ip), Some(port)) = (here.ip, here.port) else {
        return String::new();
    };
    let port = match port {
        ServerPort::Fixed(p) => i64::from(p),
        ServerPort::SameAsClient => 0,
        ServerPort::Offset(o) => i64::from(o),
    };
    match ip {
        std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
        std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

fn server_row(b: &Backend, index: usize, s: &Server) -> Row {
    let mut row = Row::new(
        RowKind::Server,
        b.name(),
        s.name(),
        proxy_iid(b.plan.id.uid),
        s.id,
    );
    let health = s.health.get();
    let t = &s.traffic;
    // The server connections of every thread's pool (`show servers conn` per thread).
    let pools = crate::idle::total((b.plan.id.uid, s.id));
    let idle = pools.idle_unsafe.saturating_add(pools.idle_safe);
    row.set(Field::srv_icur, idle);
    // `pool-max-conn`; nothing when unlimited, as HAProxy shows it.
    if let Some(limit) = s.conf.pool_max_conn {
        row.set(Field::src_ilim, limit);
    }
    row.set(Field::idle_conn_cur, pools.idle_unsafe);
    row.set(Field::safe_conn_cur, pools.idle_safe);
    row.set(Field::used_conn_cur, pools.used_cur);
    row.set(Field::need_conn_est, pools.need_est);
    row.set(Field::qcur, b.server_queued(index));
    row.set(Field::qmax, s.stats.queue_max.load(Ordering::Relaxed));
    set_rates(&mut row, t);
    set_times(&mut row, &s.stats);
    row.set(Field::scur, t.sessions.get());
    row.set(Field::smax, t.sessions.max());
    if let Some(max) = s.conf.maxconn {
        row.set(Field::slim, max);
    }
    row.set(Field::stot, t.total_sessions.get());
    row.set(Field::bin, t.bytes_in.get());
    row.set(Field::bout, t.bytes_out.get());
    row.set(Field::dresp, s.stats.denied_responses.get());
    row.set(Field::econ, s.failed_connections.get());
    row.set(Field::wretr, s.retries.get());
    row.set(Field::eresp, s.response_errors.get());
    set_server_traffic(&mut row, &s.stats);
    row.set(Field::status, server_status(s, &health));
    row.set(Field::weight, server_weight(s, &health));
    row.set(Field::act, u8::from(!s.conf.backup));
    row.set(Field::bck, u8::from(s.conf.backup));
    let c = &s.conf.checks;
    if c.check {
        row.set(Field::chkfail, s.stats.chkfail.get());
        row.set(Field::chkdown, s.stats.chkdown.get());
        row.set(Field::downtime, s.stats.downtime());
    }
    row.set(Field::lastchg, s.stats.last_change_age());
    if let Some(q) = s.conf.maxqueue {
        row.set(Field::qlimit, q);
    }
    row.set(Field::lbtot, s.stats.lbtot.get());
    if let Some(track) = &c.track {
        let backend = track.backend.as_deref().unwrap_or(b.name());
        row.set(Field::tracked, format_args!("{backend}/{}", track.server));
    }
    // Under `disable health` the check columns are empty, as in HAProxy; a check running now
    // marks the last status with `* ` (management.txt §9.1, `check_status`), and before the
    // first one ends the status is HAProxy's `INI`.
    if c.check && s.stats.checks_enabled() {
        let prefix = if s.stats.check_running() { "* " } else { "" };
        match &health.last_check {
            Some(last) => {
                row.set(Field::check_status, format_args!("{prefix}{}", last.status));
                row.set(Field::check_desc, last.description);
                if let Some(code) = last.code {
                    row.set(Field::check_code, code);
                }
                row.set(Field::check_duration, last.duration_ms);
                if let Some(info) = &last.info {
                    row.set(Field::last_chk, info);
                }
            }
            None => {
                row.set(Field::check_status, format_args!("{prefix}INI"));
                row.set(Field::check_desc, "Initializing");
            }
        }
    }
    if b.plan.mode == Mode::Http {
        set_hrsp(&mut row, &s.stats);
        // The responses the server gave (its `hrsp_*` count only those), as HAProxy counts.
        let total: u64 = s.stats.hrsp.iter().map(LoopCounter::get).sum();
        row.set(Field::req_tot, total);
    }
    if c.check {
        row.set(Field::check_rise, c.rise());
        row.set(Field::check_fall, c.fall());
        row.set(Field::check_health, s.check_health());
    }
    if c.agent {
        row.set(Field::agent_rise, 1);
        row.set(Field::agent_fall, 1);
    }
    row.set(Field::addr, server_addr(s));
    if let Some(cookie) = &s.conf.cookie {
        row.set(Field::cookie, cookie);
    }
    row.set(Field::mode, mode_name(b.plan.mode));
    row.set(Field::uweight, s.stats.weight());
    row
}

/// The weights and counts of the servers that take traffic: active ones, or the backups when
/// no active one is up (the first backup only without `option allbackups`).
fn backend_weights(b: &Backend) -> (u32, usize, usize, u32) {
    let mut active = (0u32, 0usize);
    let mut backup = (0u32, 0usize);
    let mut uweight = 0;
    for s in &b.servers {
        let h = s.health.get();
        if !(h.operational() && h.admin != Admin::Maint) {
            continue;
        }
        let w = if h.admin == Admin::Drain || h.stopping {
            0
        } else {
            server_weight(s, &h)
        };
        if w == 0 {
            continue;
        }
        let side = if s.conf.backup {
            &mut backup
        } else {
            &mut active
        };
        side.0 += w;
        side.1 += 1;
        uweight += s.stats.weight();
    }
    if active.1 > 0 {
        (active.0, active.1, backup.1, uweight)
    } else {
        (backup.0, 0, backup.1, uweight)
    }
}

/// The compression fields of a frontend or backend row (`comp_byp` stays 0: Sluice never
/// bypasses the compressor for lack of CPU).
fn set_compression(row: &mut Row, stats: &StatsCounters) {
    let [bytes_in, bytes_out, responses] = &stats.compressed;
    row.set(Field::comp_in, bytes_in.get());
    row.set(Field::comp_out, bytes_out.get());
    row.set(Field::comp_byp, 0);
    row.set(Field::comp_rsp, responses.get());
}

fn backend_row(b: &Backend) -> Row {
    let mut row = Row::new(
        RowKind::Backend,
        b.name(),
        "BACKEND",
        proxy_iid(b.plan.id.uid),
        0,
    );
    let t = &b.traffic;
    set_rates(&mut row, t);
    set_times(&mut row, &b.stats);
    row.set(Field::qcur, b.queued());
    row.set(Field::qmax, b.stats.queue_max.load(Ordering::Relaxed));
    row.set(Field::scur, t.sessions.get());
    row.set(Field::smax, t.sessions.max());
    // The backend's `fullconn` (set, or worked out from the frontends that may use it,
    // `use_backend` rules included), as HAProxy shows it.
    row.set(Field::slim, b.fullconn());
    row.set(Field::stot, t.total_sessions.get());
    row.set(Field::bin, t.bytes_in.get());
    row.set(Field::bout, t.bytes_out.get());
    set_compression(&mut row, &b.stats);
    row.set(Field::dreq, b.denied_requests.get());
    row.set(Field::dresp, b.stats.denied_responses.get());
    set_server_traffic(&mut row, &b.stats);
    row.set(Field::econ, b.failed_connections.get());
    row.set(Field::eresp, b.response_errors.get());
    row.set(Field::wretr, b.retries.get());
    let (weight, act, bck, uweight) = backend_weights(b);
    let up = act + bck > 0;
    row.set(Field::status, if up { "UP" } else { "DOWN" });
    row.set(Field::weight, weight);
    row.set(Field::act, act);
    row.set(Field::bck, bck);
    row.set(Field::chkdown, b.stats.chkdown.get());
    row.set(Field::lastchg, b.stats.last_change_age());
    row.set(Field::downtime, b.stats.downtime());
    row.set(Field::lbtot, b.stats.lbtot.get());
    if b.plan.mode == Mode::Http {
        set_hrsp(&mut row, &b.stats);
        let total: u64 = b.stats.hrsp.iter().map(LoopCounter::get).sum();
        row.set(Field::req_tot, total);
        set_cache(&mut row, &b.stats);
    }
    row.set(Field::mode, mode_name(b.plan.mode));
    row.set(Field::algo, b.plan.balance.keyword());
    row.set(Field::uweight, uweight);
    row
}

/// Which rows `show stat <proxy> <type> <sid>` keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    /// Only this proxy (by `iid`).
    pub iid: Option<u32>,
    /// A mask of [`RowKind::mask`] bits (-1: all).
    pub types: i64,
    /// Only this server id (-1: all).
    pub sid: i64,
}

impl Filter {
    /// Every row.
    pub const ALL: Filter = Filter {
        iid: None,
        types: -1,
        sid: -1,
    };

    /// Whether `row` passes.
    pub fn keeps(&self, row: &Row) -> bool {
        self.iid.is_none_or(|iid| iid == row.iid)
            && self.types & row.kind.mask() != 0
            && (self.sid == -1 || i64::from(row.sid) == self.sid)
    }
}

/// Writes the CSV header line (`# pxname,svname,...,`).
pub fn write_csv_header(out: &mut String) {
    out.push_str("# ");
    for name in FIELDS {
        out.push_str(name);
        out.push(',');
    }
    out.push('\n');
}

/// Writes one row as a CSV line; a comma in a value becomes a space, as HAProxy's CSV has no
/// quoting.
pub fn write_csv_row(row: &Row, out: &mut String) {
    for cell in row.cells() {
        if cell.contains(',') {
            out.push_str(&cell.replace(',', " "));
        } else {
            out.push_str(cell);
        }
        out.push(',');
    }
    out.push('\n');
}

/// The whole `show stat` output for `filter`, header included.
pub fn csv(process: &Process, filter: Filter) -> String {
    let mut out = String::new();
    write_csv_header(&mut out);
    for row in collect(process).iter().filter(|r| filter.keeps(r)) {
        write_csv_row(row, &mut out);
    }
    out
}

impl Backend {
    /// Counts a load-balancing pick of server `index` (`lbtot`): only the balancing's, not a
    /// persistence cookie's, a `use-server` rule's or a queue's hand-over, as in HAProxy.
    pub(crate) fn count_pick(&self, index: usize) {
        if let Some(server) = self.servers.get(index) {
            server.stats.lbtot.incr();
        }
        self.stats.lbtot.incr();
    }

    /// Records every server's state and the backend's at start-up, so the first real change
    /// is counted from there.
    pub fn note_initial_states(&self) {
        for s in &self.servers {
            let (code, up) = server_state_code(&s.health.get());
            s.stats.note_state(code, up);
        }
        let usable = self.usable();
        let up = usable.active + usable.backup > 0;
        self.stats.note_state(1 + u8::from(up), up);
    }
}

impl Process {
    /// The process-wide connection limit now (`set maxconn global`).
    pub fn runtime_maxconn(&self) -> u32 {
        self.slots.limit()
    }

    /// Changes the process-wide connection limit to `limit` (at most [`Process::maxconn`]).
    pub fn set_runtime_maxconn(&self, limit: u32) {
        self.slots.set_limit(limit.min(self.maxconn));
    }
}

/// A state code for [`StatsCounters::note_state`] and whether it counts as up.
pub fn server_state_code(health: &HealthState) -> (u8, bool) {
    let up = health.operational() && health.admin != Admin::Maint;
    let code = 1
        + u8::from(health.check_up)
        + 2 * u8::from(health.agent_up)
        + 4 * u8::from(health.stopping)
        + 8 * match health.admin {
            Admin::Ready => 0,
            Admin::Drain => 1,
            Admin::Maint => 2,
        };
    (code, up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_haproxys_up_to_agg_check_status() {
        assert_eq!(FIELDS.len(), 103);
        assert_eq!(FIELDS[Field::status as usize], "status");
        assert_eq!(FIELDS[32], "type");
        assert_eq!(FIELDS[102], "agg_check_status");
        let mut header = String::new();
        write_csv_header(&mut header);
        assert!(header.starts_with("# pxname,svname,qcur,qmax,scur,"));
        assert!(header.ends_with(",agg_server_check_status,agg_check_status,\n"));
    }

    #[test]
    fn state_changes_count_downs_and_downtime() {
        let s = StatsCounters::new(1);
        s.note_state(3, true);
        assert_eq!(s.chkdown.get(), 0);
        s.note_state(1, false);
        s.note_state(1, false);
        assert_eq!(s.chkdown.get(), 1);
        s.note_state(3, true);
        assert_eq!(s.downtime(), 0, "less than a second");
        assert_eq!(s.last_change_age(), 0);
    }

    #[test]
    fn responses_by_class() {
        let s = StatsCounters::new(0);
        for status in [101, 200, 204, 302, 404, 503, 99, 600] {
            s.count_response(status);
        }
        let counts: Vec<u64> = s.hrsp.iter().map(LoopCounter::get).collect();
        assert_eq!(counts, [1, 2, 1, 1, 1, 2]);
    }

    /// The plan of a configuration without proxies.
    fn empty_plan() -> sluice_config::plan::Plan {
        let no_env = |_: &str| None;
        let ctx = sluice_config::cond::CondContext {
            lookup: &no_env,
            features: &[],
            enabled: &[],
            version: "2.6",
        };
        let source = sluice_config::reader::Source {
            name: std::sync::Arc::from("t.cfg"),
            text: "global\n".to_owned(),
        };
        sluice_config::plan::check(&[source], &ctx)
            .plan
            .unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn set_maxconn_global_is_capped_by_the_configured_maxconn() {
        let process = Process::build(
            empty_plan(),
            crate::process::BuildOptions {
                maxconn: 4,
                default_frontend_maxconn: None,
                nbthread: 1,
                ulimit_n: 1024,
            },
            None,
        )
        .unwrap_or_else(|_| unreachable!());
        process.set_runtime_maxconn(1);
        assert_eq!(process.runtime_maxconn(), 1);
        let held = process.slots.try_take();
        assert!(held.is_some() && process.slots.try_take().is_none());
        process.set_runtime_maxconn(10);
        assert_eq!(process.runtime_maxconn(), 4, "never above maxconn");
    }

    #[test]
    fn filter_by_proxy_type_and_server() {
        let row = Row::new(RowKind::Server, "b", "s", 3, 2);
        assert!(Filter::ALL.keeps(&row));
        let f = Filter {
            iid: Some(3),
            types: 4,
            sid: 2,
        };
        assert!(f.keeps(&row));
        assert!(!Filter { types: 2, ..f }.keeps(&row));
        assert!(!Filter { sid: 1, ..f }.keeps(&row));
        assert!(!Filter { iid: Some(2), ..f }.keeps(&row));
    }
}
