//! The check engine: one task per health check and one per agent check, on a thread of their
//! own, and the state changes they cause.
//!
//! [`start`] compiles each backend's check once, then spawns the tasks on a dedicated
//! single-threaded runtime. First checks are spread evenly over each server's interval (a
//! thousand servers are not all probed in the same millisecond), and `spread-checks` adds its
//! random jitter to every interval. Each result goes through the rise/fall [`Machine`]; a
//! change of the server's health is pushed into its backend's balancer, printed in HAProxy's
//! words, and passed on to the servers that `track` it.

use crate::agent::{self, AgentAdmin, AgentOp};
use crate::external::{self, Invocation};
use crate::machine::{Intervals, Machine, Phase};
use crate::mail;
use crate::probe::{self, Endpoint, Limits, Program};
use crate::report::{self, Event};
use crate::status::{Outcome, Status};
use sluice_config::addr::{ServerAddr, ServerPort};
use sluice_config::checks::OnError;
use sluice_config::proxy::{Mode, ProxyV2Options, SendProxy};
use sluice_config::sections::SectionKind;
use sluice_runtime::dynamic;
use sluice_runtime::health::{Admin, HealthState, LastCheck, server_state};
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Server};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep, sleep_until};

/// A server by (backend index, server index).
type Key = (usize, usize);

/// What every task shares.
struct Engine {
    process: Arc<Process>,
    /// The servers tracking each server.
    trackers: HashMap<Key, Vec<Key>>,
    pid: u32,
    quiet: bool,
    spread: u32,
}

/// One task to start.
enum Task {
    Health(Key, Rc<Program>),
    Agent(Key),
}

/// Starts the checks of `process` on a thread of their own; does nothing when no server is
/// checked.
pub fn start(process: &Arc<Process>) -> io::Result<()> {
    let wanted = process.backends.iter().any(|b| {
        b.servers
            .iter()
            .any(|s| s.conf.checks.check || s.conf.checks.agent)
    });
    if !wanted {
        return Ok(());
    }
    let process = Arc::clone(process);
    std::thread::Builder::new()
        .name("sluice-checks".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(err) => {
                    eprintln!("[ALERT] cannot start the health checks: {err}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, run(process));
        })?;
    Ok(())
}

async fn run(process: Arc<Process>) {
    let mut trackers: HashMap<Key, Vec<Key>> = HashMap::new();
    let mut tasks = Vec::new();
    for (b, backend) in process.backends.iter().enumerate() {
        let program = Rc::new(Program::compile(&backend.plan.checks));
        for server in &backend.servers {
            let s = server.index;
            let c = &server.conf.checks;
            if let Some((tb, ts)) = c.track.as_ref().and_then(|t| t.resolved) {
                trackers.entry((tb, ts)).or_default().push((b, s));
            }
            if c.check {
                tasks.push((c.inter(), Task::Health((b, s), Rc::clone(&program))));
            }
            if c.agent {
                tasks.push((c.agent_inter(), Task::Agent((b, s))));
            }
        }
    }
    let engine = Rc::new(Engine {
        pid: std::process::id(),
        quiet: process.global.quiet,
        spread: process.global.spread_checks.unwrap_or(0),
        process,
        trackers,
    });
    let n = tasks.len().max(1) as u32;
    // As HAProxy: the k-th of n checks starts k/n of the shortest interval in, that interval
    // bounded by `max-spread-checks`.
    let window = tasks
        .iter()
        .map(|(inter, _)| *inter)
        .min()
        .unwrap_or_default();
    let window = engine
        .process
        .global
        .max_spread_checks
        .map_or(window, |max| window.min(max));
    for (k, (_, task)) in tasks.into_iter().enumerate() {
        let first = window / n * k as u32;
        let engine = Rc::clone(&engine);
        match task {
            Task::Health(key, program) => {
                tokio::task::spawn_local(health_task(engine, key, program, first));
            }
            Task::Agent(key) => {
                tokio::task::spawn_local(agent_task(engine, key, first));
            }
        }
    }
    std::future::pending::<()>().await
}

impl Engine {
    fn server(&self, (b, s): Key) -> Option<(&Backend, &Server)> {
        let backend = self.process.backends.get(b)?;
        Some((backend, backend.servers.get(s)?))
    }

    fn print(&self, tag: &str, message: &str) {
        if !self.quiet {
            eprintln!("{}", report::line(tag, self.pid, message));
        }
    }

    /// Changes a server's health with `f`; reports and propagates what changed.
    fn apply(
        &self,
        key: Key,
        f: &dyn Fn(&mut HealthState),
        outcome: Option<&Outcome>,
        via: Option<&str>,
        depth: u32,
    ) {
        let Some((backend, server)) = self.server(key) else {
            return;
        };
        let (before, after) = server.health.update(|h| f(h));
        let visible = |h: &HealthState| {
            (
                h.check_up,
                h.agent_up,
                h.stopping,
                h.admin,
                h.weight_percent,
            )
        };
        if visible(&before) == visible(&after) {
            return;
        }
        let usable = |h: &HealthState| {
            let s = server_state(server.stats.weight(), server.conf.backup, h);
            s.usable && s.weight > 0
        };
        // `slowstart`: a comeback ramps the server up, stepped by a task of this thread.
        if let Some(warmup) = dynamic::warm_up(server, &before, &after)
            && let Some(owner) = self.process.backends.get(key.0)
        {
            tokio::task::spawn_local(dynamic::ramp(Arc::clone(owner), key.1, warmup));
        }
        let (count, sessions) = backend.apply_health(key.1);
        if let Some(event) = classify(&before, &after, outcome, via) {
            let message = report::message(
                report::Who {
                    backend: backend.name(),
                    server: server.name(),
                    backup: server.conf.backup,
                    reasons: !backend.plan.checks.log_health_checks,
                },
                &event,
                count,
                sessions,
            );
            self.print("[WARNING]", &message);
            if let Some(alert) = &backend.plan.email_alert {
                // A server going down is an alert; the other changes are notices.
                let level = if matches!(event, Event::Down(..)) {
                    LOG_ALERT
                } else {
                    LOG_NOTICE
                };
                mail::send(alert, level, &message);
            }
        }
        let c = &server.conf.checks;
        if c.shutdown_on_down && before.operational() && !after.operational() {
            server
                .health
                .kill_sessions(&self.process.streams, backend.plan.id.uid, server.index);
        }
        if c.shutdown_backups_on_up && !server.conf.backup && !usable(&before) && usable(&after) {
            for backup in backend.servers.iter().filter(|s| s.conf.backup) {
                backup.health.kill_sessions(
                    &self.process.streams,
                    backend.plan.id.uid,
                    backup.index,
                );
            }
        }
        if usable(&before) && !usable(&after) && count.active + count.backup == 0 {
            let listen = backend.plan.id.kind == SectionKind::Listen;
            self.print("[ALERT]", &report::no_server(listen, backend.name()));
        }
        let moved =
            before.operational() != after.operational() || before.stopping != after.stopping;
        // A tracking cycle without checks cannot change anything; the depth bound is a guard.
        if moved && depth < 16 {
            let via = format!("{}/{}", backend.name(), server.name());
            for &tracker in self
                .trackers
                .get(&key)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                self.apply(
                    tracker,
                    &|h| {
                        h.check_up = after.operational();
                        h.stopping = after.stopping;
                    },
                    None,
                    Some(&via),
                    depth + 1,
                );
            }
        }
    }
}

/// The syslog levels of the events mailed (`email-alert level`).
const LOG_ALERT: u8 = 1;
const LOG_NOTICE: u8 = 5;
const LOG_INFO: u8 = 6;

/// The message a health change deserves, if any.
fn classify<'a>(
    before: &HealthState,
    after: &HealthState,
    outcome: Option<&'a Outcome>,
    via: Option<&'a str>,
) -> Option<Event<'a>> {
    if before.admin != after.admin {
        return Some(match (before.admin, after.admin) {
            (_, Admin::Maint) => Event::Maint,
            (Admin::Maint, _) => Event::LeaveMaint,
            (_, Admin::Drain) => Event::Drain,
            _ => Event::Ready,
        });
    }
    if after.admin == Admin::Maint {
        // A server in maintenance takes no traffic whatever its checks say.
        return None;
    }
    if before.operational() != after.operational() {
        return Some(if after.operational() {
            Event::Up(outcome, via)
        } else {
            Event::Down(outcome, via)
        });
    }
    if before.stopping != after.stopping && after.operational() {
        return Some(if after.stopping {
            Event::Stopping(outcome)
        } else {
            Event::Up(outcome, via)
        });
    }
    None
}

/// Where `server` is checked: `addr` and `port` (the server's `addr` and `port` options) over
/// its own address and port, then `rules_port` (the first `connect` rule's) for a server
/// without a port.
fn endpoint(
    server: &Server,
    addr: Option<IpAddr>,
    port: Option<u16>,
    rules_port: Option<u16>,
) -> Option<Endpoint> {
    match &server.conf.addr {
        ServerAddr::Unix(path) => match (addr, port) {
            (Some(ip), Some(port)) => Some(Endpoint::Inet(SocketAddr::new(ip, port))),
            _ => Some(Endpoint::Unix(PathBuf::from(path))),
        },
        ServerAddr::Abstract(name) => match (addr, port) {
            (Some(ip), Some(port)) => Some(Endpoint::Inet(SocketAddr::new(ip, port))),
            _ => Some(Endpoint::Abstract(name.clone())),
        },
        ServerAddr::Inet { .. } => {
            // The server's current location: `set server addr` moves its checks too.
            let here = server.location();
            // A server at `0.0.0.0` goes where each client went: nothing to check but `addr`.
            let ip = addr.or(here.ip.filter(|ip| !ip.is_unspecified()))?;
            let port = port
                .or(match here.port {
                    Some(ServerPort::Fixed(p)) => Some(p),
                    _ => None,
                })
                .or(rules_port)?;
            Some(Endpoint::Inet(SocketAddr::new(ip, port)))
        }
    }
}

/// The arguments and variables of an external check of `server` at `here`.
fn invocation(
    process: &Process,
    backend: &Backend,
    server: &Server,
    here: &Endpoint,
) -> Invocation {
    const NOT_USED: &str = "NOT_USED";
    // The first listening address of the proxy, when it has one (a `listen` section).
    let listener = process
        .frontends
        .iter()
        .find(|f| f.plan.id.uid == backend.plan.id.uid)
        .and_then(|f| f.first_address.get());
    let (proxy_addr, proxy_port) = match listener {
        Some((addr, port)) => (
            addr.clone(),
            port.map(|p| p.to_string()).unwrap_or_default(),
        ),
        None => (String::new(), String::new()),
    };
    let (server_addr, server_port) = match here {
        Endpoint::Inet(sa) => (sa.ip().to_string(), sa.port().to_string()),
        Endpoint::Unix(path) => (path.display().to_string(), String::new()),
        Endpoint::Abstract(name) => (name.to_string(), String::new()),
    };
    let or_not_used = |text: &str| {
        if text.is_empty() {
            NOT_USED.to_owned()
        } else {
            text.to_owned()
        }
    };
    let proto = if backend.plan.mode == Mode::Http {
        "h1"
    } else {
        "tcp"
    };
    let vars = vec![
        ("HAPROXY_PROXY_ADDR", proxy_addr.clone()),
        (
            "HAPROXY_PROXY_ID",
            sluice_runtime::stats::proxy_iid(backend.plan.id.uid).to_string(),
        ),
        ("HAPROXY_PROXY_NAME", backend.name().to_owned()),
        ("HAPROXY_PROXY_PORT", proxy_port.clone()),
        ("HAPROXY_SERVER_ADDR", server_addr.clone()),
        (
            "HAPROXY_SERVER_CURCONN",
            server.traffic.sessions.get().to_string(),
        ),
        ("HAPROXY_SERVER_ID", server.id.to_string()),
        (
            "HAPROXY_SERVER_MAXCONN",
            server.conf.maxconn.unwrap_or(0).to_string(),
        ),
        ("HAPROXY_SERVER_NAME", server.name().to_owned()),
        ("HAPROXY_SERVER_PORT", server_port.clone()),
        ("HAPROXY_SERVER_SSL", "0".to_owned()),
        ("HAPROXY_SERVER_PROTO", proto.to_owned()),
    ];
    let preserved = if process.global.external_check == Some(true) {
        process.environment()
    } else {
        Vec::new()
    };
    Invocation {
        args: [
            or_not_used(&proxy_addr),
            or_not_used(&proxy_port),
            server_addr,
            server_port,
        ],
        vars,
        preserved,
    }
}

/// configuration.txt §4.2 "timeout check": with it, connecting may take min(`timeout
/// connect`, `inter`) and the rest `timeout check`; without it, `inter` bounds each part.
/// Checks connect from the server's `source` (else the backend's), as its traffic does.
fn limits(backend: &Backend, server: &Server, inter: Duration) -> Limits {
    let t = &backend.plan.timeouts;
    let source = server.conf.source.or(backend.plan.source);
    match t.check {
        Some(check) => Limits {
            connect: t.connect.unwrap_or(inter).min(inter),
            rest: check,
            source,
        },
        None => Limits {
            connect: inter,
            rest: inter,
            source,
        },
    }
}

/// A small per-task random source for `spread-checks` (xorshift, seeded from the key).
struct Jitter {
    state: u64,
    percent: u32,
}

impl Jitter {
    fn new(key: Key, percent: u32) -> Self {
        let seed = (key.0 as u64) << 32 ^ key.1 as u64 ^ u64::from(std::process::id());
        Jitter {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            percent,
        }
    }

    /// `d` moved randomly by up to `percent` percent either way.
    fn apply(&mut self, d: Duration) -> Duration {
        if self.percent == 0 {
            return d;
        }
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        let span = d.as_micros() as u64 * u64::from(self.percent) / 100;
        if span == 0 {
            return d;
        }
        let offset = x % (2 * span + 1);
        (d + Duration::from_micros(offset)).saturating_sub(Duration::from_micros(span))
    }
}

/// The `X-Haproxy-Server-State` value (`http-check send-state`).
fn state_header(
    node: &str,
    backend: &Backend,
    server: &Server,
    machine: &Machine,
    rise: u32,
    fall: u32,
) -> String {
    let h = server.health.get();
    let health = machine.health();
    let state = match (h.admin, machine.phase()) {
        (Admin::Maint, _) => "MAINT".to_owned(),
        (_, _) if h.stopping || h.admin == Admin::Drain => "NOLB".to_owned(),
        (_, Phase::Up) if health == rise + fall - 1 => "UP".to_owned(),
        (_, Phase::Up) => format!("UP {}/{}", health - rise + 1, fall),
        (_, Phase::Down) if health == 0 => "DOWN".to_owned(),
        (_, Phase::Down) => format!("DOWN {health}/{rise}"),
    };
    // The weights in effect (slowstart, agent, drain), as HAProxy reports them.
    let total = backend.total_weight();
    let (address, port) = match endpoint(server, None, None, None) {
        Some(Endpoint::Inet(sa)) => (sa.ip().to_string(), sa.port()),
        _ => (String::new(), 0),
    };
    format!(
        "{state}; address={address}; port={port}; name={}/{}; node={node}; weight={}/{total}; scur={}/{}; qcur=0",
        backend.name(),
        server.name(),
        backend.effective_weight(server.index),
        server.traffic.sessions.get(),
        backend.traffic.sessions.get(),
    )
}

async fn health_task(engine: Rc<Engine>, key: Key, program: Rc<Program>, first: Duration) {
    let Some((backend, server)) = engine.server(key) else {
        return;
    };
    let c = &server.conf.checks;
    let probes = server.probes();
    // A server without a port is checked on the port of the rules' first `connect`.
    let rules_port = program.first_connect_port();
    let Some(ep) = endpoint(server, probes.check_addr, probes.check_port, rules_port) else {
        engine.print(
            "[ALERT]",
            &format!(
                "Server {}/{}: no address or port to check, health checks disabled.",
                backend.name(),
                server.name()
            ),
        );
        return;
    };
    let intervals = Intervals {
        inter: c.inter(),
        fastinter: c.fastinter(),
        downinter: c.downinter(),
    };
    let limits = limits(backend, server, c.inter());
    let (rise, fall) = (c.rise(), c.fall());
    let mut machine = Machine::new(rise, fall);
    let mut jitter = Jitter::new(key, engine.spread);
    server.health.set_observing(
        c.observe.is_some(),
        c.observe == Some(sluice_config::checks::Observe::Layer7),
    );
    let node = engine.process.global.node.as_deref().unwrap_or_default();
    // configuration.txt §5.2 `check-send-proxy`: a server that receives the PROXY protocol
    // with its traffic gets it with its checks too, unless they go to another `port`/`addr`;
    // in its version, whatever asks for it.
    let options = server.conf.proxy_v2;
    let proxy = probe::CheckProxy {
        always: c.send_proxy
            || (server.conf.send_proxy().is_some() && c.port.is_none() && c.addr.is_none()),
        version: server.conf.send_proxy().unwrap_or(SendProxy::V1),
        crc32c: options.contains(ProxyV2Options::CRC32C),
        ssl: options.contains(ProxyV2Options::SSL),
        local: !engine.process.global.pp2_never_send_local,
    };
    sleep(first).await;
    loop {
        // `del server`: its checks end with it.
        if server.is_deleted() {
            return;
        }
        // `disable health`: no check runs, the server keeps its state until `enable health`.
        if !server.stats.checks_enabled() {
            sleep(c.inter()).await;
            continue;
        }
        let started = Instant::now();
        let state = program
            .send_state
            .then(|| state_header(node, backend, server, &machine, rise, fall));
        // Read again each time: `set server addr` moves the checks with the traffic.
        let probes = server.probes();
        let here = endpoint(server, probes.check_addr, probes.check_port, rules_port)
            .unwrap_or_else(|| ep.clone());
        server.stats.set_check_running(true);
        let mut outcome = match &program.external {
            // The program runs no longer than the interval, as in HAProxy.
            Some(external) => {
                let invocation = invocation(&engine.process, backend, server, &here);
                external::run(external, &invocation, c.inter()).await
            }
            None => probe::run(&program, &here, limits, state.as_deref(), proxy).await,
        };
        server.stats.set_check_running(false);
        outcome.duration = started.elapsed();
        // `chkfail` counts the checks that failed while the server was up (management.txt
        // §9.1), the one that takes it down included: not the failures of a down server.
        if !outcome.status.passed() && machine.phase() == Phase::Up {
            server.stats.chkfail.incr();
        }
        let health_before = machine.health();
        machine.record(outcome.status.passed());
        server.stats.set_check_health(machine.health());
        // `option log-health-checks`: each result that moved the health counter.
        if backend.plan.checks.log_health_checks && machine.health() != health_before {
            let line = report::check_result(
                (backend.name(), server.name(), server.conf.backup),
                &outcome,
                &machine,
                server.stats.weight(),
            );
            engine.print("[WARNING]", &line);
            if let Some(alert) = &backend.plan.email_alert {
                mail::send(alert, LOG_INFO, &line);
            }
        }
        let up = machine.phase() == Phase::Up;
        let stopping = outcome.status == Status::L7OkC;
        let last = LastCheck {
            status: outcome.status.code(),
            description: outcome.status.description(),
            code: outcome.code,
            duration_ms: outcome.duration.as_millis() as u64,
            info: outcome.info.clone(),
        };
        engine.apply(
            key,
            &|h| {
                h.check_up = up;
                // Stopping lasts as long as the 404s; a failure is reported as DOWN instead.
                h.stopping = up && (stopping || (h.stopping && !outcome.status.passed()));
                h.last_check = Some(last.clone());
            },
            Some(&outcome),
            None,
            0,
        );
        let mut next = Instant::now() + jitter.apply(machine.interval(&intervals));
        // Until the next check, the traffic's failures may bring it forward (`observe`).
        loop {
            tokio::select! {
                () = sleep_until(next) => break,
                () = server.health.observed() => {}
            }
            let errors = server.health.observed_errors();
            if errors < c.error_limit() {
                continue;
            }
            server.health.reset_observed_errors();
            let outcome = Outcome::new(Status::Hana).info(format!(
                "Detected {errors} consecutive errors, last one was: {}",
                server.health.last_observed().description()
            ));
            let failed = match c.on_error {
                OnError::Fastinter => false,
                OnError::FailCheck => {
                    machine.record(false);
                    true
                }
                OnError::SuddenDeath => {
                    machine.sudden_death();
                    false
                }
                OnError::MarkDown => {
                    machine.force(Phase::Down);
                    true
                }
            };
            if failed {
                let up = machine.phase() == Phase::Up;
                engine.apply(
                    key,
                    &|h| {
                        h.check_up = up;
                        h.stopping = h.stopping && up;
                    },
                    Some(&outcome),
                    None,
                    0,
                );
            }
            next = next.min(Instant::now() + c.fastinter());
        }
    }
}

async fn agent_task(engine: Rc<Engine>, key: Key, first: Duration) {
    let Some((backend, server)) = engine.server(key) else {
        return;
    };
    let c = &server.conf.checks;
    let probes = server.probes();
    let Some(ep) = endpoint(
        server,
        probes.agent_addr.or(probes.check_addr),
        probes.agent_port,
        None,
    ) else {
        engine.print(
            "[ALERT]",
            &format!(
                "Server {}/{}: no address or port for the agent, agent checks disabled.",
                backend.name(),
                server.name()
            ),
        );
        return;
    };
    let inter = c.agent_inter();
    let limits = limits(backend, server, inter);
    let mut machine = Machine::new(c.rise(), c.fall());
    let mut jitter = Jitter::new(key, engine.spread);
    sleep(first).await;
    loop {
        if server.is_deleted() {
            return;
        }
        // `disable agent`: the agent is not asked until `enable agent`.
        if !server.stats.agent_enabled() {
            sleep(inter).await;
            continue;
        }
        let started = Instant::now();
        // An agent that cannot be reached changes nothing: only its words count.
        let probes = server.probes();
        let here = endpoint(
            server,
            probes.agent_addr.or(probes.check_addr),
            probes.agent_port,
            None,
        )
        .unwrap_or_else(|| ep.clone());
        let sent = probes.agent_send.as_deref();
        if let Ok(reply) = probe::ask_agent(&here, sent, limits).await {
            let reply = agent::parse(&reply);
            let mut outcome = None;
            match &reply.operational {
                Some(AgentOp::Down(word)) => {
                    machine.record(false);
                    let mut info = format!("via agent : {word}");
                    if let Some(d) = &reply.description {
                        info.push_str(&format!(", {d}"));
                    }
                    let mut o = Outcome::new(Status::L7Sts).code(0).info(info);
                    o.duration = started.elapsed();
                    outcome = Some(o);
                }
                Some(AgentOp::Up) => {
                    machine.force(Phase::Up);
                    let mut o = Outcome::new(Status::L7Ok).code(0).info("via agent : up");
                    o.duration = started.elapsed();
                    outcome = Some(o);
                }
                None => {
                    machine.record(true);
                }
            }
            let up = machine.phase() == Phase::Up;
            engine.apply(
                key,
                &|h| {
                    h.agent_up = up;
                    match reply.admin {
                        Some(AgentAdmin::Ready) => h.admin = Admin::Ready,
                        Some(AgentAdmin::Drain) => h.admin = Admin::Drain,
                        Some(AgentAdmin::Maint) => h.admin = Admin::Maint,
                        None => {}
                    }
                    if let Some(p) = reply.weight_percent {
                        h.weight_percent = p;
                    }
                },
                outcome.as_ref(),
                None,
                0,
            );
        }
        sleep(jitter.apply(inter)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> HealthState {
        HealthState {
            check_up: true,
            agent_up: true,
            stopping: false,
            admin: Admin::Ready,
            weight_percent: 100,
            last_check: None,
            warmup: None,
        }
    }

    #[test]
    fn classify_changes() {
        let up = state();
        let mut down = state();
        down.check_up = false;
        assert!(matches!(
            classify(&up, &down, None, None),
            Some(Event::Down(..))
        ));
        assert!(matches!(
            classify(&down, &up, None, None),
            Some(Event::Up(..))
        ));
        let mut drain = state();
        drain.admin = Admin::Drain;
        assert!(matches!(
            classify(&up, &drain, None, None),
            Some(Event::Drain)
        ));
        let mut maint = state();
        maint.admin = Admin::Maint;
        let mut maint_down = maint.clone();
        maint_down.check_up = false;
        assert!(classify(&maint, &maint_down, None, None).is_none());
        let mut half = state();
        half.weight_percent = 50;
        assert!(classify(&up, &half, None, None).is_none());
    }

    #[test]
    fn jitter_stays_within_its_percentage() {
        let mut j = Jitter::new((1, 2), 10);
        for _ in 0..1000 {
            let d = j.apply(Duration::from_millis(1000));
            assert!(d >= Duration::from_millis(900) && d <= Duration::from_millis(1100));
        }
        let mut none = Jitter::new((0, 0), 0);
        assert_eq!(none.apply(Duration::from_secs(1)), Duration::from_secs(1));
    }
}
