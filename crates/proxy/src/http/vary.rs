//! The request and response fields a cache with `process-vary on` chooses variants by
//! (configuration.txt §6), read as HAProxy 2.6 reads them.
//!
//! A response may vary on `Accept-Encoding` and `Referer` only ([`vary_of`]); any other
//! name in its `Vary` keeps it out of the cache. Content codings are bit sets
//! ([`accepted_codings`] for what a request accepts, [`response_codings`] for what a
//! response carries), so a stored variant fits every request accepting its codings, however
//! the request lists them. A `Referer` is kept as a CRC-32 of its value ([`referer_hash`]).

use sluice_http::head::{MessageHead, RequestHead, ResponseHead};
use sluice_runtime::cache::{RequestVariant, Variant};

/// The content codings a cache tells apart, one bit each (`x-gzip` and `x-compress` are
/// their plain names' aliases).
const CODINGS: [(&[u8], u16); 10] = [
    (b"gzip", 0x1),
    (b"x-gzip", 0x1),
    (b"deflate", 0x2),
    (b"br", 0x4),
    (b"compress", 0x8),
    (b"x-compress", 0x8),
    (b"aes128gcm", 0x10),
    (b"exi", 0x20),
    (b"pack200-gzip", 0x40),
    (b"zstd", 0x80),
];

/// `identity`, accepted unless refused.
const IDENTITY: u16 = 0x100;
/// `*`.
const ANY: u16 = 0x200;
/// Any coding not in [`CODINGS`].
const OTHER: u16 = 0x400;
/// Every bit: what a request without `Accept-Encoding` accepts.
const ALL: u16 = 0x7ff;

/// More codings than this in a request's `Accept-Encoding` fields, and HAProxy gives up:
/// the request is neither served from nor stored in the cache.
const MAX_ACCEPTED: usize = 15;

/// The bit of a coding name, `None` for an unknown one; requests name codings in any case,
/// responses in lower case.
fn coding_bit(name: &[u8], any_case: bool) -> Option<u16> {
    let is = |known: &[u8]| {
        if any_case {
            name.eq_ignore_ascii_case(known)
        } else {
            name == known
        }
    };
    if is(b"identity") {
        return Some(IDENTITY);
    }
    if name == b"*" {
        return Some(ANY);
    }
    CODINGS.iter().find(|(n, _)| is(n)).map(|(_, bit)| *bit)
}

/// The items of every `name` field of a message, split on the commas outside quoted
/// strings (`cacheability::list_items`, as HAProxy reads lists) and trimmed.
fn items<'b>(fields: impl Iterator<Item = &'b [u8]>) -> impl Iterator<Item = &'b [u8]> {
    fields
        .flat_map(super::cacheability::list_items)
        .map(<[u8]>::trim_ascii)
}

/// What the request's `Accept-Encoding` fields accept: every coding without one; otherwise
/// the codings listed (an unknown one as "other"), `identity` unless refused, everything
/// for `*`, less those refused with exactly `q=0`. `None` past [`MAX_ACCEPTED`] codings.
/// Read in place, without allocating: it runs for every request a `process-vary` cache
/// looks up.
pub(crate) fn accepted_codings(buf: &[u8], head: &RequestHead) -> Option<u16> {
    let mut fields = head.header_values(buf, "accept-encoding").peekable();
    if fields.peek().is_none() {
        return Some(ALL);
    }
    let (mut accepted, mut refused, mut count) = (IDENTITY, 0u16, 0usize);
    for item in items(fields).filter(|item| !item.is_empty()) {
        count += 1;
        if count > MAX_ACCEPTED {
            return None;
        }
        let (name, params) = match item.iter().position(|&b| b == b';') {
            Some(at) => (item[..at].trim_ascii(), Some(item[at + 1..].trim_ascii())),
            None => (item, None),
        };
        let bit = coding_bit(name, true).unwrap_or(OTHER);
        if params.is_some_and(|p| p.eq_ignore_ascii_case(b"q=0")) {
            refused |= bit;
        } else {
            accepted |= if bit == ANY { ALL } else { bit };
        }
    }
    Some(accepted & !refused)
}

/// The codings of a response's `Content-Encoding` fields (names compared as written),
/// `identity` without any; `None` if one is unknown, which keeps the response out of the
/// cache.
pub(crate) fn response_codings(buf: &[u8], head: &ResponseHead) -> Option<u16> {
    let mut codings = 0;
    for item in items(head.header_values(buf, "content-encoding")) {
        let name = item
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        codings |= coding_bit(name, false)?;
    }
    Some(if codings == 0 { IDENTITY } else { codings })
}

/// The CRC-32 of the request's first `Referer` value, trimmed; 0 without one.
pub(crate) fn referer_hash(buf: &[u8], head: &RequestHead) -> u32 {
    head.header_values(buf, "referer")
        .next()
        .map_or(0, |value| crc32fast::hash(value.trim_ascii()))
}

/// The fields of a request that variants are chosen by; `None` when its `Accept-Encoding`
/// cannot be read.
pub(crate) fn request_variant(buf: &[u8], head: &RequestHead) -> Option<RequestVariant> {
    Some(RequestVariant {
        accepted: accepted_codings(buf, head)?,
        referer: referer_hash(buf, head),
    })
}

/// The variant a response is stored as, from its `Vary` fields and the request that
/// fetched it; `None` if it may not be stored: `Vary` names another field (`*`, `Origin`,
/// an empty item...), or its `Content-Encoding` is unknown while it varies on the codings.
pub(crate) fn vary_of(
    buf: &[u8],
    head: &ResponseHead,
    request: &RequestVariant,
) -> Option<Variant> {
    let mut variant = Variant::default();
    for item in items(head.header_values(buf, "vary")) {
        if item.eq_ignore_ascii_case(b"accept-encoding") {
            variant.by_coding = true;
        } else if item.eq_ignore_ascii_case(b"referer") {
            variant.by_referer = true;
        } else {
            return None;
        }
    }
    // Codings count only when `Vary` names them. (HAProxy 2.6 records them for every
    // variant, so one varying on the referer alone never fits a request again there.)
    if variant.by_coding {
        variant.codings = response_codings(buf, head)?;
    }
    if variant.by_referer {
        variant.referer = request.referer;
    }
    Some(variant)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_http::head::{Limits, Parse, parse_request, parse_response};

    fn request(fields: &str) -> (Vec<u8>, RequestHead) {
        let text = format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
        let buf = text.into_bytes();
        let Ok(Parse::Complete(head)) = parse_request(&buf, &Limits::default()) else {
            panic!("unparsed request: {fields}");
        };
        (buf, head)
    }

    fn response(fields: &str) -> (Vec<u8>, ResponseHead) {
        let text = format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 0\r\n\r\n");
        let buf = text.into_bytes();
        let Ok(Parse::Complete(head)) = parse_response(&buf, &Limits::default()) else {
            panic!("unparsed response: {fields}");
        };
        (buf, head)
    }

    fn accepted(fields: &str) -> Option<u16> {
        let (buf, head) = request(fields);
        accepted_codings(&buf, &head)
    }

    #[test]
    fn a_comma_in_a_quoted_parameter_separates_no_coding() {
        // Split on every comma, `"b"` would read as a coding of its own, an unknown one.
        assert_eq!(
            accepted("Accept-Encoding: gzip;ext=\"a,b\", br\r\n"),
            Some(0x1 | 0x4 | IDENTITY)
        );
    }

    #[test]
    fn accept_encoding_is_a_set_of_codings() {
        assert_eq!(accepted(""), Some(ALL));
        assert_eq!(accepted("Accept-Encoding: \r\n"), Some(IDENTITY));
        assert_eq!(
            accepted("Accept-Encoding: gzip, br\r\n"),
            Some(0x1 | 0x4 | IDENTITY)
        );
        // Order, case, parameters and several fields make no difference.
        assert_eq!(
            accepted("Accept-Encoding: BR;q=0.5\r\nAccept-Encoding: x-gzip\r\n"),
            accepted("Accept-Encoding: gzip,br\r\n")
        );
        // Only exactly `q=0` refuses, whatever the order; `identity` too.
        assert_eq!(
            accepted("Accept-Encoding: gzip;q=0, gzip\r\n"),
            Some(IDENTITY)
        );
        assert_eq!(
            accepted("Accept-Encoding: gzip;q=0.0\r\n"),
            Some(0x1 | IDENTITY)
        );
        assert_eq!(accepted("Accept-Encoding: br, identity;q=0\r\n"), Some(0x4));
        // `*` accepts all but what is refused; unknown names are "other".
        assert_eq!(
            accepted("Accept-Encoding: *, gzip;q=0\r\n"),
            Some(ALL & !0x1)
        );
        assert_eq!(
            accepted("Accept-Encoding: gzipx\r\n"),
            Some(OTHER | IDENTITY)
        );
        let many = vec!["gzip"; MAX_ACCEPTED + 1].join(", ");
        assert_eq!(accepted(&format!("Accept-Encoding: {many}\r\n")), None);
        let enough = vec!["gzip"; MAX_ACCEPTED].join(", ");
        assert!(accepted(&format!("Accept-Encoding: {enough}\r\n")).is_some());
    }

    #[test]
    fn vary_names_the_fields_a_response_is_chosen_by() {
        let (buf, head) = request("Referer: http://a/ \r\n");
        let asked = request_variant(&buf, &head).unwrap();
        assert_eq!(asked.referer, crc32fast::hash(b"http://a/"));
        let vary = |fields: &str| {
            let (buf, head) = response(fields);
            vary_of(&buf, &head, &asked)
        };
        assert_eq!(vary(""), Some(Variant::default()));
        let gzip = vary("Vary: Accept-Encoding\r\nContent-Encoding: gzip\r\n").unwrap();
        assert_eq!(
            (gzip.by_coding, gzip.codings, gzip.by_referer),
            (true, 0x1, false)
        );
        let plain = vary("Vary: accept-encoding, REFERER\r\n").unwrap();
        assert_eq!((plain.codings, plain.referer), (IDENTITY, asked.referer));
        // Other fields, `*`, empty items and unknown codings are not stored.
        assert_eq!(vary("Vary: origin\r\n"), None);
        assert_eq!(vary("Vary: *\r\n"), None);
        assert_eq!(vary("Vary: accept-encoding,\r\n"), None);
        assert_eq!(
            vary("Vary: accept-encoding\r\nContent-Encoding: GZIP\r\n"),
            None
        );
        // An unknown coding matters only when the response varies on codings.
        assert!(vary("Vary: referer\r\nContent-Encoding: foo\r\n").is_some());
    }
}
