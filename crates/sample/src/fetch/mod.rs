//! Sample fetch methods (configuration.txt §7.3.2–§7.3.6): the first keyword of every
//! expression, reading a value from the [`Context`].
//!
//! [`lookup`] finds a keyword's [`FetchDef`] (arguments, output type, [`Source`]); the
//! expression compiler checks the argument count and calls its `build`, which checks the
//! arguments and returns a [`Fetch`]. At run time [`Fetch::run`] hands the values to a sink:
//! one value when the expression is used as a sample, every value (all occurrences of a
//! header, all cookies of a name) when an ACL iterates over them, stopping as soon as the
//! sink says so. The families live in submodules: `internal` (constants, environment,
//! counters), `conn` (addresses, proxy names), `http_line` (method, URL, versions, status),
//! `http_hdr` (header fields), `http_cookie` (cookies), `http_auth` (the Authorization field and user lists), `capture` (capture slots), `res_payload` (the server's first bytes), `stick` (stick counters and tables), `record` (what a log line says: timers, byte counts, status), `payload` (raw request bytes, the
//! TLS hello parsed by `tls_hello`, the HTTP body). Read [`Fetch::run`] first.

/// A [`FetchDef`] whose `build` is the calling module's own `build` function (a name the
/// macro resolves where it is used).
macro_rules! fetch_def {
    ($name:literal, $min:literal, $max:literal, $out:ident, $source:ident) => {
        FetchDef {
            name: $name,
            min_args: $min,
            max_args: $max,
            out: SampleType::$out,
            source: Source::$source,
            build,
        }
    };
}

mod capture;
mod conn;
mod http_auth;
mod http_cookie;
mod http_hdr;
mod http_line;
mod internal;
pub use internal::last_rule_read;
mod payload;
mod record;
mod res_payload;
mod stick;
mod tls;
mod tls_hello;

pub(crate) use http_line::path_query;

use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType};

/// Where a fetch sends its values; returning true stops the fetch (an ACL found a match,
/// or a single value was asked for).
pub(crate) type Sink<'s, 'a> = &'s mut dyn FnMut(Sample<'a>) -> bool;

/// The description of one fetch keyword.
pub(crate) struct FetchDef {
    /// The keyword.
    pub name: &'static str,
    /// Mandatory arguments.
    pub min_args: usize,
    /// Mandatory plus optional arguments.
    pub max_args: usize,
    /// The type of the values.
    pub out: SampleType,
    /// The data it reads, which decides where it is valid.
    pub source: Source,
    /// Checks the arguments (their count is already checked) and compiles the fetch.
    pub build: fn(&FetchDef, &[String]) -> Result<Fetch, String>,
}

/// A compiled fetch: one variant per family.
#[derive(Clone, Debug)]
pub(crate) enum Fetch {
    /// Constants, environment, time, counters.
    Internal(internal::Internal),
    /// Addresses and proxy names.
    Conn(conn::Conn),
    /// Start-line fetches of requests and responses.
    Line(http_line::Line),
    /// Header fields.
    Hdr(http_hdr::Hdr),
    /// Cookies.
    Cookie(http_cookie::Cookie),
    /// Raw request bytes: payload, TLS hello, body.
    Payload(payload::Payload),
    /// The Authorization field, checked against user lists or not.
    Auth(http_auth::Auth),
    /// The transaction's capture slots.
    Capture(capture::Capture),
    /// The server's first bytes (`tcp-response content`).
    ResPayload(res_payload::ResPayload),
    /// Stick counters and tables.
    Stick(stick::StickFetch),
    /// What the log record says, and the process's facts.
    Record(record::Record),
    /// TLS properties of the connections, which are all clear.
    Tls(tls::Tls),
}

impl Fetch {
    /// Makes a header or cookie fetch read the response's fields (the bare `hdr` and
    /// `cookie` in a response context, see `Expr::check_stages`).
    pub fn read_response_side(&mut self) {
        match self {
            Fetch::Hdr(hdr) => hdr.read_response_side(),
            Fetch::Cookie(cookie) => cookie.read_response_side(),
            _ => {}
        }
    }

    /// Sends the fetch's values to `out`: at most one unless `all`, every value otherwise,
    /// until `out` returns true. Returns true if `out` stopped it.
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        match self {
            Fetch::Internal(f) => f.run(ctx, out),
            Fetch::Conn(f) => f.run(ctx, out),
            Fetch::Line(f) => f.run(ctx, all, out),
            Fetch::Hdr(f) => f.run(ctx, all, out),
            Fetch::Cookie(f) => f.run(ctx, all, out),
            Fetch::Payload(f) => f.run(ctx, all, out),
            Fetch::Auth(f) => f.run(ctx, all, out),
            Fetch::Capture(f) => f.run(ctx, out),
            Fetch::ResPayload(f) => f.run(ctx, out),
            Fetch::Stick(f) => f.run(ctx, out),
            Fetch::Record(f) => f.run(ctx, out),
            Fetch::Tls(f) => f.run(ctx, out),
        }
    }

    /// Links the fetch to what the configuration declared elsewhere (the user list of
    /// `http_auth`, the table a stick-counter fetch names).
    pub fn resolve(&mut self, maps: &crate::map::MapStore) -> Result<(), String> {
        match self {
            Fetch::Auth(f) => f.resolve(maps),
            Fetch::Stick(f) => f.resolve(maps),
            _ => Ok(()),
        }
    }
}

/// The definition of fetch keyword `name`, if Sluice has it.
pub(crate) fn lookup(name: &str) -> Option<&'static FetchDef> {
    internal::FETCHES
        .iter()
        .chain(conn::FETCHES)
        .chain(http_line::FETCHES)
        .chain(http_hdr::FETCHES)
        .chain(http_cookie::FETCHES)
        .chain(payload::FETCHES)
        .chain(http_auth::FETCHES)
        .chain(capture::FETCHES)
        .chain(res_payload::FETCHES)
        .chain(stick::FETCHES)
        .chain(stick::OTHER_FETCHES)
        .chain(tls::FETCHES)
        .chain(record::FETCHES)
        .find(|def| def.name == name)
}

/// Sends the one value `value` if there is one.
fn emit<'a>(value: Option<Sample<'a>>, out: Sink<'_, 'a>) -> bool {
    match value {
        Some(sample) => out(sample),
        None => false,
    }
}

/// Sends values picked from a list the way an occurrence argument asks (configuration.txt
/// `req.hdr`): `occ` > 0 counts from the first, < 0 from the last; 0 means every value when
/// an ACL iterates (`all`) and the last one otherwise. `values` makes a fresh iterator, so
/// counting from the end needs no allocation; `wrap` turns a value into a sample and may
/// refuse it.
fn emit_occurrence<'a, I>(
    values: impl Fn() -> I,
    occ: i64,
    all: bool,
    wrap: impl Fn(&'a [u8]) -> Option<Sample<'a>>,
    out: Sink<'_, 'a>,
) -> bool
where
    I: Iterator<Item = &'a [u8]>,
{
    if occ == 0 && all {
        for value in values() {
            if let Some(sample) = wrap(value)
                && out(sample)
            {
                return true;
            }
        }
        return false;
    }
    let picked = match occ {
        0 | -1 => values().last(),
        n if n > 0 => values().nth(usize::try_from(n - 1).unwrap_or(usize::MAX)),
        n => {
            let count = values().count();
            let back = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
            count
                .checked_sub(back)
                .and_then(|index| values().nth(index))
        }
    };
    emit(picked.and_then(wrap), out)
}

/// An optional delimiter argument: its first character (HAProxy uses only that), or
/// `default` when the argument is absent or empty.
fn delim_arg(args: &[String], index: usize, default: u8) -> u8 {
    args.get(index)
        .and_then(|a| a.bytes().next())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests;
