//! How long is the body? RFC 9112 §6.3, applied strictly.
//!
//! The step after `head`: given a parsed head, [`request_framing`] and [`response_framing`]
//! return a [`BodyFraming`], which tells the proxy how to read the body that follows the head
//! and therefore where the next pipelined message begins. This is where request smuggling is
//! stopped: any head whose length could be read two ways (Content-Length with
//! Transfer-Encoding, differing Content-Length values, `chunked` not last, codings in
//! HTTP/1.0, ...) is refused instead of being guessed at, since the proxy and the server must
//! never disagree on where a message ends.
//!
//! What the proxy forwards: it removes every field of [`FRAMING_FIELDS`] and writes the
//! framing again in canonical form, so the next hop can only read it one way. For
//! `ContentLength(n)`: one `content-length: n` (identical duplicates are thereby merged, as
//! HAProxy does). For `Chunked` (and a response's `UntilClose` with codings):
//! `transfer-encoding:` followed by [`transfer_encoding_value`], the received codings in
//! lowercase, one list, ending with `chunked`, which is what the proxy sends after re-encoding
//! the chunks; earlier codings such as gzip stay meaningful to the server. Forwarding the
//! received spelling instead (`CHUNKED`, `chunked,`, two field lines) would invite a lax
//! server to read the body differently. Read [`BodyFraming`] first.

use crate::error::{HttpError, HttpErrorKind};
use crate::field::{is_token, list_elements, trim_ows};
use crate::head::{MessageHead, RequestHead, ResponseHead, Version};

/// How the body of a message is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyFraming {
    /// No body: the message ends with its head. Also the answer for a 2xx to CONNECT, after
    /// which the connection becomes a tunnel, and for 101 Switching Protocols.
    None,
    /// Exactly this many bytes follow the head (0 is possible).
    ContentLength(u64),
    /// Chunked transfer coding; decode it with `chunked::ChunkedDecoder`.
    Chunked,
    /// A response body that lasts until the server closes the connection.
    UntilClose,
}

impl BodyFraming {
    /// False when the message certainly has no body bytes (none, or a length of 0).
    pub fn has_payload(self) -> bool {
        !matches!(self, BodyFraming::None | BodyFraming::ContentLength(0))
    }
}

/// The fields that carry framing; the proxy removes them all and writes its own.
pub const FRAMING_FIELDS: [&str; 2] = ["content-length", "transfer-encoding"];

/// The largest Content-Length or chunk size accepted: 2^63 - 1, so that the value fits the
/// signed 64-bit integers many servers use and can never wrap around in theirs.
pub const MAX_BODY_LENGTH: u64 = i64::MAX as u64;

/// The transfer codings RFC 9110 §8.4.1 and the IANA registry define, other than `chunked`;
/// a request may carry them before `chunked` (the proxy forwards them untouched).
const KNOWN_CODINGS: [&str; 5] = ["gzip", "x-gzip", "deflate", "compress", "x-compress"];

/// Parses every Content-Length field of a head into one value, or `None` if there is none.
///
/// Each field value may be a comma list (RFC 9110 §8.6); every element must be one or more
/// digits with nothing else (no sign, no space inside, no `0x`), at most 19 digits and at most
/// [`MAX_BODY_LENGTH`]. Several elements are accepted only if they are byte-for-byte
/// identical (`5, 5`), since that can only come from an upstream that merged duplicates;
/// `5` and `05` are refused, as one of them did not come from an honest sender.
fn content_length<'a>(
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<Option<u64>, HttpErrorKind> {
    let mut first: Option<&[u8]> = None;
    for value in values {
        for element in list_elements(value) {
            if element.is_empty() || element.len() > 19 || !element.iter().all(u8::is_ascii_digit) {
                return Err(HttpErrorKind::BadContentLength);
            }
            match first {
                None => first = Some(element),
                Some(f) if f == element => {}
                Some(_) => return Err(HttpErrorKind::ConflictingContentLength),
            }
        }
    }
    let Some(digits) = first else {
        return Ok(None);
    };
    let mut n: u64 = 0;
    for &d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(HttpErrorKind::BadContentLength)?;
    }
    if n > MAX_BODY_LENGTH {
        return Err(HttpErrorKind::BadContentLength);
    }
    Ok(Some(n))
}

/// What a Transfer-Encoding list says.
#[derive(Debug, PartialEq, Eq)]
struct Codings {
    /// `chunked` is the last coding.
    chunked_last: bool,
    /// A coding before the last is not one of [`KNOWN_CODINGS`].
    unknown_before: bool,
}

/// One element of a Transfer-Encoding list.
struct Coding<'a> {
    /// The coding's name, as received.
    name: &'a [u8],
    /// Its `name=value` parameters, without whitespace.
    params: Vec<(&'a [u8], &'a [u8])>,
}

/// Splits a transfer-coding list element into its name and its parameters (RFC 9112 §7:
/// `token *( OWS ";" OWS token "=" token )`). Quoted parameter values are refused: no
/// registered coding has any, and a quoted comma would split the list elsewhere for a naive
/// reader.
fn split_coding(element: &[u8]) -> Option<Coding<'_>> {
    let mut parts = element.split(|&b| b == b';');
    let name = trim_ows(parts.next()?);
    if !is_token(name) {
        return None;
    }
    let mut params = Vec::new();
    for param in parts {
        let (key, value) = param.split_at(param.iter().position(|&b| b == b'=')?);
        let (key, value) = (trim_ows(key), trim_ows(value.get(1..)?));
        if !is_token(key) || !is_token(value) {
            return None;
        }
        params.push((key, value));
    }
    Some(Coding { name, params })
}

/// Reads all Transfer-Encoding fields as one list (RFC 9112 §6.1, RFC 9110 §5.3: several
/// field lines are one comma-joined list). Empty elements are skipped as RFC 9110 §5.6.1
/// asks; codings are case-insensitive and may carry `;param`, except `chunked`, which has no
/// parameters. Refuses (`BadTransferEncoding`) an empty list, an element that is not a token,
/// `chunked` with parameters, and `chunked` named twice (RFC 9112 §6.1: a sender MUST NOT
/// apply it more than once). Whether `chunked` is last is left to the caller: fatal in a
/// request, read-until-close in a response.
fn codings<'a>(values: impl Iterator<Item = &'a [u8]>) -> Result<Codings, HttpErrorKind> {
    let bad = HttpErrorKind::BadTransferEncoding;
    let mut chunked_seen = false;
    let mut last_is_chunked = false;
    let mut unknown_before = false;
    let mut last_unknown = false;
    let mut count = 0usize;
    for value in values {
        for element in list_elements(value).filter(|e| !e.is_empty()) {
            let Coding { name, params } = split_coding(element).ok_or(bad)?;
            // The previous element is now known not to be the last one.
            unknown_before |= last_unknown;
            let chunked = name.eq_ignore_ascii_case(b"chunked");
            if chunked && (!params.is_empty() || chunked_seen) {
                return Err(bad);
            }
            chunked_seen |= chunked;
            last_is_chunked = chunked;
            last_unknown = !chunked
                && !KNOWN_CODINGS
                    .iter()
                    .any(|k| name.eq_ignore_ascii_case(k.as_bytes()));
            count += 1;
        }
    }
    if count == 0 {
        return Err(bad);
    }
    Ok(Codings {
        chunked_last: last_is_chunked,
        unknown_before,
    })
}

/// The canonical value for the Transfer-Encoding field the proxy forwards: every coding of
/// every received Transfer-Encoding field, in order, names in lowercase, parameters written
/// `;name=value` without whitespace, separated by `, `, empty elements dropped. `None` when the head has no
/// Transfer-Encoding or one that [`request_framing`] / [`response_framing`] would refuse.
pub fn transfer_encoding_value(buf: &[u8], head: &impl MessageHead) -> Option<Vec<u8>> {
    let values = || head.header_values(buf, "transfer-encoding");
    codings(values()).ok()?;
    let mut out = Vec::new();
    for value in values() {
        for element in list_elements(value).filter(|e| !e.is_empty()) {
            let Coding { name, params } = split_coding(element)?;
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend(name.iter().map(u8::to_ascii_lowercase));
            for (key, value) in params {
                out.push(b';');
                out.extend(key.iter().map(u8::to_ascii_lowercase));
                out.push(b'=');
                out.extend_from_slice(value);
            }
        }
    }
    Some(out)
}

/// How the body of a request is delimited (RFC 9112 §6.3 items 3, 4, 6, 7).
///
/// Transfer-Encoding wins only when it is unambiguous: refused with 400 are Transfer-Encoding
/// in an HTTP/1.0 request (`TransferEncodingInHttp10`, §6.1), Transfer-Encoding together with
/// Content-Length (`AmbiguousFraming`), a list that does not end with `chunked` or names it
/// twice (`BadTransferEncoding`, §6.3 item 4); a list ending in `chunked` whose earlier
/// codings are not registered ones (gzip, deflate, compress and their x- aliases) is refused
/// with 501 (`UnknownTransferCoding`, §6.1). Without Transfer-Encoding a valid Content-Length
/// gives the length (see the rules above `content_length`), and a request with neither has
/// no body.
pub fn request_framing(buf: &[u8], head: &RequestHead) -> Result<BodyFraming, HttpError> {
    let err = HttpError::request;
    let has_te = head.has_header(buf, "transfer-encoding");
    let cl = content_length(head.header_values(buf, "content-length")).map_err(err)?;
    if has_te {
        if head.version == Version::Http10 {
            return Err(err(HttpErrorKind::TransferEncodingInHttp10));
        }
        if cl.is_some() {
            return Err(err(HttpErrorKind::AmbiguousFraming));
        }
        let list = codings(head.header_values(buf, "transfer-encoding")).map_err(err)?;
        if !list.chunked_last {
            return Err(err(HttpErrorKind::BadTransferEncoding));
        }
        if list.unknown_before {
            return Err(err(HttpErrorKind::UnknownTransferCoding));
        }
        return Ok(BodyFraming::Chunked);
    }
    Ok(match cl {
        Some(n) => BodyFraming::ContentLength(n),
        None => BodyFraming::None,
    })
}

/// Whether a request is an HTTP/1.0 GET, HEAD or DELETE with a body (a Content-Length above
/// zero, or Transfer-Encoding), given its `framing`: HAProxy refuses those with 413 unless
/// `h1-accept-payload-with-any-method`, since HTTP/1.0 servers may not look for the body of
/// such a request and take it for the next one (request smuggling).
pub fn http10_body_on_bodyless_method(
    buf: &[u8],
    head: &RequestHead,
    framing: &Result<BodyFraming, HttpError>,
) -> bool {
    head.version == Version::Http10
        && matches!(head.method_bytes(buf), b"GET" | b"HEAD" | b"DELETE")
        && match framing {
            Ok(BodyFraming::ContentLength(n)) => *n > 0,
            Ok(BodyFraming::Chunked) => true,
            Err(err) => err.kind == HttpErrorKind::TransferEncodingInHttp10,
            Ok(_) => false,
        }
}

/// How the body of a response is delimited (RFC 9112 §6.3 items 1–3, 5, 8).
///
/// `request_method_is_head` and `request_was_connect` describe the request this response
/// answers. No body: any response to HEAD, 1xx, 204 and 304 (item 1), and a 2xx to CONNECT,
/// after which the connection is a tunnel (item 2); their framing fields are not examined, as
/// the RFC says they are not framing. Otherwise Transfer-Encoding ending with `chunked` gives
/// `Chunked` and any other list (`gzip`, `chunked, gzip`) gives `UntilClose` (item 3; codings
/// are forwarded, not decoded, so unknown ones are fine); Content-Length gives the length; neither gives
/// `UntilClose`. Refused with 502: Transfer-Encoding in an HTTP/1.0 response, together with
/// Content-Length, malformed, or naming `chunked` twice; an invalid or conflicting
/// Content-Length.
pub fn response_framing(
    buf: &[u8],
    head: &ResponseHead,
    request_method_is_head: bool,
    request_was_connect: bool,
) -> Result<BodyFraming, HttpError> {
    let err = HttpError::response;
    let status = head.status;
    if request_method_is_head
        || (100..200).contains(&status)
        || status == 204
        || status == 304
        || (request_was_connect && (200..300).contains(&status))
    {
        return Ok(BodyFraming::None);
    }
    let has_te = head.has_header(buf, "transfer-encoding");
    let cl = content_length(head.header_values(buf, "content-length")).map_err(err)?;
    if has_te {
        if head.version == Version::Http10 {
            return Err(err(HttpErrorKind::TransferEncodingInHttp10));
        }
        if cl.is_some() {
            return Err(err(HttpErrorKind::AmbiguousFraming));
        }
        let list = codings(head.header_values(buf, "transfer-encoding")).map_err(err)?;
        return Ok(if list.chunked_last {
            BodyFraming::Chunked
        } else {
            BodyFraming::UntilClose
        });
    }
    Ok(match cl {
        Some(n) => BodyFraming::ContentLength(n),
        None => BodyFraming::UntilClose,
    })
}

#[cfg(test)]
mod tests;
