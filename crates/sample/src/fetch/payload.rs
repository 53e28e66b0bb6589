//! Fetches over raw request bytes (configuration.txt §7.3.5 and §7.3.6): `req.payload`,
//! `req.payload_lv`, the TLS hello fetches (`req.ssl_sni`...) for `tcp-request content`
//! rules, and the HTTP body fetches (`req.body`, `req.body_param`..., and the response's
//! `res.body`, `res.body_len`, `res.body_size`).
//!
//! The payload fetches read [`Context::request_payload`], the bytes buffered from the
//! client so far; the body fetches read [`Context::request_body`] and
//! [`Context::response_body`]. A fetch whose bytes are
//! not all there yet produces no sample, so a content rule waiting for them
//! (`tcp-request inspect-delay`) keeps waiting. The TLS parsing itself lives in
//! `tls_hello`; everything here only slices.

use std::borrow::Cow;

use sluice_http::{header_name, header_value};

use super::tls_hello::{self, ClientHello};
use super::{Fetch, FetchDef, Sink, emit};
use crate::args::{bad_arg, int_arg, str_arg};
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType, parse_int_exact};

/// A compiled payload, TLS or body fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// `req.payload(offset,length)`; length 0 means "to the end".
    Block { offset: usize, length: usize },
    /// `req.payload_lv(offset1,length[,offset2])`.
    LengthValue(LengthValue),
    /// `req.ssl_hello_type`.
    HelloType,
    /// `req.ssl_ver`.
    SslVersion,
    /// `req.ssl_sni`.
    Sni,
    /// `req.ssl_alpn`.
    Alpn,
    /// `req.ssl_ec_ext`.
    EcExtension,
    /// `req.ssl_st_ext`.
    TicketExtension,
    /// `req.body`.
    Body,
    /// `req.body_len`.
    BodyLen,
    /// `req.body_size`.
    BodySize,
    /// `res.body`.
    ResponseBody,
    /// `res.body_len`.
    ResponseBodyLen,
    /// `res.body_size`.
    ResponseBodySize,
    /// `req.body_param([name[,i]])`.
    BodyParam { name: Option<String>, icase: bool },
    /// `req.rdp_cookie([name])`: the RDP cookie's value.
    RdpCookie { name: Option<String> },
    /// `req.rdp_cookie_cnt([name])`: 1 if the request has that RDP cookie, else 0.
    RdpCookieCount { name: Option<String> },
}

/// Where `req.payload_lv`'s block starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataOffset {
    /// Right after the length field (no third argument).
    AfterLength,
    /// At this offset in the buffer.
    Absolute(usize),
    /// This many bytes after (or before) the end of the length field (`+n` / `-n`).
    Relative(i64),
}

fn int<'a>(n: usize) -> Sample<'a> {
    Sample::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

impl Payload {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        let payload = || ctx.request_payload();
        let hello = || payload().and_then(ClientHello::parse);
        let value = match self {
            Payload::Block { offset, length } => payload().and_then(|buf| {
                let block = if *length == 0 {
                    buf.get(*offset..)?
                } else {
                    buf.get(*offset..offset.checked_add(*length)?)?
                };
                Some(Sample::Bin(Cow::Borrowed(block)))
            }),
            Payload::LengthValue(block) => payload().and_then(|buf| block.read(buf)),
            Payload::RdpCookie { name } => {
                payload().and_then(|buf| match crate::rdp::rdp_cookie(buf, name.as_deref()) {
                    crate::rdp::RdpCookie::Found(value) => Some(Sample::str(value)),
                    _ => None,
                })
            }
            // No sample while the packet is incomplete: a rule waits for the rest.
            Payload::RdpCookieCount { name } => {
                payload().and_then(|buf| match crate::rdp::rdp_cookie(buf, name.as_deref()) {
                    crate::rdp::RdpCookie::Found(_) => Some(Sample::Int(1)),
                    crate::rdp::RdpCookie::Absent => Some(Sample::Int(0)),
                    crate::rdp::RdpCookie::Incomplete => None,
                })
            }
            Payload::HelloType => payload().and_then(tls_hello::hello_type).map(Sample::Int),
            Payload::SslVersion => payload().and_then(tls_hello::version).map(Sample::Int),
            Payload::Sni => hello().and_then(|h| h.server_name()).map(Sample::str),
            Payload::Alpn => {
                let Some(h) = hello() else {
                    return false;
                };
                // One protocol per value: the first as a sample, each for an ACL.
                for name in h.alpn() {
                    if out(Sample::str(name)) || !all {
                        return true;
                    }
                }
                return false;
            }
            Payload::EcExtension => hello().map(|h| Sample::Bool(h.has_supported_groups())),
            Payload::TicketExtension => hello().map(|h| Sample::Int(h.session_ticket())),
            Payload::Body => ctx.request_body().map(Sample::Bin),
            Payload::BodyLen => ctx.request_body().map(|b| int(b.len())),
            Payload::BodySize => ctx
                .request()
                .and_then(|(buf, head)| content_length(buf, &head.headers))
                .map(Sample::Int)
                .or_else(|| ctx.request_body().map(|b| int(b.len()))),
            Payload::ResponseBody => ctx.response_body().map(Sample::Bin),
            Payload::ResponseBodyLen => ctx.response_body().map(|b| int(b.len())),
            Payload::ResponseBodySize => ctx
                .response()
                .and_then(|(buf, head)| content_length(buf, &head.headers))
                .map(Sample::Int)
                .or_else(|| ctx.response_body().map(|b| int(b.len()))),
            Payload::BodyParam { name, icase } => {
                let name = name.as_deref();
                // A body decoded from chunks is owned: its values are copied out.
                return match ctx.request_body() {
                    None => false,
                    Some(Cow::Borrowed(body)) => params_named(body, name, *icase)
                        .any(|value| out(Sample::str(value)) || !all),
                    Some(Cow::Owned(body)) => params_named(&body, name, *icase)
                        .any(|value| out(Sample::owned_str(value.to_vec())) || !all),
                };
            }
        };
        emit(value, out)
    }
}

/// The values of the form parameters of `body` called `name` (every one without a name),
/// in order.
fn params_named<'b>(
    body: &'b [u8],
    name: Option<&'b str>,
    icase: bool,
) -> impl Iterator<Item = &'b [u8]> {
    form_params(body)
        .filter(move |(key, _)| match name {
            None => true,
            Some(n) if icase => key.eq_ignore_ascii_case(n.as_bytes()),
            Some(n) => *key == n.as_bytes(),
        })
        .map(|(_, value)| value)
}

/// A length-prefixed block of a buffer (`req.payload_lv`, `res.payload_lv`): a big-endian
/// length of `len_size` bytes at `len_offset`, then that many bytes where `data` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LengthValue {
    len_offset: usize,
    len_size: usize,
    data: DataOffset,
}

impl LengthValue {
    /// From the fetch's arguments: where the length field is, its size (1 to 8 bytes), and
    /// where the data starts.
    pub(super) fn parse(args: &[String]) -> Result<LengthValue, String> {
        let len_size = offset_arg(args, 1)?;
        if !(1..=8).contains(&len_size) {
            return Err(format!(
                "length size must be between 1 and 8 bytes (got {len_size})"
            ));
        }
        let data = match str_arg(args, 2) {
            None | Some("") => DataOffset::AfterLength,
            Some(text) if text.starts_with(['+', '-']) => {
                let digits = text.strip_prefix('+').unwrap_or(text);
                DataOffset::Relative(
                    parse_int_exact(digits).ok_or_else(|| bad_arg(text, "integer", 2))?,
                )
            }
            Some(_) => DataOffset::Absolute(offset_arg(args, 2)?),
        };
        Ok(LengthValue {
            len_offset: offset_arg(args, 0)?,
            len_size,
            data,
        })
    }

    /// The block, once `buf` holds all of it.
    pub(super) fn read<'a>(&self, buf: &'a [u8]) -> Option<Sample<'a>> {
        let LengthValue {
            len_offset,
            len_size,
            data,
        } = *self;
        let field = buf.get(len_offset..len_offset.checked_add(len_size)?)?;
        let length = field.iter().try_fold(0usize, |acc, &b| {
            acc.checked_mul(256)?.checked_add(usize::from(b))
        })?;
        let after = len_offset.checked_add(len_size)?;
        let start = match data {
            DataOffset::AfterLength => after,
            DataOffset::Absolute(at) => at,
            DataOffset::Relative(delta) => {
                let after = i64::try_from(after).ok()?;
                usize::try_from(after.checked_add(delta)?).ok()?
            }
        };
        buf.get(start..start.checked_add(length)?)
            .map(|b| Sample::Bin(Cow::Borrowed(b)))
    }
}

/// The message's announced body length (`*.body_size`), when it has one that is a number.
fn content_length(buf: &[u8], headers: &[sluice_http::HeaderSpan]) -> Option<i64> {
    headers
        .iter()
        .find(|h| header_name(buf, h).eq_ignore_ascii_case(b"content-length"))
        .and_then(|h| std::str::from_utf8(header_value(buf, h)).ok())
        .and_then(parse_int_exact)
}

/// The `name=value` pairs of a url-encoded form, separated by `&`; parts without `=` are
/// skipped. Values are returned as sent (no URL decoding, §7.3.6 `req.body_param`).
fn form_params(body: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    body.split(|&b| b == b'&').filter_map(|part| {
        let at = part.iter().position(|&b| b == b'=')?;
        Some((part.get(..at)?, part.get(at + 1..)?))
    })
}

/// A non-negative integer argument that fits in memory.
pub(super) fn offset_arg(args: &[String], index: usize) -> Result<usize, String> {
    let text = str_arg(args, index).unwrap_or("");
    int_arg(args, index)?
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad_arg(text, "positive integer", index))
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    let payload = match def.name {
        "req.payload" | "payload" => Payload::Block {
            offset: offset_arg(args, 0)?,
            length: offset_arg(args, 1)?,
        },
        "req.payload_lv" | "payload_lv" => Payload::LengthValue(LengthValue::parse(args)?),
        "req.ssl_hello_type" | "req_ssl_hello_type" => Payload::HelloType,
        "req.ssl_ver" | "req_ssl_ver" => Payload::SslVersion,
        "req.ssl_sni" | "req_ssl_sni" => Payload::Sni,
        "req.ssl_alpn" => Payload::Alpn,
        "req.ssl_ec_ext" => Payload::EcExtension,
        "req.ssl_st_ext" => Payload::TicketExtension,
        "req.rdp_cookie" | "rdp_cookie" => Payload::RdpCookie {
            name: str_arg(args, 0)
                .filter(|n| !n.is_empty())
                .map(str::to_string),
        },
        "req.rdp_cookie_cnt" | "rdp_cookie_cnt" => Payload::RdpCookieCount {
            name: str_arg(args, 0)
                .filter(|n| !n.is_empty())
                .map(str::to_string),
        },
        "req.body" => Payload::Body,
        "req.body_len" => Payload::BodyLen,
        "req.body_size" => Payload::BodySize,
        "res.body" => Payload::ResponseBody,
        "res.body_len" => Payload::ResponseBodyLen,
        "res.body_size" => Payload::ResponseBodySize,
        _ => {
            let icase = match str_arg(args, 1) {
                None | Some("") => false,
                Some("i") => true,
                Some(other) => return Err(bad_arg(other, "'i'", 1)),
            };
            Payload::BodyParam {
                name: str_arg(args, 0)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
                icase,
            }
        }
    };
    Ok(Fetch::Payload(payload))
}

macro_rules! def {
    ($name:literal, $min:literal, $max:literal, $out:ident) => {
        FetchDef {
            name: $name,
            min_args: $min,
            max_args: $max,
            out: SampleType::$out,
            source: Source::RequestBuffer,
            build,
        }
    };
}

/// The payload, TLS hello and body fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    def!("req.payload", 2, 2, Bin),
    def!("payload", 2, 2, Bin),
    def!("req.payload_lv", 2, 3, Bin),
    def!("payload_lv", 2, 3, Bin),
    def!("req.ssl_hello_type", 0, 0, Int),
    def!("req_ssl_hello_type", 0, 0, Int),
    def!("req.ssl_ver", 0, 0, Int),
    def!("req_ssl_ver", 0, 0, Int),
    def!("req.ssl_sni", 0, 0, Str),
    def!("req_ssl_sni", 0, 0, Str),
    def!("req.ssl_alpn", 0, 0, Str),
    def!("req.ssl_ec_ext", 0, 0, Bool),
    def!("req.ssl_st_ext", 0, 0, Int),
    def!("req.rdp_cookie", 0, 1, Str),
    def!("rdp_cookie", 0, 1, Str),
    def!("req.rdp_cookie_cnt", 0, 1, Int),
    def!("rdp_cookie_cnt", 0, 1, Int),
    def!("req.body", 0, 0, Bin),
    def!("req.body_len", 0, 0, Int),
    def!("req.body_size", 0, 0, Int),
    def!("req.body_param", 0, 2, Str),
    response_body_def("res.body", SampleType::Bin),
    response_body_def("res.body_len", SampleType::Int),
    response_body_def("res.body_size", SampleType::Int),
];

/// A response body fetch: `http-response` rules only.
const fn response_body_def(name: &'static str, out: SampleType) -> FetchDef {
    FetchDef {
        name,
        min_args: 0,
        max_args: 0,
        out,
        source: Source::ResponseBody,
        build,
    }
}
