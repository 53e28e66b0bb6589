//! RFC 7239 `Forwarded` elements, as HAProxy reads and writes them (configuration.txt §4.2
//! `option forwarded`, §7.3.1 the `rfc7239_*` converters): an element is `;`-separated
//! parameters among `for`, `by`, `host` and `proto` (lower case, each at most once); a
//! node (`for`, `by`) is an IPv4 address, a bracketed IPv6 address (quoted), `unknown` or an
//! obfuscated identifier (`_` then letters, digits, `.`, `-`, `_`), with a port only when
//! quoted; a host is letters, digits and dots or a bracketed IPv6 address, with a port only
//! when quoted; `proto` is `http` or `https`. Each parser takes the start of its input and
//! returns what follows, so callers check whether a value was taken whole.

use std::net::{Ipv4Addr, Ipv6Addr};

/// True if `parse` takes all of `text`.
pub fn whole(text: &[u8], parse: impl Fn(&[u8]) -> Option<&[u8]>) -> bool {
    parse(text).is_some_and(<[u8]>::is_empty)
}

/// Whether a request's `forwarded` fields may be extended: every comma-separated element of
/// every field is valid. `None` when there is no such field.
pub fn fields_valid<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Option<bool> {
    let mut any = false;
    let valid = values.all(|value| {
        any = true;
        value
            .split(|&b| b == b',')
            .all(|element| valid_element(element.trim_ascii()))
    });
    any.then_some(valid)
}

/// A parameter of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// `for`: the client's node.
    For = 0,
    /// `by`: the proxy's node.
    By = 1,
    /// `host`: the host the client asked for.
    Host = 2,
    /// `proto`: `http` or `https`.
    Proto = 3,
}

impl Param {
    /// The parameter named `name` (`for`, `by`, `host`, `proto`).
    pub fn named(name: &str) -> Option<Param> {
        Some(match name {
            "for" => Param::For,
            "by" => Param::By,
            "host" => Param::Host,
            "proto" => Param::Proto,
            _ => return None,
        })
    }
}

/// The values of a valid element's parameters, without their quotes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Element<'a> {
    values: [Option<&'a [u8]>; 4],
}

impl<'a> Element<'a> {
    /// The value of `param`, if the element has it.
    pub fn get(&self, param: Param) -> Option<&'a [u8]> {
        self.values[param as usize]
    }
}

/// One `forwarded` element, as HAProxy accepts it: `for`, `by`, `host` and `proto`
/// parameters (lower case), each at most once, separated by `;`, with well-formed values
/// (`proto` unquoted). Reading stops once all four were found.
pub fn parse_element(mut rest: &[u8]) -> Option<Element<'_>> {
    const NAMES: [(&[u8], Param); 4] = [
        (b"for=", Param::For),
        (b"by=", Param::By),
        (b"host=", Param::Host),
        (b"proto=", Param::Proto),
    ];
    let mut element = Element::default();
    let mut first = true;
    while !rest.is_empty() && element.values.iter().any(Option::is_none) {
        if !first {
            rest = rest.strip_prefix(b";")?;
        }
        first = false;
        let (value, param) = NAMES
            .iter()
            .find(|(name, param)| {
                element.get(*param).is_none() && rest.len() > name.len() && rest.starts_with(name)
            })
            .map(|(name, param)| (&rest[name.len()..], *param))?;
        let (quoted, value) = match value.strip_prefix(b"\"") {
            Some(inner) if param != Param::Proto => (true, inner),
            _ => (false, value),
        };
        let after = match param {
            Param::For | Param::By => node_token(value, quoted),
            Param::Host => host_token(value, quoted),
            Param::Proto => proto_token(value),
        }?;
        element.values[param as usize] = Some(&value[..value.len() - after.len()]);
        rest = if quoted {
            after.strip_prefix(b"\"")?
        } else {
            after
        };
    }
    element
        .values
        .iter()
        .any(Option::is_some)
        .then_some(element)
}

/// Whether `element` is valid ([`parse_element`]).
pub fn valid_element(element: &[u8]) -> bool {
    parse_element(element).is_some()
}

/// A node (`for`, `by` value, quotes removed): its name, and its port when it has one (a
/// number, or an obfuscated identifier with its `_`).
pub fn parse_node(value: &[u8]) -> Option<(NodeName, Option<NodePort<'_>>)> {
    let (name, rest) = parse_nodename(value)?;
    let Some(port) = rest.strip_prefix(b":") else {
        return Some((name, None));
    };
    let after = nodeport(port)?;
    let port = &port[..port.len() - after.len()];
    let port = match port.strip_prefix(b"_") {
        Some(_) => NodePort::Obfuscated(port),
        None => NodePort::Number(std::str::from_utf8(port).ok()?.parse().ok()?),
    };
    Some((name, Some(port)))
}

/// A node's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodePort<'a> {
    /// A port number.
    Number(u16),
    /// An obfuscated identifier, `_` included.
    Obfuscated(&'a [u8]),
}

/// `http` or `https`; what follows.
pub fn proto_token(value: &[u8]) -> Option<&[u8]> {
    let rest = value.strip_prefix(b"http")?;
    Some(rest.strip_prefix(b"s").unwrap_or(rest))
}

/// A host (letters, digits, dots; or a bracketed IPv6 address when quoted) and, when quoted,
/// an optional port; what follows.
pub fn host_token(value: &[u8], quoted: bool) -> Option<&[u8]> {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeName {
    /// An IPv4 address.
    Ipv4(Ipv4Addr),
    /// A bracketed IPv6 address (quoted).
    Ipv6(Ipv6Addr),
    /// `unknown`.
    Unknown,
    /// An obfuscated identifier (`_` and at least one character).
    Obfuscated,
}

/// A node name (`_obfs`, `unknown`, an IPv4 address, or a bracketed IPv6 address as in a
/// quoted value) at the start of `value`, and what follows.
pub fn parse_nodename(value: &[u8]) -> Option<(NodeName, &[u8])> {
    match value.first()? {
        b'_' => {
            let n = obfuscated_len(&value[1..]);
            (n > 0).then(|| (NodeName::Obfuscated, &value[1 + n..]))
        }
        b'u' => value
            .strip_prefix(b"unknown")
            .map(|rest| (NodeName::Unknown, rest)),
        b'[' => bracketed_ipv6(value).map(|(ip, rest)| (NodeName::Ipv6(ip), rest)),
        _ => {
            let n = value
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .count();
            let text = std::str::from_utf8(&value[..n]).ok()?;
            text.parse::<Ipv4Addr>()
                .ok()
                .map(|ip| (NodeName::Ipv4(ip), &value[n..]))
        }
    }
}

/// A node (name, and when quoted an optional `:port`) at the start of `value`; what follows.
pub fn node_token(value: &[u8], quoted: bool) -> Option<&[u8]> {
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
pub fn nodeport(value: &[u8]) -> Option<&[u8]> {
    match value.strip_prefix(b"_") {
        Some(obfs) => {
            let n = obfuscated_len(obfs);
            (n > 0).then(|| &obfs[n..])
        }
        None => port_number(value),
    }
}

/// A port number from 1 to 65535 at the start of `value`; what follows.
pub fn port_number(value: &[u8]) -> Option<&[u8]> {
    let n = value.iter().take_while(|b| b.is_ascii_digit()).count();
    let port: u32 = std::str::from_utf8(&value[..n]).ok()?.parse().ok()?;
    (1..=65535).contains(&port).then(|| &value[n..])
}

/// `[` IPv6 address `]` at the start of `value`: the address and what follows.
pub fn bracketed_ipv6(value: &[u8]) -> Option<(Ipv6Addr, &[u8])> {
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
pub fn obfuscated_len(value: &[u8]) -> usize {
    value
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        .count()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
            "proto=\"http\"",
        ] {
            assert!(!valid_element(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn fields_are_valid_when_every_element_is() {
        let fields = ["for=1.2.3.4, for=5.6.7.8", "by=_a"];
        assert_eq!(
            fields_valid(fields.iter().map(|f| f.as_bytes())),
            Some(true)
        );
        let fields = ["for=1.2.3.4", "for=1.2.3.4, garbage"];
        assert_eq!(
            fields_valid(fields.iter().map(|f| f.as_bytes())),
            Some(false)
        );
        assert_eq!(fields_valid(std::iter::empty()), None);
    }

    #[test]
    fn an_element_gives_its_values_without_quotes() {
        let element =
            parse_element(b"proto=https;host=\"h.org:80\";for=\"[::1]:9\";by=_p").unwrap();
        assert_eq!(element.get(Param::Proto), Some(&b"https"[..]));
        assert_eq!(element.get(Param::Host), Some(&b"h.org:80"[..]));
        assert_eq!(element.get(Param::For), Some(&b"[::1]:9"[..]));
        assert_eq!(element.get(Param::By), Some(&b"_p"[..]));
        assert_eq!(
            parse_node(b"[::1]:9"),
            Some((
                NodeName::Ipv6(Ipv6Addr::LOCALHOST),
                Some(NodePort::Number(9))
            ))
        );
        assert_eq!(
            parse_node(b"_n:_p"),
            Some((NodeName::Obfuscated, Some(NodePort::Obfuscated(b"_p"))))
        );
        assert_eq!(parse_node(b"1.2.3.4:0"), None);
    }
}
