//! HTTP response compression (`compression algo|type|offload`, configuration.txt §4.2), as
//! HAProxy 2.6 does it.
//!
//! The request decides whether its answer may be compressed, and with what: an HTTP/1.1
//! client, not an old Mozilla/4 one, that lists one of the configured codings in
//! `Accept-Encoding` with a non-zero weight ([`negotiate`]). The response then decides
//! whether it is worth it ([`compressible`]): a 200 to 203 with a body of known framing, of a
//! configured media type, not already encoded nor transfer-coded otherwise than chunked, not
//! marked `no-transform`, from an HTTP/1.1 server. Its head loses its
//! length, gains `Transfer-Encoding: chunked`, `Content-Encoding` and `Vary: Accept-Encoding`,
//! and a strong `ETag` becomes weak ([`weak_etag`]); its body goes through [`Compressing`],
//! which compresses what the body relay writes and frames the result as chunks. Its output
//! leaves when the relay flushes it, before waiting for more of the server's body (so a
//! streamed answer is not held back, and the pieces that came together leave together), or
//! once enough of it waits. A chunked response's trailers follow the compressed body.
//!
//! The process's budget ([`CompressionBudget`]: `maxcomprate`, `maxcompcpuusage`,
//! `maxzlibmem`, `tune.comp.maxlevel`) decides whether a response may start compressed
//! ([`admits`]) and, at each flush, whether its level goes one step down or back up.
//!
//! As in HAProxy, whose list of algorithms is built by adding each at its head, the last
//! configured algorithm comes first: `*` takes it, and of `deflate` and `raw-deflate` (both
//! asked for as `deflate`) the later one applies.

use crc32fast::Hasher as Crc;
use flate2::{Compress, Compression, FlushCompress, Status};
use sluice_config::compression::Algo;
use sluice_http::chunked;
use sluice_http::encode::HeaderCase;
use sluice_http::framing::BodyFraming;
use sluice_http::head::{MessageHead, RequestHead, ResponseHead, Version};
use sluice_runtime::compression::CompressionBudget;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::AsyncWrite;

/// Compressed bytes that leave without waiting for a flush, once this many wait.
const SEND_AT: usize = 16 * 1024;

/// The configured algorithm the request's client takes best, if its answer may be
/// compressed at all. `identity`, when configured, applies whatever the client says.
pub fn negotiate(buf: &[u8], head: &RequestHead, algos: &[Algo]) -> Option<Algo> {
    if algos.is_empty() || head.version != Version::Http11 || old_mozilla(buf, head) {
        return None;
    }
    let mut best: Option<(Algo, f32)> = None;
    for value in head.header_values(buf, "accept-encoding") {
        for element in value.split(|&b| b == b',') {
            let mut parts = element.split(|&b| b == b';');
            let coding = parts.next().unwrap_or_default().trim_ascii();
            let weight = parts
                .filter_map(|p| p.trim_ascii().strip_prefix(b"q="))
                .find_map(|q| std::str::from_utf8(q).ok()?.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if weight <= 0.0 || best.is_some_and(|(_, w)| w >= weight) {
                continue;
            }
            let found = if coding == b"*" {
                algos.last().copied()
            } else {
                algos
                    .iter()
                    .rev()
                    .copied()
                    .find(|a| a.token().as_bytes().eq_ignore_ascii_case(coding))
            };
            if let Some(algo) = found {
                best = Some((algo, weight));
            }
        }
    }
    best.map(|(algo, _)| algo)
        .or_else(|| algos.contains(&Algo::Identity).then_some(Algo::Identity))
}

/// Netscape 4 and the Internet Explorers before 6 with XP SP2 announce gzip and cannot read
/// it: HAProxy does not compress for a `User-Agent` starting with `Mozilla/4` unless it names
/// `MSIE 7` or later (one digit, as HAProxy reads it) or `MSIE 6` with `SV1`.
fn old_mozilla(buf: &[u8], head: &RequestHead) -> bool {
    let Some(agent) = head.header_values(buf, "user-agent").next() else {
        return false;
    };
    if !agent.starts_with(b"Mozilla/4") {
        return false;
    }
    let Some(at) = agent.windows(5).position(|w| w == b"MSIE ") else {
        return true;
    };
    match agent.get(at + 5) {
        Some(b'7'..=b'9') => false,
        Some(b'6') => !agent.windows(3).any(|w| w == b"SV1"),
        _ => true,
    }
}

/// Whether a response the client may get compressed is one to compress (`types`: the
/// configured media types, any when empty).
pub fn compressible(
    buf: &[u8],
    head: &ResponseHead,
    framing: BodyFraming,
    types: &[String],
) -> bool {
    let body = match framing {
        BodyFraming::ContentLength(n) => n > 0,
        BodyFraming::Chunked => true,
        BodyFraming::None | BodyFraming::UntilClose => false,
    };
    if !body
        || head.version != Version::Http11
        || !(200..=203).contains(&head.status)
        || head.has_header(buf, "content-encoding")
    {
        return false;
    }
    // A coding before `chunked` (`gzip, chunked`) is the server's: the body passes unchanged.
    let other_coding = head.header_values(buf, "transfer-encoding").any(|v| {
        v.split(|&b| b == b',')
            .any(|c| !c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
    });
    if other_coding {
        return false;
    }
    let no_transform = head.header_values(buf, "cache-control").any(|v| {
        v.split(|&b| b == b',')
            .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    });
    if no_transform {
        return false;
    }
    let mut etags = head.header_values(buf, "etag");
    if let Some(etag) = etags.next()
        && (etags.next().is_some() || !valid_etag(etag))
    {
        return false;
    }
    match head.header_values(buf, "content-type").next() {
        Some(ctype) => {
            let starts = |prefix: &[u8]| {
                ctype.len() >= prefix.len() && ctype[..prefix.len()].eq_ignore_ascii_case(prefix)
            };
            !starts(b"multipart")
                && (types.is_empty() || types.iter().any(|t| starts(t.as_bytes())))
        }
        None => types.is_empty(),
    }
}

/// `"tag"` or `W/"tag"`.
fn valid_etag(value: &[u8]) -> bool {
    let tag = value.strip_prefix(b"W/").unwrap_or(value);
    tag.len() >= 2 && tag.starts_with(b"\"") && tag.ends_with(b"\"")
}

/// The weak form of the response's `ETag`, when it has a strong one: a compressed body is
/// not the byte-for-byte representation the tag named.
pub fn weak_etag(buf: &[u8], head: &ResponseHead) -> Option<Vec<u8>> {
    let etag = head.header_values(buf, "etag").next()?;
    (!etag.starts_with(b"W/")).then(|| [&b"W/"[..], etag].concat())
}

/// How many idle deflate states a thread keeps for the next responses. A state is about
/// 300 kB: made anew for each response, its allocation and first touch (page faults,
/// zeroing) cost more than compressing a 64 kB page.
const SPARE_STATES: usize = 4;

/// Deflate states alive in the process, in use or spare: what `maxzlibmem` bounds.
static STATES_ALIVE: AtomicU64 = AtomicU64::new(0);

/// A raw deflate state at a level, counted in [`STATES_ALIVE`] while it exists. Every
/// algorithm's wrapper (gzip's, zlib's) is written by the [`Encoder`], so that a stream can
/// go on with another state at another level: the deflate library cannot change the level
/// of a state that already compressed.
struct State {
    deflate: Compress,
    level: u32,
}

impl State {
    fn new(level: u32) -> Self {
        STATES_ALIVE.fetch_add(1, Ordering::Relaxed);
        State {
            deflate: Compress::new(Compression::new(level), false),
            level,
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        STATES_ALIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    /// Idle deflate states, reset.
    static SPARES: std::cell::RefCell<Vec<State>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a response compressed with `algo` may start now: the rate and CPU limits are not
/// exceeded, and a deflate state is at hand (a spare of this thread) or fits in `maxzlibmem`.
pub fn admits(budget: &CompressionBudget, algo: Algo) -> bool {
    if budget.limits_level() && budget.exceeded(sluice_runtime::load::idle_percent_of_loops()) {
        return false;
    }
    algo == Algo::Identity
        || budget.has_room_for_state(STATES_ALIVE.load(Ordering::Relaxed))
        || SPARES.with(|spares| !spares.borrow().is_empty())
}

/// A deflate state at `level`: a spare of the thread's at that level, or a new one.
fn take_state(level: u32) -> State {
    SPARES
        .with(|spares| {
            let mut spares = spares.borrow_mut();
            let at = spares.iter().rposition(|s| s.level == level)?;
            Some(spares.swap_remove(at))
        })
        .unwrap_or_else(|| State::new(level))
}

/// Gives a state back to the thread's spares, reset, unless they are full (or gone: a thread
/// that ends drops its states). A full set of spares trades its oldest for it, so the levels
/// in use are the ones kept.
fn give_back_state(mut state: State) {
    let _ = SPARES.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        state.deflate.reset();
        if spares.len() >= SPARE_STATES {
            spares.remove(0);
        }
        spares.push(state);
    });
}

/// gzip's header (RFC 1952 §2.3): deflate, no flags, no time, the extra flags of `level`
/// (fastest, best, or neither), Unix.
fn gzip_header(level: u32) -> [u8; 10] {
    let extra = match level {
        0 | 1 => 4,
        9 => 2,
        _ => 0,
    };
    [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, extra, 3]
}

/// zlib's header (RFC 1950 §2.2): deflate with a 32 kB window, no dictionary, the level's
/// class, and the check bits that make the pair a multiple of 31.
fn zlib_header(level: u32) -> [u8; 2] {
    let flags = match level {
        0 | 1 => 0x01,
        2..=5 => 0x5e,
        6 => 0x9c,
        _ => 0xda,
    };
    [0x78, flags]
}

/// The checksum of the data a wrapper's trailer holds.
enum Checksum {
    /// raw deflate and identity: none.
    None,
    /// gzip: CRC-32 (and the length, from [`Encoder::taken`]).
    Crc(Crc),
    /// zlib: Adler-32.
    Adler(Adler32),
}

/// An algorithm's encoder, writing into `out`, from which the compressed bytes are taken.
/// Deflate states come from the thread's spares and go back there when the encoder is
/// dropped.
struct Encoder {
    /// `None` for identity.
    deflate: Option<State>,
    checksum: Checksum,
    /// Bytes taken in (gzip's trailer says how many, modulo 2^32).
    taken: u64,
    out: Vec<u8>,
}

impl Encoder {
    fn new(algo: Algo, level: u32) -> Self {
        let mut out = Vec::new();
        let checksum = match algo {
            Algo::Gzip => {
                out.extend_from_slice(&gzip_header(level));
                Checksum::Crc(Crc::new())
            }
            Algo::Deflate => {
                out.extend_from_slice(&zlib_header(level));
                Checksum::Adler(Adler32::default())
            }
            Algo::RawDeflate | Algo::Identity => Checksum::None,
        };
        Encoder {
            deflate: (algo != Algo::Identity).then(|| take_state(level)),
            checksum,
            taken: 0,
            out,
        }
    }

    /// Compresses `data`; the encoder may keep some of it until [`Encoder::flush`].
    fn push(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.checksum {
            Checksum::None => {}
            Checksum::Crc(crc) => crc.update(data),
            Checksum::Adler(adler) => adler.update(data),
        }
        self.taken += data.len() as u64;
        match &mut self.deflate {
            Some(state) => run(&mut state.deflate, data, &mut self.out, FlushCompress::None),
            None => {
                self.out.extend_from_slice(data);
                Ok(())
            }
        }
    }

    /// A sync flush: everything pushed so far can be decoded from the bytes ready.
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.deflate {
            Some(state) => run(&mut state.deflate, &[], &mut self.out, FlushCompress::Sync),
            None => Ok(()),
        }
    }

    /// After a flush: one level down while a limit of `budget` is exceeded, else one back up
    /// towards its maximum. The stream goes on with a state at the new level: a flushed
    /// stream ends on a byte boundary between blocks, and the new state's blocks refer only
    /// to what it compressed itself, so the receiver decodes them in sequence.
    fn adapt_level(&mut self, budget: &CompressionBudget) {
        let Some(state) = &mut self.deflate else {
            return;
        };
        if !budget.limits_level() {
            return;
        }
        let level = if budget.exceeded(sluice_runtime::load::idle_percent_of_loops()) {
            state.level.saturating_sub(1)
        } else {
            (state.level + 1).min(budget.max_level)
        };
        if level != state.level {
            give_back_state(std::mem::replace(state, take_state(level)));
        }
    }

    /// Ends the stream (its trailer: gzip's CRC and length, zlib's checksum).
    fn finish(&mut self) -> io::Result<()> {
        if let Some(state) = &mut self.deflate {
            run(
                &mut state.deflate,
                &[],
                &mut self.out,
                FlushCompress::Finish,
            )?;
        }
        match &self.checksum {
            Checksum::None => {}
            Checksum::Crc(crc) => {
                self.out
                    .extend_from_slice(&crc.clone().finalize().to_le_bytes());
                // ISIZE: the input's length modulo 2^32.
                self.out
                    .extend_from_slice(&(self.taken as u32).to_le_bytes());
            }
            Checksum::Adler(adler) => self.out.extend_from_slice(&adler.value().to_be_bytes()),
        }
        Ok(())
    }

    /// The compressed bytes produced so far and not yet taken.
    fn ready(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if let Some(state) = self.deflate.take() {
            give_back_state(state);
        }
    }
}

/// zlib's Adler-32 checksum (RFC 1950 §8.2).
struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32 { a: 1, b: 0 }
    }
}

impl Adler32 {
    /// The largest prime below 2^16.
    const MODULUS: u32 = 65521;
    /// The most bytes summed before `b` could overflow 32 bits (zlib's NMAX).
    const RUN: usize = 5552;

    fn update(&mut self, data: &[u8]) {
        for run in data.chunks(Self::RUN) {
            for &byte in run {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= Self::MODULUS;
            self.b %= Self::MODULUS;
        }
    }

    fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

/// Deflates all of `input` into `out` with `flush`, growing `out` as needed.
fn run(
    state: &mut Compress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> io::Result<()> {
    loop {
        // Room for what this input makes, or for the flush's last bytes.
        out.reserve(input.len() / 2 + 64);
        let (before, written) = (state.total_in(), out.len());
        let status = state
            .compress_vec(input, out, flush)
            .map_err(io::Error::other)?;
        let consumed = usize::try_from(state.total_in() - before).unwrap_or(input.len());
        input = &input[consumed.min(input.len())..];
        match status {
            Status::StreamEnd => return Ok(()),
            // Room was given: a state that neither takes nor gives is broken, not to be
            // called again and again.
            _ if consumed == 0
                && out.len() == written
                && !out.spare_capacity_mut().is_empty()
                && (flush == FlushCompress::Finish || !input.is_empty()) =>
            {
                return Err(io::Error::other("the deflate state makes no progress"));
            }
            // Done once everything is in and, for a sync flush, the output was not filled.
            _ if flush != FlushCompress::Finish
                && input.is_empty()
                && out.len() < out.capacity() =>
            {
                return Ok(());
            }
            _ => {}
        }
    }
}

/// A writer that compresses what is written to it and writes the result to `inner` as
/// chunks when flushed, or once [`SEND_AT`] bytes wait; [`Compressing::finish`] ends the
/// stream and the chunked body.
///
/// A write is taken whole unless chunks wait that the client has not taken, so a client that
/// reads slowly slows the relay down as a plain copy would.
pub struct Compressing<'w, W> {
    inner: &'w mut W,
    encoder: Encoder,
    budget: &'w CompressionBudget,
    /// Framed chunks waiting to be written to `inner`, and how much of them was.
    framed: Vec<u8>,
    sent: usize,
    /// Bytes taken in and compressed bytes put out (`comp_in`, `comp_out`).
    consumed: u64,
    produced: u64,
    /// Data was written since the last flush (a second sync flush would add an empty block).
    unflushed: bool,
}

impl<'w, W: AsyncWrite + Unpin> Compressing<'w, W> {
    /// Compresses with `algo` into `inner`, within `budget`, whose rates it counts.
    pub fn new(inner: &'w mut W, algo: Algo, budget: &'w CompressionBudget) -> Self {
        Compressing {
            inner,
            encoder: Encoder::new(algo, budget.max_level),
            budget,
            framed: Vec::new(),
            sent: 0,
            consumed: 0,
            produced: 0,
            unflushed: false,
        }
    }

    /// Frames the encoder's output as a chunk after those waiting.
    fn frame_ready(&mut self) {
        let ready = self.encoder.ready();
        if ready.is_empty() {
            return;
        }
        chunked::write_chunk_header(ready.len(), &mut self.framed);
        self.framed.extend_from_slice(ready);
        self.framed.extend_from_slice(b"\r\n");
        self.produced += ready.len() as u64;
        self.budget.rates[1].add(ready.len() as u64);
        ready.clear();
    }

    /// Writes the waiting chunks.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.framed.len() {
            let n = ready!(Pin::new(&mut *self.inner).poll_write(cx, &self.framed[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.framed.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Ends the compressed stream and the chunked body, with the received body's `trailers`
    /// if it had any (their names spelled as `case` says), and writes what is left; the bytes
    /// taken in and the compressed bytes sent.
    pub async fn finish(
        mut self,
        trailers: Option<&[u8]>,
        case: Option<&HeaderCase>,
    ) -> io::Result<(u64, u64)> {
        self.encoder.finish()?;
        self.frame_ready();
        match trailers {
            Some(trailers) => {
                chunked::write_last_chunk_with_trailers(trailers, case, &mut self.framed)
            }
            None => chunked::write_last_chunk(&mut self.framed),
        }
        std::future::poll_fn(|cx| self.poll_send(cx)).await?;
        Ok((self.consumed, self.produced))
    }
}

/// The compressor holds its output itself, until the body's relay flushes it before
/// waiting for more (`body::fill_or_flush`) or it fills a send.
impl<W: AsyncWrite + Unpin> super::body::BodyOutput for Compressing<'_, W> {
    fn poll_write_held(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
        _more: bool,
    ) -> Poll<io::Result<usize>> {
        Pin::new(self).poll_write_vectored(cx, bufs)
    }

    fn push(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Compressing<'_, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.framed.len() >= SEND_AT {
            ready!(this.poll_send(cx))?;
        }
        this.encoder.push(data)?;
        this.consumed += data.len() as u64;
        // Counted as it goes in: `maxcomprate` judges the rate of the moment.
        this.budget.rates[0].add(data.len() as u64);
        this.unflushed = true;
        this.frame_ready();
        if this.framed.len() >= SEND_AT
            && let Poll::Ready(Err(err)) = this.poll_send(cx)
        {
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.unflushed {
            this.encoder.flush()?;
            this.unflushed = false;
            this.frame_ready();
            this.encoder.adapt_level(this.budget);
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut *this.inner).poll_flush(cx)
    }

    /// Sends what waits and shuts `inner` down, without ending the compressed stream: only
    /// [`Compressing::finish`] does.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut *this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_http::head::{Limits, Parse, parse_request, parse_response};
    use std::io::Read;
    use tokio::io::AsyncWriteExt;

    fn request(text: &str) -> (Vec<u8>, RequestHead) {
        let buf = text.as_bytes().to_vec();
        let Ok(Parse::Complete(head)) = parse_request(&buf, &Limits::default()) else {
            panic!("bad request")
        };
        (buf, head)
    }

    fn choose(fields: &str, algos: &[Algo]) -> Option<Algo> {
        let (buf, head) = request(&format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n"));
        negotiate(&buf, &head, algos)
    }

    #[test]
    fn the_best_weighted_configured_coding_is_chosen() {
        use Algo::*;
        let ae = |v: &str| format!("Accept-Encoding: {v}\r\n");
        assert_eq!(choose(&ae("gzip"), &[Gzip]), Some(Gzip));
        assert_eq!(choose(&ae("GZIP"), &[Gzip]), Some(Gzip));
        assert_eq!(choose(&ae("gzip;q=0"), &[Gzip]), None);
        assert_eq!(choose(&ae("deflate, gzip;q=0.5"), &[Gzip]), Some(Gzip));
        assert_eq!(
            choose(&ae("gzip;q=0.5, deflate"), &[Gzip, RawDeflate]),
            Some(RawDeflate)
        );
        // The last configured comes first, as in HAProxy; equal weights: the client's order.
        assert_eq!(choose(&ae("*"), &[Gzip, Deflate]), Some(Deflate));
        assert_eq!(
            choose(&ae("deflate"), &[Deflate, RawDeflate]),
            Some(RawDeflate)
        );
        assert_eq!(choose(&ae("gzip, deflate"), &[Gzip, Deflate]), Some(Gzip));
        assert_eq!(choose(&ae("br"), &[Gzip]), None);
        assert_eq!(choose("", &[Gzip]), None);
        // Several fields count as one list.
        assert_eq!(choose(&(ae("br") + &ae("gzip")), &[Gzip]), Some(Gzip));
        // identity applies whatever the client says.
        assert_eq!(choose(&ae("br"), &[Gzip, Identity]), Some(Identity));
        assert_eq!(choose("", &[Identity]), Some(Identity));
    }

    #[test]
    fn old_clients_get_nothing_compressed() {
        let with_agent = |agent: &str| {
            choose(
                &format!("Accept-Encoding: gzip\r\nUser-Agent: {agent}\r\n"),
                &[Algo::Gzip],
            )
        };
        assert_eq!(
            with_agent("Mozilla/4.0 (compatible; MSIE 7.0)"),
            Some(Algo::Gzip)
        );
        assert_eq!(
            with_agent("Mozilla/4.0 (compatible; MSIE 6.0; SV1)"),
            Some(Algo::Gzip)
        );
        assert_eq!(with_agent("Mozilla/4.0 (compatible; MSIE 6.0)"), None);
        // One digit, as HAProxy reads it.
        assert_eq!(with_agent("Mozilla/4.0 (compatible; MSIE 10.0)"), None);
        assert_eq!(with_agent("Mozilla/4.0"), None);
        assert_eq!(with_agent("Mozilla/5.0"), Some(Algo::Gzip));
        let (buf, head) = request("GET / HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n");
        assert_eq!(negotiate(&buf, &head, &[Algo::Gzip]), None, "HTTP/1.0");
    }

    fn response(fields: &str) -> (Vec<u8>, ResponseHead) {
        let buf = format!("HTTP/1.1 200 OK\r\n{fields}\r\n").into_bytes();
        let Ok(Parse::Complete(head)) = parse_response(&buf, &Limits::default()) else {
            panic!("bad response")
        };
        (buf, head)
    }

    #[test]
    fn only_eligible_responses_are_compressed() {
        let types = ["text/html".to_owned(), "text/plain".to_owned()];
        let ok = |fields: &str, framing| {
            let (buf, head) = response(fields);
            compressible(&buf, &head, framing, &types)
        };
        let cl = BodyFraming::ContentLength(10);
        assert!(ok("Content-Type: text/html; charset=utf-8\r\n", cl));
        assert!(ok("Content-Type: text/plain\r\n", BodyFraming::Chunked));
        assert!(!ok("Content-Type: application/json\r\n", cl));
        assert!(!ok(
            "Content-Type: text/plain\r\n",
            BodyFraming::ContentLength(0)
        ));
        assert!(!ok("Content-Type: text/plain\r\n", BodyFraming::UntilClose));
        assert!(!ok(
            "Content-Type: text/plain\r\nContent-Encoding: br\r\n",
            cl
        ));
        assert!(!ok(
            "Content-Type: text/plain\r\nCache-Control: public, no-transform\r\n",
            cl
        ));
        assert!(!ok(
            "Content-Type: text/plain\r\nETag: \"a\"\r\nETag: \"b\"\r\n",
            cl
        ));
        assert!(!ok("Content-Type: text/plain\r\nETag: a\r\n", cl));
        let coded = "Content-Type: text/plain\r\nTransfer-Encoding: gzip, chunked\r\n";
        assert!(
            !ok(coded, BodyFraming::Chunked),
            "transfer-coded by the server"
        );
        assert!(ok("Content-Type: text/plain\r\nETag: W/\"a\"\r\n", cl));
        assert!(!ok("", cl), "no type, some configured");
        let (buf, head) = response("Content-Type: multipart/mixed\r\n");
        assert!(!compressible(&buf, &head, cl, &[]));
        let (buf, head) = response("");
        assert!(
            compressible(&buf, &head, cl, &[]),
            "no type, none configured"
        );
        for status_line in ["HTTP/1.1 404 Not Found", "HTTP/1.0 200 OK"] {
            let buf = format!("{status_line}\r\n\r\n").into_bytes();
            let Ok(Parse::Complete(head)) = parse_response(&buf, &Limits::default()) else {
                panic!()
            };
            assert!(!compressible(&buf, &head, cl, &[]), "{status_line}");
        }
    }

    #[test]
    fn a_strong_etag_turns_weak() {
        let (buf, head) = response("ETag: \"v1\"\r\n");
        assert_eq!(weak_etag(&buf, &head).as_deref(), Some(&b"W/\"v1\""[..]));
        let (buf, head) = response("ETag: W/\"v1\"\r\n");
        assert_eq!(weak_etag(&buf, &head), None);
    }

    #[test]
    fn deflate_states_are_kept_by_the_thread_for_the_next_responses() {
        let spare = || SPARES.with(|s| s.borrow().len());
        assert_eq!(spare(), 0);
        drop(Encoder::new(Algo::Gzip, 1));
        assert_eq!(spare(), 1, "given back when done");
        let taken = Encoder::new(Algo::Deflate, 1);
        assert_eq!(spare(), 0, "taken again, whatever the wrapper");
        drop(Encoder::new(Algo::Identity, 1));
        assert_eq!(spare(), 0, "identity holds none");
        drop(taken);
        // A spare at another level is not taken.
        let other = Encoder::new(Algo::RawDeflate, 2);
        assert_eq!(spare(), 1);
        drop(other);
        // A state given back in the middle of a stream (an aborted response) starts afresh.
        let mut aborted = Encoder::new(Algo::RawDeflate, 1);
        aborted.push(b"half of a body").unwrap();
        drop(aborted);
        let mut next = Encoder::new(Algo::RawDeflate, 1);
        next.push(b"a whole body").unwrap();
        next.finish().unwrap();
        let mut plain = Vec::new();
        flate2::read::DeflateDecoder::new(&next.ready()[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, b"a whole body");
        drop(next);
        let many: Vec<Encoder> = (0..SPARE_STATES + 2)
            .map(|_| Encoder::new(Algo::Gzip, 1))
            .collect();
        drop(many);
        assert_eq!(spare(), SPARE_STATES, "no more than the bound kept");
    }

    #[test]
    fn adler32_matches_known_values() {
        let of = |data: &[u8]| {
            let mut adler = Adler32::default();
            adler.update(data);
            adler.value()
        };
        assert_eq!(of(b""), 1);
        assert_eq!(of(b"Wikipedia"), 0x11E6_0398);
        // Long enough to wrap both sums many times, fed whole and in pieces.
        let long: Vec<u8> = (0..100_000u32).map(|n| (n * 7 % 256) as u8).collect();
        let mut pieces = Adler32::default();
        for piece in long.chunks(999) {
            pieces.update(piece);
        }
        assert_eq!(pieces.value(), of(&long));
        let mut reference = flate2::Compress::new(flate2::Compression::fast(), true);
        let mut out = Vec::with_capacity(200_000);
        reference
            .compress_vec(&long, &mut out, flate2::FlushCompress::Finish)
            .unwrap();
        let trailer: [u8; 4] = out[out.len() - 4..].try_into().unwrap();
        assert_eq!(
            u32::from_be_bytes(trailer),
            of(&long),
            "zlib's own checksum"
        );
        for level in 0..=9 {
            let [cmf, flg] = zlib_header(level);
            assert_eq!((u32::from(cmf) * 256 + u32::from(flg)) % 31, 0, "{level}");
        }
        assert_eq!(out[..2], zlib_header(1), "as zlib writes it at level 1");
    }

    /// The chunks of a chunked body, joined.
    fn dechunk(mut body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16).unwrap();
            body = &body[line_end + 2..];
            if size == 0 {
                assert_eq!(body, b"\r\n", "the body ends with its last chunk");
                return out;
            }
            out.extend_from_slice(&body[..size]);
            assert_eq!(&body[size..size + 2], b"\r\n");
            body = &body[size + 2..];
        }
    }

    #[tokio::test]
    async fn every_algorithm_round_trips_and_each_write_is_sent_decodable() {
        let text: Vec<u8> = b"the quick brown fox jumps over the lazy dog "
            .repeat(300)
            .to_vec();
        let budget = CompressionBudget::default();
        for algo in [Algo::Identity, Algo::Gzip, Algo::Deflate, Algo::RawDeflate] {
            let mut wire = Vec::new();
            let mut writer = Compressing::new(&mut wire, algo, &budget);
            writer.write_all(&text[..5000]).await.unwrap();
            writer.write_all(&text[5000..]).await.unwrap();
            let (consumed, produced) = writer.finish(None, None).await.unwrap();
            assert_eq!(consumed, text.len() as u64);
            let compressed = dechunk(&wire);
            assert_eq!(produced, compressed.len() as u64);
            let mut plain = Vec::new();
            match algo {
                Algo::Identity => plain = compressed.clone(),
                Algo::Gzip => {
                    flate2::read::GzDecoder::new(&compressed[..])
                        .read_to_end(&mut plain)
                        .unwrap();
                }
                Algo::Deflate => {
                    flate2::read::ZlibDecoder::new(&compressed[..])
                        .read_to_end(&mut plain)
                        .unwrap();
                }
                Algo::RawDeflate => {
                    flate2::read::DeflateDecoder::new(&compressed[..])
                        .read_to_end(&mut plain)
                        .unwrap();
                }
            }
            assert!(plain == text, "{algo:?}");
            if algo != Algo::Identity {
                assert!(compressed.len() < text.len() / 10, "{algo:?}: compressed");
            }
        }
        let [rate_in, rate_out] = &budget.rates;
        // Counted as they went in and out (a sliding figure: at most the bytes seen).
        assert!((1..=4 * text.len() as u32).contains(&rate_in.get()));
        assert!(rate_out.get() > 0);
        // A piece written and flushed is on the wire, decodable, before the stream ends (a
        // second flush adds nothing).
        let mut wire = Vec::new();
        let mut writer = Compressing::new(&mut wire, Algo::RawDeflate, &budget);
        writer.write_all(b"streamed").await.unwrap();
        writer.flush().await.unwrap();
        writer.flush().await.unwrap();
        drop(writer);
        let line_end = wire.windows(2).position(|w| w == b"\r\n").unwrap();
        let mut partial = Vec::new();
        let _ = flate2::read::DeflateDecoder::new(&wire[line_end + 2..wire.len() - 2])
            .read_to_end(&mut partial);
        assert_eq!(partial, b"streamed");
    }

    #[tokio::test]
    async fn levels_step_down_while_a_limit_is_exceeded_and_back_up_after() {
        let text: Vec<u8> = b"compressible text, compressible text ".repeat(100);
        // 1 kB/s: exceeded by the first write.
        let budget = CompressionBudget::new(Some(1), None, None, Some(3));
        let mut wire = Vec::new();
        let mut writer = Compressing::new(&mut wire, Algo::Gzip, &budget);
        let level = |w: &Compressing<'_, Vec<u8>>| w.encoder.deflate.as_ref().unwrap().level;
        assert_eq!(level(&writer), 3, "starts at tune.comp.maxlevel");
        for expected in [2, 1, 0, 0] {
            writer.write_all(&text).await.unwrap();
            writer.flush().await.unwrap();
            assert_eq!(level(&writer), expected);
        }
        // Under the limit again, it climbs back to the maximum, one step per flush.
        budget.set_rate_limit_kbps(1_000_000);
        for expected in [1, 2, 3, 3] {
            writer.write_all(&text).await.unwrap();
            writer.flush().await.unwrap();
            assert_eq!(level(&writer), expected);
        }
        writer.finish(None, None).await.unwrap();
        // Every level's blocks belong to one valid stream.
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&dechunk(&wire)[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert!(plain == text.repeat(8));
        // A state given back at a lower level starts the next response at the maximum.
        let next = Encoder::new(Algo::Gzip, 3);
        assert_eq!(next.deflate.as_ref().unwrap().level, 3);
    }
}
