//! Head rewriting for `http-request` and `http-response` actions.
//!
//! Field actions (`set-header`, `add-header`, `del-header`, `replace-header`,
//! `replace-value`) edit the head in place in the buffer ([`edit_request`],
//! [`edit_response`]): a removed line is cut out, a new one goes before the empty line ending
//! the head, a replaced value takes its old value's place, and the field offsets are moved
//! accordingly. Nothing is parsed again and nothing is allocated: every new name and value is
//! checked as the parser would check it (a valid field, the line count and the buffer room),
//! and only a change to `Host`, which the parser checks against the request line, has the
//! whole head parsed again. Actions on the request line or the status build the complete
//! new head instead, which replaces the old one and is parsed again ([`install_request`],
//! [`install_response`]).
//!
//! Either way the head the data path reads is one the strict parser accepts, so a value
//! computed from client input can never inject a line or a second framing field. A value
//! that is not a valid field value, or a head that no longer fits in the buffer, is a failed
//! rewrite, answered with 500 for a request (502 for a response) as HAProxy's `strict-mode
//! on` does.

use super::buffer::InBuf;
use regex::bytes::{Captures, Regex};
use sluice_config::rules::{LinePart, NameMatch};
use sluice_http::encode::is_valid_field;
use sluice_http::head::{
    HeaderSpan, Limits, MessageHead, Parse, RequestHead, ResponseHead, header_name, header_value,
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

/// A head whose field list [`edit_request`] and [`edit_response`] change along with the bytes.
pub trait EditableHead: MessageHead {
    /// The field offsets and the head's length, to move after an edit.
    fn fields_mut(&mut self) -> (&mut Vec<HeaderSpan>, &mut usize);
}

impl EditableHead for RequestHead {
    fn fields_mut(&mut self) -> (&mut Vec<HeaderSpan>, &mut usize) {
        (&mut self.headers, &mut self.head_len)
    }
}

impl EditableHead for ResponseHead {
    fn fields_mut(&mut self) -> (&mut Vec<HeaderSpan>, &mut usize) {
        (&mut self.headers, &mut self.head_len)
    }
}

/// Applies `edit` to the request head at the start of `input`. Returns whether the head
/// changed. An invalid field, one field too many or a lack of room is refused before
/// anything moves; a `Host` the parser refuses after the edit fails the request.
pub fn edit_request(
    input: &mut InBuf,
    head: &mut RequestHead,
    edit: &FieldEdit<'_>,
    limits: &Limits,
) -> Result<bool, RewriteFailed> {
    let Some((remove, add)) = in_place(edit) else {
        return Ok(match request_fields(input.filled(), head, edit)? {
            Some(new_head) => {
                install_request(input, head, &new_head, limits)?;
                true
            }
            None => false,
        });
    };
    let (changed, host) = edit_fields(input, head, remove, add, limits)?;
    // The parser checks Host against the request line: a changed Host is checked by it.
    if host {
        match parse_request(input.filled(), limits) {
            Ok(Parse::Complete(parsed)) if parsed.head_len == head.head_len => *head = parsed,
            _ => return Err(RewriteFailed),
        }
    }
    Ok(changed)
}

/// Applies `edit` to the response head at the start of `input`. Returns whether the head
/// changed. An in-place edit that fails leaves the head as it was.
pub fn edit_response(
    input: &mut InBuf,
    head: &mut ResponseHead,
    edit: &FieldEdit<'_>,
    limits: &Limits,
) -> Result<bool, RewriteFailed> {
    let Some((remove, add)) = in_place(edit) else {
        return Ok(match response_fields(input.filled(), head, edit)? {
            Some(new_head) => {
                install_response(input, head, &new_head, limits)?;
                true
            }
            None => false,
        });
    };
    Ok(edit_fields(input, head, remove, add, limits)?.0)
}

/// The fields an in-place edit removes.
#[derive(Clone, Copy)]
enum Removed<'e> {
    /// None (`add-header`).
    Nothing,
    /// Those of this name, ignoring case (`set-header`).
    Named(&'e str),
    /// Those whose name matches (`del-header`).
    Matching(&'e NameMatch),
}

impl Removed<'_> {
    fn matches(self, name: &[u8]) -> bool {
        match self {
            Removed::Nothing => false,
            Removed::Named(n) => name.eq_ignore_ascii_case(n.as_bytes()),
            Removed::Matching(m) => m.matches(name),
        }
    }
}

/// A field an edit appends: name and value.
type Field<'e> = (&'e str, &'e [u8]);

/// Which fields an edit removes and which one it appends, for the edits made in place
/// (`set-header`, `add-header`, `del-header`); `None` for value replacements, which rebuild
/// the head.
fn in_place<'e>(edit: &FieldEdit<'e>) -> Option<(Removed<'e>, Option<Field<'e>>)> {
    match *edit {
        FieldEdit::Set(name, value) => Some((Removed::Named(name), Some((name, value)))),
        FieldEdit::Add(name, value) => Some((Removed::Nothing, Some((name, value)))),
        FieldEdit::Delete(matcher) => Some((Removed::Matching(matcher), None)),
        FieldEdit::ReplaceValue(..) | FieldEdit::ReplaceElements(..) => None,
    }
}

/// Removes the fields `remove` matches, then appends `add`, in place: the same
/// change [`request_fields`] makes by rebuilding the head. Everything that could fail (an
/// invalid field, too many fields, no room) is checked before the first byte moves. Returns
/// whether the head changed and whether a `Host` field was touched.
fn edit_fields(
    input: &mut InBuf,
    head: &mut impl EditableHead,
    remove: Removed<'_>,
    add: Option<Field<'_>>,
    limits: &Limits,
) -> Result<(bool, bool), RewriteFailed> {
    let buf = input.filled();
    let head_len = head.head_len();
    let (mut lines, mut bytes, mut host) = (0, 0, false);
    for h in head.headers() {
        let name = header_name(buf, h);
        if remove.matches(name) {
            lines += 1;
            bytes += line_end(buf, h.name.end as usize, head_len)? - h.name.start as usize;
            host |= name.eq_ignore_ascii_case(b"host");
        }
    }
    let mut added = 0;
    if let Some((name, value)) = add {
        if !is_valid_field(name, value) || head.headers().len() - lines + 1 >= limits.max_headers {
            return Err(RewriteFailed);
        }
        added = name.len() + value.len() + 4;
        host |= name.eq_ignore_ascii_case("host");
    }
    if head_len - bytes + added > limits.max_head || input.len() - bytes + added > input.capacity()
    {
        return Err(RewriteFailed);
    }
    // Backwards, so that the lines still to remove keep their offsets.
    let to_check = if lines > 0 { head.headers().len() } else { 0 };
    for i in (0..to_check).rev() {
        let h = head.headers()[i].clone();
        let buf = input.filled();
        if remove.matches(header_name(buf, &h)) {
            // The whole line goes, its line ending with it.
            let start = h.name.start as usize;
            let end = line_end(buf, h.name.end as usize, head.head_len())?;
            replace(input, head, start, end - start, &[])?;
            head.fields_mut().0.remove(i);
        }
    }
    if let Some((name, value)) = add {
        let head_len = head.head_len();
        // The new line goes before the empty line ending the head (CRLF, or a lone LF).
        let at = head_len
            - if input.filled()[..head_len].ends_with(b"\r\n") {
                2
            } else {
                1
            };
        replace(
            input,
            head,
            at,
            0,
            &[name.as_bytes(), b": ", value, b"\r\n"],
        )?;
        let span = HeaderSpan {
            name: offset(at)?..offset(at + name.len())?,
            value: value_span(at + name.len() + 2, value)?,
        };
        head.fields_mut().0.push(span);
    }
    Ok((lines > 0 || add.is_some(), host))
}

/// The end of the field line whose name ends at `from`: just past its line feed.
fn line_end(buf: &[u8], from: usize, head_len: usize) -> Result<usize, RewriteFailed> {
    let line = buf.get(from..head_len).ok_or(RewriteFailed)?;
    let lf = line.iter().position(|&b| b == b'\n').ok_or(RewriteFailed)?;
    Ok(from + lf + 1)
}

/// Replaces `old_len` bytes of the head at `at` with `parts`, moving every field offset
/// past the replaced bytes and the head's length by the difference.
fn replace(
    input: &mut InBuf,
    head: &mut impl EditableHead,
    at: usize,
    old_len: usize,
    parts: &[&[u8]],
) -> Result<(), RewriteFailed> {
    if !input.replace_range(at, old_len, parts) {
        return Err(RewriteFailed);
    }
    let new_len: usize = parts.iter().map(|p| p.len()).sum();
    let after = offset(at + old_len)?;
    let grown = new_len as i64 - old_len as i64;
    let moved = |o: &mut u32| {
        if *o >= after {
            *o = (i64::from(*o) + grown) as u32;
        }
    };
    let (headers, head_len) = head.fields_mut();
    for h in headers.iter_mut() {
        moved(&mut h.name.start);
        moved(&mut h.name.end);
        moved(&mut h.value.start);
        moved(&mut h.value.end);
    }
    *head_len = (*head_len as i64 + grown) as usize;
    Ok(())
}

/// The span of a value written at `start`, without its surrounding blanks, as the parser
/// would give it.
fn value_span(start: usize, value: &[u8]) -> Result<std::ops::Range<u32>, RewriteFailed> {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let lead = value.iter().take_while(|b| blank(b)).count();
    let trail = value[lead..].iter().rev().take_while(|b| blank(b)).count();
    Ok(offset(start + lead)?..offset(start + value.len() - trail)?)
}

fn offset(at: usize) -> Result<u32, RewriteFailed> {
    u32::try_from(at).map_err(|_| RewriteFailed)
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

    /// The fields of a head as (name, value) pairs.
    fn pairs(buf: &[u8], head: &impl MessageHead) -> Vec<(Vec<u8>, Vec<u8>)> {
        head.headers()
            .iter()
            .map(|h| (header_name(buf, h).to_vec(), header_value(buf, h).to_vec()))
            .collect()
    }

    /// A head (and a body after it) in a buffer of `capacity` bytes.
    async fn buffered(text: &str, capacity: usize) -> (InBuf, RequestHead) {
        let mut input = InBuf::new(capacity);
        let mut bytes = text.as_bytes();
        input.read_more(&mut bytes, None).await.unwrap();
        let Ok(Parse::Complete(head)) = parse_request(input.filled(), &Limits::default()) else {
            panic!("test request must parse");
        };
        (input, head)
    }

    #[tokio::test]
    async fn in_place_edits_equal_rebuilt_heads() {
        let x_beg = NameMatch::Beg("x-".to_owned());
        let nothing = NameMatch::Str("nothing".to_owned());
        let edits = [
            FieldEdit::Set("X-A", b"9"),
            FieldEdit::Set("New", b"  padded value\t"),
            FieldEdit::Add("C", b"4"),
            FieldEdit::Add("Empty", b""),
            FieldEdit::Delete(&x_beg),
            FieldEdit::Delete(&nothing),
        ];
        let heads = [
            "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nB: 3\r\n\r\nbody",
            "GET /p HTTP/1.1\nhost:h\nX-A:   1  \nE:\n\npipelined",
            "GET / HTTP/1.0\r\n\r\n",
        ];
        let limits = Limits {
            max_head: 4096,
            ..Limits::default()
        };
        for text in heads {
            for edit in &edits {
                let (mut input, mut head) = buffered(text, 4096).await;
                let rebuilt = request_fields(input.filled(), &head, edit).unwrap();
                let body = input.filled()[head.head_len..].to_vec();
                let changed = edit_request(&mut input, &mut head, edit, &limits).unwrap();
                assert_eq!(changed, rebuilt.is_some(), "{text:?}");
                // The offsets are those the parser finds in the edited bytes, the fields
                // those of the rebuilt head, and the bytes after the head are untouched.
                let Ok(Parse::Complete(parsed)) = parse_request(input.filled(), &limits) else {
                    panic!("edited head must parse: {:?}", input.filled());
                };
                assert_eq!(parsed, head, "{text:?}");
                assert_eq!(&input.filled()[head.head_len..], &body[..]);
                if let Some(rebuilt) = rebuilt {
                    let Ok(Parse::Complete(expected)) = parse_request(&rebuilt, &limits) else {
                        panic!("rebuilt head must parse");
                    };
                    assert_eq!(pairs(input.filled(), &head), pairs(&rebuilt, &expected));
                }
            }
        }
    }

    #[tokio::test]
    async fn a_failed_in_place_edit_changes_nothing() {
        let text = "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n";
        let limits = Limits::default();
        for (edit, capacity, max_headers) in [
            (FieldEdit::Set("X-A", &b"a\r\nEvil: 1"[..]), 4096, 101),
            (FieldEdit::Add("Bad Name", b"v"), 4096, 101),
            // No room in the buffer, or one field more than allowed.
            (
                FieldEdit::Add("X-Long", &[b'v'; 64][..]),
                text.len() + 8,
                101,
            ),
            (FieldEdit::Add("X-B", b"2"), 4096, 3),
        ] {
            let (mut input, mut head) = buffered(text, capacity).await;
            let before = (input.filled().to_vec(), head.clone());
            let limits = Limits {
                max_head: capacity,
                max_headers,
                ..limits.clone()
            };
            assert!(edit_request(&mut input, &mut head, &edit, &limits).is_err());
            assert_eq!((input.filled().to_vec(), head), before);
        }
        // Removing a field makes room for its replacement.
        let (mut input, mut head) = buffered(text, 4096).await;
        let limits = Limits {
            max_headers: 3,
            ..limits
        };
        assert!(
            edit_request(&mut input, &mut head, &FieldEdit::Set("x-a", b"2"), &limits).unwrap()
        );
    }

    #[tokio::test]
    async fn a_changed_host_is_checked_by_the_parser() {
        let text = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        let limits = Limits::default();
        let (mut input, mut head) = buffered(text, 4096).await;
        assert!(
            edit_request(
                &mut input,
                &mut head,
                &FieldEdit::Set("Host", b"a b"),
                &limits
            )
            .is_err()
        );
        let (mut input, mut head) = buffered(text, 4096).await;
        let host = NameMatch::Str("host".to_owned());
        assert!(edit_request(&mut input, &mut head, &FieldEdit::Delete(&host), &limits).is_err());
        let (mut input, mut head) = buffered(text, 4096).await;
        assert!(
            edit_request(
                &mut input,
                &mut head,
                &FieldEdit::Set("host", b"other:8080"),
                &limits
            )
            .unwrap()
        );
        assert_eq!(
            head.header_values(input.filled(), "host").next(),
            Some(&b"other:8080"[..])
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
