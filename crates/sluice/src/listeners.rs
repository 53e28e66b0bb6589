//! Binding every listening socket of the process before the event loops start.
//!
//! All sockets are bound while the process still has its start-up privileges (low ports,
//! socket directories), and a failure stops the start-up with an alert naming the
//! configuration line: a configuration error never leaves a half-started proxy. A worker of a
//! master process (`-W`) takes the sockets its master bound instead ([`Handoff`]), and serves
//! its own CLI socket from the master too.

use crate::master::Handoff;
use sluice_admin::cli;
use sluice_config::addr::ListenAddr;
use sluice_config::global::{CliLevel, Owner, StatsSocketConf};
use sluice_config::plan::Plan;
use sluice_config::proxy::BindConf;
use sluice_net::listen::{self, BindOptions, BoundListener, Endpoint};
use sluice_runtime::listener::ListenerStats;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::Frontend;
use sluice_runtime::slots::ConnSlots;
use std::sync::Arc;
use std::time::Duration;

/// The kernel's pending-connection queue when neither `backlog` nor `maxconn` says otherwise.
const DEFAULT_BACKLOG: u32 = 1024;

/// The event-loop threads a process of `plan` runs: `nbthread`, else one per CPU.
pub fn thread_count(plan: &Plan) -> usize {
    plan.global
        .nbthread
        .map(|n| n as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many sockets beside its first each TCP address of `plan` gets, one for each other
/// event-loop thread (`BoundListener::shards`); none under `noreuseport`, where the threads
/// share one socket.
pub fn shards_wanted(plan: &Plan) -> usize {
    if plan.global.noreuseport {
        return 0;
    }
    thread_count(plan).saturating_sub(1)
}

/// The key under which the `index`-th shard (from 1) of the socket of `endpoint` is handed
/// over, by a master to its workers or through `_getsocks` (`-x`); the socket itself goes
/// under the endpoint's own key.
pub fn shard_key(endpoint: &str, index: usize) -> String {
    format!("{endpoint}#{index}")
}

/// One bound socket of a frontend, with its bind line's connection limit.
pub struct FrontendSocket {
    /// The frontend it accepts for.
    pub frontend: Arc<Frontend>,
    /// The socket, for the first event-loop thread.
    pub socket: BoundListener,
    /// Its shards, in the same `SO_REUSEPORT` group (`BoundListener::shards`): one for each
    /// other event-loop thread, or more when a process with more threads handed them over
    /// (`-x`); empty when the threads share `socket`.
    pub shards: Vec<BoundListener>,
    /// Shared by every socket of one `bind` line that has `maxconn`.
    pub bind_slots: Option<Arc<ConnSlots>>,
    /// The event-loop threads (from 0) that accept from it (`bind ... thread`); `None`: all.
    pub threads: Option<Arc<[usize]>>,
    /// The queue length a TCP socket listens again with after a pause, which takes it out
    /// of the listening state, or an abstract unix socket this process bound is bound again
    /// with after a pause, which closes it; `None` for an inherited `fd@` socket (whose
    /// other holders a pause must not disturb, as HAProxy leaves them) and a unix one named
    /// by a path: they keep their queue.
    pub release_backlog: Option<u32>,
    /// The bind line's `accept-proxy`: connections start with a PROXY protocol header.
    pub accept_proxy: bool,
    /// The bind line's `name`, else the socket's number in its frontend (from 1), as
    /// HAProxy names a listener in its error logs.
    pub name: Arc<str>,
    /// Its number in its frontend, from 1 (`so_id`).
    pub number: u32,
    /// Its own counters, under `option socket-stats`.
    pub stats: Option<Arc<ListenerStats>>,
}

/// One bound `stats socket`.
pub struct CliSocket {
    /// The socket.
    pub socket: BoundListener,
    /// Its access level.
    pub level: CliLevel,
    /// Its inactivity timeout.
    pub timeout: Duration,
    /// `expose-fd listeners`: `_getsocks` hands the listening sockets over.
    pub expose: bool,
    /// The master's socket into this worker (kept open while the worker stops).
    pub from_master: bool,
    /// An abstract unix socket (`abns@`) this process bound: a pause closes it, which frees
    /// its name for a process replacing this one, and a resume binds it again.
    pub releases_on_pause: bool,
}

/// Every socket of the process, bound.
pub struct Bound {
    /// The frontends' sockets.
    pub frontends: Vec<FrontendSocket>,
    /// The CLI sockets.
    pub clis: Vec<CliSocket>,
    /// A handle on each frontend socket with its key, kept when some CLI socket exposes them.
    pub exposed: Vec<(String, BoundListener)>,
}

/// Binds every frontend socket and stats socket (taking those `handoff` holds), or returns
/// every failure.
pub fn bind_all(
    process: &Process,
    mut handoff: Option<&mut Handoff>,
) -> Result<Bound, BindFailure> {
    let mut errors = Vec::new();
    let mut address_in_use = false;
    let mut frontend_sockets = Vec::new();
    let expose = process
        .global
        .stats_sockets
        .iter()
        .any(|s| s.expose_listeners);
    let mut exposed = Vec::new();
    for frontend in &process.frontends {
        let mut number = 0;
        for bind in &frontend.plan.binds {
            // `thread`: the threads that accept for this line, numbered from 0 here (the
            // configuration's check refused a set naming a thread this process does not run).
            let threads: Option<Arc<[usize]>> = bind
                .threads
                .as_ref()
                .and_then(|set| set.threads(process.nbthread as u32).ok())
                .map(|threads| threads.iter().map(|&t| t as usize - 1).collect());
            let accepting = threads.as_ref().map_or(process.nbthread, |t| t.len());
            let shards = if process.global.noreuseport {
                0
            } else {
                accepting.saturating_sub(1)
            };
            let opts = match bind_options(bind, frontend.slots.limit(), process.global.noreuseport)
            {
                Ok(opts) => opts,
                Err(err) => {
                    for addr in &bind.addrs {
                        errors.push(bind_error(&bind.span, frontend.name(), addr, &err));
                    }
                    continue;
                }
            };
            let slots = bind.maxconn.filter(|&n| n > 0).map(ConnSlots::new);
            for addr in &bind.addrs {
                match bind_or_inherit(addr, &opts, handoff.as_deref_mut(), shards) {
                    Ok(sockets) => frontend_sockets.extend(sockets.into_iter().map(
                        |Obtained {
                             endpoint,
                             socket,
                             shards,
                             handed_over,
                         }| {
                            number += 1;
                            if expose {
                                expose_with_shards(&endpoint, &socket, &shards, &mut exposed)
                                    .unwrap_or_else(|err| errors.push(err));
                            }
                            let name = bind.name.clone().unwrap_or_else(|| number.to_string());
                            let stats = frontend.listeners.get(number - 1).cloned();
                            let _ = frontend
                                .first_address
                                .get_or_init(|| socket.address_parts());
                            if let Some(stats) = &stats {
                                let _ = stats.addr.set(socket.address_text());
                            }
                            // An abstract socket is released by closing it, which frees its
                            // name only if this process holds its one descriptor: not one
                            // handed over or exposed (`expose-fd listeners`), and it is
                            // accepted on a single thread.
                            let releases_abstract = matches!(endpoint, Endpoint::Abstract(_))
                                && !handed_over
                                && !expose;
                            let release_backlog = (matches!(endpoint, Endpoint::Tcp(_))
                                || releases_abstract)
                                .then_some(opts.backlog);
                            let threads = if releases_abstract {
                                let first = threads.as_ref().and_then(|t| t.first().copied());
                                Some(Arc::from([first.unwrap_or(0)]))
                            } else {
                                threads.clone()
                            };
                            FrontendSocket {
                                frontend: Arc::clone(frontend),
                                socket,
                                shards,
                                bind_slots: slots.clone(),
                                release_backlog,
                                threads,
                                accept_proxy: bind.accept_proxy,
                                name: name.into(),
                                number: u32::try_from(number).unwrap_or(u32::MAX),
                                stats,
                            }
                        },
                    )),
                    Err(err) => {
                        address_in_use |= err.kind() == std::io::ErrorKind::AddrInUse;
                        errors.push(bind_error(&bind.span, frontend.name(), addr, &err));
                    }
                }
            }
        }
    }
    // A unix stats socket is bound by replacing its file: when this start fails anyway (a
    // reload whose address is taken), the running process keeps the path to its CLI.
    if !errors.is_empty() {
        return Err(BindFailure {
            messages: errors,
            address_in_use,
        });
    }
    let timeout = process.global.stats_timeout.unwrap_or(cli::DEFAULT_TIMEOUT);
    let mut cli_sockets = Vec::new();
    for conf in &process.global.stats_sockets {
        match bind_stats_socket(conf) {
            Ok(sockets) => cli_sockets.extend(sockets.into_iter().map(|socket| CliSocket {
                socket,
                level: conf.level,
                timeout,
                expose: conf.expose_listeners,
                from_master: false,
                releases_on_pause: matches!(conf.addr, ListenAddr::Abstract(_)),
            })),
            Err(err) => {
                // An abstract name in use is the old process's until it is paused.
                address_in_use |= err.kind() == std::io::ErrorKind::AddrInUse;
                errors.push(bind_error(&conf.span, "stats socket", &conf.addr, &err));
            }
        }
    }
    if let Some(fd) = handoff.as_ref().and_then(|h| h.cli) {
        // The master's way in (`@1 show info`): level admin, as HAProxy's master CLI.
        match listen::bind_endpoint(&Endpoint::Fd(fd), &BindOptions::default()) {
            Ok(socket) => cli_sockets.push(CliSocket {
                socket,
                level: CliLevel::Admin,
                timeout,
                expose: false,
                from_master: true,
                releases_on_pause: false,
            }),
            Err(err) => errors.push(format!(
                "[ALERT] cannot take the master's CLI socket (fd {fd}): {err}"
            )),
        }
    }
    if errors.is_empty() {
        Ok(Bound {
            frontends: frontend_sockets,
            clis: cli_sockets,
            exposed,
        })
    } else {
        Err(BindFailure {
            messages: errors,
            address_in_use,
        })
    }
}

/// Why [`bind_all`] failed.
#[derive(Debug)]
pub struct BindFailure {
    /// The alerts, one per socket that could not be had.
    pub messages: Vec<String>,
    /// Whether an address was in use: another process may still listen there (a process
    /// this one replaces, under `noreuseport` or on an abstract unix socket), so a retry
    /// may succeed once it is paused.
    pub address_in_use: bool,
}

impl From<BindFailure> for Vec<String> {
    fn from(failure: BindFailure) -> Self {
        failure.messages
    }
}

/// Keeps a handle on `socket` and on each of its `shards`, under their keys, for `_getsocks`:
/// every shard goes too, since a process taking over a socket without its shards would leave
/// the connections queued on them to be lost with this one.
fn expose_with_shards(
    endpoint: &Endpoint,
    socket: &BoundListener,
    shards: &[BoundListener],
    exposed: &mut Vec<(String, BoundListener)>,
) -> Result<(), String> {
    let key = endpoint.to_string();
    let keys = std::iter::once(key.clone()).chain((1..).map(|index| shard_key(&key, index)));
    for (key, socket) in keys.zip(std::iter::once(socket).chain(shards)) {
        let handle = socket
            .try_clone()
            .map_err(|err| format!("[ALERT] cannot keep a handle on {key} for expose-fd: {err}"))?;
        exposed.push((key, handle));
    }
    Ok(())
}

/// A socket [`bind_or_inherit`] bound or took over, with its shards.
struct Obtained {
    endpoint: Endpoint,
    socket: BoundListener,
    shards: Vec<BoundListener>,
    /// Taken over from a master or an older process (`-x`), which may still hold it.
    handed_over: bool,
}

/// The sockets of `addr`, each with `shards` more for the other threads: handed over with
/// every shard the other process had (a master has as many; a process replaced with `-x` may
/// have had more, all kept, or fewer, completed here), or bound here.
fn bind_or_inherit(
    addr: &ListenAddr,
    opts: &BindOptions,
    mut handoff: Option<&mut Handoff>,
    shards: usize,
) -> std::io::Result<Vec<Obtained>> {
    listen::endpoints(addr)?
        .into_iter()
        .map(|endpoint| {
            let handed = handoff.as_deref_mut().and_then(|h| h.take(&endpoint));
            let handed_over = handed.is_some();
            let (socket, mut taken) = match handed {
                Some(fd) => {
                    let shards = handoff
                        .as_deref_mut()
                        .map(|h| h.take_shards(&endpoint))
                        .unwrap_or_default()
                        .into_iter()
                        .map(listen::adopt_owned)
                        .collect::<std::io::Result<Vec<_>>>()?;
                    (listen::adopt_owned(fd)?, shards)
                }
                None => (listen::bind_endpoint(&endpoint, opts)?, Vec::new()),
            };
            // An inherited `fd@N` is one socket, whoever bound it; a master's worker takes
            // what its master holds (a shard of its own would close with it, and the
            // connections queued there with it).
            let from_master = handed_over && handoff.as_ref().is_some_and(|h| h.from_master);
            if taken.len() < shards && !from_master && !matches!(endpoint, Endpoint::Fd(_)) {
                taken.extend(socket.shards(shards - taken.len(), opts)?);
            }
            Ok(Obtained {
                endpoint,
                socket,
                shards: taken,
                handed_over,
            })
        })
        .collect()
}

/// The socket options of a `bind` line (`noreuseport`: without `SO_REUSEPORT`); fails when
/// a user or group it names does not exist.
pub fn bind_options(
    bind: &BindConf,
    frontend_maxconn: u32,
    noreuseport: bool,
) -> std::io::Result<BindOptions> {
    let owner = bind.unix_owner.as_ref().map(owner_uid).transpose()?;
    let group = bind.unix_group.as_ref().map(owner_gid).transpose()?;
    Ok(BindOptions {
        // HAProxy sizes the queue from the frontend's maxconn when no backlog is given.
        backlog: bind
            .backlog
            .unwrap_or_else(|| frontend_maxconn.clamp(1, DEFAULT_BACKLOG)),
        v4v6: bind.v4v6,
        v6only: bind.v6only,
        defer_accept: bind.defer_accept,
        tfo: bind.tfo,
        unix_mode: bind.unix_mode,
        unix_owner: (owner, group),
        no_reuseport: noreuseport,
        user_timeout: bind.user_timeout,
        mss: bind.mss,
        interface: bind.interface.clone(),
    })
}

/// Binds a `stats socket` (or the master CLI socket), setting its owner.
pub fn bind_stats_socket(conf: &StatsSocketConf) -> std::io::Result<Vec<BoundListener>> {
    let opts = BindOptions {
        backlog: cli::STATS_SOCKET_BACKLOG,
        unix_mode: conf.mode,
        ..BindOptions::default()
    };
    let sockets = listen::bind(&conf.addr, &opts)?;
    if let ListenAddr::Unix(path) = &conf.addr
        && (conf.uid.is_some() || conf.gid.is_some())
    {
        let uid = conf.uid.as_ref().map(owner_uid).transpose()?;
        let gid = conf.gid.as_ref().map(owner_gid).transpose()?;
        std::os::unix::fs::chown(path, uid, gid)?;
    }
    Ok(sockets)
}

fn owner_uid(owner: &Owner) -> std::io::Result<u32> {
    match owner {
        Owner::Id(id) => Ok(*id),
        Owner::Name(name) => nix::unistd::User::from_name(name)
            .map_err(std::io::Error::from)?
            .map(|u| u.uid.as_raw())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("unknown user '{name}'"),
                )
            }),
    }
}

fn owner_gid(owner: &Owner) -> std::io::Result<u32> {
    match owner {
        Owner::Id(id) => Ok(*id),
        Owner::Name(name) => nix::unistd::Group::from_name(name)
            .map_err(std::io::Error::from)?
            .map(|g| g.gid.as_raw())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("unknown group '{name}'"),
                )
            }),
    }
}

/// The alert for an address that could not be bound.
pub fn bind_error(
    span: &sluice_config::diag::Span,
    what: &str,
    addr: &ListenAddr,
    err: &std::io::Error,
) -> String {
    format!(
        "[ALERT] {span}: Starting {what}: cannot bind socket {}: {err}",
        describe(addr)
    )
}

fn describe(addr: &ListenAddr) -> String {
    match addr {
        ListenAddr::Inet { host, ports, .. } => {
            let host = match host {
                sluice_config::addr::Host::Any(_) => "*".to_owned(),
                sluice_config::addr::Host::Ip(ip) => ip.to_string(),
                sluice_config::addr::Host::Name(name) => name.clone(),
            };
            if ports.start() == ports.end() {
                format!("[{host}:{}]", ports.start())
            } else {
                format!("[{host}:{}-{}]", ports.start(), ports.end())
            }
        }
        ListenAddr::Unix(path) => format!("[unix@{path}]"),
        ListenAddr::Abstract(name) => format!("[{name}]"),
        ListenAddr::Fd(n) => format!("[fd@{n}]"),
    }
}
