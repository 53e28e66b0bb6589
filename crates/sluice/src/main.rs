//! `sluice`: the command-line entry point. Reads haproxy.cfg, then starts the proxy.
//!
//! The start-up sequence, in order: parse the command line ([`args`]); answer `-v`, `-vv` and
//! `-cc` at once; read and check the configuration (every diagnostic printed, exit 1 on any
//! alert); build the live objects; stop there for `-c`; raise limits and bind every socket
//! ([`listeners`]); detach, write the pid file and drop privileges ([`system`]); start the event
//! loops and run the control loop ([`event_loops`]) until a signal ends the process. With `-W`
//! (or `master-worker`) the process becomes a master instead, binding the sockets and running
//! workers of itself ([`master`]); a worker takes its sockets from its master.

mod args;
mod capabilities;
mod event_loops;
mod listeners;
mod master;
mod system;

use sluice_config::addr::ListenAddr;
use sluice_config::diag::Severity;
use sluice_config::{cond, lexer, plan, reader};
use sluice_runtime::process::{BuildOptions, Process};
use sluice_runtime::record::{StderrLog, StreamLog};
use std::process::ExitCode;
use std::sync::Arc;

/// The C allocator, with mid-size blocks mapped apart and cached per event loop (`sluice_heap`).
#[global_allocator]
static ALLOCATOR: sluice_heap::ThreadCachedAlloc = sluice_heap::ThreadCachedAlloc;

fn main() -> ExitCode {
    let opts = match args::parse(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(err) => {
            eprintln!("[ALERT] {}\n{}", err.0, args::USAGE);
            return ExitCode::from(1);
        }
    };
    if opts.version == 1 {
        println!("{}", capabilities::version_line());
        return ExitCode::SUCCESS;
    }
    if opts.version >= 2 {
        print!("{}", capabilities::build_report());
        return ExitCode::SUCCESS;
    }
    let local_peer = opts
        .local_peer
        .clone()
        .unwrap_or_else(|| sluice_runtime::logging::hostname().to_owned());
    let env = capabilities::ConfigEnv::new(local_peer);
    let lookup = |name: &str| env.lookup(name);
    let ctx = capabilities::cond_context(&lookup);
    if let Some(expr) = &opts.eval_condition {
        // management.txt §3: 0 if true, 1 if false, 2 on error. The expression is read like a
        // `.if` line: split into words (quotes, `$VAR`), then joined with single spaces.
        let expr = match lexer::split_line(expr, &lookup) {
            Ok(words) => words.join(" "),
            Err(err) => {
                eprintln!("[ALERT] failed to parse condition '{expr}': {err}");
                return ExitCode::from(2);
            }
        };
        return match cond::eval(&expr, &ctx) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(err) => {
                eprintln!("[ALERT] failed to evaluate condition '{expr}': {err}");
                ExitCode::from(2)
            }
        };
    }
    match start(&opts, &ctx) {
        Ok(code) => ExitCode::from(code),
        Err(messages) => {
            for m in messages {
                eprintln!("{m}");
            }
            ExitCode::from(1)
        }
    }
}

/// Everything after the command line; `Err` carries the alerts that stopped the start-up.
fn start(opts: &args::Options, ctx: &cond::CondContext<'_>) -> Result<u8, Vec<String>> {
    if let Some(dir) = &opts.chdir {
        std::env::set_current_dir(dir).map_err(|e| {
            vec![format!(
                "[ALERT] cannot change directory to '{}': {e}",
                dir.display()
            )]
        })?;
    }
    let plan = load_plan(opts, ctx)?;
    let listeners: usize = plan
        .frontends
        .iter()
        .flat_map(|f| &f.binds)
        .map(|b| b.addrs.len())
        .sum::<usize>()
        + plan.global.stats_sockets.len();
    if listeners == 0 {
        // HAProxy's answer to a valid configuration that would accept nothing.
        if opts.check_only {
            println!(
                "Configuration file has no error but will not start (no listener) => exit(2)."
            );
            return Ok(2);
        }
        return Err(vec![
            "[ALERT] No enabled listener found (check for 'bind' directives)! Exiting.".into(),
        ]);
    }
    let mut plan = plan;
    if plan.global.node.is_none() {
        plan.global.node = Some(sluice_runtime::logging::hostname().to_owned());
    }
    let nbthread = listeners::thread_count(&plan);
    // What the listening sockets take of the descriptors, at most: a socket per thread for
    // each TCP port bound (`listeners::bind_all` shards them), one for each other address.
    let listening_sockets: u64 = plan
        .frontends
        .iter()
        .flat_map(|f| &f.binds)
        .flat_map(|b| &b.addrs)
        .map(|addr| match addr {
            ListenAddr::Inet { ports, .. } => ports.len() as u64 * nbthread as u64,
            ListenAddr::Unix(_) | ListenAddr::Abstract(_) | ListenAddr::Fd(_) => 1,
        })
        .sum::<u64>()
        + plan.global.stats_sockets.len() as u64;
    let maxconn_wanted = opts.maxconn.or(plan.global.maxconn);
    let ulimit_wanted = plan.global.ulimit_n;
    let (maxconn, ulimit_n) = if opts.check_only {
        (maxconn_wanted.unwrap_or(1), ulimit_wanted.unwrap_or(0))
    } else {
        let fd_limits = (ulimit_wanted, plan.global.fd_hard_limit);
        let limits = system::apply_limits(maxconn_wanted, fd_limits, listening_sockets)
            .map_err(|e| vec![format!("[ALERT] cannot set the file descriptor limit: {e}")])?;
        if let Some(wanted) = limits.short_of {
            let what = format!(
                "{} file descriptors and the limit cannot be raised above {}",
                if ulimit_wanted.is_some() {
                    format!("'ulimit-n' asks for {wanted}")
                } else {
                    format!("'maxconn' needs {wanted}")
                },
                limits.ulimit_n,
            );
            // `strict-limits`, on unless `no strict-limits` says otherwise.
            if !plan.global.lax_limits {
                return Err(vec![format!(
                    "[ALERT] {what}: lower it, raise the hard limit, or set 'no strict-limits'"
                )]);
            }
            eprintln!(
                "[WARNING] {what}; running with {} ('no strict-limits')",
                limits.ulimit_n
            );
        }
        (limits.maxconn, limits.ulimit_n)
    };
    let handoff = master::Handoff::from_env();
    // A master keeps the checked plan (the live objects are built only to check them).
    let master_plan = (handoff.is_none() && (opts.master_worker || plan.global.master_worker))
        .then(|| plan.clone());
    let mut plan = plan;
    plan.env
        .define(process_variables(&plan, ctx, handoff.is_some()));
    let process = Process::build(
        plan,
        BuildOptions {
            maxconn,
            default_frontend_maxconn: opts.proxy_maxconn,
            nbthread,
            ulimit_n,
        },
        // `-d` shows one log line per finished stream on stderr.
        opts.debug
            .then(|| Box::new(StderrLog) as Box<dyn StreamLog>),
    )
    .map_err(|errs| {
        let mut out: Vec<String> = errs.into_iter().map(|e| format!("[ALERT] {e}")).collect();
        out.push("[ALERT] Fatal errors found in configuration.".into());
        out
    })?;
    if opts.check_only {
        if opts.verbose {
            println!("Configuration file is valid");
        }
        return Ok(0);
    }
    if let Some(plan) = master_plan {
        // The master runs no proxy of its own.
        drop(process);
        return master::run(opts, &plan, &|| load_plan(opts, ctx));
    }
    // `load-server-state-from-file`: what the previous process's servers had been set to.
    for warning in sluice_runtime::server_state::load(&process) {
        eprintln!("[WARNING] {warning}");
    }
    // A worker never detaches nor writes the pid file: its master did.
    let worker = handoff.as_ref().is_some_and(|h| h.from_master);
    if worker {
        // A worker whose master is gone must not linger with the master's sockets.
        let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
        // A master that died before that request sends no signal: its worker is already
        // someone else's child.
        let master = handoff.as_ref().and_then(|h| h.master);
        if master.is_some_and(|pid| nix::unistd::getppid().as_raw() != pid) {
            eprintln!("[ALERT] the master process is gone: exiting.");
            std::process::exit(1);
        }
    }
    // `-x`: the listening sockets of the process this one replaces, shared rather than bound
    // again, so that none of its queued connections is lost.
    let mut handoff = handoff.or_else(|| {
        let path = opts.transfer_socket.as_ref()?;
        match master::Handoff::from_old_process(path) {
            Ok(handoff) => Some(handoff),
            Err(err) => {
                eprintln!(
                    "[WARNING] could not take the listening sockets from '{}': {err}; binding them anew",
                    path.display()
                );
                None
            }
        }
    });
    let bound = match (&opts.replaces, handoff.as_mut()) {
        (Some((_, pids)), None) => bind_replacing(&process, pids)?,
        (_, handoff) => listeners::bind_all(&process, handoff)?,
    };
    // Sockets handed over that this configuration does not use are closed now.
    drop(handoff);
    let (frontend_sockets, cli_sockets) = (bound.frontends, bound.clis);
    let debug = opts.debug;
    let daemon = (opts.daemon || process.global.daemon) && !debug && !opts.foreground && !worker;
    if daemon {
        system::daemonize()
            .map_err(|e| vec![format!("[ALERT] cannot go to the background: {e}")])?;
    }
    let pidfile = opts
        .pidfile
        .clone()
        .or_else(|| process.global.pidfile.as_ref().map(Into::into));
    if let Some(path) = pidfile.as_ref().filter(|_| !worker) {
        system::write_pidfile(path).map_err(|e| {
            vec![format!(
                "[ALERT] cannot write pid file '{}': {e}",
                path.display()
            )]
        })?;
    }
    if process.global.set_dumpable {
        system::raise_core_limits();
    }
    system::drop_privileges(
        process.global.chroot.as_deref(),
        process.global.user.as_ref(),
        process.global.group.as_ref(),
    )
    .map_err(|e| vec![format!("[ALERT] cannot drop privileges: {e}")])?;
    if process.global.set_dumpable {
        system::make_dumpable().map_err(|e| {
            vec![format!(
                "[ALERT] set-dumpable: cannot make the process dumpable: {e}"
            )]
        })?;
    }

    let process = Arc::new(process);
    // Before the event loops allocate any buffer: see `map_buffers_apart`.
    sluice_heap::map_buffers_apart(process.global.bufsize() as usize);
    let main_loop = event_loops::start_event_loops(&process, frontend_sockets)
        .map_err(|e| vec![format!("[ALERT] cannot start the event loops: {e}")])?;
    // Health checks run on their own thread: they never share a loop with the data path.
    sluice_check::start(&process)
        .map_err(|e| vec![format!("[ALERT] cannot start the health checks: {e}")])?;
    // Every thread of the process runs now.
    let global = &process.global;
    system::forbid_new_processes(global.insecure_fork, global.insecure_setuid)
        .map_err(|e| vec![format!("[ALERT] cannot forbid new processes: {e}")])?;
    if debug {
        eprintln!(
            "[NOTICE] Sluice {} started: {} thread(s), maxconn {}",
            env!("CARGO_PKG_VERSION"),
            process.nbthread,
            process.maxconn
        );
    }
    if let Some((how, pids)) = &opts.replaces {
        replace_old_processes(*how, pids, debug);
    }
    let exposed = sluice_admin::cli::Exposed::new(bound.exposed);
    let code = event_loops::run_control(process, main_loop, cli_sockets, exposed, debug)
        .map_err(|e| vec![format!("[ALERT] control loop failed: {e}")])?;
    Ok(u8::try_from(code).unwrap_or(1))
}

/// Reads and checks the configuration, printing its diagnostics; `Err` if it cannot run.
fn load_plan(opts: &args::Options, ctx: &cond::CondContext<'_>) -> Result<plan::Plan, Vec<String>> {
    let mut diags = Vec::new();
    let sources = reader::read_sources(&opts.config_paths, &mut diags);
    let checked = plan::check(&sources, ctx);
    diags.extend(checked.diagnostics);
    let zero_warning =
        opts.zero_warning || checked.plan.as_ref().is_some_and(|p| p.global.zero_warning);
    let quiet =
        opts.quiet || checked.plan.as_ref().is_some_and(|p| p.global.quiet) && !opts.verbose;
    for d in &diags {
        let show = match d.severity {
            Severity::Alert => true,
            Severity::Warning => !quiet || zero_warning,
            Severity::Notice => !quiet,
            Severity::Diag => opts.diagnostic,
        };
        if show {
            eprintln!("{d}");
        }
    }
    let has_warnings = diags.iter().any(|d| d.severity == Severity::Warning);
    // Any alert is fatal, including one about a file that could not be read: starting with
    // part of a configuration is worse than not starting.
    let fatal = diags.iter().any(|d| d.is_fatal());
    let Some(mut plan) = checked.plan.filter(|_| !fatal) else {
        return Err(vec!["[ALERT] Fatal errors found in configuration.".into()]);
    };
    plan.global.noreuseport |= opts.no_reuseport;
    // `bind ... thread`: checked against the threads this process would run, as HAProxy
    // checks it at `-c` with the machine's.
    let nbthread = listeners::thread_count(&plan) as u32;
    let bad_sets: Vec<String> = plan
        .frontends
        .iter()
        .flat_map(|f| f.binds.iter().map(move |b| (f, b)))
        .filter_map(|(f, b)| {
            let err = b.threads.as_ref()?.threads(nbthread).err()?;
            Some(format!("[ALERT] {}: proxy '{}': {err}", b.span, f.id.name))
        })
        .collect();
    if !bad_sets.is_empty() {
        for alert in &bad_sets {
            eprintln!("{alert}");
        }
        return Err(vec!["[ALERT] Fatal errors found in configuration.".into()]);
    }
    if zero_warning && has_warnings {
        return Err(vec![
            "[ALERT] Warnings found in configuration while zero-warning is set.".into(),
        ]);
    }

    Ok(plan)
}

/// How many times a process replacing others (`-sf`/`-st`) tries to bind an address they
/// hold, 10 ms apart: HAProxy's second at most.
const BIND_RETRIES: u32 = 100;

/// Binds the sockets of a process replacing `old_pids`. Where an address is taken (the old
/// processes listen there without `SO_REUSEPORT`, under `noreuseport`), asks them to stop
/// listening (SIGTTOU, which takes their sockets out of the listening state) and tries again,
/// as HAProxy does; should it still fail, they are told to listen again (SIGTTIN) and this
/// process does not start.
fn bind_replacing(process: &Process, old_pids: &[i32]) -> Result<listeners::Bound, Vec<String>> {
    let mut paused_old = false;
    for _ in 0..BIND_RETRIES {
        match listeners::bind_all(process, None) {
            Ok(bound) => return Ok(bound),
            Err(failure) if failure.address_in_use => {
                if !signal_old_processes(old_pids, nix::sys::signal::Signal::SIGTTOU) {
                    return Err(failure.into());
                }
                paused_old = true;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(failure) => {
                if paused_old {
                    signal_old_processes(old_pids, nix::sys::signal::Signal::SIGTTIN);
                }
                return Err(failure.into());
            }
        }
    }
    let last = listeners::bind_all(process, None);
    if last.is_err() && paused_old {
        signal_old_processes(old_pids, nix::sys::signal::Signal::SIGTTIN);
    }
    last.map_err(Into::into)
}

/// Sends `signal` to each of `pids`; true if at least one got it.
fn signal_old_processes(pids: &[i32], signal: nix::sys::signal::Signal) -> bool {
    pids.iter()
        .filter(|&&pid| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).is_ok())
        .count()
        > 0
}

/// Now that this process listens, tells the old ones (`-sf`: finish your sessions and exit,
/// `-st`: exit now), as HAProxy's reload does (management.txt §4). A process that is gone
/// already is no error.
fn replace_old_processes(how: args::Replace, pids: &[i32], debug: bool) {
    let signal = match how {
        args::Replace::Finish => nix::sys::signal::Signal::SIGUSR1,
        args::Replace::Terminate => nix::sys::signal::Signal::SIGTERM,
    };
    for &pid in pids {
        let sent = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        if debug && sent.is_err() {
            eprintln!("[WARNING] could not signal old process {pid}: it may have exited already");
        }
    }
}

/// The variables HAProxy 2.6 defines in its own environment once started, which `env()`,
/// `show env` and external checks see.
fn process_variables(
    plan: &plan::Plan,
    ctx: &cond::CondContext<'_>,
    worker: bool,
) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = ["HAPROXY_STARTUP_VERSION", "HAPROXY_LOCALPEER"]
        .into_iter()
        .filter_map(|name| Some((name.to_owned(), (ctx.lookup)(name)?)))
        .collect();
    let files: Vec<&str> = plan.files.iter().map(|f| &**f).collect();
    vars.push(("HAPROXY_CFGFILES".to_owned(), files.join(";")));
    if worker {
        vars.push(("HAPROXY_MWORKER".to_owned(), "1".to_owned()));
    }
    let sockets: Vec<String> = plan
        .global
        .stats_sockets
        .iter()
        .map(|s| s.address_text())
        .collect();
    vars.push(("HAPROXY_CLI".to_owned(), sockets.join(";")));
    vars
}
