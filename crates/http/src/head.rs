//! Parsing request and response heads into offsets (RFC 9112 §2–§5).
//!
//! The first step of every HTTP/1 message in the proxy: bytes read from a socket sit in the
//! connection's buffer, and [`parse_request`] / [`parse_response`] turn the head found there
//! into a [`RequestHead`] / [`ResponseHead`] holding *offsets* into that buffer (zero-copy:
//! nothing is copied until the head is re-encoded by `encode`). A head that is not complete
//! yet gives [`Parse::Partial`]; call again with more bytes. After a complete head,
//! `framing` decides how the body is delimited, and the next message of a pipeline starts at
//! `head_len` plus the body.
//!
//! httparse does the scanning; this module adds what a proxy must enforce on top, as
//! configuration.txt "option accept-unsafe-violations-in-http-request" describes HAProxy's
//! default strictness: size and count limits ([`Limits`], "tune.bufsize" minus
//! "tune.maxrewrite", "tune.http.maxhdr"), versions other than 1.0/1.1, target forms, Host
//! rules, and precise error names (through `diagnose`). Line endings may be CRLF or a lone LF
//! (RFC 9112 §2.2 lets a recipient accept LF); the head is always re-encoded with CRLF before
//! it is forwarded, so the next hop never sees the difference. The span lists of dropped heads
//! are kept per thread for the next heads parsed there, so parsing allocates nothing once a
//! thread is warm. Read [`parse_request`] first.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ops::Range;

use crate::diagnose::{self, Diagnosis};
use crate::error::{HttpError, HttpErrorKind, Side};
use crate::spares::Spares;
use crate::target::{self, TargetForm};

/// The protocol versions Sluice speaks on HTTP/1 connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// HTTP/1.0: connections close after each message unless keep-alive is asked for.
    Http10,
    /// HTTP/1.1: persistent connections, Host required, chunked framing.
    Http11,
}

impl Version {
    /// The version as written on a start line: `HTTP/1.0` or `HTTP/1.1`.
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        }
    }
}

/// One field line of a head: offsets of its name and of its value (without surrounding
/// whitespace) in the caller's buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeaderSpan {
    /// Offsets of the field name.
    pub name: Range<u32>,
    /// Offsets of the field value, leading and trailing whitespace excluded.
    pub value: Range<u32>,
}

/// A parsed request head; every range is an offset into the buffer it was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    /// Offsets of the method token.
    pub method: Range<u32>,
    /// Offsets of the request-target.
    pub target: Range<u32>,
    /// The form of the target, already checked against the method.
    pub form: TargetForm,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The field lines, in order.
    pub headers: Vec<HeaderSpan>,
    /// Bytes from the start of the buffer to the end of the empty line closing the head; the
    /// body (if any) starts here.
    pub head_len: usize,
}

/// A parsed response head; every range is an offset into the buffer it was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code, 100 to 999.
    pub status: u16,
    /// Offsets of the reason phrase (possibly empty).
    pub reason: Range<u32>,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The field lines, in order.
    pub headers: Vec<HeaderSpan>,
    /// Bytes from the start of the buffer to the end of the empty line closing the head.
    pub head_len: usize,
}

/// The outcome of a parse that did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// The whole head was there.
    Complete(T),
    /// The bytes so far are a valid beginning; read more and parse again from the start.
    Partial,
}

/// Limits and leniency of the head parser, per side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest head accepted, in bytes: HAProxy's `tune.bufsize - tune.maxrewrite`.
    pub max_head: usize,
    /// `tune.http.maxhdr`: the largest number of lines in a head, *counting the start line*
    /// as configuration.txt says, so at most `max_headers - 1` field lines.
    pub max_headers: usize,
    /// `option accept-unsafe-violations-in-http-request` (or `-response`): field lines whose
    /// name is invalid are dropped instead of rejected, bytes above 127 and fragments are
    /// accepted in targets, the authority/Host checks are skipped, and chunked framing
    /// tolerates a lone LF. Obs-fold, bare CR and NUL stay errors even then.
    pub accept_unsafe: bool,
}

impl Default for Limits {
    /// HAProxy's defaults: 16384 - 1024 bytes, 101 lines, strict parsing.
    fn default() -> Self {
        Limits {
            max_head: 16384 - 1024,
            max_headers: 101,
            accept_unsafe: false,
        }
    }
}

impl Limits {
    /// The limits a head the proxy rewrote is parsed again with: the whole buffer of
    /// `bufsize` bytes (the room `tune.maxrewrite` keeps free is for rewrites) and any number
    /// of fields (`tune.http.maxhdr` bounds what a peer sends, not what rules add, as in
    /// HAProxy).
    pub fn for_rewrites(&self, bufsize: usize) -> Limits {
        Limits {
            max_head: bufsize,
            max_headers: usize::MAX,
            accept_unsafe: self.accept_unsafe,
        }
    }
}

/// The bytes of `range` in `buf`; empty if the range does not fit (a head used with another
/// buffer than its own must not panic).
fn bytes_at<'a>(buf: &'a [u8], range: &Range<u32>) -> &'a [u8] {
    buf.get(range.start as usize..range.end as usize)
        .unwrap_or(&[])
}

/// The name of a field line.
pub fn header_name<'a>(buf: &'a [u8], h: &HeaderSpan) -> &'a [u8] {
    bytes_at(buf, &h.name)
}

/// The value of a field line, without surrounding whitespace.
pub fn header_value<'a>(buf: &'a [u8], h: &HeaderSpan) -> &'a [u8] {
    bytes_at(buf, &h.value)
}

/// The values of every field line named `name` (compared ignoring ASCII case), in order.
pub fn header_values<'a>(
    buf: &'a [u8],
    headers: &'a [HeaderSpan],
    name: &'a str,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .iter()
        .filter(move |h| header_name(buf, h).eq_ignore_ascii_case(name.as_bytes()))
        .map(move |h| header_value(buf, h))
}

/// What requests and responses have in common, for code that handles either.
pub trait MessageHead {
    /// The field lines, in order.
    fn headers(&self) -> &[HeaderSpan];
    /// HTTP/1.0 or HTTP/1.1.
    fn version(&self) -> Version;
    /// Length of the head in the buffer, empty line included.
    fn head_len(&self) -> usize;

    /// The values of every field named `name` (ignoring ASCII case), in order.
    fn header_values<'a>(
        &'a self,
        buf: &'a [u8],
        name: &'a str,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        header_values(buf, self.headers(), name)
    }

    /// True if at least one field is named `name` (ignoring ASCII case).
    fn has_header(&self, buf: &[u8], name: &str) -> bool {
        self.headers()
            .iter()
            .any(|h| header_name(buf, h).eq_ignore_ascii_case(name.as_bytes()))
    }
}

impl MessageHead for RequestHead {
    fn headers(&self) -> &[HeaderSpan] {
        &self.headers
    }
    fn version(&self) -> Version {
        self.version
    }
    fn head_len(&self) -> usize {
        self.head_len
    }
}

impl MessageHead for ResponseHead {
    fn headers(&self) -> &[HeaderSpan] {
        &self.headers
    }
    fn version(&self) -> Version {
        self.version
    }
    fn head_len(&self) -> usize {
        self.head_len
    }
}

impl RequestHead {
    /// The method token, e.g. `GET`.
    pub fn method_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.method)
    }

    /// The request-target as received.
    pub fn target_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.target)
    }

    /// True if the method is exactly `method` (methods are case-sensitive, RFC 9110 §9.1).
    pub fn is_method(&self, buf: &[u8], method: &str) -> bool {
        self.method_bytes(buf) == method.as_bytes()
    }

    /// The authority named by the target: the `host[:port]` of an absolute-form target, the
    /// whole target of a CONNECT; `None` for origin and asterisk forms (then the Host field
    /// names the authority).
    pub fn target_authority<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        let target = self.target_bytes(buf);
        match self.form {
            TargetForm::Absolute => target::absolute_parts(target).map(|(_, a)| a),
            TargetForm::Authority => Some(target),
            TargetForm::Origin | TargetForm::Asterisk => None,
        }
    }
}

impl ResponseHead {
    /// The reason phrase as received (possibly empty).
    pub fn reason_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.reason)
    }
}

/// Offsets of `part`, a sub-slice that httparse returned, inside `buf`.
fn span(buf: &[u8], part: &[u8]) -> Option<Range<u32>> {
    let start = part.as_ptr().addr().checked_sub(buf.as_ptr().addr())?;
    let end = start.checked_add(part.len())?;
    if end > buf.len() {
        return None;
    }
    Some(u32::try_from(start).ok()?..u32::try_from(end).ok()?)
}

/// The parse window: at most `max_head` bytes (and never more than offsets can hold), and
/// whether the buffer already reaches that size, so that an incomplete head is too large.
fn window<'a>(buf: &'a [u8], limits: &Limits) -> (&'a [u8], bool) {
    let max = limits.max_head.min(u32::MAX as usize);
    match buf.get(..max) {
        Some(w) => (w, true),
        None => (buf, false),
    }
}

/// The verdict on a head that is not complete: wait for more, or it is too large. A request
/// whose request line did not even end is 414, any other head 431 (502 for responses).
fn incomplete<T>(window: &[u8], full: bool, side: Side) -> Result<Parse<T>, HttpError> {
    if !full {
        return Ok(Parse::Partial);
    }
    let line_started = window
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(window.len());
    let line_ended = window
        .get(line_started..)
        .is_some_and(|rest| rest.contains(&b'\n'));
    let kind = match side {
        Side::Request if !line_ended => HttpErrorKind::UriTooLong,
        _ => HttpErrorKind::HeaderTooLarge,
    };
    Err(HttpError::new(side, kind))
}

/// The condition behind an httparse error, or `Partial` when only more input can tell.
fn refused<T>(
    window: &[u8],
    full: bool,
    side: Side,
    err: httparse::Error,
    diagnosis: Diagnosis,
) -> Result<Parse<T>, HttpError> {
    let kind = match diagnosis {
        Diagnosis::Found(kind) => kind,
        Diagnosis::NeedMore => return incomplete(window, full, side),
        Diagnosis::Unknown => match err {
            httparse::Error::HeaderName => HttpErrorKind::BadHeaderName,
            httparse::Error::HeaderValue => HttpErrorKind::BadHeaderValue,
            httparse::Error::NewLine => HttpErrorKind::BareCr,
            httparse::Error::Status => HttpErrorKind::BadStatusLine,
            httparse::Error::Token => match side {
                Side::Request => HttpErrorKind::BadRequestLine,
                Side::Response => HttpErrorKind::BadStatusLine,
            },
            httparse::Error::TooManyHeaders => HttpErrorKind::TooManyHeaders,
            httparse::Error::Version => HttpErrorKind::BadVersion,
        },
    };
    Err(HttpError::new(side, kind))
}

/// In lenient mode httparse drops invalid field lines, obs-fold continuations among them;
/// a dropped continuation would silently shorten a value, so folding stays an error.
fn has_obs_fold(head: &[u8]) -> bool {
    head.windows(2).any(|w| matches!(w, [b'\n', b' ' | b'\t']))
}

/// Room for the field lines httparse may find: `tune.http.maxhdr` counts the start line, and
/// a head cannot hold more fields than it has line ends, so a large configured limit costs
/// nothing on small heads.
/// Header slots kept on the stack: enough for HAProxy's default `tune.http.maxhdr` (101
/// lines, the start line included), so parsing a head allocates nothing but its span list.
const STACK_SLOTS: usize = 128;

/// httparse's field slots: on the stack up to [`STACK_SLOTS`], on the heap beyond. Left
/// uninitialised: httparse writes the slots it fills, and filling all 128 with empty fields
/// first was a 4 KiB copy per head parsed (two per exchange).
struct Slots<'b> {
    stack: [MaybeUninit<httparse::Header<'b>>; STACK_SLOTS],
    heap: Vec<MaybeUninit<httparse::Header<'b>>>,
}

impl<'b> Slots<'b> {
    fn new() -> Self {
        Slots {
            stack: [const { MaybeUninit::uninit() }; STACK_SLOTS],
            heap: Vec::new(),
        }
    }

    fn take(&mut self, count: usize) -> &mut [MaybeUninit<httparse::Header<'b>>] {
        if count <= STACK_SLOTS {
            &mut self.stack[..count]
        } else {
            self.heap.resize_with(count, MaybeUninit::uninit);
            &mut self.heap[..]
        }
    }
}

/// How many field lines httparse may fill: one per allowed line but the start line, and no
/// more than the window has lines (a larger limit than [`STACK_SLOTS`] then costs a heap list
/// sized by the head, not by the limit).
fn slot_count(window: &[u8], limits: &Limits) -> usize {
    let allowed = limits.max_headers.saturating_sub(1);
    if allowed <= STACK_SLOTS {
        allowed
    } else {
        allowed.min(window.iter().filter(|&&b| b == b'\n').count())
    }
}

/// The largest span list kept for reuse (a head with many more fields than usual gives its
/// list back to the allocator).
const SPARE_CAPACITY: usize = 128;

thread_local! {
    /// The spare lists of this thread, for the next heads parsed here: a busy thread parses
    /// every head into a list it already has, instead of allocating one.
    static SPARE_SPANS: RefCell<Spares<Vec<HeaderSpan>>> = const { RefCell::new(Spares::new()) };
}

/// An empty span list with room for `len` fields and the few that rules commonly add.
fn span_list(len: usize) -> Vec<HeaderSpan> {
    let spare = SPARE_SPANS.try_with(|spare| spare.borrow_mut().take());
    let mut list = spare.ok().flatten().unwrap_or_default();
    list.reserve(len + 8);
    list
}

/// Gives a dropped head's span list to the thread's spares.
fn give_span_list(mut list: Vec<HeaderSpan>) {
    if list.capacity() == 0 || list.capacity() > SPARE_CAPACITY {
        return;
    }
    list.clear();
    // During the thread's own teardown there is nowhere to keep it: it is freed.
    let _ = SPARE_SPANS.try_with(|spare| spare.borrow_mut().give(list));
}

/// Frees the span lists this thread's spares have not used since the last call (see
/// [`Spares::trim`]); called on a period by the thread's upkeep.
pub fn trim_spare_span_lists() {
    let _ = SPARE_SPANS.try_with(|spare| spare.borrow_mut().trim());
}

impl Drop for RequestHead {
    fn drop(&mut self) {
        give_span_list(std::mem::take(&mut self.headers));
    }
}

impl Drop for ResponseHead {
    fn drop(&mut self) {
        give_span_list(std::mem::take(&mut self.headers));
    }
}

/// Field spans of httparse's headers.
fn spans(window: &[u8], headers: &[httparse::Header<'_>]) -> Option<Vec<HeaderSpan>> {
    // Sized up front: never one allocation per field, and usually none at all.
    let mut out = span_list(headers.len());
    for h in headers {
        out.push(HeaderSpan {
            name: span(window, h.name.as_bytes())?,
            value: span(window, h.value)?,
        });
    }
    Some(out)
}

fn version_of(v: Option<u8>) -> Option<Version> {
    match v {
        Some(0) => Some(Version::Http10),
        Some(1) => Some(Version::Http11),
        _ => None,
    }
}

/// Parses the request head at the start of `buf`.
///
/// Returns `Partial` while the bytes are a valid beginning shorter than `limits.max_head`.
/// Rejects (status in brackets, see [`HttpError::status`]): a head over `max_head` bytes
/// (414 `UriTooLong` if the request line itself did not end, else 431 `HeaderTooLarge`); more
/// than `max_headers - 1` fields (400 `TooManyHeaders`); a malformed request line, method,
/// target or version (400); a well-formed version other than HTTP/1.0 and 1.1 (505); NUL, bare
/// CR, control characters, obs-fold, whitespace before a colon, invalid field names (400);
/// a target whose form does not fit the method, a missing Host in HTTP/1.1, several differing
/// Host fields, an invalid Host, a Host differing from an absolute-form or CONNECT authority
/// (400). Identical Host copies are kept once. See [`Limits::accept_unsafe`] for what lenient
/// mode lets through.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Parse<RequestHead>, HttpError> {
    let side = Side::Request;
    let (window, full) = window(buf, limits);
    let mut storage = Slots::new();
    let slots = storage.take(slot_count(window, limits));
    let mut req = httparse::Request::new(&mut []);
    let mut config = httparse::ParserConfig::default();
    config.ignore_invalid_headers_in_requests(limits.accept_unsafe);
    let head_len = match config.parse_request_with_uninit_headers(&mut req, window, slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return incomplete(window, full, side),
        Err(e) => return refused(window, full, side, e, diagnose::request(window)),
    };
    let fail = |kind| Err(HttpError::request(kind));
    let head = window.get(..head_len).unwrap_or(window);
    if limits.accept_unsafe && has_obs_fold(head) {
        return fail(HttpErrorKind::ObsFold);
    }
    let method_bytes = req.method.unwrap_or("").as_bytes();
    let target_bytes = req.path.unwrap_or("").as_bytes();
    let (Some(method), Some(target), Some(version), Some(headers)) = (
        span(window, method_bytes),
        span(window, target_bytes),
        version_of(req.version),
        spans(window, req.headers),
    ) else {
        return fail(HttpErrorKind::BadRequestLine);
    };
    let form = match target::classify(method_bytes, target_bytes, limits.accept_unsafe) {
        Ok(form) => form,
        Err(kind) => return fail(kind),
    };
    let hosts = header_values(window, &headers, "host");
    let checked = target::check_host(hosts, version, form, target_bytes, limits.accept_unsafe);
    let mut headers = headers;
    match checked {
        Ok(copies) if copies > 1 => {
            // Identical copies: rules see one and the server gets one, as from HAProxy.
            let mut first = true;
            headers.retain(|h| {
                !header_name(window, h).eq_ignore_ascii_case(b"host") || std::mem::take(&mut first)
            });
        }
        Ok(_) => {}
        Err(kind) => return fail(kind),
    }
    Ok(Parse::Complete(RequestHead {
        method,
        target,
        form,
        version,
        headers,
        head_len,
    }))
}

/// Offsets of the reason phrase: httparse accepts `HTTP/1.1 200 reason` and `HTTP/1.1 200`,
/// after optional empty lines; it does not return the reason's place when it holds obs-text,
/// so the status line is read again here.
fn reason_span(head: &[u8]) -> Option<Range<u32>> {
    let start = head.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let line = crate::field::line_at(head, start);
    // "HTTP/1.1 200" is 12 bytes; the reason starts after one more space.
    // Without a reason, an empty range at the end of the line.
    let reason = line
        .bytes
        .get(13..)
        .or_else(|| line.bytes.get(line.bytes.len()..))?;
    span(head, reason)
}

/// Parses the response head at the start of `buf`.
///
/// Returns `Partial` while the bytes are a valid beginning shorter than `limits.max_head`.
/// Every rejection is a 502 for the client: a head over `max_head` bytes, too many fields, a
/// malformed status line, a status below 100, a version other than 1.0/1.1, NUL, bare CR,
/// control characters, obs-fold, whitespace before a colon, invalid field names.
pub fn parse_response(buf: &[u8], limits: &Limits) -> Result<Parse<ResponseHead>, HttpError> {
    let side = Side::Response;
    let (window, full) = window(buf, limits);
    let mut storage = Slots::new();
    let slots = storage.take(slot_count(window, limits));
    let mut resp = httparse::Response::new(&mut []);
    let mut config = httparse::ParserConfig::default();
    config.ignore_invalid_headers_in_responses(limits.accept_unsafe);
    let head_len = match config.parse_response_with_uninit_headers(&mut resp, window, slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return incomplete(window, full, side),
        Err(e) => return refused(window, full, side, e, diagnose::response(window)),
    };
    let fail = |kind| Err(HttpError::response(kind));
    let head = window.get(..head_len).unwrap_or(window);
    if limits.accept_unsafe && has_obs_fold(head) {
        return fail(HttpErrorKind::ObsFold);
    }
    let status = resp.code.unwrap_or(0);
    if status < 100 {
        return fail(HttpErrorKind::BadStatus);
    }
    let (Some(reason), Some(version), Some(headers)) = (
        reason_span(head),
        version_of(resp.version),
        spans(window, resp.headers),
    ) else {
        return fail(HttpErrorKind::BadStatusLine);
    };
    Ok(Parse::Complete(ResponseHead {
        status,
        reason,
        version,
        headers,
        head_len,
    }))
}

#[cfg(test)]
mod tests;
