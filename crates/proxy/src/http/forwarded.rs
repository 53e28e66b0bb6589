//! `option forwarded` (configuration.txt §4.2, RFC 7239): the `forwarded` field a backend adds
//! to the requests it sends, naming the protocol, the host asked for, the proxy's address
//! (`by`) and the client's (`for`), each from the connection or from an expression.
//!
//! As HAProxy (2.8 and later) writes it: parameters in the order `proto`, `host`, `by`, `for`,
//! separated by `;`; `host` always quoted, and kept empty unless its value is a valid host
//! (letters, digits and dots, or a bracketed IPv6 address, with an optional port); a node
//! quoted when it has a port or is an IPv6 address; a computed node that is no address is
//! written as an obfuscated identifier (`_` and the value) when its characters allow it, else
//! `unknown`. A request that already carries `forwarded` elements, all valid in the sense
//! HAProxy checks (only `for`, `by`, `host`, `proto`, each once, well formed), gets its element
//! appended to them (HAProxy extends the last field in place; Sluice sends the elements in one
//! field, in the same order, which RFC 9110 §5.3 makes equivalent); otherwise a field of its
//! own is added beside them.

use crate::stream_context::StreamView;
use sluice_config::http_options::{Forwarded, ForwardedValue};
use sluice_sample::{Sample, SampleType};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

/// Writes the element `option` asks for to `out`. `host` is the request's first Host value.
pub fn element(option: &Forwarded, view: &StreamView<'_>, host: Option<&[u8]>, out: &mut Vec<u8>) {
    let endpoints = view.endpoints;
    let sep = |out: &mut Vec<u8>| {
        if !out.is_empty() {
            out.push(b';');
        }
    };
    if option.proto {
        sep(out);
        // Sluice's clients come in clear.
        out.extend_from_slice(b"proto=http");
    }
    if let Some(value) = &option.host {
        sep(out);
        out.extend_from_slice(b"host=\"");
        let text = match value {
            ForwardedValue::Original => host.map(<[u8]>::to_vec),
            ForwardedValue::Expr(expr) => string_of(expr, view),
        };
        if let Some(text) = text.filter(|t| whole(t, |s| host_token(s, true))) {
            out.extend_from_slice(&text);
        }
        out.push(b'"');
    }
    if let Some(name) = &option.by {
        sep(out);
        out.extend_from_slice(b"by=");
        node(out, view, endpoints.local, name, option.by_port.as_ref());
    }
    if let Some(name) = &option.for_node {
        sep(out);
        out.extend_from_slice(b"for=");
        node(out, view, endpoints.client, name, option.for_port.as_ref());
    }
}

/// A `for` or `by` node: its name (from `addr` or an expression, `unknown` if neither gives
/// one) and, when asked for, its port; quoted when it has a port or an IPv6 name.
fn node(
    out: &mut Vec<u8>,
    view: &StreamView<'_>,
    addr: Option<SocketAddr>,
    name: &ForwardedValue,
    port: Option<&ForwardedValue>,
) {
    let start = out.len();
    let quoted = port.is_some();
    if quoted {
        out.push(b'"');
    }
    let name_at = out.len();
    match name {
        ForwardedValue::Original => match addr.map(|a| a.ip()) {
            Some(IpAddr::V4(ip)) => {
                let _ = write!(out, "{ip}");
            }
            Some(IpAddr::V6(ip)) => ipv6(out, ip, quoted),
            None => {}
        },
        ForwardedValue::Expr(expr) => match expr.eval(view) {
            Some(Sample::Ip(IpAddr::V6(ip))) => ipv6(out, ip, quoted),
            sample => {
                let text = sample.and_then(|s| match s.cast(SampleType::Str) {
                    Some(Sample::Str(text)) => Some(text.into_owned()),
                    _ => None,
                });
                if let Some(text) = text {
                    match parse_nodename(&text) {
                        Some((NodeName::Ipv6(ip), [])) => ipv6(out, ip, quoted),
                        Some((NodeName::Plain, [])) => out.extend_from_slice(&text),
                        _ if obfuscated_len(&text) == text.len() && !text.is_empty() => {
                            out.push(b'_');
                            out.extend_from_slice(&text);
                        }
                        _ => {}
                    }
                }
            }
        },
    }
    if out.len() == name_at {
        out.extend_from_slice(b"unknown");
    }
    if let Some(port) = port {
        out.push(b':');
        let port_at = out.len();
        match port {
            ForwardedValue::Original => {
                if let Some(addr) = addr {
                    let _ = write!(out, "{}", addr.port());
                }
            }
            ForwardedValue::Expr(expr) => {
                let text = expr.eval(view).and_then(|s| match s.cast(SampleType::Str) {
                    Some(Sample::Str(text)) => Some(text.into_owned()),
                    _ => None,
                });
                if let Some(text) = text {
                    if whole(&text, nodeport) {
                        out.extend_from_slice(&text);
                    } else if !text.is_empty() && obfuscated_len(&text) == text.len() {
                        out.push(b'_');
                        out.extend_from_slice(&text);
                    }
                }
            }
        }
        if out.len() == port_at {
            // No port to give: no colon either.
            out.pop();
        }
    }
    if out.get(start) == Some(&b'"') {
        out.push(b'"');
    }
}

/// An IPv6 node name: bracketed, and quoted unless the node already is.
fn ipv6(out: &mut Vec<u8>, ip: std::net::Ipv6Addr, quoted: bool) {
    if !quoted {
        out.push(b'"');
    }
    let _ = write!(out, "[{ip}]");
}

/// The value of `expr` as a string, if it has one.
fn string_of(expr: &sluice_sample::Expr, view: &StreamView<'_>) -> Option<Vec<u8>> {
    match expr.eval(view)?.cast(SampleType::Str)? {
        Sample::Str(text) => Some(text.into_owned()),
        _ => None,
    }
}

/// True if `parse` takes all of `text`.
fn whole(text: &[u8], parse: impl Fn(&[u8]) -> Option<&[u8]>) -> bool {
    parse(text).is_some_and(<[u8]>::is_empty)
}

/// Whether a request's `forwarded` fields may be extended: every comma-separated element of
/// every field is valid. `None` when there is no such field.
pub fn existing_fields_valid<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Option<bool> {
    let mut any = false;
    let valid = values.all(|value| {
        any = true;
        value
            .split(|&b| b == b',')
            .all(|element| valid_element(element.trim_ascii()))
    });
    any.then_some(valid)
}

/// One `forwarded` element, as HAProxy accepts it: `for`, `by`, `host` and `proto`
/// parameters (lower case), each at most once, separated by `;`, with well-formed values.
fn valid_element(mut rest: &[u8]) -> bool {
    let mut seen = [false; 4];
    let mut first = true;
    while !rest.is_empty() && seen.iter().any(|s| !s) {
        if !first {
            match rest.strip_prefix(b";") {
                Some(after) => rest = after,
                None => return false,
            }
        }
        first = false;
        let params: [(&[u8], usize); 4] =
            [(b"for=", 0), (b"by=", 1), (b"host=", 2), (b"proto=", 3)];
        let Some((value, which)) = params
            .iter()
            .find(|(p, i)| !seen[*i] && rest.len() > p.len() && rest.starts_with(p))
            .map(|(p, i)| (&rest[p.len()..], *i))
        else {
            return false;
        };
        let (quoted, value) = match value.strip_prefix(b"\"") {
            Some(inner) => (true, inner),
            None => (false, value),
        };
        let after = match which {
            0 | 1 => node_token(value, quoted),
            2 => host_token(value, quoted),
            _ => proto_token(value),
        };
        let Some(mut after) = after else {
            return false;
        };
        if quoted {
            match after.strip_prefix(b"\"") {
                Some(a) => after = a,
                None => return false,
            }
        }
        seen[which] = true;
        rest = after;
    }
    seen.iter().any(|s| *s)
}

/// `http` or `https`; what follows.
fn proto_token(value: &[u8]) -> Option<&[u8]> {
    let rest = value.strip_prefix(b"http")?;
    Some(rest.strip_prefix(b"s").unwrap_or(rest))
}

/// A host (letters, digits, dots; or a bracketed IPv6 address when quoted) and, when quoted,
/// an optional port; what follows.
fn host_token(value: &[u8], quoted: bool) -> Option<&[u8]> {
    if value.is_empty() {
        return None;
    }
    let mut rest = if quoted && value.starts_with(b"[") {
        bracketed_ipv6(value)?.1
    } else {
        let n = value
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'.')
            .count();
        &value[n..]
    };
    if let Some(port) = rest.strip_prefix(b":") {
        if !quoted {
            return None;
        }
        rest = port_number(port)?;
    }
    Some(rest)
}

/// The name of a node as RFC 7239 §6 writes it.
enum NodeName {
    /// An IPv4 address, `unknown` or an obfuscated identifier: written as given.
    Plain,
    /// A bracketed IPv6 address (quoted).
    Ipv6(std::net::Ipv6Addr),
}

/// A node name (`_obfs`, `unknown`, an IPv4 address, or a bracketed IPv6 address as in a
/// quoted value) at the start of `value`, and what follows.
fn parse_nodename(value: &[u8]) -> Option<(NodeName, &[u8])> {
    match value.first()? {
        b'_' => {
            let n = obfuscated_len(&value[1..]);
            (n > 0).then(|| (NodeName::Plain, &value[1 + n..]))
        }
        b'u' => value
            .strip_prefix(b"unknown")
            .map(|rest| (NodeName::Plain, rest)),
        b'[' => bracketed_ipv6(value).map(|(ip, rest)| (NodeName::Ipv6(ip), rest)),
        _ => {
            let n = value
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .count();
            let text = std::str::from_utf8(&value[..n]).ok()?;
            text.parse::<std::net::Ipv4Addr>()
                .ok()
                .map(|_| (NodeName::Plain, &value[n..]))
        }
    }
}

/// A node (name, and when quoted an optional `:port`) at the start of `value`; what follows.
fn node_token(value: &[u8], quoted: bool) -> Option<&[u8]> {
    let (name, mut rest) = parse_nodename(value)?;
    if matches!(name, NodeName::Ipv6(_)) && !quoted {
        return None;
    }
    if let Some(port) = rest.strip_prefix(b":") {
        if !quoted {
            return None;
        }
        rest = nodeport(port)?;
    }
    Some(rest)
}

/// A node's port: a number from 1 to 65535, or an obfuscated identifier; what follows.
fn nodeport(value: &[u8]) -> Option<&[u8]> {
    match value.strip_prefix(b"_") {
        Some(obfs) => {
            let n = obfuscated_len(obfs);
            (n > 0).then(|| &obfs[n..])
        }
        None => port_number(value),
    }
}

/// A port number from 1 to 65535 at the start of `value`; what follows.
fn port_number(value: &[u8]) -> Option<&[u8]> {
    let n = value.iter().take_while(|b| b.is_ascii_digit()).count();
    let port: u32 = std::str::from_utf8(&value[..n]).ok()?.parse().ok()?;
    (1..=65535).contains(&port).then(|| &value[n..])
}

/// `[` IPv6 address `]` at the start of `value`: the address and what follows.
fn bracketed_ipv6(value: &[u8]) -> Option<(std::net::Ipv6Addr, &[u8])> {
    let inner = value.strip_prefix(b"[")?;
    let n = inner
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b':')
        .count();
    let rest = inner[n..].strip_prefix(b"]")?;
    let ip = std::str::from_utf8(&inner[..n]).ok()?.parse().ok()?;
    Some((ip, rest))
}

/// How many bytes at the start of `value` an obfuscated identifier may hold (letters,
/// digits, `.`, `-`, `_`).
fn obfuscated_len(value: &[u8]) -> usize {
    value
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_checked_as_haproxy_checks_them() {
        for good in [
            "for=192.0.2.60;proto=http;by=203.0.113.43",
            "for=\"[2001:db8:cafe::17]:4711\"",
            "for=unknown",
            "for=_hidden;by=_SEVKISEK",
            "host=\"example.com:8080\";proto=https",
            "host=example.com",
            "for=\"_gazonk:_port\"",
        ] {
            assert!(valid_element(good.as_bytes()), "{good}");
        }
        for bad in [
            "",
            "for=[2001:db8::1]",
            "for=192.0.2.60:80",
            "for=192.0.2.256",
            "For=192.0.2.60",
            "secret=x;for=1.2.3.4",
            "for=1.2.3.4;for=5.6.7.8",
            "proto=ftp",
            "host=\"a.b",
            "for=\"1.2.3.4:0\"",
            "for=\"1.2.3.4:65536\"",
        ] {
            assert!(!valid_element(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn fields_are_valid_when_every_element_is() {
        let fields = ["for=1.2.3.4, for=5.6.7.8", "by=_a"];
        assert_eq!(
            existing_fields_valid(fields.iter().map(|f| f.as_bytes())),
            Some(true)
        );
        let fields = ["for=1.2.3.4", "for=1.2.3.4, garbage"];
        assert_eq!(
            existing_fields_valid(fields.iter().map(|f| f.as_bytes())),
            Some(false)
        );
        assert_eq!(existing_fields_valid(std::iter::empty()), None);
    }
}
