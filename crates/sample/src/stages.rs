//! Where in a stream's life a fetch can find its data: rule stages and data sources
//! (configuration.txt §7.3: fetches "declare at which rule stage they are valid").
//!
//! Each fetch names the [`Source`] it reads (client address, HTTP request headers, response
//! status...), and each source is available at a set of [`Stages`]: request headers exist
//! from `tcp-request content` to server selection, but not once the response is being
//! processed; the response status exists in response rules and in the log. The
//! configuration checker passes the stages where a rule runs (for a `listen` section, both
//! its frontend and backend checkpoints) and asks [`Expr::check_stages`](crate::Expr) or
//! [`Condition::confine`](crate::Condition::confine) whether the rule can ever see its
//! data; HAProxy's rule is that one common stage is enough. Read [`Source::stages`] first.

use std::fmt;
use std::ops::{BitAnd, BitOr};

/// A set of rule stages (checkpoints) of a stream, as a bit set.
///
/// The single-bit constants name one checkpoint each; the combined ones
/// ([`Stages::TCP_REQ_CONTENT`], [`Stages::HTTP_REQ`], [`Stages::HTTP_RES`]) cover a rule
/// keyword allowed in both frontends and backends.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Stages(u16);

impl Stages {
    /// No stage at all.
    pub const NONE: Stages = Stages(0);
    /// `tcp-request connection` rules (frontend, before any data).
    pub const TCP_REQ_CONN: Stages = Stages(1 << 0);
    /// `tcp-request session` rules (frontend, after the handshakes).
    pub const TCP_REQ_SESS: Stages = Stages(1 << 1);
    /// `tcp-request content` rules of a frontend.
    pub const FE_TCP_REQ_CONTENT: Stages = Stages(1 << 2);
    /// `http-request` rules of a frontend.
    pub const FE_HTTP_REQ: Stages = Stages(1 << 3);
    /// `use_backend` / `default_backend` choice (frontend).
    pub const USE_BACKEND: Stages = Stages(1 << 4);
    /// `tcp-request content` rules of a backend.
    pub const BE_TCP_REQ_CONTENT: Stages = Stages(1 << 5);
    /// `http-request` rules of a backend.
    pub const BE_HTTP_REQ: Stages = Stages(1 << 6);
    /// `use-server` and server choice (backend).
    pub const USE_SERVER: Stages = Stages(1 << 7);
    /// `tcp-response content` rules (backend).
    pub const TCP_RES_CONTENT: Stages = Stages(1 << 8);
    /// `http-response` rules of a backend.
    pub const BE_HTTP_RES: Stages = Stages(1 << 9);
    /// `http-response` rules of a frontend (and `http-after-response`).
    pub const FE_HTTP_RES: Stages = Stages(1 << 10);
    /// Log-format evaluation at the end of the stream.
    pub const LOG: Stages = Stages(1 << 11);

    /// `tcp-request content` in a frontend or a backend.
    pub const TCP_REQ_CONTENT: Stages =
        Stages(Self::FE_TCP_REQ_CONTENT.0 | Self::BE_TCP_REQ_CONTENT.0);
    /// `http-request` in a frontend or a backend.
    pub const HTTP_REQ: Stages = Stages(Self::FE_HTTP_REQ.0 | Self::BE_HTTP_REQ.0);
    /// `http-response` in a frontend or a backend.
    pub const HTTP_RES: Stages = Stages(Self::FE_HTTP_RES.0 | Self::BE_HTTP_RES.0);
    /// Every stage.
    pub const ALL: Stages = Stages((1 << 12) - 1);

    /// True if every stage of `other` is in `self`.
    pub fn contains(self, other: Stages) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if `self` and `other` have a stage in common.
    pub fn intersects(self, other: Stages) -> bool {
        self.0 & other.0 != 0
    }

    /// True if the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How HAProxy's diagnostics name the rule running at these stages: its first
    /// checkpoint in the stream's order ("frontend http-request header rule"; for a
    /// `listen` section's response rules, the backend's, which run first).
    pub fn checkpoint_name(self) -> &'static str {
        const NAMES: [&str; 12] = [
            "frontend tcp-request connection rule",
            "frontend tcp-request session rule",
            "frontend tcp-request content rule",
            "frontend http-request header rule",
            "frontend use-backend rule",
            "backend tcp-request content rule",
            "backend http-request header rule",
            "backend use-server, balance or stick-match rule",
            "backend tcp-response content rule",
            "backend http-response header rule",
            "frontend http-response header rule",
            "logs",
        ];
        NAMES
            .get(self.0.trailing_zeros() as usize)
            .copied()
            .unwrap_or("no rule")
    }
}

impl BitOr for Stages {
    type Output = Stages;
    fn bitor(self, rhs: Stages) -> Stages {
        Stages(self.0 | rhs.0)
    }
}

impl BitAnd for Stages {
    type Output = Stages;
    fn bitand(self, rhs: Stages) -> Stages {
        Stages(self.0 & rhs.0)
    }
}

impl fmt::Debug for Stages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 12] = [
            "TCP_REQ_CONN",
            "TCP_REQ_SESS",
            "FE_TCP_REQ_CONTENT",
            "FE_HTTP_REQ",
            "USE_BACKEND",
            "BE_TCP_REQ_CONTENT",
            "BE_HTTP_REQ",
            "USE_SERVER",
            "TCP_RES_CONTENT",
            "BE_HTTP_RES",
            "FE_HTTP_RES",
            "LOG",
        ];
        let mut set = f.debug_set();
        for (bit, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// The data a fetch reads; it decides the stages where the fetch is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Constants and process state (`str`, `env`, `nbsrv`...): valid everywhere.
    Internal,
    /// The client connection's addresses and the frontend: valid everywhere.
    ClientAddress,
    /// The request buffer (`req.len`, `req.proto_http`): request stages only.
    RequestBuffer,
    /// The request head as it is being processed (`path`, `hdr`...): request stages only.
    RequestHeaders,
    /// What is kept of the request for its whole life (`method`, `req.ver`): request and
    /// response stages and the log.
    Request,
    /// The backend chosen: from the backend's rules on, and in the log.
    Backend,
    /// The server chosen: response stages and the log.
    Server,
    /// The server connection's addresses (`bc_src`, `bc_dst`...): response stages and the
    /// log, as the server's.
    ServerConnection,
    /// The response head being processed (`res.hdr`...): response stages only.
    ResponseHeaders,
    /// What is kept of the response (`status`): response stages and the log.
    Response,
    /// The server's first bytes in `mode tcp` (`res.len`, `res.payload`): `tcp-response
    /// content` rules only.
    ResponseBuffer,
    /// The HTTP response body received with its head (`res.body`...): `http-response`
    /// rules only.
    ResponseBody,
    /// The stream's log record (timers, byte counts, termination state): log formats only.
    Record,
}

impl Source {
    /// The stages where data from this source exists.
    pub fn stages(self) -> Stages {
        let request =
            Stages::TCP_REQ_CONTENT | Stages::HTTP_REQ | Stages::USE_BACKEND | Stages::USE_SERVER;
        let response = Stages::TCP_RES_CONTENT | Stages::HTTP_RES;
        match self {
            Source::Internal | Source::ClientAddress => Stages::ALL,
            Source::RequestBuffer | Source::RequestHeaders => request,
            Source::Request => request | response | Stages::LOG,
            Source::Backend => {
                Stages::BE_TCP_REQ_CONTENT
                    | Stages::BE_HTTP_REQ
                    | Stages::USE_SERVER
                    | response
                    | Stages::LOG
            }
            Source::Server | Source::ServerConnection | Source::Response => response | Stages::LOG,
            Source::ResponseHeaders => response,
            Source::ResponseBuffer => Stages::TCP_RES_CONTENT,
            Source::ResponseBody => Stages::HTTP_RES,
            Source::Record => Stages::LOG,
        }
    }

    /// How diagnostics name the source ("fetch method 'res.hdr' extracts information from
    /// 'HTTP response headers', none of which is available here").
    pub fn name(self) -> &'static str {
        match self {
            Source::Internal => "internal state",
            Source::ClientAddress => "client address",
            Source::RequestBuffer => "request buffer",
            Source::RequestHeaders => "HTTP request headers",
            Source::Request => "HTTP request",
            Source::Backend => "backend",
            Source::Server => "server",
            Source::ServerConnection => "server connection",
            Source::ResponseHeaders => "HTTP response headers",
            Source::Response => "HTTP response",
            Source::ResponseBuffer => "response buffer",
            Source::ResponseBody => "HTTP response body",
            Source::Record => "log record",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let s = Stages::HTTP_REQ | Stages::LOG;
        assert!(s.contains(Stages::FE_HTTP_REQ));
        assert!(s.intersects(Stages::LOG | Stages::TCP_REQ_CONN));
        assert!(!s.intersects(Stages::HTTP_RES));
        assert!((s & Stages::HTTP_RES).is_empty());
        assert_eq!(
            format!("{:?}", Stages::HTTP_REQ),
            "{FE_HTTP_REQ, BE_HTTP_REQ}"
        );
    }

    #[test]
    fn sources() {
        assert!(
            !Source::ResponseHeaders
                .stages()
                .intersects(Stages::HTTP_REQ)
        );
        assert!(!Source::RequestHeaders.stages().intersects(Stages::LOG));
        assert!(
            Source::Request
                .stages()
                .contains(Stages::LOG | Stages::HTTP_RES)
        );
        assert!(!Source::Backend.stages().intersects(Stages::FE_HTTP_REQ));
        assert!(Source::Backend.stages().intersects(Stages::HTTP_REQ));
        assert_eq!(Source::Internal.stages(), Stages::ALL);
    }
}
