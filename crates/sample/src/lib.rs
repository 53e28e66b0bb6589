//! The sample engine of Sluice: fetches, converters, ACLs, conditions and maps
//! (configuration.txt §7 "Using ACLs and fetching samples").
//!
//! Pure code (layer 0: no I/O but reading pattern and map files while the configuration is
//! checked, no clock, no tokio): the stream being looked at comes in through the
//! [`Context`] trait, which the proxy implements and tests implement over a parsed request.
//! The configuration compiles, once:
//!
//! 1. sample expressions with [`Expr::parse`] (`%[...]`, `set-var`, `use_backend %[...]`):
//!    the fetch and converters are checked, and [`Expr::check_stages`] tells whether the
//!    rule's [`Stages`] can see the fetch's data;
//! 2. `acl` lines into an [`AclSet`] ([`AclSet::add`]);
//! 3. `if`/`unless` conditions with [`Condition::parse`];
//! 4. custom log formats (`log-format`, `set-header X %[src]`...) with [`LogFormat::parse`]
//!    or [`LogFormat::parse_log`]; what only the proxy knows at logging time comes through
//!    [`LogFacts`].
//!
//! At run time, [`Expr::eval`] returns a [`Sample`] and [`Condition::eval`] a verdict;
//! neither allocates when the data stays borrowed from the request buffer. Pattern and map
//! files go through one [`MapStore`] so each is read once. Nothing here panics on any input.
//!
//! Payload and TLS hello fetches (`req.payload`, `req.ssl_sni`...) read
//! [`Context::request_payload`], which the proxy answers during `mode tcp` content
//! inspection; body fetches (`req.body`...) read [`Context::request_body`], which the proxy
//! does not answer yet (it streams bodies without buffering them).
//!
//! Stick-counter fetches (`sc_*`, `src_*`, `table_avl`...) and the `table_*` converters name
//! what they want with [`StickSource`] and [`StickOp`]; the proxy answers from its tables
//! through [`Context::stick`] and [`Context::table_lookup`].
//!
//! Not available yet: fetches of a TLS connection Sluice terminates (`ssl_fc_sni`...) and
//! the `RDP_COOKIE` predefined ACL.

mod acl;
mod args;
mod auth;
mod cond;
mod context;
mod conv;
mod expr;
mod fetch;
mod logformat;
mod map;
mod patref;
mod pattern;
pub mod rdp;
mod stages;
mod time;
mod value;

/// The unit tests' stream context, also built for the fuzz targets (feature `fuzzing`).
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod testing;

pub use acl::{Acl, AclSet};
pub use auth::{Password, User, Userlist, auth_scheme, basic_credentials};
pub use cond::Condition;
pub use context::{
    BackendStat, Context, FrontendStat, ProxyTlv, ServerStat, StickOp, StickSource, TcpMeasure,
    TimeoutFetch,
};
pub use expr::Expr;
pub use fetch::last_rule_read;
pub use logformat::{LogFacts, LogFormat, LogNumber, LogText};
#[doc(hidden)]
pub use map::MapProbe;
pub use map::MapStore;
pub use patref::{PatRef, Probe, RefEntry};
pub use pattern::{IntOp, MatchMethod};
pub use stages::{Source, Stages};
pub use time::{Civil, civil, strftime};
pub use value::{Sample, SampleType, ip_text, parse_int_prefix, parse_ip};
