//! Cookie fetches (configuration.txt §7.3.6 `req.cook`, `req.cook_cnt`, `req.cook_val`,
//! `req.cook_names` and the `res.` twins reading `Set-Cookie`).
//!
//! A request's `Cookie` fields hold `name=value` pairs separated by `;` (HAProxy also
//! accepts `,`), spaces around names and values ignored; a response's `Set-Cookie` field
//! holds one cookie, its first pair, followed by attributes. Pairs without `=` are skipped.
//! Names are case-sensitive. As a sample, `cook(name)` is the last occurrence and `cook()`
//! the first cookie; an ACL sees every occurrence.

use sluice_http::HeaderSpan;

use super::http_hdr::{Side, Values, fields, trim};
use super::{Fetch, FetchDef, Sink, delim_arg, emit};
use crate::args::str_arg;
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType, parse_int_prefix};

/// What a cookie fetch returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CookieKind {
    /// The value (`cook`).
    Value,
    /// The value as an integer (`cook_val`).
    Int,
    /// The number of matching cookies (`cook_cnt`).
    Count,
}

impl Cookie {
    /// Reads the response's `Set-Cookie` fields from now on.
    pub(crate) fn read_response_side(&mut self) {
        match self {
            Cookie::Named { side, .. } | Cookie::Names { side, .. } => *side = Side::Response,
        }
    }
}

/// A compiled cookie fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cookie {
    /// `cook`, `cook_val`, `cook_cnt`.
    Named {
        side: Side,
        name: Option<String>,
        kind: CookieKind,
    },
    /// `cook_names`.
    Names { side: Side, delim: u8 },
}

/// The `(name, value)` pairs of one side's cookies, in order.
fn pairs<'a>(
    buf: &'a [u8],
    headers: &'a [HeaderSpan],
    side: Side,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    let field = match side {
        Side::Request => "cookie",
        Side::Response => "set-cookie",
    };
    Values::new(buf, headers, Some(field), true)
        .flat_map(move |line| {
            // Only the first pair of a Set-Cookie is a cookie; the rest are attributes.
            let limit = if side == Side::Request { usize::MAX } else { 1 };
            line.split(move |&b| b == b';' || (side == Side::Request && b == b','))
                .take(limit)
        })
        .filter_map(|pair| {
            let eq = pair.iter().position(|&b| b == b'=')?;
            Some((
                trim(&pair[..eq]),
                trim(pair.get(eq + 1..).unwrap_or_default()),
            ))
        })
}

impl Cookie {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        match self {
            Cookie::Named { side, name, kind } => {
                let Some((buf, headers)) = fields(ctx, *side) else {
                    return false;
                };
                let wanted = name.as_deref().map(str::as_bytes);
                let matching = pairs(buf, headers, *side)
                    .filter(move |(n, _)| wanted.is_none_or(|w| *n == w))
                    .map(|(_, v)| v);
                let wrap = |v: &'a [u8]| match kind {
                    CookieKind::Int => Sample::Int(parse_int_prefix(v).unwrap_or(0)),
                    _ => Sample::str(v),
                };
                match kind {
                    CookieKind::Count => {
                        let n = matching.count();
                        emit(Some(Sample::Int(i64::try_from(n).unwrap_or(i64::MAX))), out)
                    }
                    _ if all => {
                        for value in matching {
                            if out(wrap(value)) {
                                return true;
                            }
                        }
                        false
                    }
                    // Without a name the first cookie is the sample, with one the last
                    // occurrence of that name.
                    _ if wanted.is_none() => emit(matching.take(1).next().map(wrap), out),
                    _ => emit(matching.last().map(wrap), out),
                }
            }
            Cookie::Names { side, delim } => {
                let names = fields(ctx, *side).map(|(buf, headers)| {
                    let mut joined = Vec::new();
                    for (i, (name, _)) in pairs(buf, headers, *side).enumerate() {
                        if i > 0 {
                            joined.push(*delim);
                        }
                        joined.extend_from_slice(name);
                    }
                    Sample::owned_str(joined)
                });
                emit(names, out)
            }
        }
    }
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let side = if def.name.starts_with("res.") || def.name.starts_with("scook") {
        Side::Response
    } else {
        Side::Request
    };
    let base = def
        .name
        .trim_start_matches("req.")
        .trim_start_matches("res.")
        .trim_start_matches('s');
    let name = str_arg(args, 0)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let cookie = match base {
        "cook_names" => Cookie::Names {
            side,
            delim: delim_arg(args, 0, b','),
        },
        "cook_cnt" => Cookie::Named {
            side,
            name,
            kind: CookieKind::Count,
        },
        "cook_val" => Cookie::Named {
            side,
            name,
            kind: CookieKind::Int,
        },
        _ => Cookie::Named {
            side,
            name,
            kind: CookieKind::Value,
        },
    };
    Ok(Fetch::Cookie(cookie))
}

macro_rules! def {
    ($name:literal, $out:ident, $source:ident) => {
        FetchDef {
            name: $name,
            min_args: 0,
            max_args: 1,
            out: SampleType::$out,
            source: Source::$source,
            build,
        }
    };
}

/// The cookie fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    def!("req.cook", Str, RequestHeaders),
    def!("cook", Str, RequestHeaders),
    // Deprecated: the request's cookies, or the response's where only a response is there
    // (`Expr::check_stages` switches it, as it does the bare `hdr`).
    def!("cookie", Str, RequestHeaders),
    def!("req.cook_cnt", Int, RequestHeaders),
    def!("cook_cnt", Int, RequestHeaders),
    def!("req.cook_val", Int, RequestHeaders),
    def!("cook_val", Int, RequestHeaders),
    def!("req.cook_names", Str, RequestHeaders),
    def!("res.cook", Str, ResponseHeaders),
    def!("scook", Str, ResponseHeaders),
    def!("res.cook_cnt", Int, ResponseHeaders),
    def!("scook_cnt", Int, ResponseHeaders),
    def!("res.cook_val", Int, ResponseHeaders),
    def!("scook_val", Int, ResponseHeaders),
    def!("res.cook_names", Str, ResponseHeaders),
];
