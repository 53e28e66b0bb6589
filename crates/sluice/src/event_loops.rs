//! The threads of a running process: `nbthread` event loops that accept and serve
//! connections, the first on the main thread, where the control tasks (signals, the CLI) run
//! too, as HAProxy's first thread handles them. With `nbthread 1` the process is then a
//! single thread, as HAProxy's is, so the kernel takes no reference on a descriptor for each
//! system call on it, as it must for a descriptor table that threads share (health checks
//! and log writers, when configured, have threads of their own).
//!
//! Each event-loop thread runs its own single-threaded tokio runtime and its own clone of every
//! listening socket, so a connection lives and dies on the thread that accepted it (no
//! cross-thread hand-off on the data path, as in HAProxy's one-loop-per-thread design,
//! DESIGN.md §4). Signals follow management.txt §4: SIGINT/SIGTERM stop at once, SIGUSR1 stops
//! softly (listeners close, sessions finish, `hard-stop-after` bounds the wait), SIGTTOU pauses
//! the listeners and SIGTTIN resumes them.

use crate::listeners::{CliSocket, FrontendSocket};
use sluice_admin::cli::Exposed;
use sluice_runtime::process::{ListenState, Process};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use tokio::signal::unix::{SignalKind, signal};

/// The first event loop's share of the listening sockets, which [`run_control`] serves on the
/// main thread.
pub struct MainLoop(Vec<FrontendSocket>);

/// Starts the event-loop threads beyond the first, serving their share of `sockets`; the
/// first one's share is returned, for [`run_control`].
pub fn start_event_loops(
    process: &Arc<Process>,
    sockets: Vec<FrontendSocket>,
) -> io::Result<MainLoop> {
    // Every thread gets its own shard of every socket, or its own handle on a shared one;
    // shards beyond one per thread (handed over by a process with more threads) go to the
    // threads in turn, each accepting from them too. The originals are dropped at the end,
    // leaving the threads as the only owners.
    let threads = process.nbthread.max(1);
    let mut per_thread: Vec<Vec<FrontendSocket>> = (0..threads).map(|_| Vec::new()).collect();
    for spec in sockets {
        let FrontendSocket {
            frontend,
            socket,
            shards,
            bind_slots,
            release_backlog,
            threads: only,
            accept_proxy,
            name,
            number,
            stats,
        } = spec;
        let handle = |socket| FrontendSocket {
            frontend: Arc::clone(&frontend),
            socket,
            shards: Vec::new(),
            bind_slots: bind_slots.clone(),
            release_backlog,
            threads: None,
            accept_proxy,
            name: Arc::clone(&name),
            number,
            stats: stats.clone(),
        };
        // `bind ... thread`: only those threads accept from it.
        // (`bind_all` checked the set against the thread count: never empty.)
        let accepting: Vec<usize> = match &only {
            Some(set) if set.iter().any(|&t| t < threads) => {
                set.iter().copied().filter(|&t| t < threads).collect()
            }
            _ => (0..threads).collect(),
        };
        let mut shards = shards.into_iter();
        for (nth, &thread) in accepting.iter().enumerate() {
            let own = if nth == 0 { None } else { shards.next() };
            let socket = match own {
                Some(shard) => shard,
                None => socket.try_clone()?,
            };
            per_thread[thread].push(handle(socket));
        }
        for (n, shard) in shards.enumerate() {
            per_thread[accepting[n % accepting.len()]].push(handle(shard));
        }
    }
    let mut per_thread = per_thread.into_iter();
    let first = MainLoop(per_thread.next().unwrap_or_default());
    for (index, mine) in per_thread.enumerate() {
        let process = Arc::clone(process);
        std::thread::Builder::new()
            .name(format!("sluice-loop-{}", index + 1))
            .spawn(move || {
                // Thread 1 is the first loop's, on the calling thread.
                let thread = index as u32 + 2;
                run_event_loop(&process, (thread, mine), std::future::pending::<()>())
            })?;
    }
    Ok(first)
}

/// Runs event loop `thread` (numbered from 1, as `cpu-map` counts) serving `sockets` on the
/// calling thread until `until` completes (never, on the threads beyond the first), and
/// returns its output.
fn run_event_loop<T: 'static>(
    process: &Arc<Process>,
    (thread, sockets): (u32, Vec<FrontendSocket>),
    until: impl std::future::Future<Output = T> + 'static,
) -> T {
    pin_to_cpus(process, thread);
    sluice_heap::cache_this_thread();
    if process.nbthread <= 1 {
        // The only event loop (and the control tasks with it): no other thread updates the
        // data path's counters, which can then do without locked instructions.
        sluice_runtime::counters::count_alone();
    }
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    // `tune.maxpollevents`: how many readiness events one poll hands over (16 by default,
    // where tokio's is 1024). It also bounds a round (`sluice_proxy::batch`), the sessions
    // one poll wakes, whose reads a held head write waits for: see DEFAULT_MAXPOLLEVENTS.
    builder.max_io_events_per_tick(process.global.maxpollevents() as usize);
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("[ALERT] cannot start an event loop: {err}");
            std::process::exit(1);
        }
    };
    // A LocalSet lets sessions be thread-local tasks: a connection never leaves the thread that
    // accepted it, so its state needs no Send or Sync.
    // In turns: the clock is read once per turn of the loop, not per task (`clock`).
    let local = tokio::task::LocalSet::new();
    runtime.block_on(sluice_runtime::clock::turns(local.run_until(async move {
        // Ends each round of the loop: head writes wait for the round's reads.
        tokio::task::spawn_local(sluice_proxy::batch::run_rounds());
        // Times the sessions' waits, one queue per limit (`sluice_runtime::timers`).
        tokio::task::spawn_local(sluice_runtime::timers::run());
        if process.global.busy_polling {
            tokio::task::spawn_local(busy_poll(Arc::clone(process)));
        }
        for spec in sockets {
            let buffers = process.global.client_buffers;
            let tuned = spec
                .socket
                .tune_accepted(spec.frontend.plan.smart_accept, buffers);
            match tuned.and_then(|()| spec.socket.into_async()) {
                Ok(listener) => {
                    let listener = match spec.release_backlog {
                        Some(_) => listener.releasing_on_pause(),
                        None => listener,
                    };
                    tokio::task::spawn_local(sluice_proxy::accept::run_listener(
                        Arc::clone(process),
                        spec.frontend,
                        (listener, spec.release_backlog),
                        spec.bind_slots,
                        (spec.accept_proxy, spec.name),
                        (spec.stats, spec.number),
                    ));
                }
                Err(err) => {
                    eprintln!("[ALERT] cannot register a listener: {err}");
                    std::process::exit(1);
                }
            }
        }
        // Sessions outlive their listeners during a soft stop; the control loop decides when
        // the process exits. Meanwhile the thread gives back the buffers and idle server
        // connections its traffic stopped needing, on a period timer that also keeps a
        // timer always standing (see `upkeep`). It is a task of its own: the future given to
        // `block_on` is polled on every wake-up of the loop, a task only when its timer fires.
        tokio::task::spawn_local(sluice_proxy::http::upkeep(
            !process.global.no_memory_trimming,
        ));
        // The same holds for `until` (the control tasks, on the first loop).
        match output_of(until).await {
            Some(output) => output,
            // Only a panic could end it so, and where panics unwind (tests, debug builds;
            // release builds abort) the process has nothing left to do either.
            None => {
                eprintln!("[ALERT] the control tasks failed");
                std::process::exit(1);
            }
        }
    })))
}

/// `cpu-map`: binds the calling thread, event loop `thread`, to the CPUs a line gives it.
/// Should the system refuse (a CPU it does not have), the thread runs where the system lets
/// it, with a warning.
fn pin_to_cpus(process: &Process, thread: u32) {
    let Some(cpus) = sluice_config::cpu_map::cpus_of(&process.global.cpu_maps, thread) else {
        return;
    };
    let mut set = nix::sched::CpuSet::new();
    let pinned = cpus
        .iter()
        .try_for_each(|&cpu| set.set(cpu))
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set));
    if let Err(err) = pinned
        && !process.global.quiet
    {
        eprintln!("[WARNING] cpu-map: thread {thread} cannot be bound to CPUs {cpus:?}: {err}");
    }
}

/// Runs `task` as a task of the thread's set and waits for its output; `None` if the task
/// ended without one (it panicked).
///
/// The wait is polled on every turn of the loop, and costs a borrow there. A tokio
/// `JoinHandle` would register the loop's waker again at each poll (the copy it keeps never
/// compares equal to the loop's own), four locked instructions and a few hundred others per
/// turn, which a lightly loaded loop takes once or twice per request. The loop's waker is kept
/// once here, and the task wakes it when it ends.
async fn output_of<T: 'static>(task: impl std::future::Future<Output = T> + 'static) -> Option<T> {
    struct Outcome<T> {
        output: Option<T>,
        waiter: Option<std::task::Waker>,
    }
    /// Held by the task: dropped when it ends, with its output or by a panic.
    struct Report<T>(Rc<RefCell<Outcome<T>>>);
    impl<T> Drop for Report<T> {
        fn drop(&mut self) {
            if let Some(waiter) = self.0.borrow_mut().waiter.take() {
                waiter.wake();
            }
        }
    }
    let outcome = Rc::new(RefCell::new(Outcome {
        output: None,
        waiter: None,
    }));
    let report = Report(Rc::clone(&outcome));
    tokio::task::spawn_local(async move {
        let output = task.await;
        report.0.borrow_mut().output = Some(output);
    });
    std::future::poll_fn(|cx| {
        let mut state = outcome.borrow_mut();
        if let Some(output) = state.output.take() {
            return Poll::Ready(Some(output));
        }
        // Only this wait holds the outcome: the task is gone without an output.
        if Rc::strong_count(&outcome) == 1 {
            return Poll::Ready(None);
        }
        if state.waiter.is_none() {
            state.waiter = Some(cx.waker().clone());
        }
        Poll::Pending
    })
    .await
}

/// `busy-polling`: keeps the event loop from ever sleeping in the poller, trading a busy CPU
/// for the wake-up latency of an idle one (and for the cost, to whoever sends to this
/// process, of waking a sleeping thread). A task that is always ready does it: tokio runs a
/// task that yields again only after its next poll of the I/O driver, which then cannot
/// wait. As in HAProxy, it ends when the process stops listening for good (a soft stop,
/// the old process of a reload), so a process that only finishes its sessions does not spin.
async fn busy_poll(process: Arc<Process>) {
    while process.listen_state() != ListenState::Stopped {
        tokio::task::yield_now().await;
    }
}

/// Runs the first event loop, `main_loop`, on the calling thread with the control tasks until
/// the process must exit; returns the exit status. `exposed` are the listening sockets
/// `_getsocks` hands over.
pub fn run_control(
    process: Arc<Process>,
    main_loop: MainLoop,
    cli_sockets: Vec<CliSocket>,
    exposed: Exposed,
    debug: bool,
) -> io::Result<i32> {
    let control = control(Arc::clone(&process), cli_sockets, Arc::new(exposed), debug);
    run_event_loop(&process, (1, main_loop.0), control)
}

async fn control(
    process: Arc<Process>,
    cli_sockets: Vec<CliSocket>,
    exposed: Arc<Exposed>,
    debug: bool,
) -> io::Result<i32> {
    for cli in cli_sockets {
        let mut listener = cli.socket.into_async()?;
        // A stats socket this process bound gives its abstract name up while paused (one
        // task serves it: its descriptor is the only one).
        if cli.releases_on_pause {
            listener = listener.releasing_on_pause();
        }
        tokio::spawn(sluice_admin::cli::serve(
            Arc::clone(&process),
            listener,
            sluice_admin::cli::CliOptions {
                level: cli.level,
                idle_timeout: cli.timeout,
                exposed: cli.expose.then(|| Arc::clone(&exposed)),
                stays_while_stopping: cli.from_master,
            },
        ));
    }
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut soft_stop = signal(SignalKind::user_defined1())?;
    let mut pause = signal(SignalKind::from_raw(nix::libc::SIGTTOU))?;
    let mut resume = signal(SignalKind::from_raw(nix::libc::SIGTTIN))?;
    let mut hangup = signal(SignalKind::hangup())?;
    let say = |msg: &str| {
        if debug {
            eprintln!("[NOTICE] {msg}");
        }
    };
    let mut drain: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>> = None;
    // `grace`: after SIGUSR1 the process says it is stopping (the `stopping` fetch) while
    // its listeners still accept, until this ends.
    let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            _ = interrupt.recv() => return Ok(0),
            _ = terminate.recv() => return Ok(0),
            _ = soft_stop.recv(), if drain.is_none() && grace.is_none() => {
                process.begin_stopping();
                match process.global.grace {
                    Some(delay) if !delay.is_zero() => {
                        say("SIGUSR1 received: stopping after the grace period");
                        grace = Some(Box::pin(tokio::time::sleep(delay)));
                    }
                    _ => drain = Some(stop_listening(&process, &exposed, say)),
                }
            }
            () = async { if let Some(g) = grace.as_mut() { g.await } else { std::future::pending().await } } => {
                grace = None;
                drain = Some(stop_listening(&process, &exposed, say));
            }
            _ = pause.recv() => {
                say("SIGTTOU received: pausing listeners");
                process.set_listen_state(ListenState::Paused);
            }
            _ = resume.recv() => {
                say("SIGTTIN received: resuming listeners");
                process.set_listen_state(ListenState::Active);
            }
            _ = hangup.recv() => say("SIGHUP received"),
            _ = async { if let Some(d) = drain.as_mut() { d.await } else { std::future::pending().await } } => {
                say("all sessions finished: exiting");
                return Ok(0);
            }
        }
    }
}

/// The soft stop proper: the listeners close for good and the process waits for its
/// sessions (the future returned).
fn stop_listening(
    process: &Arc<Process>,
    exposed: &Exposed,
    say: impl Fn(&str),
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
    say("soft stop: stopping listeners, waiting for sessions to finish");
    process.set_listen_state(ListenState::Stopped);
    // A stopping process keeps no socket that nobody accepts on.
    exposed.clear();
    Box::pin(wait_for_sessions(Arc::clone(process)))
}

/// Completes when every session has ended, or when `hard-stop-after` has passed.
async fn wait_for_sessions(process: Arc<Process>) {
    // Every session holds one of the process's `maxconn` slots: holding them all means no
    // session is left.
    let all = process.slots.all_free();
    match process.global.hard_stop_after {
        Some(limit) => {
            let _ = tokio::time::timeout(limit, all).await;
        }
        None => {
            let _ = all.await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn on_a_task_set<T>(f: impl std::future::Future<Output = T>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(tokio::task::LocalSet::new().run_until(f))
    }

    #[test]
    fn the_wait_gets_the_task_output_once_it_ends() {
        let got = on_a_task_set(output_of(async {
            // Ends on a later turn than the one that started it.
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            7
        }));
        assert_eq!(got, Some(7));
    }

    #[test]
    fn a_task_that_panics_ends_the_wait_without_output() {
        let got = on_a_task_set(output_of(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("the control tasks fail");
            }
            7
        }));
        assert_eq!(got, None);
    }
}
