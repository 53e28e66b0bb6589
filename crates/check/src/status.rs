//! The result of one check in HAProxy's vocabulary: a status code (`L4OK`, `L4CON`, `L7STS`...,
//! configuration.txt §9.1 "check_status"), an optional code (HTTP status, agent code), an
//! optional text ("Connection refused", the reason phrase) and the check's duration.
//!
//! [`Status::passed`] decides what the rise/fall counters see, and [`Outcome::write_reason`]
//! writes the `reason: ..., code: ..., info: "...", check duration: ...ms` part of the
//! transition messages, with the same rules as HAProxy: the code is shown only for
//! the statuses that carry one (L7OK, L7OKC, L7STS), the info only when there is some.

use std::time::Duration;

/// A check status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The connection could not be set up locally (no socket, no route).
    SockErr,
    /// Connected (plain TCP check).
    L4Ok,
    /// The connection attempt timed out.
    L4Tout,
    /// The connection was refused or reset.
    L4Con,
    /// The TLS answer was a handshake (`ssl-hello-chk`).
    L6Ok,
    /// The TLS answer was not a handshake (`ssl-hello-chk`).
    L6Rsp,
    /// The response did not arrive in time.
    L7Tout,
    /// The response was invalid or did not match.
    L7Rsp,
    /// Passed (HTTP check or tcp-check).
    L7Ok,
    /// Passed conditionally: `disable-on-404` saw a 404.
    L7OkC,
    /// The HTTP status (or the agent's word) said no.
    L7Sts,
    /// The traffic's errors (`observe`) reached `error-limit`.
    Hana,
    /// `option external-check`: the program exited with 0.
    ProcOk,
    /// The program failed (its exit status is the code), or could not start.
    ProcErr,
    /// The program did not end within the check's interval.
    ProcTout,
}

impl Status {
    /// Whether the check counts as a success for rise/fall (a conditional pass does).
    pub fn passed(self) -> bool {
        matches!(
            self,
            Status::L4Ok | Status::L6Ok | Status::L7Ok | Status::L7OkC | Status::ProcOk
        )
    }

    /// The short code shown in statistics.
    pub fn code(self) -> &'static str {
        match self {
            Status::SockErr => "SOCKERR",
            Status::L4Ok => "L4OK",
            Status::L4Tout => "L4TOUT",
            Status::L4Con => "L4CON",
            Status::L6Ok => "L6OK",
            Status::L6Rsp => "L6RSP",
            Status::L7Tout => "L7TOUT",
            Status::L7Rsp => "L7RSP",
            Status::L7Ok => "L7OK",
            Status::L7OkC => "L7OKC",
            Status::L7Sts => "L7STS",
            Status::Hana => "HANA",
            Status::ProcOk => "PROCOK",
            Status::ProcErr => "PROCERR",
            Status::ProcTout => "PROCTOUT",
        }
    }

    /// The description used after `reason:` in the transition messages.
    pub fn description(self) -> &'static str {
        match self {
            Status::SockErr => "Socket error",
            Status::L4Ok => "Layer4 check passed",
            Status::L4Tout => "Layer4 timeout",
            Status::L4Con => "Layer4 connection problem",
            Status::L6Ok => "Layer6 check passed",
            Status::L6Rsp => "Layer6 invalid response",
            Status::L7Tout => "Layer7 timeout",
            Status::L7Rsp => "Layer7 invalid response",
            Status::L7Ok => "Layer7 check passed",
            Status::L7OkC => "Layer7 check conditionally passed",
            Status::L7Sts => "Layer7 wrong status",
            Status::Hana => "Health analyze",
            Status::ProcOk => "External check passed",
            Status::ProcErr => "External check error",
            Status::ProcTout => "External check timeout",
        }
    }

    /// Whether messages show the code: statuses that come from reading a status, and an
    /// external check's (its exit status).
    fn shows_code(self) -> bool {
        matches!(
            self,
            Status::L7Ok
                | Status::L7OkC
                | Status::L7Sts
                | Status::ProcOk
                | Status::ProcErr
                | Status::ProcTout
        )
    }
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Status.
    pub status: Status,
    /// HTTP status or agent code.
    pub code: Option<u16>,
    /// Extra text.
    pub info: Option<String>,
    /// How long the check took.
    pub duration: Duration,
}

impl Outcome {
    /// An outcome without code or info (the duration is filled in by the engine).
    pub fn new(status: Status) -> Self {
        Outcome {
            status,
            code: None,
            info: None,
            duration: Duration::ZERO,
        }
    }

    /// With an info text.
    pub fn info(mut self, info: impl Into<String>) -> Self {
        self.info = Some(info.into());
        self
    }

    /// With a code.
    pub fn code(mut self, code: u16) -> Self {
        self.code = Some(code);
        self
    }

    /// `reason: <description>[, code: N][, info: "..."], check duration: Nms`.
    pub fn write_reason(&self, out: &mut String) {
        out.push_str("reason: ");
        out.push_str(self.status.description());
        if self.status.shows_code() {
            out.push_str(&format!(", code: {}", self.code.unwrap_or(0)));
        }
        if let Some(info) = self.info.as_deref().filter(|i| !i.is_empty()) {
            out.push_str(", info: \"");
            // Server-sent text goes to a log line: keep it printable and on one line.
            for c in info.chars().take(200) {
                if c.is_control() {
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            out.push('"');
        }
        // An analysis of the traffic is not a check: it has no duration.
        if self.status != Status::Hana {
            out.push_str(&format!(
                ", check duration: {}ms",
                self.duration.as_millis()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(o: &Outcome) -> String {
        let mut s = String::new();
        o.write_reason(&mut s);
        s
    }

    #[test]
    fn reasons_as_haproxy_writes_them() {
        let o = Outcome::new(Status::L4Con).info("Connection refused");
        assert_eq!(
            reason(&o),
            "reason: Layer4 connection problem, info: \"Connection refused\", check duration: 0ms"
        );
        let mut o = Outcome::new(Status::L7Sts)
            .code(500)
            .info("Internal Server Error");
        o.duration = Duration::from_millis(3);
        assert_eq!(
            reason(&o),
            "reason: Layer7 wrong status, code: 500, info: \"Internal Server Error\", check duration: 3ms"
        );
        assert_eq!(
            reason(&Outcome::new(Status::L7Tout).code(200)),
            "reason: Layer7 timeout, check duration: 0ms"
        );
        assert_eq!(
            reason(&Outcome::new(Status::L4Ok)),
            "reason: Layer4 check passed, check duration: 0ms"
        );
    }
}
