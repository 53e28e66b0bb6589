//! HTTP fetches reading the start lines (configuration.txt §7.3.6): method, URL parts, URL
//! parameters, the URL's hashes (`base32`, `url32`) and address (`url_ip`, `url_port`),
//! versions, status, the `capture.req.*` parts and `capture.res.ver` as text, the request
//! buffer's state, and whether a cache built the response (`res.cache_hit`,
//! `res.cache_name`).
//!
//! Everything is sliced out of the buffer the [`Context`] lends, so these fetches return
//! borrowed strings; only `base` and `baseq`, which glue the Host field to the path, build a
//! new one. The URL forms are those `sluice_http` classified: origin (`/p?q`), absolute
//! (`http://h/p?q`), authority (CONNECT) and asterisk (`*`); the last two have no path.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use sluice_balance::hash::{avalanche, sdbm_from};
use sluice_http::{TargetForm, Version, header_values};

use super::{Fetch, FetchDef, Sink, delim_arg, emit};
use crate::args::str_arg;
use crate::context::Context;
use crate::logformat::{LogNumber, LogText};
use crate::stages::Source;
use crate::value::{Sample, SampleType, parse_int_prefix};

/// A compiled start-line fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// `fc_http_major`: the client connection's HTTP encoding, 1 (HTTP/1.x).
    HttpMajor,
    /// `http_first_req`: the request is the connection's first.
    FirstRequest,
    /// `method`.
    Method,
    /// `path`.
    Path,
    /// `pathq`.
    PathQuery,
    /// `query([with_qm])`.
    Query { with_qm: bool },
    /// `url`.
    Url,
    /// `base`.
    Base,
    /// `baseq`.
    BaseQuery,
    /// `base32` (`base32+src` with `src`), and `url32` (`url32+src`) when `query`: the
    /// `base` (`baseq`) value hashed with sdbm and avalanche, as `base,sdbm(1)` gives.
    BaseHash { query: bool, src: bool },
    /// `url_ip`.
    UrlIp,
    /// `url_port`.
    UrlPort,
    /// `url_param`/`urlp` (`as_int` for `urlp_val`).
    UrlParam {
        name: Option<String>,
        delim: u8,
        icase: bool,
        as_int: bool,
    },
    /// `req.ver`.
    ReqVersion,
    /// `capture.req.method`, `capture.req.uri` and `capture.req.ver`: the request line's
    /// parts as text, for log formats.
    Captured(Captured),
    /// `res.ver`.
    ResVersion,
    /// `status`.
    Status,
    /// `res.cache_hit`.
    CacheHit,
    /// `res.cache_name`.
    CacheName,
    /// `req.proto_http`.
    ProtoHttp,
    /// `req.len`.
    ReqLen,
}

impl Line {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        let target = || {
            ctx.request()
                .map(|(buf, head)| (head.target_bytes(buf), head.form))
        };
        let value = match self {
            Line::Method => ctx
                .request()
                .map(|(buf, head)| Sample::Meth(Cow::Borrowed(head.method_bytes(buf)))),
            Line::Path => target()
                .and_then(|(t, form)| path_query(t, form))
                .map(|pq| Sample::str(split_query(pq).0)),
            Line::PathQuery => target()
                .and_then(|(t, form)| path_query(t, form))
                .map(Sample::str),
            Line::Query { with_qm } => target().and_then(|(t, _)| {
                let at = t.iter().position(|&b| b == b'?')?;
                let from = if *with_qm && at + 1 < t.len() {
                    at
                } else {
                    at + 1
                };
                t.get(from..).map(Sample::str)
            }),
            Line::Url => target().map(|(t, _)| Sample::str(t)),
            Line::Base | Line::BaseQuery => ctx.request().and_then(|(buf, head)| {
                let pq = path_query(head.target_bytes(buf), head.form);
                let tail = match self {
                    Line::Base => pq.map(|pq| split_query(pq).0),
                    _ => pq,
                };
                let host = header_values(buf, &head.headers, "host").next();
                match (host, tail) {
                    (Some(host), tail) => {
                        let tail = tail.unwrap_or_default();
                        let mut joined = Vec::with_capacity(host.len() + tail.len());
                        joined.extend_from_slice(host);
                        joined.extend_from_slice(tail);
                        Some(Sample::owned_str(joined))
                    }
                    (None, tail) => tail.map(Sample::str),
                }
            }),
            Line::BaseHash { query, src } => ctx.request().and_then(|(buf, head)| {
                let hash = base_hash(buf, head, *query);
                if !src {
                    return Some(Sample::Int(i64::from(hash)));
                }
                // The hash in network byte order, then the client's address bytes.
                let mut key = hash.to_be_bytes().to_vec();
                match ctx.src()?.ip() {
                    IpAddr::V4(ip) => key.extend_from_slice(&ip.octets()),
                    IpAddr::V6(ip) => key.extend_from_slice(&ip.octets()),
                }
                Some(Sample::Bin(Cow::Owned(key)))
            }),
            Line::UrlIp => target()
                .and_then(|(t, form)| url_address(t, form))
                .map(|addr| Sample::Ip(addr.ip())),
            Line::UrlPort => target()
                .and_then(|(t, form)| url_address(t, form))
                .map(|addr| Sample::Int(i64::from(addr.port()))),
            Line::UrlParam {
                name,
                delim,
                icase,
                as_int,
            } => {
                let Some((url, _)) = target() else {
                    return false;
                };
                let wanted = name.as_deref().map(str::as_bytes);
                for (param, value) in url_params(url, *delim) {
                    let hit = match wanted {
                        None => true,
                        Some(w) if *icase => param.eq_ignore_ascii_case(w),
                        Some(w) => param == w,
                    };
                    if hit {
                        let sample = if *as_int {
                            Sample::Int(parse_int_prefix(value).unwrap_or(0))
                        } else {
                            Sample::str(value)
                        };
                        // The first occurrence is the sample; an ACL sees them all.
                        let stop = out(sample);
                        if stop || !all {
                            return stop;
                        }
                    }
                }
                return false;
            }
            Line::ReqVersion => ctx.request().map(|(_, head)| version(head.version)),
            Line::Captured(part) => match part {
                Captured::Method => ctx
                    .request()
                    .map(|(buf, head)| Sample::str(head.method_bytes(buf))),
                Captured::Uri => ctx
                    .request()
                    .map(|(buf, head)| Sample::str(head.target_bytes(buf))),
                Captured::RequestVersion => ctx
                    .request()
                    .map(|(_, head)| Sample::str(head.version.as_bytes())),
                // In a log line the response head is gone: the version its record kept.
                Captured::ResponseVersion => ctx
                    .response()
                    .map(|(_, head)| head.version.as_bytes())
                    .or_else(|| ctx.log_facts()?.text(LogText::ResponseVersion))
                    .map(Sample::str),
            },
            Line::ResVersion => ctx.response().map(|(_, head)| version(head.version)),
            // In a log line the response head is gone: the status the log reports (`%ST`)
            // when a server's response came; none for the proxy's own answers, as from
            // HAProxy, whose `status` reads only a server's.
            Line::Status => ctx
                .response()
                .map(|(_, head)| i64::from(head.status))
                .or_else(|| {
                    let facts = ctx.log_facts()?;
                    facts.text(LogText::ResponseVersion)?;
                    facts.number(LogNumber::Status)
                })
                .map(Sample::Int),
            Line::CacheHit => Some(Sample::Bool(ctx.cache_used().is_some())),
            // The empty string when no cache built the response.
            Line::CacheName => Some(Sample::str(ctx.cache_used().unwrap_or("").as_bytes())),
            // During content inspection, a request not complete yet may still become one:
            // no answer until the inspection is over (HAProxy's "may change").
            Line::ProtoHttp => match ctx.request() {
                Some(_) => Some(Sample::Bool(true)),
                None if ctx.inspection_ended() => Some(Sample::Bool(false)),
                // Bytes no request can start with (binary data, a TLS hello) settle it at
                // once, as in HAProxy: only a valid beginning is worth waiting for.
                None => ctx
                    .request_payload()
                    .filter(|bytes| !starts_like_a_request(bytes))
                    .map(|_| Sample::Bool(false)),
            },
            // Sluice speaks HTTP/1 to clients: the major version of its encoding is 1.
            Line::HttpMajor => ctx.request().map(|_| Sample::Int(1)),
            Line::FirstRequest => ctx.first_request().map(Sample::Bool),
            Line::ReqLen => ctx
                .request_buffered()
                .or_else(|| ctx.request_payload().map(<[u8]>::len))
                .map(|n| Sample::Int(i64::try_from(n).unwrap_or(i64::MAX))),
        };
        emit(value, out)
    }
}

/// The hash of `base32` (`url32` when `query`): sdbm over the first Host value then the path
/// (with its query when `query`), then avalanche. Without a Host or a path, the other part
/// alone is hashed, as `base` returns it alone.
fn base_hash(buf: &[u8], head: &sluice_http::RequestHead, query: bool) -> u32 {
    let host = header_values(buf, &head.headers, "host")
        .next()
        .unwrap_or_default();
    let pq = path_query(head.target_bytes(buf), head.form).unwrap_or_default();
    let tail = if query { pq } else { split_query(pq).0 };
    avalanche(sdbm_from(sdbm_from(0, host), tail))
}

/// The address of an absolute-form target whose host is an IPv4 literal (`url_ip`,
/// `url_port`): its port, or the scheme's (80 for `http`, 443 for `https`). Other targets,
/// host names and IPv6 literals give nothing, as from HAProxy.
fn url_address(target: &[u8], form: TargetForm) -> Option<SocketAddr> {
    if form != TargetForm::Absolute {
        return None;
    }
    let scheme_end = target.windows(3).position(|w| w == b"://")?;
    let default_port = match &target[..scheme_end] {
        s if s.eq_ignore_ascii_case(b"http") => 80,
        s if s.eq_ignore_ascii_case(b"https") => 443,
        _ => return None,
    };
    let rest = target.get(scheme_end + 3..)?;
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = std::str::from_utf8(&rest[..end]).ok()?;
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, port.parse::<u16>().ok()?),
        None => (authority, default_port),
    };
    let ip = host.parse::<Ipv4Addr>().ok()?;
    Some(SocketAddr::new(IpAddr::V4(ip), port))
}

/// `req.ver`/`res.ver` values: `major.minor`.
fn version<'a>(v: Version) -> Sample<'a> {
    Sample::str(match v {
        Version::Http10 => b"1.0",
        Version::Http11 => b"1.1",
    })
}

/// The path and query of a target, from the first `/` of the path: the whole origin form,
/// the part after the authority of an absolute form; `None` when there is no path
/// (`http://host`, `*`, a CONNECT authority), where HAProxy's `path` fails too.
pub(crate) fn path_query(target: &[u8], form: TargetForm) -> Option<&[u8]> {
    match form {
        TargetForm::Origin => Some(target),
        TargetForm::Absolute => {
            let scheme_end = target.windows(3).position(|w| w == b"://")?;
            let rest = target.get(scheme_end + 3..)?;
            let end = rest.iter().position(|&b| matches!(b, b'/' | b'?' | b'#'))?;
            (rest.get(end) == Some(&b'/'))
                .then(|| rest.get(end..))
                .flatten()
        }
        TargetForm::Authority | TargetForm::Asterisk => None,
    }
}

/// Splits `path?query` into the path and the query (without its `?`).
pub(crate) fn split_query(pq: &[u8]) -> (&[u8], Option<&[u8]>) {
    match pq.iter().position(|&b| b == b'?') {
        Some(at) => (&pq[..at], pq.get(at + 1..)),
        None => (pq, None),
    }
}

/// The `name=value` parameters of a URL: they start after the first `?` (or `delim`) and
/// are separated by `&`, `;` or `delim`; parameters without `=` are skipped, as HAProxy's
/// `url_param` skips them.
pub(crate) fn url_params(url: &[u8], delim: u8) -> impl Iterator<Item = (&[u8], &[u8])> {
    let start = url
        .iter()
        .position(|&b| b == b'?' || b == delim)
        .map(|at| at + 1);
    let query = start.and_then(|s| url.get(s..)).unwrap_or_default();
    let empty = start.is_none();
    query
        .split(move |&b| b == b'&' || b == b';' || b == delim)
        .filter(move |_| !empty)
        .filter_map(|param| {
            let eq = param.iter().position(|&b| b == b'=')?;
            Some((&param[..eq], param.get(eq + 1..).unwrap_or_default()))
        })
}

/// A part of a start line that a `capture.*` fetch returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Captured {
    /// The request's method.
    Method,
    /// The request's target, as received.
    Uri,
    /// The request's version, `HTTP/1.1`.
    RequestVersion,
    /// The response's version, `HTTP/1.1`.
    ResponseVersion,
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let line = match def.name {
        "method" => Line::Method,
        "path" => Line::Path,
        "pathq" => Line::PathQuery,
        "query" => match str_arg(args, 0) {
            None => Line::Query { with_qm: false },
            Some("with_qm") => Line::Query { with_qm: true },
            Some(other) => {
                return Err(format!(
                    "unknown option '{other}' (only 'with_qm' is supported)"
                ));
            }
        },
        "url" => Line::Url,
        "base" => Line::Base,
        "baseq" => Line::BaseQuery,
        "base32" | "base32+src" | "url32" | "url32+src" => Line::BaseHash {
            query: def.name.starts_with("url"),
            src: def.name.ends_with("+src"),
        },
        "url_ip" => Line::UrlIp,
        "url_port" => Line::UrlPort,
        "url_param" | "urlp" | "urlp_val" => {
            let name = str_arg(args, 0)
                .filter(|n| !n.is_empty())
                .map(str::to_string);
            let icase = match str_arg(args, 2) {
                None | Some("") => false,
                Some("i") => true,
                Some(other) => {
                    return Err(format!(
                        "invalid third argument '{other}' (only 'i' is supported)"
                    ));
                }
            };
            Line::UrlParam {
                name,
                delim: delim_arg(args, 1, b'?'),
                icase,
                as_int: def.name == "urlp_val",
            }
        }
        "req.ver" | "req_ver" => Line::ReqVersion,
        "capture.req.method" => Line::Captured(Captured::Method),
        "capture.req.uri" => Line::Captured(Captured::Uri),
        "capture.req.ver" => Line::Captured(Captured::RequestVersion),
        "capture.res.ver" => Line::Captured(Captured::ResponseVersion),
        "res.ver" | "resp_ver" => Line::ResVersion,
        "status" => Line::Status,
        "res.cache_hit" => Line::CacheHit,
        "res.cache_name" => Line::CacheName,
        "req.proto_http" | "req_proto_http" => Line::ProtoHttp,
        "fc_http_major" => Line::HttpMajor,
        "http_first_req" => Line::FirstRequest,
        _ => Line::ReqLen,
    };
    Ok(Fetch::Line(line))
}

/// True when `bytes` may be the beginning of an HTTP/1 request: nothing yet, or a method (a
/// token, RFC 9110 §5.6.2) or its first characters, then a space. Binary data and TLS hellos
/// are not; what comes after the method is left to the request parser. (Deliberately not the
/// parser itself: a second caller of it here changed how the build inlines it on the data
/// path, 3% more instructions per request.)
fn starts_like_a_request(bytes: &[u8]) -> bool {
    let method_end = bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len());
    let method = &bytes[..method_end];
    let is_token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    bytes.is_empty() || (!method.is_empty() && method.iter().all(is_token))
}

/// The start-line fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    fetch_def!("method", 0, 0, Meth, Request),
    fetch_def!("path", 0, 0, Str, RequestHeaders),
    fetch_def!("pathq", 0, 0, Str, RequestHeaders),
    fetch_def!("query", 0, 1, Str, RequestHeaders),
    fetch_def!("url", 0, 0, Str, RequestHeaders),
    fetch_def!("base", 0, 0, Str, RequestHeaders),
    fetch_def!("baseq", 0, 0, Str, RequestHeaders),
    fetch_def!("base32", 0, 0, Int, RequestHeaders),
    fetch_def!("base32+src", 0, 0, Bin, RequestHeaders),
    fetch_def!("url32", 0, 0, Int, RequestHeaders),
    fetch_def!("url32+src", 0, 0, Bin, RequestHeaders),
    fetch_def!("url_ip", 0, 0, Ip, RequestHeaders),
    fetch_def!("url_port", 0, 0, Int, RequestHeaders),
    fetch_def!("url_param", 0, 3, Str, RequestHeaders),
    fetch_def!("urlp", 0, 3, Str, RequestHeaders),
    fetch_def!("urlp_val", 0, 3, Int, RequestHeaders),
    fetch_def!("req.ver", 0, 0, Str, Request),
    fetch_def!("req_ver", 0, 0, Str, Request),
    fetch_def!("res.ver", 0, 0, Str, Response),
    fetch_def!("capture.req.method", 0, 0, Str, Request),
    fetch_def!("capture.req.uri", 0, 0, Str, Request),
    fetch_def!("capture.req.ver", 0, 0, Str, Request),
    fetch_def!("capture.res.ver", 0, 0, Str, Response),
    fetch_def!("resp_ver", 0, 0, Str, Response),
    fetch_def!("status", 0, 0, Int, Response),
    fetch_def!("res.cache_hit", 0, 0, Bool, Response),
    fetch_def!("res.cache_name", 0, 0, Str, Response),
    fetch_def!("req.proto_http", 0, 0, Bool, RequestBuffer),
    fetch_def!("req_proto_http", 0, 0, Bool, RequestBuffer),
    fetch_def!("req.len", 0, 0, Int, RequestBuffer),
    fetch_def!("req_len", 0, 0, Int, RequestBuffer),
    fetch_def!("fc_http_major", 0, 0, Int, Request),
    fetch_def!("http_first_req", 0, 0, Bool, Request),
];
