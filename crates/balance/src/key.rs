//! Key extraction for the hash-based algorithms (configuration.txt §4.2 "balance"): what part of
//! the request `source`, `uri`, `url_param` and `hdr` hash. The data path calls these on the bytes
//! it already has (the client address, the request target, a header value, a form body) and
//! passes the result as [`PickInput::key`](crate::PickInput::key); `None` means "no key", and the
//! balancer then falls back to round robin as HAProxy does.
//!
//! Pure functions over borrowed bytes: they return sub-slices of their input and never allocate.

use std::net::IpAddr;

use crate::config::UriOptions;

/// The part of a request target that `balance uri` hashes (§4.2 "balance", "uri").
///
/// - `path_only`: start at the path. An origin-form target (`/a?b`) is kept as it is; an
///   absolute URI (`http://host/a?b`) loses its scheme and authority (an absolute URI without a
///   path gives an empty key); an asterisk-form (`*`) or authority-form (`host:443`) target has no
///   path and gives `None`.
/// - `len`: only the first `len` bytes (of what `path_only` kept) count.
/// - `depth`: one level per `/`; hashing stops before the `/` that would open level `depth + 1`,
///   so `/a/b/c` at depth 2 gives `/a/b`.
/// - Hashing stops at `?` unless `whole` is set.
///
/// When `len` and `depth` are both set, the first limit reached wins.
pub fn uri_key<'a>(target: &'a [u8], opts: &UriOptions) -> Option<&'a [u8]> {
    let mut uri = target;
    if opts.path_only {
        uri = path_of(uri)?;
    }
    if let Some(len) = opts.len {
        uri = &uri[..uri.len().min(len)];
    }
    let mut slashes = 0usize;
    let end = uri
        .iter()
        .position(|&c| match c {
            b'/' => {
                slashes += 1;
                opts.depth.is_some_and(|depth| slashes > depth)
            }
            b'?' => !opts.whole,
            _ => false,
        })
        .unwrap_or(uri.len());
    Some(&uri[..end])
}

/// The path (with its query) of a request target, as `path-only` sees it.
fn path_of(target: &[u8]) -> Option<&[u8]> {
    if target.first() == Some(&b'/') {
        return Some(target);
    }
    // Absolute form: scheme "://" authority [path]. A scheme is letters, digits, '+', '-', '.'.
    let colon = target.iter().position(|&c| c == b':')?;
    let scheme = &target[..colon];
    let is_scheme = !scheme.is_empty()
        && scheme
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    let after = target[colon..].strip_prefix(b"://")?;
    if !is_scheme {
        return None;
    }
    let path_start = after
        .iter()
        .position(|&c| matches!(c, b'/' | b'?'))
        .unwrap_or(after.len());
    Some(&after[path_start..])
}

/// The value of the first `name=value` parameter of the request target's query string
/// (`balance url_param`, §4.2 "balance"). Parameters are separated by `&`; the name is compared
/// byte for byte (case-sensitive). A parameter with the name but no `=`, or with an empty value,
/// does not count ("If no value is found or if the parameter is not found, then a round robin
/// algorithm is applied"), so the search goes on and ends with `None` if nothing better follows.
pub fn url_param_key<'a>(target: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let query_start = target.iter().position(|&c| c == b'?')? + 1;
    form_param_key(&target[query_start..], name)
}

/// Like [`url_param_key`], on a form-encoded request body (`url_param <name> check_post`): the
/// body is a sequence of `name=value` pairs separated by `&`, with no leading `?`. The caller
/// decides how much of the body it has (HAProxy looks at what the request buffer holds).
pub fn form_param_key<'a>(params: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let name = name.as_bytes();
    if name.is_empty() {
        return None;
    }
    params.split(|&c| c == b'&').find_map(|param| {
        param
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(b"="))
            .filter(|value| !value.is_empty())
    })
}

/// The key of `balance hdr(<name>) [use_domain_only]` (§4.2 "balance", "hdr") from the header's
/// value, or `None` for an empty value ("If the header is absent or if it does not contain any
/// value, the roundrobin algorithm is applied instead").
///
/// With `use_domain_only`, only the main domain label counts: the label just before the last
/// dot, so `haproxy.1wt.eu` gives `1wt` and `www.example.com:8080` gives `example`. A value
/// without a dot (`localhost`, `[::1]:80`) is used whole.
pub fn hdr_key(value: &[u8], use_domain_only: bool) -> Option<&[u8]> {
    if value.is_empty() {
        return None;
    }
    if !use_domain_only {
        return Some(value);
    }
    let Some(last_dot) = value.iter().rposition(|&c| c == b'.') else {
        return Some(value);
    };
    let before = &value[..last_dot];
    let start = before
        .iter()
        .rposition(|&c| c == b'.')
        .map_or(0, |dot| dot + 1);
    Some(&before[start..])
}

/// The bytes `balance source` hashes for a client address: 4 for IPv4, 16 for IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceKey {
    bytes: [u8; 16],
    len: u8,
}

impl SourceKey {
    /// The key bytes, to pass as [`PickInput::key`](crate::PickInput::key).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The `balance source` key of a client address. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
/// what a dual-stack listener reports for an IPv4 client) gives the IPv4 key, so one client
/// reaches the same server whichever kind of listener it came through.
pub fn source_key(ip: IpAddr) -> SourceKey {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None => {
                return SourceKey {
                    bytes: v6.octets(),
                    len: 16,
                };
            }
        },
    };
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&v4.octets());
    SourceKey { bytes, len: 4 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn uri(target: &str, opts: UriOptions) -> Option<&str> {
        uri_key(target.as_bytes(), &opts).map(|k| std::str::from_utf8(k).unwrap())
    }

    #[test]
    fn uri_default_stops_at_query() {
        let d = UriOptions::default();
        assert_eq!(uri("/a/b?x=1", d), Some("/a/b"));
        assert_eq!(uri("/a/b", d), Some("/a/b"));
        assert_eq!(uri("/?x", d), Some("/"));
        assert_eq!(uri("", d), Some(""));
        let whole = UriOptions { whole: true, ..d };
        assert_eq!(uri("/a/b?x=1", whole), Some("/a/b?x=1"));
    }

    #[test]
    fn uri_depth_counts_slashes() {
        let depth = |n| UriOptions {
            depth: Some(n),
            ..UriOptions::default()
        };
        assert_eq!(uri("/a/b/c/d", depth(1)), Some("/a"));
        assert_eq!(uri("/a/b/c/d", depth(2)), Some("/a/b"));
        assert_eq!(uri("/a/b/c/d", depth(3)), Some("/a/b/c"));
        assert_eq!(uri("/a/b/c/d", depth(9)), Some("/a/b/c/d"));
        assert_eq!(uri("/a/b/", depth(2)), Some("/a/b"));
        // The query string ends the path first, unless `whole`.
        assert_eq!(uri("/a?p=/x/y", depth(1)), Some("/a"));
        let whole = UriOptions {
            whole: true,
            depth: Some(2),
            ..UriOptions::default()
        };
        assert_eq!(uri("/a?p=/x/y", whole), Some("/a?p=/x"));
    }

    #[test]
    fn uri_len_and_depth_first_limit_wins() {
        let len = |n| UriOptions {
            len: Some(n),
            ..UriOptions::default()
        };
        assert_eq!(uri("/abcdef", len(3)), Some("/ab"));
        assert_eq!(uri("/ab", len(30)), Some("/ab"));
        assert_eq!(uri("/a?bcdef", len(5)), Some("/a"));
        let both = UriOptions {
            len: Some(4),
            depth: Some(2),
            ..UriOptions::default()
        };
        assert_eq!(uri("/a/b/c", both), Some("/a/b"));
        assert_eq!(uri("/abcdef/g", both), Some("/abc"));
    }

    #[test]
    fn uri_path_only() {
        let p = UriOptions {
            path_only: true,
            ..UriOptions::default()
        };
        assert_eq!(uri("http://example.com/a/b?q", p), Some("/a/b"));
        assert_eq!(uri("https://user@h:8443/x", p), Some("/x"));
        assert_eq!(uri("/same/path", p), Some("/same/path"));
        assert_eq!(uri("http://example.com", p), Some(""));
        assert_eq!(uri("http://example.com?q", p), Some(""));
        assert_eq!(uri("*", p), None);
        assert_eq!(uri("example.com:443", p), None);
        // Without path-only the authority is part of the key.
        assert_eq!(
            uri("http://example.com/a", UriOptions::default()),
            Some("http://example.com/a")
        );
        let depth = UriOptions {
            path_only: true,
            depth: Some(1),
            len: Some(4),
            ..UriOptions::default()
        };
        assert_eq!(uri("http://h/abcdef/g", depth), Some("/abc"));
    }

    #[test]
    fn url_param_first_occurrence() {
        fn k<'a>(t: &'a str, n: &str) -> Option<&'a str> {
            url_param_key(t.as_bytes(), n).map(|v| std::str::from_utf8(v).unwrap())
        }
        assert_eq!(k("/p?userid=42", "userid"), Some("42"));
        assert_eq!(k("/p?a=1&userid=42&userid=7", "userid"), Some("42"));
        assert_eq!(k("/p?xuserid=1&userid=2", "userid"), Some("2"));
        assert_eq!(k("/p?userid&userid=3", "userid"), Some("3"));
        assert_eq!(k("/p?userid=&userid=4", "userid"), Some("4"));
        assert_eq!(k("/p?userid=", "userid"), None);
        assert_eq!(k("/p?userid", "userid"), None);
        assert_eq!(k("/p?other=1", "userid"), None);
        assert_eq!(k("/p/userid=1", "userid"), None);
        assert_eq!(k("/p?UserId=1", "userid"), None);
        assert_eq!(k("/p?a=1&b=x=y", "b"), Some("x=y"));
        assert_eq!(k("/p?=1", ""), None);
        assert_eq!(k("", "a"), None);
    }

    #[test]
    fn form_body() {
        assert_eq!(
            form_param_key(b"user=bob&session_id=abc", "session_id"),
            Some(&b"abc"[..])
        );
        assert_eq!(form_param_key(b"", "x"), None);
    }

    #[test]
    fn hdr_domain_only() {
        fn k(v: &str, d: bool) -> Option<&str> {
            hdr_key(v.as_bytes(), d).map(|v| std::str::from_utf8(v).unwrap())
        }
        assert_eq!(k("haproxy.1wt.eu", true), Some("1wt"));
        assert_eq!(k("haproxy.1wt.eu", false), Some("haproxy.1wt.eu"));
        assert_eq!(k("example.com", true), Some("example"));
        assert_eq!(k("www.example.com:8080", true), Some("example"));
        assert_eq!(k("localhost", true), Some("localhost"));
        assert_eq!(k("[::1]:80", true), Some("[::1]:80"));
        assert_eq!(k("a.b.c.d", true), Some("c"));
        assert_eq!(k(".com", true), Some(""));
        assert_eq!(k("", true), None);
        assert_eq!(k("", false), None);
    }

    #[test]
    fn source_keys() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(source_key(v4).as_bytes(), &[192, 0, 2, 7]);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(source_key(mapped), source_key(v4));
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let key = source_key(v6);
        assert_eq!(key.as_bytes().len(), 16);
        assert_eq!(key.as_bytes()[..4], [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(key.as_bytes()[15], 1);
    }
}
