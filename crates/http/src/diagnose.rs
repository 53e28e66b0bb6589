//! Naming the condition behind an httparse error.
//!
//! httparse stops at the first bad byte of a head but says only "invalid header name" or
//! "invalid token". When it fails, `head` calls [`request`] or [`response`], which walk the
//! same bytes line by line, in the same order, and name the first offending byte's condition
//! (`BareCr`, `ObsFold`, `BadMethod`, `UnsupportedVersion`, ...). They also decide between
//! 400 and 505 for versions: a well-formed `HTTP/x.y` other than 1.0/1.1 is unsupported
//! (505), anything else is malformed (400).
//!
//! The answer must not depend on how the bytes were split by the network: when the bytes so
//! far cannot tell two conditions apart (`GET /a b` may still become a space in the target
//! or a bad version; `X ` may become `X :` or `X y`; a final CR may be followed by LF or not),
//! the diagnosis is [`Diagnosis::NeedMore`] and the head waits for more input, bounded by the
//! head size limit. A test feeds thousands of mutated heads byte by byte to hold this.

use crate::error::HttpErrorKind;
use crate::field::{self, is_tchar};
use crate::head::Version;

/// What a second look at a failed head found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Diagnosis {
    /// The named condition.
    Found(HttpErrorKind),
    /// Nothing wrong yet: the start line is a prefix of a valid or well-formed one.
    NeedMore,
    /// Nothing specific found; the caller maps httparse's own error.
    Unknown,
}

/// How an `HTTP-version` token (RFC 9112 §2.3) classifies.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum VersionClass {
    /// HTTP/1.0 or HTTP/1.1.
    Known(Version),
    /// `HTTP/DIGIT.DIGIT` but not 1.0 or 1.1.
    Unsupported,
    /// Not of the form `HTTP/DIGIT.DIGIT`: `BadVersion`, or `NulByte` / `BareCr` when that is
    /// the first byte that does not fit.
    Bad(HttpErrorKind),
    /// A prefix of a well-formed version, in a line not yet complete.
    NeedMore,
}

/// The first byte of `v` that cannot continue `HTTP/DIGIT.DIGIT`.
fn version_mismatch(v: &[u8]) -> Option<u8> {
    v.iter()
        .enumerate()
        .find(|&(i, &b)| match i {
            0..=4 => b"HTTP/".get(i) != Some(&b),
            5 | 7 => !b.is_ascii_digit(),
            6 => b != b'.',
            _ => true,
        })
        .map(|(_, &b)| b)
}

/// Classifies a version token; `complete` says whether the token may still grow.
pub(crate) fn classify_version(v: &[u8], complete: bool) -> VersionClass {
    if let Some(b) = version_mismatch(v) {
        return VersionClass::Bad(field::offending(b, HttpErrorKind::BadVersion));
    }
    match v {
        _ if !complete => VersionClass::NeedMore,
        [.., b'1', b'.', b'0'] if v.len() == 8 => VersionClass::Known(Version::Http10),
        [.., b'1', b'.', b'1'] if v.len() == 8 => VersionClass::Known(Version::Http11),
        _ if v.len() == 8 => VersionClass::Unsupported,
        _ => VersionClass::Bad(HttpErrorKind::BadVersion),
    }
}

/// Position of the start line, after the empty lines RFC 9112 §2.2 lets a server skip; a CR
/// there that is not followed by LF is a bare CR.
fn skip_empty_lines(head: &[u8]) -> Result<usize, Diagnosis> {
    let mut pos = 0;
    loop {
        match (head.get(pos), head.get(pos + 1)) {
            (Some(b'\r'), Some(b'\n')) => pos += 2,
            (Some(b'\r'), None) => return Err(Diagnosis::NeedMore),
            (Some(b'\r'), Some(_)) => return Err(Diagnosis::Found(HttpErrorKind::BareCr)),
            (Some(b'\n'), _) => pos += 1,
            _ => return Ok(pos),
        }
    }
}

/// Walks the field lines from `pos`; the first bad one is named.
fn fields(head: &[u8], mut pos: usize) -> Diagnosis {
    loop {
        let line = field::line_at(head, pos);
        if line.complete && line.bytes.is_empty() {
            return Diagnosis::Unknown;
        }
        if let Some(kind) = field::check_field_line(line.bytes, line.complete) {
            return Diagnosis::Found(kind);
        }
        if !line.complete {
            // Nothing wrong in the line so far: its end will tell.
            return Diagnosis::NeedMore;
        }
        pos = line.next;
    }
}

/// A head that ends with CR may be waiting for its LF: CR LF and a bare CR are different
/// errors (or no error), so an undecided diagnosis waits for one more byte.
fn settle(head: &[u8], diagnosis: Diagnosis) -> Diagnosis {
    match diagnosis {
        Diagnosis::Unknown if head.last() == Some(&b'\r') => Diagnosis::NeedMore,
        d => d,
    }
}

/// Names what is wrong in a request head that httparse refused.
pub(crate) fn request(head: &[u8]) -> Diagnosis {
    settle(head, request_line_and_fields(head))
}

/// Names what is wrong in a response head that httparse refused.
pub(crate) fn response(head: &[u8]) -> Diagnosis {
    settle(head, status_line_and_fields(head))
}

/// The request line is walked in order (method, target, version) and its first offending
/// byte decides; what follows the target is judged only once the line is complete, since
/// `GET /a b` may become a space in the target (`GET /a b HTTP/1.1`) or a bad version.
fn request_line_and_fields(head: &[u8]) -> Diagnosis {
    let start = match skip_empty_lines(head) {
        Ok(pos) => pos,
        Err(d) => return d,
    };
    let line = field::line_at(head, start);
    let bytes = line.bytes;
    let method_end = bytes.iter().position(|&b| b == b' ');
    let method = bytes
        .get(..method_end.unwrap_or(bytes.len()))
        .unwrap_or(&[]);
    if let Some(&b) = method.iter().find(|&&b| !is_tchar(b)) {
        return Diagnosis::Found(field::offending(b, HttpErrorKind::BadMethod));
    }
    let Some(method_end) = method_end else {
        return incomplete_or(line.complete, HttpErrorKind::BadRequestLine);
    };
    if method.is_empty() {
        return Diagnosis::Found(HttpErrorKind::BadMethod);
    }
    let rest = bytes.get(method_end + 1..).unwrap_or(&[]);
    let target_end = rest.iter().position(|&b| b == b' ');
    let target = rest.get(..target_end.unwrap_or(rest.len())).unwrap_or(&[]);
    if let Some(&b) = target.iter().find(|&&b| b < 0x21 || b == 0x7f) {
        return Diagnosis::Found(field::offending(b, HttpErrorKind::BadTarget));
    }
    if target.is_empty() && target_end.is_some() {
        // Two spaces in a row.
        return Diagnosis::Found(HttpErrorKind::BadRequestLine);
    }
    if !line.complete {
        return Diagnosis::NeedMore;
    }
    let Some(target_end) = target_end else {
        // No version at all: an HTTP/0.9 request line.
        return Diagnosis::Found(HttpErrorKind::BadRequestLine);
    };
    if std::str::from_utf8(target).is_err() {
        // httparse keeps targets as &str; bytes above 127 must form UTF-8.
        return Diagnosis::Found(HttpErrorKind::BadTarget);
    }
    let version = rest.get(target_end + 1..).unwrap_or(&[]);
    let well_formed = |v| {
        matches!(
            classify_version(v, true),
            VersionClass::Known(_) | VersionClass::Unsupported
        )
    };
    if let Some(sp) = version.iter().position(|&b| b == b' ') {
        // More than two spaces: words after the version, a space inside the target, or a
        // version that is not one.
        let first = version.get(..sp).unwrap_or(&[]);
        let last = version.rsplit(|&b| b == b' ').next().unwrap_or(&[]);
        if well_formed(first) {
            return Diagnosis::Found(HttpErrorKind::BadRequestLine);
        }
        if well_formed(last) {
            return Diagnosis::Found(HttpErrorKind::BadTarget);
        }
    }
    match classify_version(version, true) {
        VersionClass::Known(_) => fields(head, line.next),
        VersionClass::NeedMore => Diagnosis::NeedMore,
        VersionClass::Unsupported => Diagnosis::Found(HttpErrorKind::UnsupportedVersion),
        VersionClass::Bad(kind) => Diagnosis::Found(kind),
    }
}

/// The status line is walked in order (version, code, reason); its first offending byte
/// decides.
fn status_line_and_fields(head: &[u8]) -> Diagnosis {
    let start = match skip_empty_lines(head) {
        Ok(pos) => pos,
        Err(d) => return d,
    };
    let line = field::line_at(head, start);
    let bytes = line.bytes;
    let sp = bytes.iter().position(|&b| b == b' ');
    let version = bytes.get(..sp.unwrap_or(bytes.len())).unwrap_or(&[]);
    match classify_version(version, line.complete || sp.is_some()) {
        VersionClass::Known(_) => {}
        VersionClass::NeedMore => return Diagnosis::NeedMore,
        VersionClass::Unsupported => return Diagnosis::Found(HttpErrorKind::UnsupportedVersion),
        VersionClass::Bad(kind) => return Diagnosis::Found(kind),
    }
    let Some(sp) = sp else {
        return incomplete_or(line.complete, HttpErrorKind::BadStatusLine);
    };
    let rest = bytes.get(sp + 1..).unwrap_or(&[]);
    if let Some(&b) = rest.iter().take(3).find(|b| !b.is_ascii_digit()) {
        return Diagnosis::Found(field::offending(b, HttpErrorKind::BadStatus));
    }
    if rest.len() < 3 {
        return incomplete_or(line.complete, HttpErrorKind::BadStatus);
    }
    match rest.get(3) {
        None | Some(b' ') => {}
        Some(&b) => return Diagnosis::Found(field::offending(b, HttpErrorKind::BadStatus)),
    }
    let reason = rest.get(4..).unwrap_or(&[]);
    if let Some(&b) = reason.iter().find(|&&b| !field::is_field_value_byte(b)) {
        return Diagnosis::Found(field::offending(b, HttpErrorKind::ControlChar));
    }
    if line.complete {
        fields(head, line.next)
    } else {
        Diagnosis::Unknown
    }
}

/// `kind` when the line is complete; otherwise the line may still become valid.
fn incomplete_or(complete: bool, kind: HttpErrorKind) -> Diagnosis {
    if complete {
        Diagnosis::Found(kind)
    } else {
        Diagnosis::Unknown
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use HttpErrorKind::*;

    #[test]
    fn versions() {
        use VersionClass::*;
        assert_eq!(classify_version(b"HTTP/1.1", true), Known(Version::Http11));
        assert_eq!(classify_version(b"HTTP/1.0", true), Known(Version::Http10));
        assert_eq!(classify_version(b"HTTP/2.0", true), Unsupported);
        assert_eq!(classify_version(b"HTTP/1.2", true), Unsupported);
        assert_eq!(classify_version(b"HTTP/0.9", true), Unsupported);
        assert_eq!(classify_version(b"HTTP/2.0", false), NeedMore);
        assert_eq!(classify_version(b"HTTP/2", false), NeedMore);
        let bad = Bad(BadVersion);
        assert_eq!(classify_version(b"HTTP/2", true), bad);
        assert_eq!(classify_version(b"HTTP/1.10", true), bad);
        assert_eq!(classify_version(b"HTTP/1.10", false), bad);
        assert_eq!(classify_version(b"http/1.1", true), bad);
        assert_eq!(classify_version(b"RTSP/1.0", true), bad);
        assert_eq!(classify_version(b"HTTP/x", false), bad);
        assert_eq!(classify_version(b"HT\0P/1.1", true), Bad(NulByte));
        assert_eq!(classify_version(b"HTTP/1.1\r", true), Bad(BareCr));
        assert_eq!(classify_version(b"", false), NeedMore);
        assert_eq!(classify_version(b"", true), bad);
    }

    #[test]
    fn request_lines() {
        assert_eq!(request(b"G(T / HTTP/1.1\r\n"), Diagnosis::Found(BadMethod));
        assert_eq!(request(b" GET / HTTP/1.1\r\n"), Diagnosis::Found(BadMethod));
        assert_eq!(
            request(b"GET  / HTTP/1.1\r\n"),
            Diagnosis::Found(BadRequestLine)
        );
        assert_eq!(request(b"GET /\r\n"), Diagnosis::Found(BadRequestLine));
        assert_eq!(
            request(b"GET / HTTP/1.1 \r\n"),
            Diagnosis::Found(BadRequestLine)
        );
        assert_eq!(
            request(b"GET / HTTP/3.0\r\n"),
            Diagnosis::Found(UnsupportedVersion)
        );
        assert_eq!(request(b"GET / HTTP/3"), Diagnosis::NeedMore);
        assert_eq!(request(b"GET / HTTQ"), Diagnosis::NeedMore);
        assert_eq!(request(b"GET / HTTQ\r\n"), Diagnosis::Found(BadVersion));
        assert_eq!(
            request(b"GET /\x01 HTTP/1.1\r\n"),
            Diagnosis::Found(BadTarget)
        );
        assert_eq!(request(b"GET /\rx HTTP/1.1\r\n"), Diagnosis::Found(BareCr));
        assert_eq!(request(b"\rGET"), Diagnosis::Found(BareCr));
        assert_eq!(
            request(b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"),
            Diagnosis::Found(ObsFold)
        );
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            response(b"HTTP/1.1 2x0 OK\r\n"),
            Diagnosis::Found(BadStatus)
        );
        assert_eq!(
            response(b"HTTP/1.1 2000 OK\r\n"),
            Diagnosis::Found(BadStatus)
        );
        assert_eq!(response(b"HTTP/1.1 20\r\n"), Diagnosis::Found(BadStatus));
        assert_eq!(response(b"HTTP/1.1\r\n"), Diagnosis::Found(BadStatusLine));
        assert_eq!(
            response(b"HTTP/2.0 200 OK\r\n"),
            Diagnosis::Found(UnsupportedVersion)
        );
        assert_eq!(
            response(b"HTTP/1.1 200 O\x01K\r\n"),
            Diagnosis::Found(ControlChar)
        );
        assert_eq!(response(b"ICY 200 OK\r\n"), Diagnosis::Found(BadVersion));
        assert_eq!(response(b"HTTP/2"), Diagnosis::NeedMore);
    }
}
