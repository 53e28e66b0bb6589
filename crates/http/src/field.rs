//! Byte classes and field-line checks shared by the head parser, its error diagnosis and the
//! chunked trailer section.
//!
//! httparse is fast but reports coarse errors ("invalid header name"); these helpers walk a
//! line again to name the exact condition (`ObsFold`, `BareCr`, `SpaceBeforeColon`, ...), and
//! validate trailer fields, which httparse never sees. Grammar: RFC 9110 §5.1 (field names are
//! tokens), §5.5 (field values), §5.6 (lists, tokens, whitespace); RFC 9112 §5 (field lines).
//! Read [`check_field_line`] first.

use crate::error::HttpErrorKind;

/// `tchar` of RFC 9110 §5.6.2: the characters of methods, field names and codings.
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// [`is_tchar`] as a table: one load per byte, on every field name a rule writes.
static TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// True for a non-empty token (RFC 9110 §5.6.2).
/// True for an HTTP token (RFC 9110 §5.6.2): methods, field names, cookie names.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Optional whitespace, `OWS` of RFC 9110 §5.6.3.
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `s` without leading and trailing OWS.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ows(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or(&[])
}

/// The elements of a comma-separated list value (RFC 9110 §5.6.1), trimmed of OWS. Empty
/// elements are yielded too: each caller decides whether they are an error.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}

/// A byte allowed in a field value: HTAB, SP, VCHAR, obs-text (RFC 9110 §5.5).
pub(crate) fn is_field_value_byte(b: u8) -> bool {
    (b >= b' ' && b != 0x7f) || b == b'\t'
}

/// One line of a head or trailer section, without its terminator.
pub(crate) struct Line<'a> {
    /// The bytes of the line, without LF and without the CR before it.
    pub bytes: &'a [u8],
    /// Where the next line starts.
    pub next: usize,
    /// False when no LF was found: the line may still grow.
    pub complete: bool,
    /// True when the line ended with a LF not preceded by CR.
    pub bare_lf: bool,
}

/// The line starting at `pos` in `buf`. An incomplete line that ends with CR keeps that CR
/// out of `bytes`: the LF may be on its way.
pub(crate) fn line_at(buf: &[u8], pos: usize) -> Line<'_> {
    let rest = buf.get(pos..).unwrap_or(&[]);
    match rest.iter().position(|&b| b == b'\n') {
        Some(lf) => {
            let raw = rest.get(..lf).unwrap_or(&[]);
            let (bytes, bare_lf) = match raw.strip_suffix(b"\r") {
                Some(stripped) => (stripped, false),
                None => (raw, true),
            };
            Line {
                bytes,
                next: pos.saturating_add(lf).saturating_add(1),
                complete: true,
                bare_lf,
            }
        }
        None => Line {
            bytes: rest.strip_suffix(b"\r").unwrap_or(rest),
            next: buf.len(),
            complete: false,
            bare_lf: false,
        },
    }
}

/// The error for an offending byte: NUL and CR have their own kinds wherever they appear,
/// any other byte gets `otherwise`.
pub(crate) fn offending(b: u8, otherwise: HttpErrorKind) -> HttpErrorKind {
    match b {
        0 => HttpErrorKind::NulByte,
        b'\r' => HttpErrorKind::BareCr,
        _ => otherwise,
    }
}

/// Checks one field line `name ":" OWS value OWS` (RFC 9112 §5), terminator removed.
///
/// Rejects, naming the condition: a line starting with whitespace (`ObsFold`, RFC 9112 §5.2),
/// NUL, bare CR, an empty name, whitespace before the colon (RFC 9112 §5.1), a name with
/// non-token characters or no colon, control characters in the value. The line is walked in
/// order and the first offending byte decides, as in httparse, so that a prefix of a line
/// and the whole line get the same answer. When `complete` is false the line may still
/// grow: a missing colon, or whitespace that a colon may follow, is not (yet) an error.
pub(crate) fn check_field_line(line: &[u8], complete: bool) -> Option<HttpErrorKind> {
    if line.first().is_some_and(|&b| is_ows(b)) {
        return Some(HttpErrorKind::ObsFold);
    }
    let colon = line.iter().position(|&b| b == b':');
    let (name, value) = line.split_at(colon.unwrap_or(line.len()));
    for (i, &b) in name.iter().enumerate() {
        if is_tchar(b) {
            continue;
        }
        if is_ows(b) && name.get(i..).unwrap_or(&[]).iter().all(|&w| is_ows(w)) {
            // Only whitespace up to the colon, or up to the end of what arrived so far.
            return match colon {
                Some(_) => Some(HttpErrorKind::SpaceBeforeColon),
                None if complete => Some(HttpErrorKind::BadHeaderName),
                None => None,
            };
        }
        return Some(offending(b, HttpErrorKind::BadHeaderName));
    }
    if colon.is_none() {
        return complete.then_some(HttpErrorKind::BadHeaderName);
    }
    if name.is_empty() {
        return Some(HttpErrorKind::EmptyHeaderName);
    }
    value
        .get(1..)
        .unwrap_or(&[])
        .iter()
        .find(|&&b| !is_field_value_byte(b))
        .map(|&b| offending(b, HttpErrorKind::ControlChar))
}

/// The name and value of a field line already accepted by [`check_field_line`]; the value
/// without surrounding OWS.
pub(crate) fn split_field_line(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    let (name, value) = line.split_at(colon);
    Some((name, trim_ows(value.get(1..).unwrap_or(&[]))))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::error::HttpErrorKind::*;

    #[test]
    fn byte_classes() {
        let tchars: Vec<u8> = (0..=255u8).filter(|&b| is_tchar(b)).collect();
        let punctuation = b"!#$%&'*+-.^_`|~";
        assert_eq!(tchars.len(), 26 + 26 + 10 + punctuation.len());
        assert!(punctuation.iter().all(|&b| is_tchar(b)));
        assert!(
            !b" \t\"(),/:;<=>?@[\\]{}\x7f\x80"
                .iter()
                .any(|&b| is_tchar(b))
        );
        let values: Vec<u8> = (0..=255u8).filter(|&b| is_field_value_byte(b)).collect();
        // HTAB, SP to `~`, and obs-text: no other control byte, no DEL.
        assert_eq!(values.len(), 1 + 95 + 128);
        assert!(!b"\0\r\n\x1f\x7f".iter().any(|&b| is_field_value_byte(b)));
    }

    #[test]
    fn field_lines() {
        assert_eq!(check_field_line(b"Host: a", true), None);
        assert_eq!(check_field_line(b"X:", true), None);
        assert_eq!(check_field_line(b"X: a\tb \x80", true), None);
        assert_eq!(check_field_line(b" folded", true), Some(ObsFold));
        assert_eq!(check_field_line(b"\tfolded", true), Some(ObsFold));
        assert_eq!(check_field_line(b"X : a", true), Some(SpaceBeforeColon));
        assert_eq!(check_field_line(b"X\t: a", true), Some(SpaceBeforeColon));
        assert_eq!(check_field_line(b": a", true), Some(EmptyHeaderName));
        assert_eq!(check_field_line(b"X(: a", true), Some(BadHeaderName));
        assert_eq!(check_field_line(b"X Y: a", true), Some(BadHeaderName));
        assert_eq!(check_field_line(b"no colon", true), Some(BadHeaderName));
        assert_eq!(check_field_line(b"Partial", false), None);
        assert_eq!(check_field_line(b"Par tial", false), Some(BadHeaderName));
        assert_eq!(check_field_line(b"Partial \t", false), None);
        assert_eq!(check_field_line(b"X: a\rb", true), Some(BareCr));
        assert_eq!(check_field_line(b"X: a\0b", true), Some(NulByte));
        assert_eq!(check_field_line(b"X\0: a", true), Some(NulByte));
        assert_eq!(check_field_line(b"X: a\x01", true), Some(ControlChar));
        assert_eq!(check_field_line(b"X: a\x7f", true), Some(ControlChar));
        // The first offending byte decides.
        assert_eq!(check_field_line(b"X\xff\r: a", true), Some(BadHeaderName));
        assert_eq!(check_field_line(b"X\xff", false), Some(BadHeaderName));
        assert_eq!(check_field_line(b"X: \x01\0", true), Some(ControlChar));
        assert_eq!(check_field_line(b"X \0: a", true), Some(BadHeaderName));
    }

    #[test]
    fn lines_and_lists() {
        let buf = b"ab\r\ncd\nef\r";
        let l = line_at(buf, 0);
        assert_eq!(
            (l.bytes, l.next, l.complete, l.bare_lf),
            (&b"ab"[..], 4, true, false)
        );
        let l = line_at(buf, 4);
        assert_eq!(
            (l.bytes, l.next, l.complete, l.bare_lf),
            (&b"cd"[..], 7, true, true)
        );
        let l = line_at(buf, 7);
        assert_eq!((l.bytes, l.complete), (&b"ef"[..], false));
        let l = line_at(buf, 100);
        assert_eq!((l.bytes, l.complete), (&b""[..], false));
        let v: Vec<&[u8]> = list_elements(b" a ,b,, c\t").collect();
        assert_eq!(v, vec![&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(trim_ows(b"  "), b"");
        assert_eq!(
            split_field_line(b"X:  v  ").unwrap(),
            (&b"X"[..], &b"v"[..])
        );
    }
}
