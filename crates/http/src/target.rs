//! Request-target forms and the Host field (RFC 9112 §3.2, §3.2.2; RFC 9110 §7.2).
//!
//! Once httparse has split the request line, [`classify`] decides the form of the target and
//! checks that it fits the method: origin form (`/path`) for ordinary requests, absolute form
//! (`http://host/path`) as sent to proxies, authority form (`host:port`) only with CONNECT,
//! asterisk (`*`) only with OPTIONS. [`check_host`] then applies the Host rules: required in
//! HTTP/1.1, several fields only if identical, a valid `uri-host [":" port]`, and (strict
//! mode) equal to the authority of an absolute-form target. The relaxations of configuration.txt
//! "option accept-unsafe-violations-in-http-request" apply when `accept_unsafe` is set: bytes
//! above 127 and fragments in the target, no authority check for CONNECT, no comparison between
//! the target's authority and Host.

use crate::error::HttpErrorKind;
use crate::head::Version;

/// The form of a request-target (RFC 9112 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TargetForm {
    /// `absolute-path [ "?" query ]`, the usual form sent to an origin server.
    Origin,
    /// `scheme "://" authority ...`, the form sent to a proxy.
    Absolute,
    /// `host ":" port`, only with CONNECT.
    Authority,
    /// `*`, only with OPTIONS.
    Asterisk,
}

/// The scheme and authority of an absolute-form target: `scheme "://" authority` where the
/// authority ends at the first `/`, `?` or `#`.
pub(crate) fn absolute_parts(target: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = target.iter().position(|&b| b == b':')?;
    let (scheme, rest) = target.split_at(colon);
    let first = *scheme.first()?;
    let scheme_ok = first.is_ascii_alphabetic()
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    let after = rest.strip_prefix(b"://")?;
    if !scheme_ok {
        return None;
    }
    let end = after
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(after.len());
    Some((scheme, after.get(..end).unwrap_or(&[])))
}

/// Decides the form of `target` for `method` and checks its bytes.
///
/// Rejects (`BadTarget`): control characters, spaces and DEL (always); bytes above 127 and
/// `#` unless `accept_unsafe`; a form that does not fit the method; an absolute form with an
/// empty authority or userinfo (RFC 9110 §4.2.4 says to treat userinfo as an error); a CONNECT
/// target that is not `host:port` (unless `accept_unsafe`).
pub(crate) fn classify(
    method: &[u8],
    target: &[u8],
    accept_unsafe: bool,
) -> Result<TargetForm, HttpErrorKind> {
    let bad = HttpErrorKind::BadTarget;
    if target.is_empty() || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(bad);
    }
    if !accept_unsafe && target.iter().any(|&b| b >= 0x80 || b == b'#') {
        return Err(bad);
    }
    if method == b"CONNECT" {
        return if accept_unsafe || valid_host_port(target, true) {
            Ok(TargetForm::Authority)
        } else {
            Err(bad)
        };
    }
    if target == b"*" {
        return if method == b"OPTIONS" {
            Ok(TargetForm::Asterisk)
        } else {
            Err(bad)
        };
    }
    if target.first() == Some(&b'/') {
        return Ok(TargetForm::Origin);
    }
    match absolute_parts(target) {
        Some((_, authority))
            if !authority.is_empty()
                && !authority.contains(&b'@')
                && valid_host_port(authority, false) =>
        {
            Ok(TargetForm::Absolute)
        }
        _ => Err(bad),
    }
}

/// A byte of a reg-name or IPv4 address: unreserved, `%` (pct-encoding) and the sub-delims
/// of RFC 3986 §2 except the comma, which would turn a Host value into a list.
fn is_host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'%'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b';'
                | b'='
        )
}

/// True for `uri-host [ ":" port ]` (RFC 9110 §7.2); with `port_required`, the port must be
/// there and not empty (authority form, RFC 9112 §3.2.3).
pub(crate) fn valid_host_port(v: &[u8], port_required: bool) -> bool {
    let (host_ok, port) = if let Some(inner) = v.strip_prefix(b"[") {
        // IP-literal: hex digits, colons, dots (and a zone or IPvFuture in host bytes).
        let Some(close) = inner.iter().position(|&b| b == b']') else {
            return false;
        };
        let (literal, rest) = inner.split_at(close);
        let rest = rest.get(1..).unwrap_or(&[]);
        let ok = !literal.is_empty() && literal.iter().all(|&b| b == b':' || is_host_byte(b));
        match rest {
            [] => (ok, None),
            [b':', port @ ..] => (ok, Some(port)),
            _ => return false,
        }
    } else {
        match v.iter().rposition(|&b| b == b':') {
            Some(colon) => {
                let (host, port) = v.split_at(colon);
                (
                    !host.is_empty() && host.iter().all(|&b| is_host_byte(b)),
                    Some(port.get(1..).unwrap_or(&[])),
                )
            }
            None => (!v.is_empty() && v.iter().all(|&b| is_host_byte(b)), None),
        }
    };
    let port_ok = match port {
        None => !port_required,
        Some(p) => {
            p.len() <= 5 && p.iter().all(u8::is_ascii_digit) && !(port_required && p.is_empty())
        }
    };
    host_ok && port_ok
}

/// `authority` without the default port of `scheme` (`:80` for http, `:443` for https) and
/// without an empty port, so that `http://h:80/` and `Host: h` compare equal.
fn normalize_authority<'a>(scheme: &[u8], authority: &'a [u8]) -> &'a [u8] {
    let authority = authority.strip_suffix(b":").unwrap_or(authority);
    let default: &[u8] = if scheme.eq_ignore_ascii_case(b"http") {
        b":80"
    } else if scheme.eq_ignore_ascii_case(b"https") {
        b":443"
    } else {
        return authority;
    };
    authority.strip_suffix(default).unwrap_or(authority)
}

/// `authority` without a port of 80 or 443: a CONNECT to `h:443` may name `h` in its Host, as
/// HAProxy accepts, but not `h:80` or another host.
fn without_web_port(authority: &[u8]) -> &[u8] {
    authority
        .strip_suffix(b":443")
        .or_else(|| authority.strip_suffix(b":80"))
        .unwrap_or(authority)
}

/// Applies the Host rules to the values of all Host fields of a request.
///
/// Rejects: no Host in HTTP/1.1 (`MissingHost`, RFC 9112 §3.2); several Host fields whose
/// values differ, ignoring case (`DuplicateHost`; identical copies are tolerated as HAProxy
/// does, and the parser keeps only the first); a value that is not empty and not
/// `uri-host [":" port]` (`BadHost`); and unless `accept_unsafe`, an absolute-form or
/// CONNECT target whose authority differs from Host (`HostMismatch`, RFC 9112 §3.2: the
/// server would route on one and the proxy on the other). The comparison ignores case and
/// the scheme's default port (80 or 443 for CONNECT's authority), as HAProxy does. Returns
/// how many Host fields there are.
pub(crate) fn check_host<'a>(
    mut hosts: impl Iterator<Item = &'a [u8]>,
    version: Version,
    form: TargetForm,
    target: &[u8],
    accept_unsafe: bool,
) -> Result<usize, HttpErrorKind> {
    let Some(first) = hosts.next() else {
        return match version {
            Version::Http11 => Err(HttpErrorKind::MissingHost),
            Version::Http10 => Ok(0),
        };
    };
    let mut copies = 1;
    for h in hosts {
        if !h.eq_ignore_ascii_case(first) {
            return Err(HttpErrorKind::DuplicateHost);
        }
        copies += 1;
    }
    if !first.is_empty() && !valid_host_port(first, false) {
        return Err(HttpErrorKind::BadHost);
    }
    let same = match form {
        _ if accept_unsafe => true,
        TargetForm::Absolute => absolute_parts(target).is_none_or(|(scheme, authority)| {
            normalize_authority(scheme, authority)
                .eq_ignore_ascii_case(normalize_authority(scheme, first))
        }),
        TargetForm::Authority => {
            target.eq_ignore_ascii_case(first)
                || without_web_port(target).eq_ignore_ascii_case(first)
        }
        TargetForm::Origin | TargetForm::Asterisk => true,
    };
    if same {
        Ok(copies)
    } else {
        Err(HttpErrorKind::HostMismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use HttpErrorKind::*;

    fn hs<'a>(hosts: &'a [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> {
        hosts.iter().copied()
    }

    #[test]
    fn forms() {
        assert_eq!(classify(b"GET", b"/a?b", false), Ok(TargetForm::Origin));
        assert_eq!(
            classify(b"GET", b"http://h:8080/p", false),
            Ok(TargetForm::Absolute)
        );
        assert_eq!(
            classify(b"GET", b"HTTP://h", false),
            Ok(TargetForm::Absolute)
        );
        assert_eq!(
            classify(b"CONNECT", b"h:443", false),
            Ok(TargetForm::Authority)
        );
        assert_eq!(
            classify(b"CONNECT", b"[::1]:443", false),
            Ok(TargetForm::Authority)
        );
        assert_eq!(classify(b"OPTIONS", b"*", false), Ok(TargetForm::Asterisk));
        assert_eq!(classify(b"OPTIONS", b"/", false), Ok(TargetForm::Origin));
        for (m, t) in [
            (&b"GET"[..], &b"*"[..]),
            (b"GET", b"h:443"),
            (b"CONNECT", b"/"),
            (b"CONNECT", b"h"),
            (b"CONNECT", b"h:"),
            (b"CONNECT", b"http://h/"),
            (b"GET", b"http:///p"),
            (b"GET", b"http://u@h/p"),
            (b"GET", b"http://h,i/p"),
            (b"GET", b"1http://h/"),
            (b"GET", b"/a#frag"),
            (b"GET", "/é".as_bytes()),
            (b"GET", b"/a\x7f"),
            (b"GET", b""),
        ] {
            assert_eq!(classify(m, t, false), Err(BadTarget), "{t:?}");
        }
        assert_eq!(classify(b"GET", b"/a#frag", true), Ok(TargetForm::Origin));
        assert_eq!(
            classify(b"GET", "/é".as_bytes(), true),
            Ok(TargetForm::Origin)
        );
        assert_eq!(classify(b"CONNECT", b"h", true), Ok(TargetForm::Authority));
    }

    #[test]
    fn hosts() {
        let v11 = Version::Http11;
        let o = TargetForm::Origin;
        assert_eq!(check_host(hs(&[]), v11, o, b"/", false), Err(MissingHost));
        assert_eq!(check_host(hs(&[]), Version::Http10, o, b"/", false), Ok(0));
        assert_eq!(check_host(hs(&[b"a", b"A"]), v11, o, b"/", false), Ok(2));
        assert_eq!(
            check_host(hs(&[b"a", b"b"]), v11, o, b"/", false),
            Err(DuplicateHost)
        );
        assert_eq!(check_host(hs(&[b""]), v11, o, b"/", false), Ok(1));
        assert_eq!(check_host(hs(&[b"a b"]), v11, o, b"/", false), Err(BadHost));
        assert_eq!(check_host(hs(&[b"a,b"]), v11, o, b"/", false), Err(BadHost));
        assert_eq!(
            check_host(hs(&[b"a:99999x"]), v11, o, b"/", false),
            Err(BadHost)
        );
        assert_eq!(check_host(hs(&[b"[::1]:80"]), v11, o, b"/", false), Ok(1));
        let abs = TargetForm::Absolute;
        assert_eq!(
            check_host(hs(&[b"h"]), v11, abs, b"http://h:80/p", false),
            Ok(1)
        );
        assert_eq!(
            check_host(hs(&[b"H:443"]), v11, abs, b"https://h/p", false),
            Ok(1)
        );
        assert_eq!(
            check_host(hs(&[b"x"]), v11, abs, b"http://h/p", false),
            Err(HostMismatch)
        );
        assert_eq!(
            check_host(hs(&[b"x"]), v11, abs, b"http://h/p", true),
            Ok(1)
        );
        assert_eq!(
            check_host(hs(&[]), v11, abs, b"http://h/p", false),
            Err(MissingHost)
        );
    }

    #[test]
    fn a_connect_authority_must_match_host_up_to_a_web_port() {
        let (v11, auth) = (Version::Http11, TargetForm::Authority);
        for (host, target) in [
            (&b"h:443"[..], &b"h:443"[..]),
            (b"H:8443", b"h:8443"),
            (b"h", b"h:443"),
            (b"h", b"h:80"),
            (b"[::1]", b"[::1]:443"),
        ] {
            assert_eq!(check_host(hs(&[host]), v11, auth, target, false), Ok(1));
        }
        for (host, target) in [
            (&b"h:43"[..], &b"h:443"[..]),
            (b"h:80", b"h:443"),
            (b"h", b"h:8443"),
            (b"g:443", b"h:443"),
            (b"", b"h:443"),
        ] {
            assert_eq!(
                check_host(hs(&[host]), v11, auth, target, false),
                Err(HostMismatch),
                "{host:?} {target:?}"
            );
            assert_eq!(check_host(hs(&[host]), v11, auth, target, true), Ok(1));
        }
    }
}
