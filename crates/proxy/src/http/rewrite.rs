//! Head rewriting for `http-request` and `http-response` actions: each action that changes a
//! head produces the complete new head, which then replaces the old one in the buffer and is
//! parsed again ([`install_request`], [`install_response`]).
//!
//! Rebuilding the head rather than patching bytes keeps one invariant simple: whatever rules
//! do, the head the data path reads is one the strict parser accepted, so a value computed
//! from client input can never inject a line or a second framing field. A value that is not
//! a valid field value, or a head that no longer fits in the buffer, is a failed rewrite,
//! answered with 500 for a request (502 for a response) as HAProxy's `strict-mode on` does.
//! Only requests whose rules rewrite pay for this (one allocation per rewriting action).

use super::buffer::InBuf;
use regex::bytes::{Captures, Regex};
use sluice_config::rules::{LinePart, NameMatch};
use sluice_http::encode::is_valid_field;
use sluice_http::head::{
    Limits, MessageHead, Parse, RequestHead, ResponseHead, header_name, header_value,
    parse_request, parse_response,
};
use std::borrow::Cow;

/// A head change that could not be made.
#[derive(Debug)]
pub struct RewriteFailed;

/// A change to the fields of a head.
pub enum FieldEdit<'e> {
    /// Remove the fields named `name`, then append `name: value` (`set-header`).
    Set(&'e str, &'e [u8]),
    /// Append `name: value` (`add-header`).
    Add(&'e str, &'e [u8]),
    /// Remove the fields whose name matches (`del-header`).
    Delete(&'e NameMatch),
    /// Replace the value of each field `name` that `regex` matches with `template`, whose
    /// `\1`..`\9` name the groups (`replace-header`).
    ReplaceValue(&'e str, &'e Regex, &'e [u8]),
    /// The same for each comma-separated element of the values (`replace-value`).
    ReplaceElements(&'e str, &'e Regex, &'e [u8]),
}

/// Writes `name: value` lines for the fields of `head` after `edit`, then the CRLF ending the
/// head; `None` if nothing changed.
fn write_fields(
    buf: &[u8],
    head: &impl MessageHead,
    edit: &FieldEdit<'_>,
    out: &mut Vec<u8>,
) -> Result<bool, RewriteFailed> {
    let mut changed = false;
    for h in head.headers() {
        let name = header_name(buf, h);
        let value = header_value(buf, h);
        let new_value: Option<Cow<'_, [u8]>> = match edit {
            FieldEdit::Set(n, _) if name.eq_ignore_ascii_case(n.as_bytes()) => None,
            FieldEdit::Delete(m) if m.matches(name) => None,
            FieldEdit::ReplaceValue(n, re, template) if name.eq_ignore_ascii_case(n.as_bytes()) => {
                Some(match re.captures(value) {
                    Some(caps) => Cow::Owned(expand(template, &caps)),
                    None => Cow::Borrowed(value),
                })
            }
            FieldEdit::ReplaceElements(n, re, template)
                if name.eq_ignore_ascii_case(n.as_bytes()) =>
            {
                Some(replace_elements(value, re, template))
            }
            _ => Some(Cow::Borrowed(value)),
        };
        match new_value {
            None => changed = true,
            Some(v) => {
                changed |= matches!(v, Cow::Owned(_));
                push_field(name, &v, out)?;
            }
        }
    }
    if let FieldEdit::Set(name, value) | FieldEdit::Add(name, value) = edit {
        push_field(name.as_bytes(), value, out)?;
        changed = true;
    }
    out.extend_from_slice(b"\r\n");
    Ok(changed)
}

/// Appends `name: value` CRLF, refusing a pair that is not a valid field (so no computed
/// value can inject a line).
pub fn push_field(name: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteFailed> {
    let name_text = std::str::from_utf8(name).map_err(|_| RewriteFailed)?;
    if !is_valid_field(name_text, value) {
        return Err(RewriteFailed);
    }
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Replaces each comma-separated element of `value` that `re` matches, keeping the
/// separators and the blanks around elements as they were.
fn replace_elements<'v>(value: &'v [u8], re: &Regex, template: &[u8]) -> Cow<'v, [u8]> {
    let mut out = Vec::with_capacity(value.len() + template.len());
    let mut changed = false;
    for (i, element) in value.split(|&b| b == b',').enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let start = element
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(element.len());
        let end = element
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(start, |e| e + 1);
        let trimmed = &element[start..end.max(start)];
        out.extend_from_slice(&element[..start]);
        match re.captures(trimmed) {
            Some(caps) if !trimmed.is_empty() => {
                out.extend_from_slice(&expand(template, &caps));
                changed = true;
            }
            _ => out.extend_from_slice(trimmed),
        }
        out.extend_from_slice(&element[end.max(start)..]);
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(value)
    }
}

/// Expands `\0`..`\9` in `template` with the groups of `caps` (HAProxy's replacement syntax:
/// an unknown group expands to nothing, `\\` is a backslash).
pub fn expand(template: &[u8], caps: &Captures<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(template.len() + 32);
    let mut i = 0;
    while i < template.len() {
        match (template[i], template.get(i + 1)) {
            (b'\\', Some(&d)) if d.is_ascii_digit() => {
                if let Some(m) = caps.get(usize::from(d - b'0')) {
                    out.extend_from_slice(m.as_bytes());
                }
                i += 2;
            }
            (b'\\', Some(b'\\')) => {
                out.push(b'\\');
                i += 2;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The request head with `edit` applied to its fields, or `None` if nothing changed.
pub fn request_fields(
    buf: &[u8],
    head: &RequestHead,
    edit: &FieldEdit<'_>,
) -> Result<Option<Vec<u8>>, RewriteFailed> {
    let mut out = Vec::with_capacity(head.head_len + 64);
    write_request_line(
        head.method_bytes(buf),
        head.target_bytes(buf),
        head.version.as_bytes(),
        &mut out,
    );
    Ok(write_fields(buf, head, edit, &mut out)?.then_some(out))
}

/// The response head with `edit` applied to its fields, or `None` if nothing changed.
pub fn response_fields(
    buf: &[u8],
    head: &ResponseHead,
    edit: &FieldEdit<'_>,
) -> Result<Option<Vec<u8>>, RewriteFailed> {
    let mut out = Vec::with_capacity(head.head_len + 64);
    write_status_line(head, head.status, head.reason_bytes(buf), &mut out);
    Ok(write_fields(buf, head, edit, &mut out)?.then_some(out))
}

/// The response head with a new status and reason.
pub fn response_status(
    buf: &[u8],
    head: &ResponseHead,
    status: u16,
    reason: &[u8],
) -> Result<Vec<u8>, RewriteFailed> {
    if reason.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
        return Err(RewriteFailed);
    }
    let mut out = Vec::with_capacity(head.head_len + 16);
    write_status_line(head, status, reason, &mut out);
    for h in head.headers() {
        push_field(header_name(buf, h), header_value(buf, h), &mut out)?;
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

fn write_status_line(head: &ResponseHead, status: u16, reason: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(head.version.as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason);
    out.extend_from_slice(b"\r\n");
}

fn write_request_line(method: &[u8], target: &[u8], version: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(method);
    out.push(b' ');
    out.extend_from_slice(target);
    out.push(b' ');
    out.extend_from_slice(version);
    out.extend_from_slice(b"\r\n");
}

/// The parts of a request target: what precedes the path (`scheme://authority` of an
/// absolute-form target), the path, and the query string after `?`.
pub struct TargetParts<'t> {
    /// `scheme://authority`, empty for origin form.
    pub prefix: &'t [u8],
    /// The path (may be empty for an absolute target without one).
    pub path: &'t [u8],
    /// The query string, without its `?`.
    pub query: Option<&'t [u8]>,
}

/// Splits a request target into its parts.
pub fn split_target(target: &[u8]) -> TargetParts<'_> {
    let path_start = if target.starts_with(b"/") || target == b"*" {
        0
    } else {
        match target.windows(3).position(|w| w == b"://") {
            Some(scheme_end) => {
                let authority_start = scheme_end + 3;
                target[authority_start..]
                    .iter()
                    .position(|&b| b == b'/' || b == b'?')
                    .map_or(target.len(), |p| authority_start + p)
            }
            None => 0,
        }
    };
    let (prefix, rest) = target.split_at(path_start);
    match rest.iter().position(|&b| b == b'?') {
        Some(q) => TargetParts {
            prefix,
            path: &rest[..q],
            query: Some(&rest[q + 1..]),
        },
        None => TargetParts {
            prefix,
            path: rest,
            query: None,
        },
    }
}

/// The current value of a part of the request line (what `replace-*` matches against).
pub fn line_part<'b>(buf: &'b [u8], head: &RequestHead, part: LinePart) -> Cow<'b, [u8]> {
    let target = head.target_bytes(buf);
    let parts = split_target(target);
    match part {
        LinePart::Method => Cow::Borrowed(head.method_bytes(buf)),
        LinePart::Uri => Cow::Borrowed(target),
        LinePart::Path => Cow::Borrowed(parts.path),
        LinePart::Query => Cow::Borrowed(parts.query.unwrap_or_default()),
        LinePart::PathQ => Cow::Borrowed(&target[parts.prefix.len()..]),
    }
}

/// The request head with one part of its request line replaced by `value`.
pub fn request_line(
    buf: &[u8],
    head: &RequestHead,
    part: LinePart,
    value: &[u8],
) -> Result<Vec<u8>, RewriteFailed> {
    // No blank or control character may enter the request line: it would split it.
    if value.is_empty() && part != LinePart::Query || value.iter().any(|&b| b <= b' ' || b == 0x7f)
    {
        return Err(RewriteFailed);
    }
    let target = head.target_bytes(buf);
    let parts = split_target(target);
    let mut new_target = Vec::with_capacity(target.len() + value.len());
    let mut method = head.method_bytes(buf);
    match part {
        LinePart::Method => method = value,
        LinePart::Uri => new_target.extend_from_slice(value),
        LinePart::Path => {
            new_target.extend_from_slice(parts.prefix);
            new_target.extend_from_slice(value);
            if let Some(q) = parts.query {
                new_target.push(b'?');
                new_target.extend_from_slice(q);
            }
        }
        LinePart::PathQ => {
            new_target.extend_from_slice(parts.prefix);
            new_target.extend_from_slice(value);
        }
        LinePart::Query => {
            new_target.extend_from_slice(parts.prefix);
            new_target.extend_from_slice(parts.path);
            if !value.is_empty() {
                new_target.push(b'?');
                new_target.extend_from_slice(value);
            }
        }
    }
    let target = if part == LinePart::Method {
        target
    } else {
        &new_target
    };
    if method
        .iter()
        .any(|b| !b.is_ascii_alphanumeric() && !b"!#$%&'*+-.^_`|~".contains(b))
    {
        return Err(RewriteFailed);
    }
    let mut out = Vec::with_capacity(head.head_len + value.len());
    write_request_line(method, target, head.version.as_bytes(), &mut out);
    for h in head.headers() {
        push_field(header_name(buf, h), header_value(buf, h), &mut out)?;
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

/// Puts a rewritten request head in place of the old one and parses it again. The limits
/// allow the whole buffer: the room `tune.maxrewrite` kept free is for exactly this.
pub fn install_request(
    input: &mut InBuf,
    head: &mut RequestHead,
    new_head: &[u8],
    limits: &Limits,
) -> Result<(), RewriteFailed> {
    if !input.replace_prefix(head.head_len, new_head) {
        return Err(RewriteFailed);
    }
    match parse_request(input.filled(), limits) {
        Ok(Parse::Complete(parsed)) if parsed.head_len == new_head.len() => {
            *head = parsed;
            Ok(())
        }
        _ => Err(RewriteFailed),
    }
}

/// Puts a rewritten response head in place of the old one and parses it again.
pub fn install_response(
    input: &mut InBuf,
    head: &mut ResponseHead,
    new_head: &[u8],
    limits: &Limits,
) -> Result<(), RewriteFailed> {
    if !input.replace_prefix(head.head_len, new_head) {
        return Err(RewriteFailed);
    }
    match parse_response(input.filled(), limits) {
        Ok(Parse::Complete(parsed)) if parsed.head_len == new_head.len() => {
            *head = parsed;
            Ok(())
        }
        _ => Err(RewriteFailed),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request(text: &str) -> (Vec<u8>, RequestHead) {
        let buf = text.as_bytes().to_vec();
        let Ok(Parse::Complete(head)) = parse_request(&buf, &Limits::default()) else {
            panic!("test request must parse");
        };
        (buf, head)
    }

    fn text(bytes: Option<Vec<u8>>) -> String {
        String::from_utf8(bytes.unwrap()).unwrap()
    }

    #[test]
    fn set_add_and_delete_fields() {
        let (buf, head) = request("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nB: 3\r\n\r\n");
        let set = request_fields(&buf, &head, &FieldEdit::Set("X-A", b"9")).unwrap();
        assert_eq!(
            text(set),
            "GET / HTTP/1.1\r\nHost: h\r\nB: 3\r\nX-A: 9\r\n\r\n"
        );
        let add = request_fields(&buf, &head, &FieldEdit::Add("C", b"4")).unwrap();
        assert_eq!(
            text(add),
            "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nB: 3\r\nC: 4\r\n\r\n"
        );
        let beg = NameMatch::Beg("x-".to_owned());
        let del = request_fields(&buf, &head, &FieldEdit::Delete(&beg)).unwrap();
        assert_eq!(text(del), "GET / HTTP/1.1\r\nHost: h\r\nB: 3\r\n\r\n");
        let none = NameMatch::Str("nothing".to_owned());
        assert!(
            request_fields(&buf, &head, &FieldEdit::Delete(&none))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_value_cannot_inject_a_line() {
        let (buf, head) = request("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(request_fields(&buf, &head, &FieldEdit::Set("X", b"a\r\nEvil: 1")).is_err());
        assert!(request_line(&buf, &head, LinePart::Path, b"/a b").is_err());
        assert!(request_line(&buf, &head, LinePart::Path, b"/a\r\n").is_err());
        assert!(request_line(&buf, &head, LinePart::Method, b"GE T").is_err());
    }

    #[test]
    fn replace_header_and_value_use_groups() {
        let (buf, head) =
            request("GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; b=2\r\nAccept: x/y, text/z\r\n\r\n");
        let re = Regex::new("a=([0-9]+)").unwrap();
        let edit = FieldEdit::ReplaceValue("cookie", &re, b"A=\\1\\1");
        let out = text(request_fields(&buf, &head, &edit).unwrap());
        assert!(out.contains("\r\nCookie: A=11\r\n"), "{out}");
        let re = Regex::new("^text/(.*)$").unwrap();
        let edit = FieldEdit::ReplaceElements("accept", &re, b"TEXT/\\1");
        let out = text(request_fields(&buf, &head, &edit).unwrap());
        assert!(out.contains("\r\nAccept: x/y, TEXT/z\r\n"), "{out}");
    }

    #[test]
    fn request_line_parts() {
        let (buf, head) = request("GET http://h:80/a/b?q=1 HTTP/1.1\r\nHost: h:80\r\n\r\n");
        let parts = split_target(head.target_bytes(&buf));
        assert_eq!(parts.prefix, b"http://h:80");
        assert_eq!(parts.path, b"/a/b");
        assert_eq!(parts.query, Some(&b"q=1"[..]));
        let set = |part, value: &[u8]| {
            let out = request_line(&buf, &head, part, value).unwrap();
            let line_end = out.iter().position(|&b| b == b'\r').unwrap();
            String::from_utf8(out[..line_end].to_vec()).unwrap()
        };
        assert_eq!(set(LinePart::Path, b"/x"), "GET http://h:80/x?q=1 HTTP/1.1");
        assert_eq!(
            set(LinePart::Query, b"z=2"),
            "GET http://h:80/a/b?z=2 HTTP/1.1"
        );
        assert_eq!(set(LinePart::Query, b""), "GET http://h:80/a/b HTTP/1.1");
        assert_eq!(
            set(LinePart::PathQ, b"/p?r"),
            "GET http://h:80/p?r HTTP/1.1"
        );
        assert_eq!(set(LinePart::Uri, b"/u"), "GET /u HTTP/1.1");
        assert_eq!(
            set(LinePart::Method, b"POST"),
            "POST http://h:80/a/b?q=1 HTTP/1.1"
        );
        assert_eq!(&*line_part(&buf, &head, LinePart::PathQ), b"/a/b?q=1");
    }

    #[test]
    fn expansion_of_groups() {
        let re = Regex::new("(a)(b)?").unwrap();
        let caps = re.captures(b"a").unwrap();
        assert_eq!(expand(b"<\\1|\\2|\\9|\\\\>", &caps), b"<a|||\\>");
    }
}
