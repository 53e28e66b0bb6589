//! Captures of refused request and response heads, for `show errors`.
//!
//! When a head fails to parse, the buffer is copied into the proxy's latest capture
//! (`sluice_runtime::errors`) with the offset of the offending byte. The parser does not
//! report offsets, so the offset is found by parsing ever shorter prefixes: the first byte
//! whose arrival turns "incomplete" into "invalid" is the one at fault (a binary search, a
//! few parses of one head, only for refused messages). A message refused for something
//! seen only once complete (a limit, conflicting framing) points at its last byte.

use sluice_http::head::{Limits, parse_request, parse_response};
use sluice_runtime::errors::Capture;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server};
use sluice_runtime::stats::proxy_iid;
use std::net::SocketAddr;
use std::time::SystemTime;

/// The offset of the byte at which `invalid` first holds for a prefix of `data`; `None`
/// when the whole of `data` is not invalid.
fn error_position(data: &[u8], invalid: impl Fn(&[u8]) -> bool) -> Option<usize> {
    if !invalid(data) {
        return None;
    }
    // The smallest length whose prefix is invalid; the byte at fault is its last one.
    let (mut lo, mut hi) = (0, data.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if invalid(&data[..mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo.saturating_sub(1))
}

/// The request line is refused whole when it ends; like HAProxy, point inside it: at the
/// version when what follows the target is not `HTTP/x.y`.
fn in_request_line(data: &[u8], at: usize) -> usize {
    let line_end = data
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(data.len());
    if at != line_end && at != line_end + 1 {
        return at;
    }
    let line = &data[..line_end];
    let mut spaces = line.iter().enumerate().filter(|(_, b)| **b == b' ');
    let (Some(_), Some((second, _))) = (spaces.next(), spaces.next()) else {
        return at;
    };
    let version = &line[second + 1..];
    let valid = version.len() == 8
        && version.starts_with(b"HTTP/")
        && version[5].is_ascii_digit()
        && version[6] == b'.'
        && version[7].is_ascii_digit();
    if valid { at } else { second + 1 }
}

/// Inside a header name, the parser may only object a byte or two after a character that
/// cannot be in a name; point at that character, as HAProxy does.
fn in_header_name(data: &[u8], at: usize) -> usize {
    let Some(start) = data[..at.min(data.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|nl| nl + 1)
    else {
        return at;
    };
    let upto = &data[start..=at.min(data.len() - 1)];
    if upto.contains(&b':') {
        return at;
    }
    let is_tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    upto.iter()
        .position(|b| !is_tchar(b))
        .map_or(at, |i| start + i)
}

fn request_invalid(limits: &Limits) -> impl Fn(&[u8]) -> bool + '_ {
    move |b| parse_request(b, limits).is_err()
}

/// Records `data`, a request the frontend refused, if it does not parse.
pub(crate) fn request(
    process: &Process,
    frontend: &Frontend,
    client: Option<SocketAddr>,
    (data, bufsize): (&[u8], usize),
    limits: &Limits,
    backend: Option<&Backend>,
) {
    if data.is_empty() {
        return;
    }
    let error_at = error_position(data, request_invalid(limits)).map_or(data.len() - 1, |at| {
        in_header_name(data, in_request_line(data, at))
    });
    frontend.invalid_request.record(Capture {
        when: SystemTime::now(),
        event: process.error_events.next(),
        client,
        peer: backend.map(|b| (b.plan.id.name.clone(), proxy_iid(b.plan.id.uid))),
        server: None,
        bufsize,
        data: data.to_vec(),
        error_at,
    });
}

/// Records `data`, a response head that did not parse; nothing when it is only
/// incomplete (a server that closed early).
pub(crate) fn response(
    process: &Process,
    (frontend, backend, server): (&Frontend, &Backend, &Server),
    client: Option<SocketAddr>,
    (data, bufsize): (&[u8], usize),
    limits: &Limits,
) {
    let Some(error_at) = error_position(data, |b| parse_response(b, limits).is_err()) else {
        return;
    };
    let error_at = in_header_name(data, error_at);
    backend.invalid_response.record(Capture {
        when: SystemTime::now(),
        event: process.error_events.next(),
        client,
        peer: Some((
            frontend.plan.id.name.clone(),
            proxy_iid(frontend.plan.id.uid),
        )),
        server: Some((server.conf.name.clone(), server.id)),
        bufsize,
        data: data.to_vec(),
        error_at,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_point_at_the_offending_byte() {
        let limits = Limits::default();
        let at = |text: &[u8]| {
            error_position(text, request_invalid(&limits)).map(|at| in_request_line(text, at))
        };
        // HAProxy reports 7 for this one: the parser expected the version after "/a ".
        assert_eq!(at(b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n"), Some(7));
        assert_eq!(at(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
        let response = |text: &[u8]| {
            error_position(text, |b| parse_response(b, &limits).is_err())
                .map(|at| in_header_name(text, at))
        };
        // And 20 for this one: the space in the header name.
        assert_eq!(
            response(b"HTTP/1.1 200 OK\r\nBad Header\r\nContent-Length: 0\r\n\r\n"),
            Some(20)
        );
    }
}
