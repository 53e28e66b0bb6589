//! The messages HAProxy prints on a server's state change, word for word (compared with HAProxy
//! 2.6's own output), e.g. `Server be/s1 is DOWN, reason: Layer4 connection problem, info:
//! "Connection refused", check duration: 0ms. 0 active and 0 backup servers left. 0 sessions
//! active, 0 requeued, 0 remaining in queue.` and `backend 'be' has no server available!`.
//!
//! Sluice has no server queues yet, so the requeue and queue figures are always 0. The
//! messages are built here (pure, tested) and printed by the engine with HAProxy's
//! `[WARNING]  (pid) : ` prefix.

use crate::machine::{Machine, Phase};
use crate::status::{Outcome, Status};
use sluice_runtime::health::Usable;

/// What happened to a server.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// It stopped taking traffic after a check (or following the tracked server `via`).
    Down(Option<&'a Outcome>, Option<&'a str>),
    /// It takes traffic again.
    Up(Option<&'a Outcome>, Option<&'a str>),
    /// `disable-on-404`: still running, no new traffic.
    Stopping(Option<&'a Outcome>),
    /// Set to drain (agent).
    Drain,
    /// Set to maintenance (agent).
    Maint,
    /// Leaving drain (`ready`).
    Ready,
    /// Leaving maintenance.
    LeaveMaint,
}

impl Event<'_> {
    /// Whether the server no longer counts among the usable ones ("left" vs "online").
    fn gone(&self) -> bool {
        matches!(self, Event::Down(..) | Event::Maint)
    }
}

/// `option log-health-checks`: the line for a check result that moved a server's health
/// counter (`weight` is the server's current one), e.g. `Health check for server be/s1 failed, reason: Layer4 connection problem,
/// info: "Connection refused", check duration: 0ms, status: 2/3 UP` (the failures left
/// before going down, out of `fall`, while up; the successes had, out of `rise`, while
/// down), HAProxy's words.
pub fn check_result(
    (backend, server, backup): (&str, &str, bool),
    outcome: &Outcome,
    machine: &Machine,
    weight: u32,
) -> String {
    let verdict = match outcome.status {
        // `http-check disable-on-404`: up, but draining.
        Status::L7OkC => "conditionally succeeded",
        status if status.passed() => "succeeded",
        _ => "failed",
    };
    let kind = if backup { "backup " } else { "" };
    let mut line = format!("Health check for {kind}server {backend}/{server} {verdict}, ");
    outcome.write_reason(&mut line);
    let (health, of, word) = match machine.phase() {
        // An up server with no weight takes no new traffic: HAProxy says DRAIN.
        Phase::Up if weight == 0 => (
            machine.health() - machine.rise() + 1,
            machine.fall(),
            "DRAIN",
        ),
        Phase::Up => (machine.health() - machine.rise() + 1, machine.fall(), "UP"),
        Phase::Down => (machine.health(), machine.rise(), "DOWN"),
    };
    line.push_str(&format!(", status: {health}/{of} {word}."));
    line
}

/// The server a state change is about.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    /// Its backend's name.
    pub backend: &'a str,
    /// Its name.
    pub server: &'a str,
    /// A `backup` server ("Backup Server be/s2 is DOWN").
    pub backup: bool,
    /// Whether the check's reason goes in the message; not under `option
    /// log-health-checks`, whose line for the check result said it already.
    pub reasons: bool,
}

/// The warning for `event` on `who`, with the backend's usable servers after it and the
/// server's active sessions.
pub fn message(who: Who<'_>, event: &Event<'_>, usable: Usable, sessions: u32) -> String {
    let (backend, server) = (who.backend, who.server);
    let kind = if who.backup {
        "Backup Server"
    } else {
        "Server"
    };
    let mut m = format!("{kind} {backend}/{server} ");
    let with_reason = |m: &mut String, word: &str, outcome: Option<&Outcome>, via: Option<&str>| {
        m.push_str(word);
        if let Some(via) = via {
            m.push_str(&format!(" via {via}"));
        } else if let Some(o) = outcome.filter(|_| who.reasons) {
            m.push_str(", ");
            o.write_reason(m);
        }
    };
    match event {
        Event::Down(o, via) => with_reason(&mut m, "is DOWN", *o, *via),
        Event::Up(o, via) => with_reason(&mut m, "is UP", *o, *via),
        Event::Stopping(o) => with_reason(&mut m, "is stopping", *o, None),
        Event::Drain => m.push_str("enters drain state"),
        Event::Maint => m.push_str("is going DOWN for maintenance"),
        // HAProxy gives no counts when a server leaves a forced state.
        Event::Ready => return m + "is UP (leaving forced drain).",
        Event::LeaveMaint => return m + "is UP/READY (leaving forced maintenance).",
    }
    let gone = event.gone();
    m.push_str(&format!(
        ". {} active and {} backup servers {}.",
        usable.active,
        usable.backup,
        if gone { "left" } else { "online" }
    ));
    if usable.active == 0 && usable.backup > 0 {
        m.push_str(" Running on backup.");
    }
    if gone {
        m.push_str(&format!(
            " {sessions} sessions active, 0 requeued, 0 remaining in queue."
        ));
    } else {
        m.push_str(" 0 sessions requeued, 0 total in queue.");
    }
    m
}

/// The alert when a backend's last usable server is gone; `listen` sections are "proxy".
pub fn no_server(listen: bool, backend: &str) -> String {
    let kind = if listen { "proxy" } else { "backend" };
    format!("{kind} '{backend}' has no server available!")
}

/// A message with HAProxy's stderr prefix: the tag padded to 11 columns, then `(pid) : `.
pub fn line(tag: &str, pid: u32, message: &str) -> String {
    format!("{tag:<11}({pid}) : {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain<'a>(backend: &'a str, server: &'a str) -> Who<'a> {
        Who {
            backend,
            server,
            backup: false,
            reasons: true,
        }
    }
    use std::time::Duration;

    #[test]
    fn log_health_checks_lines_count_towards_the_next_change() {
        let refused = Outcome::new(Status::L4Con).info("Connection refused");
        let ok = Outcome::new(Status::L4Ok);
        let mut machine = Machine::new(2, 3);
        // Down at the first failure, then one success of the two it takes to rise.
        machine.record(false);
        assert_eq!(
            check_result(("be", "s1", false), &refused, &machine, 1),
            "Health check for server be/s1 failed, reason: Layer4 connection problem, \
             info: \"Connection refused\", check duration: 0ms, status: 0/2 DOWN."
        );
        machine.record(true);
        assert_eq!(
            check_result(("be", "s2", true), &ok, &machine, 1),
            "Health check for backup server be/s2 succeeded, reason: Layer4 check passed, \
             check duration: 0ms, status: 1/2 DOWN."
        );
        // Up, then one failure of the three it takes to fall.
        machine.record(true);
        machine.record(false);
        assert_eq!(
            check_result(("be", "s1", false), &refused, &machine, 1),
            "Health check for server be/s1 failed, reason: Layer4 connection problem, \
             info: \"Connection refused\", check duration: 0ms, status: 2/3 UP."
        );
    }

    #[test]
    fn backup_servers_and_reasons_left_to_the_check_lines() {
        let refused = Outcome::new(Status::L4Con).info("Connection refused");
        let who = Who {
            backend: "be",
            server: "s2",
            backup: true,
            reasons: false,
        };
        assert_eq!(
            message(
                who,
                &Event::Down(Some(&refused), None),
                Usable::default(),
                0
            ),
            "Backup Server be/s2 is DOWN. 0 active and 0 backup servers left. \
             0 sessions active, 0 requeued, 0 remaining in queue."
        );
    }

    #[test]
    fn haproxy_forms() {
        let refused = Outcome::new(Status::L4Con).info("Connection refused");
        let none = Usable::default();
        assert_eq!(
            line(
                "[WARNING]",
                15155,
                &message(
                    plain("be1", "s1"),
                    &Event::Down(Some(&refused), None),
                    none,
                    0
                )
            ),
            "[WARNING]  (15155) : Server be1/s1 is DOWN, reason: Layer4 connection problem, info: \"Connection refused\", check duration: 0ms. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        assert_eq!(
            line("[ALERT]", 15155, &no_server(false, "be1")),
            "[ALERT]    (15155) : backend 'be1' has no server available!"
        );
        let ok = Outcome::new(Status::L4Ok);
        let one = Usable {
            active: 1,
            backup: 0,
        };
        assert_eq!(
            message(plain("be1", "s1"), &Event::Up(Some(&ok), None), one, 0),
            "Server be1/s1 is UP, reason: Layer4 check passed, check duration: 0ms. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."
        );
        let backup = Usable {
            active: 0,
            backup: 1,
        };
        assert_eq!(
            message(plain("be6", "s1"), &Event::Drain, backup, 0),
            "Server be6/s1 enters drain state. 0 active and 1 backup servers online. Running on backup. 0 sessions requeued, 0 total in queue."
        );
        let mut c404 = Outcome::new(Status::L7OkC).code(404);
        c404.duration = Duration::from_millis(1);
        assert_eq!(
            message(plain("be7", "s1"), &Event::Stopping(Some(&c404)), none, 0),
            "Server be7/s1 is stopping, reason: Layer7 check conditionally passed, code: 404, check duration: 1ms. 0 active and 0 backup servers online. 0 sessions requeued, 0 total in queue."
        );
        let both = Usable {
            active: 1,
            backup: 1,
        };
        assert_eq!(
            message(plain("be6", "s1"), &Event::Maint, both, 0),
            "Server be6/s1 is going DOWN for maintenance. 1 active and 1 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        let agent = Outcome::new(Status::L7Sts).code(0).info("via agent : down");
        assert_eq!(
            message(
                plain("be6", "s1"),
                &Event::Down(Some(&agent), None),
                both,
                0
            ),
            "Server be6/s1 is DOWN, reason: Layer7 wrong status, code: 0, info: \"via agent : down\", check duration: 0ms. 1 active and 1 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
        );
        assert_eq!(
            message(plain("be", "s1"), &Event::Ready, one, 0),
            "Server be/s1 is UP (leaving forced drain)."
        );
        assert_eq!(
            message(plain("be", "s1"), &Event::LeaveMaint, one, 0),
            "Server be/s1 is UP/READY (leaving forced maintenance)."
        );
        assert_eq!(
            message(plain("b", "t"), &Event::Down(None, Some("b/s")), none, 2),
            "Server b/t is DOWN via b/s. 0 active and 0 backup servers left. 2 sessions active, 0 requeued, 0 remaining in queue."
        );
    }
}
