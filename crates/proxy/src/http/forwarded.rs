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
//! own is added beside them. The grammar is `sluice_http::rfc7239`'s.

use crate::stream_context::StreamView;
use sluice_config::http_options::{Forwarded, ForwardedValue};
use sluice_http::rfc7239::{NodeName, host_token, nodeport, obfuscated_len, parse_nodename, whole};
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
                        Some((_, [])) => out.extend_from_slice(&text),
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
