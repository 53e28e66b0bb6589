//! `http-request cache-use` and `http-response cache-store` (configuration.txt §6): small
//! responses kept in a `cache` section's store and served from it, as HAProxy 2.6 does.
//!
//! - `cache-use` ([`use_cache`]) keys the request (the SHA-1 of its URI, made absolute with
//!   `https://` and its Host field when it was not). A GET or HEAD of HTTP/1.1 without
//!   `Authorization` and without `no-cache` is looked up (`cache_lookups`); a fresh copy
//!   found (`cache_hits`) answers it once the request rules are done ([`take_hit`],
//!   [`answer`]): the stored head gets its `Age`, goes through the backend's and
//!   frontend's `http-response` rules and the `http-after-response` ones, and leaves with the
//!   stored body (none for HEAD, nor for a `304` to a matching `If-None-Match` or
//!   `If-Modified-Since`). The log names the server `<CACHE>`.
//! - `cache-store` ([`mark_store`]) judges the response as the rules before it left it: a
//!   200 to a GET of HTTP/1.1 the same transaction keyed, without `Vary` (or, under
//!   `process-vary on`, varying only on what [`super::vary`] reads), that a shared
//!   cache may keep with its cookies, with a `Content-Length` or chunked, and whose head and
//!   body fit `max-object-size`. Its head is kept then (without `Age`, which it remembers);
//!   the exchange tees the body as it sends it to the client ([`Tee`]) and stores the
//!   response once the body is whole ([`finish_store`]); such a body is copied, never
//!   spliced, and a compressed one is not stored. Freshness is the response's `s-maxage`,
//!   else `max-age`, else `Expires` less now, capped by the cache's `max-age` (which is also
//!   the default). A `silent-drop` among the response rules does not apply to a cached
//!   answer: there is no server connection to drop.

use std::borrow::Cow;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};

use sluice_http::date::parse_http_date;
use sluice_http::encode::{self, HeadEdits};
use sluice_http::head::{MessageHead, RequestHead, ResponseHead, Version};
use sluice_http::{BodyFraming, Parse, TargetForm, parse_response};
use sluice_runtime::cache::{CacheKey, CachedResponse, RequestVariant, Variant, key_of};
use sluice_runtime::proxy::Backend;
use tokio::io::AsyncWrite;

use super::body::BodyOutput;
use super::buffer::InBuf;
use super::cacheability::{Cacheability, list_items};
use super::rules::{self, Answer, ResponseVerdict, Scope};
use super::settings::HttpSettings;

/// A transaction's cache state, kept with its variables.
#[derive(Debug, Default)]
pub(crate) struct CacheTxn {
    /// The request's key, when a `cache-use` rule could make one.
    key: Option<CacheKey>,
    /// Its response may be stored: a GET of HTTP/1.1 without credentials or `no-cache`.
    storable_request: bool,
    /// The request's fields variants are chosen by, for a cache with `process-vary on`.
    variant: Option<RequestVariant>,
    /// A fresh copy found by `cache-use`, to answer with, and the index of its cache.
    hit: Option<(usize, Arc<CachedResponse>)>,
    /// The index of the cache the response comes from (`res.cache_name`); `cache-store`
    /// leaves such a response alone.
    served: Option<usize>,
    /// What `cache-store` decided to keep once the body went through.
    pending: Option<PendingStore>,
}

/// A response `cache-store` accepted, waiting for its body.
#[derive(Debug)]
pub(crate) struct PendingStore {
    cache: usize,
    key: CacheKey,
    /// The head as stored (hop-by-hop fields and `Age` left out).
    head: Vec<u8>,
    /// The most body bytes the cache takes with this head.
    pub body_limit: u64,
    stored_at: u64,
    expires_at: u64,
    origin_age: u64,
    etag: Option<Box<[u8]>>,
    last_modified: u64,
    /// What it varies on (`process-vary on`).
    variant: Variant,
}

/// Seconds since the epoch, the cache's clock.
fn now_secs() -> u64 {
    sluice_runtime::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The request's key: its absolute URI, or `https://` + Host + its origin-form target.
fn request_key(buf: &[u8], head: &RequestHead) -> Option<CacheKey> {
    let target = head.target_bytes(buf);
    if target.is_empty() {
        return None;
    }
    if head.form == TargetForm::Absolute {
        return Some(key_of(&[target]));
    }
    let host = head.header_values(buf, "host").next()?;
    Some(key_of(&[b"https://", host, target]))
}

/// The request asks not to be served from a cache, or carries credentials a shared cache
/// must not answer for (configuration.txt §6.1).
fn bypasses_cache(buf: &[u8], head: &RequestHead) -> bool {
    if head.has_header(buf, "authorization") {
        return true;
    }
    let mut has_cache_control = false;
    for value in head.header_values(buf, "cache-control") {
        has_cache_control = true;
        let no_cache = list_items(value).any(|d| {
            let d = d.trim_ascii();
            d.eq_ignore_ascii_case(b"no-cache") || d.eq_ignore_ascii_case(b"no-store")
        });
        if no_cache {
            return true;
        }
    }
    // `Pragma: no-cache` counts only without Cache-Control (RFC 9111 §5.4).
    !has_cache_control
        && head
            .header_values(buf, "pragma")
            .next()
            .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"no-cache"))
}

/// `http-request cache-use NAME`, in the rules of `owner` (the frontend's when `None`).
pub(crate) fn use_cache(
    scope: &Scope<'_>,
    owner: Option<&Backend>,
    name: &str,
    buf: &[u8],
    head: &RequestHead,
) {
    let process = scope.process;
    let Some(index) = process.caches.iter().position(|c| c.conf.name == name) else {
        return;
    };
    let Some(key) = request_key(buf, head) else {
        return;
    };
    let get = head.is_method(buf, "GET");
    let eligible = head.version == Version::Http11
        && (get || head.is_method(buf, "HEAD"))
        && !bypasses_cache(buf, head);
    let cache = &process.caches[index];
    // With `process-vary`, a request whose codings cannot be read (too many) is neither
    // served from the cache nor stored in it, as in HAProxy.
    let variant = if cache.conf.process_vary {
        super::vary::request_variant(buf, head)
    } else {
        None
    };
    let readable = !cache.conf.process_vary || variant.is_some();
    let mut txn = scope.vars.cache();
    txn.key = Some(key);
    txn.storable_request = eligible && get && readable;
    txn.variant = variant;
    if !eligible {
        return;
    }
    let stats = owner.map_or(&scope.frontend.stats, |b| &b.stats);
    let [lookups, hits] = &stats.cache;
    lookups.incr();
    if txn.hit.is_none()
        && readable
        && let Some(found) = cache.lookup(&key, variant.as_ref(), now_secs())
    {
        hits.incr();
        txn.hit = Some((index, found));
    }
}

/// The fresh copy `cache-use` found for this request, if any, which answers it instead of
/// a server.
pub(crate) fn take_hit(scope: &Scope<'_>) -> Option<Arc<CachedResponse>> {
    let mut txn = scope.vars.cache_if_any()?;
    let (index, hit) = txn.hit.take()?;
    txn.served = Some(index);
    Some(hit)
}

impl CacheTxn {
    /// The index of the cache the response comes from, if it comes from one.
    pub(crate) fn served(&self) -> Option<usize> {
        self.served
    }
}

/// `http-response cache-store NAME` over the response `head` in `buf`.
pub(crate) fn mark_store(scope: &Scope<'_>, name: &str, buf: &[u8], head: &ResponseHead) {
    let process = scope.process;
    let Some(mut txn) = scope.vars.cache_if_any() else {
        return;
    };
    let Some(key) = txn.key else {
        return;
    };
    if txn.served.is_some() || !txn.storable_request || head.status != 200 || txn.pending.is_some()
    {
        return;
    }
    let Some(index) = process.caches.iter().position(|c| c.conf.name == name) else {
        return;
    };
    let conf = &process.caches[index].conf;
    // A response naming request fields in `Vary` is stored only as a variant of its URI,
    // with `process-vary on`, and only for the fields a cache tells apart.
    let variant = if !head.has_header(buf, "vary") {
        Variant::default()
    } else if let Some(asked) = txn.variant.filter(|_| conf.process_vary)
        && let Some(variant) = super::vary::vary_of(buf, head, &asked)
    {
        variant
    } else {
        return;
    };
    let judged = Cacheability::of((true, head.status), buf, head);
    if !judged.exposes_cookies() {
        return;
    }
    let mut stored = Vec::with_capacity(head.head_len);
    let edits = HeadEdits {
        remove: &["age"],
        hop_by_hop: Some(false),
        ..HeadEdits::default()
    };
    encode::encode_response(buf, head, &edits, &mut stored);
    let Some(body_limit) = conf.max_object_size.checked_sub(stored.len() as u64) else {
        return;
    };
    // A body known to be too large is not waited for.
    let framing = sluice_http::response_framing(buf, head, false, false);
    match framing {
        Ok(BodyFraming::ContentLength(n)) if n <= body_limit => {}
        Ok(BodyFraming::Chunked) => {}
        _ => return,
    }
    let now = now_secs();
    let Some(fresh_for) = freshness(buf, head, now, u64::from(conf.max_age)) else {
        return;
    };
    let first = |name: &'static str| head.header_values(buf, name).next();
    let origin_age = first("age")
        .and_then(|v| {
            std::str::from_utf8(v.trim_ascii())
                .ok()?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    let date = |name| {
        first(name)
            .and_then(parse_http_date)
            .map(|t| t.max(0) as u64)
    };
    txn.pending = Some(PendingStore {
        cache: index,
        key,
        head: stored,
        body_limit,
        stored_at: now,
        expires_at: now + fresh_for,
        origin_age,
        etag: first("etag").map(|v| v.trim_ascii().into()),
        last_modified: date("last-modified")
            .or_else(|| date("date"))
            .unwrap_or(now),
        variant,
    });
}

/// How long a response stays fresh here: its `s-maxage`, else `max-age`, else `Expires`
/// less `now`, capped by `cap`; `cap` when it says nothing; `None` when a directive's value
/// is not a number (HAProxy then does not store it).
fn freshness(buf: &[u8], head: &ResponseHead, now: u64, cap: u64) -> Option<u64> {
    let (mut s_maxage, mut max_age) = (None, None);
    for value in head.header_values(buf, "cache-control") {
        for directive in list_items(value).map(<[u8]>::trim_ascii) {
            let Some(eq) = directive.iter().position(|&b| b == b'=') else {
                continue;
            };
            let (name, arg) = (&directive[..eq], &directive[eq + 1..]);
            let slot = if name.eq_ignore_ascii_case(b"s-maxage") {
                &mut s_maxage
            } else if name.eq_ignore_ascii_case(b"max-age") {
                &mut max_age
            } else {
                continue;
            };
            let arg = arg
                .strip_prefix(b"\"")
                .map_or(arg, |a| a.strip_suffix(b"\"").unwrap_or(a));
            *slot = Some(std::str::from_utf8(arg).ok()?.parse::<u64>().ok()?);
        }
    }
    let expires = || {
        let value = head.header_values(buf, "expires").next()?;
        // An invalid date is a date in the past (RFC 9111 §5.3).
        Some(parse_http_date(value).map_or(0, |t| (t.max(0) as u64).saturating_sub(now)))
    };
    let fresh = match s_maxage.filter(|&n| n > 0).or(max_age.filter(|&n| n > 0)) {
        Some(n) => n,
        None => expires().unwrap_or(cap),
    };
    Some(fresh.min(cap))
}

/// Takes what `cache-store` decided to keep, for the exchange to tee its body.
pub(crate) fn take_pending(scope: &Scope<'_>) -> Option<PendingStore> {
    scope.vars.cache_if_any()?.pending.take()
}

/// Stores the response `pending` waited for, now that its whole `body` went through.
pub(crate) fn finish_store(scope: &Scope<'_>, pending: PendingStore, body: Vec<u8>) {
    let Some(cache) = scope.process.caches.get(pending.cache) else {
        return;
    };
    let response = CachedResponse {
        head: pending.head.into(),
        body: body.into(),
        stored_at: pending.stored_at,
        expires_at: pending.expires_at,
        origin_age: pending.origin_age,
        etag: pending.etag,
        last_modified: pending.last_modified,
    };
    cache.insert(pending.key, response, pending.variant, now_secs());
}

/// An entity tag without its weakness mark, for the weak comparison.
fn opaque_tag(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

/// Whether the request's validators match the stored response, so that a 304 answers it
/// (RFC 9110 §13.1.1 and §13.1.3: `If-None-Match` first, weak comparison; otherwise
/// `If-Modified-Since`).
fn not_modified(buf: &[u8], head: &RequestHead, stored: &CachedResponse) -> bool {
    let mut asked = false;
    for value in head.header_values(buf, "if-none-match") {
        asked = true;
        // Entity tags are quoted strings, which may hold commas.
        for tag in list_items(value).map(<[u8]>::trim_ascii) {
            if tag == b"*" {
                return true;
            }
            if stored
                .etag
                .as_deref()
                .is_some_and(|e| opaque_tag(e) == opaque_tag(tag))
            {
                return true;
            }
        }
    }
    if asked {
        return false;
    }
    head.header_values(buf, "if-modified-since")
        .next()
        .and_then(parse_http_date)
        .is_some_and(|since| since >= 0 && stored.last_modified <= since as u64)
}

/// The head and body to answer a request with from `stored`: its head with `Age` added (and
/// a 304 status line when the request's validators match), and its body unless the
/// request is a HEAD or the answer a 304.
pub(crate) fn cached_response(
    buf: &[u8],
    head: &RequestHead,
    stored: &CachedResponse,
) -> (Vec<u8>, bool) {
    let now = now_secs();
    let mut bytes = Vec::with_capacity(stored.head.len() + 16);
    let unmodified = not_modified(buf, head, stored);
    let stored_head = &stored.head[..];
    let line_end = stored_head
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(0);
    if unmodified {
        bytes.extend_from_slice(b"HTTP/1.1 304 Not Modified");
    } else {
        bytes.extend_from_slice(&stored_head[..line_end]);
    }
    // The fields, then `Age`, then the empty line.
    let fields_end = stored_head.len().saturating_sub(2).max(line_end);
    bytes.extend_from_slice(&stored_head[line_end..fields_end]);
    bytes.extend_from_slice(format!("age: {}\r\n\r\n", stored.age(now)).as_bytes());
    let with_body = !unmodified && !head.is_method(buf, "HEAD");
    (bytes, with_body)
}

/// The answer to a request from `stored`, for `backend`: the cached head (with `Age`, or as
/// a 304) through the backend's and frontend's `http-response` rules and the
/// `http-after-response` ones, then the stored body. `None` when the stored head cannot be
/// read back within the buffer, in which case the server answers instead.
pub(crate) fn answer<'a>(
    scope: &Scope<'a>,
    settings: &HttpSettings<'_>,
    backend: &'a Backend,
    (buf, request): (&[u8], &RequestHead),
    stored: &CachedResponse,
) -> Option<Answer<'a>> {
    let (head_bytes, with_body) = cached_response(buf, request, stored);
    let mut input = InBuf::new(settings.bufsize);
    if !input.replace_prefix(0, &head_bytes) {
        return None;
    }
    let limits = &settings.response_limits;
    let Ok(Parse::Complete(mut head)) = parse_response(input.filled(), limits) else {
        return None;
    };
    let kept = Some((buf, request));
    let bounds = (limits, settings.bufsize);
    let mut resume = None;
    loop {
        match rules::process_response(
            scope, backend, None, kept, &mut input, &mut head, bounds, resume,
        ) {
            // The body is all here: a `wait-for-body` has nothing to wait for. A
            // `silent-drop` has no connection to a server to drop: the answer goes on.
            Ok(ResponseVerdict::Relay | ResponseVerdict::Drop) => break,
            Ok(ResponseVerdict::Replace(answer)) => return Some(answer),
            Err(wait) => resume = Some(wait.resume),
        }
    }
    let after = (backend, None);
    if let Err(answer) = rules::after_response(scope, after, kept, &mut input, &mut head, bounds) {
        return Some(answer);
    }
    let mut bytes = Vec::with_capacity(head.head_len + stored.body.len() + 64);
    let edits = HeadEdits {
        hop_by_hop: Some(false),
        version: Some(Version::Http11),
        case: settings.client_case,
        ..HeadEdits::default()
    };
    encode::encode_response(input.filled(), &head, &edits, &mut bytes);
    if with_body {
        bytes.extend_from_slice(&stored.body);
    }
    let own = backend.plan.id.uid != scope.frontend.plan.id.uid;
    Some(Answer {
        bytes: Cow::Owned(bytes),
        status: head.status,
        close: false,
        denied: false,
        tarpit: None,
        internal: false,
        backend: own.then_some(backend),
    })
}

/// A writer that passes everything to `inner` and keeps a copy of what was written, up to
/// `limit` bytes; beyond it the copy is given up (the response will not be stored).
pub(crate) struct Tee<'w, W> {
    inner: &'w mut W,
    copy: Option<Vec<u8>>,
    limit: usize,
}

impl<'w, W> Tee<'w, W> {
    /// Copies what goes to `inner`, up to `limit` bytes.
    pub(crate) fn new(inner: &'w mut W, limit: u64) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Tee {
            inner,
            copy: Some(Vec::with_capacity(limit.min(16 * 1024))),
            limit,
        }
    }

    /// What was written, if it all fit.
    pub(crate) fn into_copy(self) -> Option<Vec<u8>> {
        self.copy
    }

    /// Keeps the first `n` bytes of `bufs`, the part of them a write took.
    fn keep_vectored(&mut self, bufs: &[io::IoSlice<'_>], n: usize) {
        let mut left = n;
        for buf in bufs {
            let taken = left.min(buf.len());
            self.keep(&buf[..taken]);
            left -= taken;
            if left == 0 {
                break;
            }
        }
    }

    fn keep(&mut self, written: &[u8]) {
        if let Some(copy) = &mut self.copy {
            if copy.len() + written.len() > self.limit {
                self.copy = None;
            } else {
                copy.extend_from_slice(written);
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Tee<'_, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut *this.inner).poll_write(cx, data))?;
        this.keep(&data[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut *this.inner).poll_write_vectored(cx, bufs))?;
        this.keep_vectored(bufs, n);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<W: BodyOutput> BodyOutput for Tee<'_, W> {
    fn poll_write_held(
        &mut self,
        cx: &mut TaskContext<'_>,
        bufs: &[io::IoSlice<'_>],
        more: bool,
    ) -> Poll<io::Result<usize>> {
        let n = ready!(self.inner.poll_write_held(cx, bufs, more))?;
        self.keep_vectored(bufs, n);
        Poll::Ready(Ok(n))
    }

    fn push(&mut self) -> io::Result<()> {
        self.inner.push()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_http::{Limits, parse_request};

    fn request(raw: &str) -> (Vec<u8>, RequestHead) {
        let buf = raw.as_bytes().to_vec();
        match parse_request(&buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => (buf, head),
            Parse::Partial => panic!("partial"),
        }
    }

    fn response(raw: &str) -> (Vec<u8>, ResponseHead) {
        let buf = raw.as_bytes().to_vec();
        match parse_response(&buf, &Limits::default()).unwrap() {
            Parse::Complete(head) => (buf, head),
            Parse::Partial => panic!("partial"),
        }
    }

    fn stored(head: &str, etag: Option<&str>, last_modified: u64) -> CachedResponse {
        let now = now_secs();
        CachedResponse {
            head: head.as_bytes().into(),
            body: b"hello".to_vec().into(),
            stored_at: now,
            expires_at: now + 60,
            origin_age: 3,
            etag: etag.map(|e| e.as_bytes().into()),
            last_modified,
        }
    }

    #[test]
    fn keys_are_absolute_uris() {
        let (a, ha) = request("GET /x?y HTTP/1.1\r\nHost: example.com\r\n\r\n");
        let (b, hb) = request("GET https://example.com/x?y HTTP/1.1\r\nHost: example.com\r\n\r\n");
        let (c, hc) = request("GET /x?y HTTP/1.1\r\nHost: example.org\r\n\r\n");
        let key = |buf: &[u8], head: &RequestHead| request_key(buf, head).unwrap();
        assert_eq!(key(&a, &ha), key(&b, &hb));
        assert_ne!(key(&a, &ha), key(&c, &hc));
        let (d, hd) = request("GET /x HTTP/1.0\r\n\r\n");
        assert_eq!(request_key(&d, &hd), None, "no Host, no key");
    }

    #[test]
    fn requests_that_bypass_the_cache() {
        for (raw, bypass) in [
            ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", false),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic eDp5\r\n\r\n",
                true,
            ),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nCache-Control: max-age=0, no-cache\r\n\r\n",
                true,
            ),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
                true,
            ),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nCache-Control: max-age=5\r\nPragma: no-cache\r\n\r\n",
                false,
            ),
        ] {
            let (buf, head) = request(raw);
            assert_eq!(bypasses_cache(&buf, &head), bypass, "{raw:?}");
        }
    }

    #[test]
    fn freshness_order_and_cap() {
        let now = 1_000_000_000;
        let fresh = |raw: &str| {
            let (buf, head) = response(raw);
            freshness(&buf, &head, now, 240)
        };
        let of = |fields: &str| fresh(&format!("HTTP/1.1 200 OK\r\n{fields}\r\n"));
        assert_eq!(of("Cache-Control: max-age=100, s-maxage=30\r\n"), Some(30));
        assert_eq!(of("Cache-Control: max-age=100\r\n"), Some(100));
        assert_eq!(of("Cache-Control: max-age=1000\r\n"), Some(240));
        assert_eq!(of("Cache-Control: max-age=\"50\"\r\n"), Some(50));
        assert_eq!(of("Cache-Control: max-age=x\r\n"), None);
        assert_eq!(of("ETag: \"a\"\r\n"), Some(240));
        // 2001-09-09T01:46:40Z is 1e9 seconds; Expires a minute later.
        assert_eq!(of("Expires: Sun, 09 Sep 2001 01:47:40 GMT\r\n"), Some(60));
        assert_eq!(of("Expires: yesterday\r\n"), Some(0));
    }

    #[test]
    fn answers_carry_age_and_validators_give_304() {
        let s = stored(
            "HTTP/1.1 200 OK\r\netag: \"v1\"\r\ncontent-length: 5\r\n\r\n",
            Some("\"v1\""),
            1000,
        );
        let (buf, head) = request("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let (bytes, body) = cached_response(&buf, &head, &s);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "HTTP/1.1 200 OK\r\netag: \"v1\"\r\ncontent-length: 5\r\nage: 3\r\n\r\n"
        );
        assert!(body);
        for (validator, hit) in [
            ("If-None-Match: \"v0\", W/\"v1\"", true),
            ("If-None-Match: *", true),
            (
                "If-None-Match: \"v2\"\r\nIf-Modified-Since: Thu, 01 Jan 2099 00:00:00 GMT",
                false,
            ),
            ("If-Modified-Since: Thu, 01 Jan 1970 00:16:40 GMT", true),
            ("If-Modified-Since: Thu, 01 Jan 1970 00:16:39 GMT", false),
        ] {
            let (buf, head) = request(&format!("GET / HTTP/1.1\r\nHost: a\r\n{validator}\r\n\r\n"));
            let (bytes, body) = cached_response(&buf, &head, &s);
            assert_eq!(
                bytes.starts_with(b"HTTP/1.1 304 Not Modified\r\n"),
                hit,
                "{validator}"
            );
            assert_eq!(body, !hit, "{validator}");
        }
        let (buf, head) = request("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(!cached_response(&buf, &head, &s).1, "no body for HEAD");
        // A comma inside an entity tag does not split it.
        let comma = stored("HTTP/1.1 200 OK\r\n\r\n", Some("\"a,b\""), 1000);
        let (buf, head) =
            request("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\", \"a,b\"\r\n\r\n");
        assert!(!cached_response(&buf, &head, &comma).1);
    }

    #[tokio::test]
    async fn tee_keeps_a_copy_within_its_limit() {
        use tokio::io::AsyncWriteExt;
        let mut sink = Vec::new();
        let mut tee = Tee::new(&mut sink, 8);
        tee.write_all(b"abcd").await.unwrap();
        tee.write_all(b"efgh").await.unwrap();
        assert_eq!(tee.into_copy().as_deref(), Some(&b"abcdefgh"[..]));
        let mut sink = Vec::new();
        let mut tee = Tee::new(&mut sink, 7);
        tee.write_all(b"abcdefgh").await.unwrap();
        assert_eq!(tee.into_copy(), None, "over the limit");
        assert_eq!(sink, b"abcdefgh", "everything still went through");
    }
}
