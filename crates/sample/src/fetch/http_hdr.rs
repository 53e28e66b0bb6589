//! HTTP header field fetches of requests and responses (configuration.txt §7.3.6 `req.hdr`,
//! `req.fhdr`, `req.hdr_cnt`, `req.hdr_val`, `req.hdr_ip`, `req.hdr_names` and their `res.`
//! twins), and the whole head's fields (`req.hdrs`, `req.hdrs_bin`, `res.hdrs`,
//! `res.hdrs_bin`).
//!
//! The `hdr` family treats every comma outside double quotes as a separator between values
//! (each value trimmed of spaces and tabs), as HAProxy does for list-valued fields; the
//! `fhdr` family returns whole field lines. [`Values`] walks either way without allocating,
//! and the occurrence argument picks from it ([`super::emit_occurrence`]). `hdr`, `hdr_cnt`,
//! `hdr_val` and `hdr_ip` without a prefix read the request, as configuration.txt says the
//! ACL keywords do; `shdr...` are the response's deprecated names.

use std::net::{IpAddr, Ipv4Addr};

use sluice_http::{HeaderSpan, header_name, header_value};

use super::{Fetch, FetchDef, Sink, delim_arg, emit, emit_occurrence};
use crate::args::{int_arg, str_arg};
use crate::context::Context;
use crate::stages::Source;
use crate::value::{Sample, SampleType, parse_int_prefix};

/// Which message a header fetch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The request.
    Request,
    /// The response.
    Response,
}

/// How a header value becomes a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// As a string (`hdr`, `fhdr`).
    Text,
    /// As the integer it starts with (`hdr_val`).
    Int,
    /// As an address (`hdr_ip`).
    Ip,
}

/// A compiled header fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Hdr {
    /// `hdr`, `fhdr`, `hdr_val`, `hdr_ip`.
    Value {
        side: Side,
        name: Option<String>,
        occ: i64,
        full: bool,
        kind: ValueKind,
    },
    /// `hdr_cnt`, `fhdr_cnt`.
    Count {
        side: Side,
        name: Option<String>,
        full: bool,
    },
    /// `hdr_names`.
    Names { side: Side, delim: u8 },
    /// `req.hdrs`, `res.hdrs` (text lines), `req.hdrs_bin`, `res.hdrs_bin` (length-prefixed
    /// names and values).
    Block { side: Side, binary: bool },
}

impl Hdr {
    /// Reads the response's fields from now on.
    pub(crate) fn read_response_side(&mut self) {
        match self {
            Hdr::Value { side, .. } | Hdr::Count { side, .. } | Hdr::Names { side, .. } => {
                *side = Side::Response;
            }
            // Named for their side: never switched.
            Hdr::Block { .. } => {}
        }
    }
}

/// The buffer and field lines of one side.
pub(crate) fn fields(ctx: &dyn Context, side: Side) -> Option<(&[u8], &[HeaderSpan])> {
    match side {
        Side::Request => ctx
            .request()
            .map(|(buf, head)| (buf, head.headers.as_slice())),
        Side::Response => ctx
            .response()
            .map(|(buf, head)| (buf, head.headers.as_slice())),
    }
}

impl Hdr {
    pub fn run<'a>(&'a self, ctx: &'a dyn Context, all: bool, out: Sink<'_, 'a>) -> bool {
        match self {
            Hdr::Value {
                side,
                name,
                occ,
                full,
                kind,
            } => {
                let Some((buf, headers)) = fields(ctx, *side) else {
                    return false;
                };
                let values = || Values::new(buf, headers, name.as_deref(), *full);
                let wrap = |v: &'a [u8]| match kind {
                    ValueKind::Text => Some(Sample::str(v)),
                    ValueKind::Int => Some(Sample::Int(parse_int_prefix(v).unwrap_or(0))),
                    ValueKind::Ip => parse_field_ip(v).map(Sample::Ip),
                };
                emit_occurrence(values, *occ, all, wrap, out)
            }
            Hdr::Count { side, name, full } => {
                let count = fields(ctx, *side).map(|(buf, headers)| {
                    Values::new(buf, headers, name.as_deref(), *full).count()
                });
                emit(
                    count.map(|n| Sample::Int(i64::try_from(n).unwrap_or(i64::MAX))),
                    out,
                )
            }
            Hdr::Names { side, delim } => {
                let names = fields(ctx, *side).map(|(buf, headers)| {
                    let mut joined = Vec::new();
                    for (i, h) in headers.iter().enumerate() {
                        if i > 0 {
                            joined.push(*delim);
                        }
                        joined.extend(header_name(buf, h).iter().map(u8::to_ascii_lowercase));
                    }
                    // HAProxy keeps field names in lower case, and lists them so.
                    Sample::owned_str(joined)
                });
                emit(names, out)
            }
            Hdr::Block { side, binary } => {
                let block = fields(ctx, *side).map(|(buf, headers)| {
                    if *binary {
                        Sample::Bin(std::borrow::Cow::Owned(binary_block(buf, headers)))
                    } else {
                        Sample::owned_str(text_block(buf, headers))
                    }
                });
                emit(block, out)
            }
        }
    }
}

/// The values of the fields named `name` (every field when `None`), in order: whole lines
/// when `full`, else each comma-separated value.
#[derive(Clone)]
pub(crate) struct Values<'a> {
    buf: &'a [u8],
    headers: std::slice::Iter<'a, HeaderSpan>,
    name: Option<&'a [u8]>,
    full: bool,
    /// The rest of the line being split, after a comma.
    pending: Option<&'a [u8]>,
}

impl<'a> Values<'a> {
    pub fn new(
        buf: &'a [u8],
        headers: &'a [HeaderSpan],
        name: Option<&'a str>,
        full: bool,
    ) -> Self {
        Values {
            buf,
            headers: headers.iter(),
            name: name.filter(|n| !n.is_empty()).map(str::as_bytes),
            full,
            pending: None,
        }
    }
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(rest) = self.pending.take() {
                let (value, after) = next_list_value(rest);
                self.pending = after;
                return Some(value);
            }
            let h = self.headers.next()?;
            if let Some(name) = self.name
                && !header_name(self.buf, h).eq_ignore_ascii_case(name)
            {
                continue;
            }
            let value = header_value(self.buf, h);
            if self.full {
                return Some(value);
            }
            self.pending = Some(value);
        }
    }
}

/// Splits the first value off a list-valued field: up to the first comma outside double
/// quotes (a backslash escapes the next byte inside quotes), trimmed of spaces and tabs.
/// Returns the rest after the comma, if there was one.
pub(crate) fn next_list_value(rest: &[u8]) -> (&[u8], Option<&[u8]>) {
    let mut quoted = false;
    let mut escaped = false;
    let mut end = rest.len();
    for (i, &b) in rest.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted {
            match b {
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
        } else if b == b'"' {
            quoted = true;
        } else if b == b',' {
            end = i;
            break;
        }
    }
    let value = trim(&rest[..end]);
    (value, rest.get(end + 1..).filter(|_| end < rest.len()))
}

/// `bytes` without leading and trailing spaces and tabs.
pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let is_space = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes
        .iter()
        .position(|b| !is_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |e| e + 1);
    bytes.get(start..end).unwrap_or_default()
}

/// An address in a header value (`hdr_ip`): an IPv4 address optionally followed by `:port`
/// (dropped), or an IPv6 address.
fn parse_field_ip(value: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(value).ok()?;
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let (addr, port) = text.split_once(':')?;
    let valid_port = !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| p <= 65535);
    if !valid_port {
        return None;
    }
    addr.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// `req.hdrs`, `res.hdrs`: every field as a `name: value` line ending in CRLF, names in lower case as
/// HAProxy keeps them, then the empty line that ends a head.
fn text_block(buf: &[u8], headers: &[HeaderSpan]) -> Vec<u8> {
    let mut block = Vec::new();
    for h in headers {
        block.extend(header_name(buf, h).iter().map(u8::to_ascii_lowercase));
        block.extend_from_slice(b": ");
        block.extend_from_slice(header_value(buf, h));
        block.extend_from_slice(b"\r\n");
    }
    block.extend_from_slice(b"\r\n");
    block
}

/// `req.hdrs_bin`, `res.hdrs_bin`: each name then value as a length (the SPOE variable-length integer) and
/// its bytes, names in lower case, ended by an empty name and an empty value.
fn binary_block(buf: &[u8], headers: &[HeaderSpan]) -> Vec<u8> {
    let mut block = Vec::new();
    for h in headers {
        let name = header_name(buf, h);
        push_varint(&mut block, name.len());
        block.extend(name.iter().map(u8::to_ascii_lowercase));
        let value = header_value(buf, h);
        push_varint(&mut block, value.len());
        block.extend_from_slice(value);
    }
    block.extend_from_slice(&[0, 0]);
    block
}

/// Appends `n` in SPOE's variable-length integer encoding: below 240 one byte; otherwise a
/// first byte carrying the low 4 bits with its top four set, then 7 bits per byte, each but
/// the last with its top bit set, every step taking off what the byte before stood for.
fn push_varint(out: &mut Vec<u8>, n: usize) {
    let mut n = n as u64;
    if n < 240 {
        out.push(n as u8);
        return;
    }
    out.push((n as u8) | 0xF0);
    n = (n - 240) >> 4;
    while n >= 128 {
        out.push((n as u8) | 0x80);
        n = (n - 128) >> 7;
    }
    out.push(n as u8);
}

fn build(def: &FetchDef, args: &[String]) -> Result<Fetch, String> {
    for (prefix, side) in [("req.hdrs", Side::Request), ("res.hdrs", Side::Response)] {
        if let Some(kind) = def.name.strip_prefix(prefix) {
            return Ok(Fetch::Hdr(Hdr::Block {
                side,
                binary: kind == "_bin",
            }));
        }
    }
    let side = if def.name.starts_with("res.") || def.name.starts_with("shdr") {
        Side::Response
    } else {
        Side::Request
    };
    let base = def
        .name
        .trim_start_matches("req.")
        .trim_start_matches("res.")
        .trim_start_matches('s');
    let name = || {
        str_arg(args, 0)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    let hdr = match base {
        "hdr_cnt" | "fhdr_cnt" => Hdr::Count {
            side,
            name: name(),
            full: base == "fhdr_cnt",
        },
        "hdr_names" => Hdr::Names {
            side,
            delim: delim_arg(args, 0, b','),
        },
        _ => {
            let kind = match base {
                "hdr_val" => ValueKind::Int,
                "hdr_ip" => ValueKind::Ip,
                _ => ValueKind::Text,
            };
            let occ = int_arg(args, 1)?.unwrap_or(0);
            Hdr::Value {
                side,
                name: name(),
                occ,
                full: base == "fhdr",
                kind,
            }
        }
    };
    Ok(Fetch::Hdr(hdr))
}

/// The header fetches.
pub(super) static FETCHES: &[FetchDef] = &[
    fetch_def!("req.hdr", 0, 2, Str, RequestHeaders),
    fetch_def!("hdr", 0, 2, Str, RequestHeaders),
    fetch_def!("req.fhdr", 0, 2, Str, RequestHeaders),
    fetch_def!("req.hdr_cnt", 0, 1, Int, RequestHeaders),
    fetch_def!("hdr_cnt", 0, 1, Int, RequestHeaders),
    fetch_def!("req.fhdr_cnt", 0, 1, Int, RequestHeaders),
    fetch_def!("req.hdr_val", 0, 2, Int, RequestHeaders),
    fetch_def!("hdr_val", 0, 2, Int, RequestHeaders),
    fetch_def!("req.hdr_ip", 0, 2, Ip, RequestHeaders),
    fetch_def!("hdr_ip", 0, 2, Ip, RequestHeaders),
    fetch_def!("req.hdr_names", 0, 1, Str, RequestHeaders),
    fetch_def!("req.hdrs", 0, 0, Str, RequestHeaders),
    fetch_def!("req.hdrs_bin", 0, 0, Bin, RequestHeaders),
    fetch_def!("res.hdrs", 0, 0, Str, ResponseHeaders),
    fetch_def!("res.hdrs_bin", 0, 0, Bin, ResponseHeaders),
    fetch_def!("res.hdr", 0, 2, Str, ResponseHeaders),
    fetch_def!("shdr", 0, 2, Str, ResponseHeaders),
    fetch_def!("res.fhdr", 0, 2, Str, ResponseHeaders),
    fetch_def!("res.hdr_cnt", 0, 1, Int, ResponseHeaders),
    fetch_def!("shdr_cnt", 0, 1, Int, ResponseHeaders),
    fetch_def!("res.fhdr_cnt", 0, 1, Int, ResponseHeaders),
    fetch_def!("res.hdr_val", 0, 2, Int, ResponseHeaders),
    fetch_def!("shdr_val", 0, 2, Int, ResponseHeaders),
    fetch_def!("res.hdr_ip", 0, 2, Ip, ResponseHeaders),
    fetch_def!("shdr_ip", 0, 2, Ip, ResponseHeaders),
    fetch_def!("res.hdr_names", 0, 1, Str, ResponseHeaders),
];

#[cfg(test)]
mod tests {
    use super::push_varint;

    /// Reads one SPOE variable-length integer, as an agent would.
    fn read_varint(bytes: &[u8]) -> (u64, usize) {
        let first = u64::from(bytes[0]);
        if first < 240 {
            return (first, 1);
        }
        let (mut value, mut shift, mut used) = (first, 4, 1);
        loop {
            let byte = bytes[used];
            used += 1;
            value += u64::from(byte) << shift;
            shift += 7;
            if byte < 128 {
                return (value, used);
            }
        }
    }

    #[test]
    fn varints_round_trip_at_every_width() {
        for n in (0..5000).chain([239, 240, 2287, 2288, 264_431, 264_432, 1 << 30]) {
            let mut out = Vec::new();
            push_varint(&mut out, n);
            assert_eq!(read_varint(&out), (n as u64, out.len()), "{n}");
        }
        let mut out = Vec::new();
        push_varint(&mut out, 2288);
        assert_eq!(out, [0xF0, 0x80, 0x00]);
    }
}
