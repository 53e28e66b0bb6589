//! Streaming a message body from one side to the other without holding it whole.
//!
//! The input side is described by the framing the parser derived from the head
//! ([`BodyFraming`]); the output side by [`OutFraming`]. A chunked body is decoded and
//! re-encoded as canonical chunks (no extensions): what we send is framed exactly as we
//! understood it, so a peer cannot read a different message boundary than ours (RFC 9112 §6,
//! request smuggling). Bytes past the end of the body stay in the input buffer; they belong to
//! the next message.

use super::buffer::{InBuf, ReadError};
use crate::live_bytes::LiveBytes;
use sluice_http::chunked::{self, ChunkedDecoder};
use sluice_http::encode::HeaderCase;
use sluice_http::error::{HttpError, HttpErrorKind, Side};
use sluice_http::framing::BodyFraming;
use sluice_http::head::Limits;
use sluice_net::splice::{Pipe, SpliceEnd};
use std::borrow::Cow;
use std::future::poll_fn;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// The part of a message body already in `buf` after its head (`head_len` bytes), decoded
/// from `framing`, and whether it is the whole body. What the body fetches (`req.body`,
/// `res.body`...) read, and what `option http-buffer-request` and `wait-for-body` wait to
/// complete. A chunked body is copied out of its framing, up to the first malformed byte if
/// any; a response body delimited by the server's close is whole only at that close.
pub fn buffered(buf: &[u8], head_len: usize, framing: BodyFraming) -> (Cow<'_, [u8]>, bool) {
    let rest = buf.get(head_len..).unwrap_or(&[]);
    match framing {
        BodyFraming::None => (Cow::Borrowed(&[]), true),
        BodyFraming::UntilClose => (Cow::Borrowed(rest), false),
        BodyFraming::ContentLength(len) => {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            (
                Cow::Borrowed(&rest[..rest.len().min(len)]),
                rest.len() >= len,
            )
        }
        BodyFraming::Chunked => {
            let mut data = Vec::new();
            let whole = decode_chunks(rest, |part| data.extend_from_slice(part));
            (Cow::Owned(data), whole == Ok(true))
        }
    }
}

/// Whether the part of a chunked body in `bytes` (which may stop short of its end) is well
/// formed: a request whose body is already malformed is refused before a server is reached,
/// as HAProxy's parser refuses it while reading the request.
pub fn chunks_so_far_valid(bytes: &[u8]) -> bool {
    decode_chunks(bytes, |_| {}).is_ok()
}

/// Decodes the chunks in `input`, handing each part of their data to `each`; whether the
/// body ended there, or `Err` at the first malformed byte.
fn decode_chunks(mut input: &[u8], mut each: impl FnMut(&[u8])) -> Result<bool, ()> {
    let mut decoder = ChunkedDecoder::new();
    loop {
        let step = decoder.decode(input).map_err(|_| ())?;
        each(&input[step.data.clone()]);
        if step.done || step.consumed == 0 {
            return Ok(step.done);
        }
        input = &input[step.consumed..];
    }
}

/// How the body is framed on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFraming {
    /// As many bytes as a `Content-Length` announced, or a body delimited by closing.
    Raw,
    /// Re-encoded as chunks, ended by a last chunk.
    Chunked,
}

/// Why a body could not be passed on.
#[derive(Debug)]
pub enum BodyError {
    /// The sender closed before the end of the body.
    Truncated,
    /// The sender was silent for longer than its timeout.
    ReadTimeout,
    /// The receiver did not accept data within its timeout.
    WriteTimeout,
    /// The body is malformed (bad chunk size, ...).
    Invalid(HttpError),
    /// Reading failed.
    ReadIo(io::Error),
    /// Writing failed.
    WriteIo(io::Error),
}

/// Time limits for one body transfer.
#[derive(Clone, Copy, Debug, Default)]
pub struct BodyTimeouts {
    /// Inactivity of the sender.
    pub read: Option<Duration>,
    /// Inactivity of the receiver.
    pub write: Option<Duration>,
}

/// What to transfer and how: the body's framing in and out, its time limits, and the side
/// that sends it (which names the status of its errors).
#[derive(Clone, Copy, Debug)]
pub struct BodySpec<'a> {
    /// Framing of the incoming body.
    pub framing: BodyFraming,
    /// Framing on the way out.
    pub out: OutFraming,
    /// Inactivity limits.
    pub timeouts: BodyTimeouts,
    /// Limits of the trailer section of a chunked body.
    pub limits: &'a Limits,
    /// Who sends the body.
    pub side: Side,
    /// Field names adjusted in the trailers passed on (`h1-case-adjust`).
    pub case: Option<&'a HeaderCase>,
    /// Where the bytes are counted as they pass (`option contstats`).
    pub live: Option<&'a LiveBytes<'a>>,
    /// Where a chunked body's trailer section is kept when the output is not chunked by
    /// this relay (the compressor frames its own output, and ends it with them).
    pub trailers: Option<&'a std::cell::RefCell<Option<Vec<u8>>>>,
    /// Bytes to send ahead of the body, in its first write: the message's head, when body
    /// bytes came with it (see [`forward_body`]).
    pub lead: &'a [u8],
}

/// Counts a body's bytes as they pass (`option contstats`), on the side that sends it: the
/// request's come from the client, the response's go to it.
#[derive(Clone, Copy)]
pub struct Meter<'a> {
    live: Option<&'a LiveBytes<'a>>,
    side: Side,
}

impl<'a> Meter<'a> {
    /// Counts into `live`, if any, the bytes of a body `side` sends.
    pub fn new(live: Option<&'a LiveBytes<'a>>, side: Side) -> Self {
        Meter { live, side }
    }

    fn passed(self, bytes: usize) {
        if let Some(live) = self.live {
            let bytes = bytes as u64;
            match self.side {
                Side::Request => live.add(bytes, 0),
                Side::Response => live.add(0, bytes),
            }
        }
    }
}

/// Where a body goes: a writer that may hold a write back for the next one (MSG_MORE on a
/// TCP socket) and push what it holds. A body read 16 KiB at a time then leaves in
/// segments of the path's full size while its parts come in at once, as HAProxy sends
/// them (MSG_MORE until the message's end). A write is held only after a read that
/// filled the buffer, and what is held leaves before the relay waits for the sender.
pub trait BodyOutput: AsyncWrite + Unpin {
    /// Writes `bufs` as `poll_write_vectored` does; with `more`, bytes short of a full
    /// segment may wait for the next write.
    fn poll_write_held(
        &mut self,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
        more: bool,
    ) -> std::task::Poll<io::Result<usize>>;

    /// Sends what writes with `more` left waiting.
    fn push(&mut self) -> io::Result<()>;
}

impl BodyOutput for sluice_net::stream::WriteSide<'_> {
    fn poll_write_held(
        &mut self,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
        more: bool,
    ) -> std::task::Poll<io::Result<usize>> {
        self.poll_write_vectored_more(cx, bufs, more)
    }

    fn push(&mut self) -> io::Result<()> {
        sluice_net::stream::WriteSide::push(self)
    }
}

/// A request body's way to the server that can turn into a sink: once the server's response
/// is complete while the client is still sending its body, the rest of that body is read and
/// dropped, so that the client's connection can carry its next request (as HAProxy drains
/// it), whether or not the server still reads.
pub struct Discardable<'d, W: ?Sized> {
    inner: &'d mut W,
    discard: &'d std::cell::Cell<bool>,
}

impl<'d, W: ?Sized> Discardable<'d, W> {
    /// Writes to `inner` until `discard` is set, then drops what it is given.
    pub fn new(inner: &'d mut W, discard: &'d std::cell::Cell<bool>) -> Self {
        Discardable { inner, discard }
    }
}

fn total_len(bufs: &[io::IoSlice<'_>]) -> usize {
    bufs.iter().map(|b| b.len()).sum()
}

impl<W: AsyncWrite + Unpin + ?Sized> AsyncWrite for Discardable<'_, W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if self.discard.get() {
            return std::task::Poll::Ready(Ok(buf.len()));
        }
        std::pin::Pin::new(&mut *self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        if self.discard.get() {
            return std::task::Poll::Ready(Ok(total_len(bufs)));
        }
        std::pin::Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if self.discard.get() {
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if self.discard.get() {
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

impl<W: BodyOutput + ?Sized> BodyOutput for Discardable<'_, W> {
    fn poll_write_held(
        &mut self,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
        more: bool,
    ) -> std::task::Poll<io::Result<usize>> {
        if self.discard.get() {
            return std::task::Poll::Ready(Ok(total_len(bufs)));
        }
        self.inner.poll_write_held(cx, bufs, more)
    }

    fn push(&mut self) -> io::Result<()> {
        if self.discard.get() {
            return Ok(());
        }
        self.inner.push()
    }
}

/// A body's output and whether it holds bytes back (see [`BodyOutput`]).
struct Out<'o, W: ?Sized> {
    writer: &'o mut W,
    held: bool,
}

impl<W: BodyOutput + ?Sized> Out<'_, W> {
    /// Writes all of `pieces`, in order, giving up if that takes longer than any `limit`
    /// between two writes; with `more`, the last bytes may wait for the next write.
    async fn write(
        &mut self,
        mut pieces: &mut [io::IoSlice<'_>],
        limit: Option<Duration>,
        more: bool,
    ) -> Result<(), BodyError> {
        io::IoSlice::advance_slices(&mut pieces, 0);
        while !pieces.is_empty() {
            let writer = &mut *self.writer;
            let written = poll_fn(|cx| writer.poll_write_held(cx, pieces, more));
            let n = within(limit, written)
                .await
                .ok_or(BodyError::WriteTimeout)?
                .map_err(BodyError::WriteIo)?;
            if n == 0 {
                return Err(BodyError::WriteIo(io::ErrorKind::WriteZero.into()));
            }
            self.held = more;
            io::IoSlice::advance_slices(&mut pieces, n);
        }
        Ok(())
    }

    /// Sends the bytes held back, if any.
    fn push(&mut self) -> Result<(), BodyError> {
        if std::mem::take(&mut self.held) {
            self.writer.push().map_err(BodyError::WriteIo)?;
        }
        Ok(())
    }
}

/// Copies the body described by `spec` from `input` (bytes already in `buf` first) to
/// `output`, after `spec.lead`. Returns the number of payload bytes passed on.
///
/// The lead leaves in the body's first write when `buf` holds body bytes: a head and the
/// body that arrived with it then take one system call and one segment, as HAProxy sends
/// one buffer holding both. Otherwise it is written at once, alone: a head is never held
/// back while the body is awaited.
pub async fn forward_body<R, W>(
    buf: &mut InBuf,
    input: &mut R,
    output: &mut W,
    spec: BodySpec<'_>,
) -> Result<u64, BodyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: BodyOutput + ?Sized,
{
    let BodySpec {
        framing,
        out,
        timeouts,
        ..
    } = spec;
    let mut lead = spec.lead;
    if !lead.is_empty() && (buf.is_empty() || !framing.has_payload()) {
        write(output, lead, timeouts.write).await?;
        lead = &[];
    }
    let meter = Meter::new(spec.live, spec.side);
    let output = &mut Out {
        writer: output,
        held: false,
    };
    let moved = match framing {
        BodyFraming::None => Ok(0),
        BodyFraming::ContentLength(len) => {
            copy_length(buf, (input, output), (lead, len), timeouts, meter).await
        }
        BodyFraming::Chunked => copy_chunked(buf, input, output, BodySpec { lead, ..spec }).await,
        BodyFraming::UntilClose => {
            copy_until_close(buf, (input, output), (lead, out), timeouts, meter).await
        }
    }?;
    // Each relay ends with a write that holds nothing back; this is for a body whose end
    // came with no bytes to write (a server's close).
    output.push()?;
    Ok(moved)
}

/// Copies a body of `len` bytes, the first of them in one write with `lead` (`buf` holds
/// some when `lead` is not empty: see [`forward_body`]).
async fn copy_length<R, W>(
    buf: &mut InBuf,
    (input, output): (&mut R, &mut Out<'_, W>),
    (mut lead, len): (&[u8], u64),
    timeouts: BodyTimeouts,
    meter: Meter<'_>,
) -> Result<u64, BodyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: BodyOutput + ?Sized,
{
    let mut remaining = len;
    while remaining > 0 {
        if buf.is_empty() {
            fill_or_flush(buf, input, output, timeouts).await?;
        }
        let take = buf
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        let mut pieces = [
            io::IoSlice::new(lead),
            io::IoSlice::new(&buf.filled()[..take]),
        ];
        // Held only while the body goes on and the read filled the buffer: a read that
        // left room found the sender with nothing more at hand.
        let more = remaining > take as u64 && buf.reached_capacity();
        output.write(&mut pieces, timeouts.write, more).await?;
        lead = &[];
        meter.passed(take);
        buf.consume(take);
        remaining -= take as u64;
    }
    Ok(len)
}

/// Passes on a body of `len` bytes through a kernel pipe (`option splice-*`): `lead` (the
/// head) and the bytes already read into `buf` are written first, in one write, the rest
/// goes from `input` to `output` with `splice(2)`, never through user space, and never more
/// than the body (what follows it belongs to the next message). Returns the number of
/// payload bytes passed on.
pub async fn splice_length<R, W>(
    buf: &mut InBuf,
    (input, output): (&R, &mut W),
    (lead, len): (&[u8], u64),
    pipe: &mut Pipe,
    timeouts: BodyTimeouts,
    meter: Meter<'_>,
) -> Result<u64, BodyError>
where
    R: SpliceEnd,
    W: SpliceEnd + BodyOutput,
{
    let buffered = buf.len().min(usize::try_from(len).unwrap_or(usize::MAX));
    let mut pieces = [
        io::IoSlice::new(lead),
        io::IoSlice::new(&buf.filled()[..buffered]),
    ];
    let mut out = Out {
        writer: &mut *output,
        held: false,
    };
    out.write(&mut pieces, timeouts.write, false).await?;
    meter.passed(buffered);
    buf.consume(buffered);
    buf.release_if_empty();
    let mut remaining = len - buffered as u64;
    while remaining > 0 {
        let max = usize::try_from(remaining).unwrap_or(usize::MAX);
        let filled = within(timeouts.read, poll_fn(|cx| pipe.poll_fill(cx, input, max)))
            .await
            .ok_or(BodyError::ReadTimeout)?
            .map_err(BodyError::ReadIo)?;
        if filled == 0 {
            return Err(BodyError::Truncated);
        }
        remaining -= filled as u64;
        while pipe.held() > 0 {
            let drained = within(timeouts.write, poll_fn(|cx| pipe.poll_drain(cx, &*output)))
                .await
                .ok_or(BodyError::WriteTimeout)?
                .map_err(BodyError::WriteIo)?;
            meter.passed(drained);
        }
    }
    Ok(len)
}

/// `future`'s output, or `None` if `limit` passes first.
async fn within<F: std::future::Future>(limit: Option<Duration>, future: F) -> Option<F::Output> {
    match limit {
        Some(limit) => sluice_runtime::clock::timeout(limit, future).await.ok(),
        None => Some(future.await),
    }
}

async fn copy_chunked<R, W>(
    buf: &mut InBuf,
    input: &mut R,
    output: &mut Out<'_, W>,
    spec: BodySpec<'_>,
) -> Result<u64, BodyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: BodyOutput + ?Sized,
{
    let BodySpec {
        out,
        timeouts,
        limits,
        side,
        case,
        trailers: kept,
        lead,
        ..
    } = spec;
    let meter = Meter::new(spec.live, side);
    // Errors name the side that sent the body: a bad request body is a 400, a bad response
    // body a 502.
    let mut decoder = ChunkedDecoder::with_limits(limits).on_side(side);
    let mut gathered = Gathered::after(lead);
    let mut total = 0u64;
    // Bytes of the buffer decoded and gathered, consumed once what they became is written:
    // every chunk the buffer holds leaves in one write.
    let mut decoded = 0;
    loop {
        let step = decoder
            .decode(&buf.filled()[decoded..])
            .map_err(BodyError::Invalid)?;
        if !step.data.is_empty() {
            let data = decoded + step.data.start..decoded + step.data.end;
            total += data.len() as u64;
            gathered.payload(data, out);
        }
        if step.done {
            let trailers = step
                .trailers
                .clone()
                .map(|t| decoded + t.start..decoded + t.end);
            if out == OutFraming::Chunked {
                // Trailers were validated like header fields; they pass on with the last chunk.
                let input = buf.filled();
                gathered.framing(|framing| match trailers {
                    Some(range) => {
                        chunked::write_last_chunk_with_trailers(&input[range], case, framing)
                    }
                    None => chunked::write_last_chunk(framing),
                });
            } else if let (Some(kept), Some(range)) = (kept, trailers) {
                *kept.borrow_mut() = Some(buf.filled()[range].to_vec());
            }
            gathered
                .write_out(output, buf.filled(), timeouts.write, meter, false)
                .await?;
            buf.consume(decoded + step.consumed);
            return Ok(total);
        }
        decoded += step.consumed;
        let starved = step.consumed == 0 || decoded == buf.len();
        if starved || gathered.is_full() {
            let more = !starved || buf.reached_capacity();
            gathered
                .write_out(output, buf.filled(), timeouts.write, meter, more)
                .await?;
            buf.consume(decoded);
            decoded = 0;
        }
        if starved {
            fill_or_flush(buf, input, output, timeouts)
                .await
                .map_err(|e| match e {
                    // Only a trailer section is kept whole in the buffer: filling it means the
                    // trailers are larger than a head may be.
                    BodyError::Invalid(_) => {
                        BodyError::Invalid(HttpError::new(side, HttpErrorKind::TrailersTooLarge))
                    }
                    other => other,
                })?;
        }
    }
}

async fn copy_until_close<R, W>(
    buf: &mut InBuf,
    (input, output): (&mut R, &mut Out<'_, W>),
    (lead, out): (&[u8], OutFraming),
    timeouts: BodyTimeouts,
    meter: Meter<'_>,
) -> Result<u64, BodyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: BodyOutput + ?Sized,
{
    let mut total = 0u64;
    let mut gathered = Gathered::after(lead);
    loop {
        if !buf.is_empty() {
            let n = buf.len();
            gathered.payload(0..n, out);
            let more = buf.reached_capacity();
            gathered
                .write_out(output, buf.filled(), timeouts.write, meter, more)
                .await?;
            total += n as u64;
            buf.consume(n);
        }
        match fill_or_flush(buf, input, output, timeouts).await {
            Ok(()) => {}
            Err(BodyError::Truncated) => {
                if out == OutFraming::Chunked {
                    gathered.framing(chunked::write_last_chunk);
                    gathered
                        .write_out(output, &[], timeouts.write, meter, false)
                        .await?;
                }
                return Ok(total);
            }
            Err(err) => return Err(err),
        }
    }
}

/// Reads more of the body into `buf`: bytes already waiting at once; before waiting for more,
/// `output` pushes what it held back and is flushed. On a socket flushing is nothing; a
/// writer that transforms the body (the compressor) holds its output until then, so the
/// pieces that come together leave in one send, and none is held back while the sender
/// pauses.
async fn fill_or_flush<R, W>(
    buf: &mut InBuf,
    input: &mut R,
    output: &mut Out<'_, W>,
    timeouts: BodyTimeouts,
) -> Result<(), BodyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: BodyOutput + ?Sized,
{
    let mut reading = std::pin::pin!(fill(buf, input, timeouts.read));
    // Polled once with a waker that wakes nothing; awaited below, it takes the task's own.
    let mut now = std::task::Context::from_waker(std::task::Waker::noop());
    if let std::task::Poll::Ready(done) = reading.as_mut().poll(&mut now) {
        return done;
    }
    output.push()?;
    within(timeouts.write, output.writer.flush())
        .await
        .ok_or(BodyError::WriteTimeout)?
        .map_err(BodyError::WriteIo)?;
    reading.await
}

async fn fill<R: AsyncRead + Unpin + ?Sized>(
    buf: &mut InBuf,
    input: &mut R,
    limit: Option<Duration>,
) -> Result<(), BodyError> {
    match buf.read_more(input, limit).await {
        Ok(_) => Ok(()),
        Err(ReadError::Closed) => Err(BodyError::Truncated),
        Err(ReadError::Timeout) => Err(BodyError::ReadTimeout),
        Err(ReadError::Io(e)) => Err(BodyError::ReadIo(e)),
        // Only chunked bodies keep unconsumed bytes; see `copy_chunked` for the side.
        Err(ReadError::Full) => Err(BodyError::Invalid(HttpError::request(
            HttpErrorKind::TrailersTooLarge,
        ))),
    }
}

/// The most pieces one vectored write carries (well under the system's limit of 1024).
const GATHERED_PIECES: usize = 64;

/// Output gathered to leave in one vectored write, in order: payload, as ranges of the input
/// buffer (never copied), and the framing Sluice writes around it (chunk-size lines, the
/// chunks' line ends, the last chunk and its trailers). A buffer holding many small chunks
/// then leaves in one system call and one segment, as HAProxy sends a whole buffer, rather
/// than three sends per chunk.
struct Gathered<'l> {
    /// Bytes that go first, in the first write only (the message's head).
    lead: &'l [u8],
    /// The framing bytes, in the order written.
    framing: Vec<u8>,
    pieces: Vec<Piece>,
    /// Payload bytes gathered, counted as passed once written.
    payload: usize,
}

/// One piece of [`Gathered`] output.
enum Piece {
    /// [`Gathered::lead`].
    Lead,
    /// Bytes of [`Gathered::framing`].
    Framing(std::ops::Range<usize>),
    /// Bytes of the input buffer.
    Payload(std::ops::Range<usize>),
}

impl<'l> Gathered<'l> {
    /// Nothing gathered yet but `lead`, if not empty.
    fn after(lead: &'l [u8]) -> Self {
        Gathered {
            lead,
            framing: Vec::new(),
            pieces: if lead.is_empty() {
                Vec::new()
            } else {
                vec![Piece::Lead]
            },
            payload: 0,
        }
    }

    /// Adds payload, framed as a chunk when the output is chunked.
    fn payload(&mut self, range: std::ops::Range<usize>, out: OutFraming) {
        self.payload += range.len();
        if out == OutFraming::Chunked {
            let len = range.len();
            self.framing(|f| chunked::write_chunk_header(len, f));
            self.pieces.push(Piece::Payload(range));
            self.framing(|f| f.extend_from_slice(b"\r\n"));
        } else {
            self.pieces.push(Piece::Payload(range));
        }
    }

    /// Adds the framing bytes `write` appends.
    fn framing(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.framing.len();
        write(&mut self.framing);
        self.pieces.push(Piece::Framing(start..self.framing.len()));
    }

    /// True when another chunk would not fit in one write.
    fn is_full(&self) -> bool {
        self.pieces.len() + 3 > GATHERED_PIECES
    }

    /// Writes everything gathered (payload from `input`), then starts empty again; with
    /// `more`, the last bytes may wait for the next write.
    async fn write_out<W: BodyOutput + ?Sized>(
        &mut self,
        output: &mut Out<'_, W>,
        input: &[u8],
        limit: Option<Duration>,
        meter: Meter<'_>,
        more: bool,
    ) -> Result<(), BodyError> {
        let groups = self.pieces.len().div_ceil(GATHERED_PIECES);
        for (n, group) in self.pieces.chunks(GATHERED_PIECES).enumerate() {
            // On the stack: no allocation per write.
            let mut slices = [io::IoSlice::new(&[]); GATHERED_PIECES];
            for (slice, piece) in slices.iter_mut().zip(group) {
                *slice = io::IoSlice::new(match piece {
                    Piece::Lead => self.lead,
                    Piece::Framing(range) => &self.framing[range.clone()],
                    Piece::Payload(range) => &input[range.clone()],
                });
            }
            let last = n + 1 == groups;
            output
                .write(&mut slices[..group.len()], limit, more || !last)
                .await?;
        }
        meter.passed(std::mem::take(&mut self.payload));
        self.framing.clear();
        self.pieces.clear();
        Ok(())
    }
}

/// Writes all of `data`, giving up if that takes longer than `limit`.
pub async fn write<W: AsyncWrite + Unpin + ?Sized>(
    output: &mut W,
    data: &[u8],
    limit: Option<Duration>,
) -> Result<(), BodyError> {
    within(limit, output.write_all(data))
        .await
        .ok_or(BodyError::WriteTimeout)?
        .map_err(BodyError::WriteIo)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::track::Trackers;
    use sluice_net::splice::PipeBudget;
    use sluice_net::stream::Stream;
    use sluice_runtime::counters::Traffic;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    #[test]
    fn the_buffered_body_is_decoded_and_says_whether_it_is_whole() {
        let head = b"POST / HTTP/1.1\r\n\r\n";
        let with = |body: &[u8]| [&head[..], body].concat();
        let at = head.len();
        let cl = |n| BodyFraming::ContentLength(n);
        assert_eq!(
            buffered(&with(b"abc"), at, cl(5)),
            (Cow::Borrowed(&b"abc"[..]), false)
        );
        // Bytes past the length belong to the next request.
        assert_eq!(
            buffered(&with(b"abcdefGET"), at, cl(5)),
            (Cow::Borrowed(&b"abcde"[..]), true)
        );
        assert_eq!(
            buffered(&with(b""), at, BodyFraming::None),
            (Cow::Borrowed(&b""[..]), true)
        );
        // A response delimited by its server's close: all of it, whole only at the close.
        assert_eq!(
            buffered(&with(b"abc"), at, BodyFraming::UntilClose),
            (Cow::Borrowed(&b"abc"[..]), false)
        );
        let chunked = |body: &[u8]| {
            let buf = with(body);
            let (data, whole) = buffered(&buf, at, BodyFraming::Chunked);
            (data.into_owned(), whole)
        };
        assert_eq!(
            chunked(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
            (b"abcde".to_vec(), true)
        );
        assert_eq!(chunked(b"3\r\nabc\r\n2\r\nd"), (b"abcd".to_vec(), false));
        assert_eq!(chunked(b"3\r\nabc\r\nzz\r\n"), (b"abc".to_vec(), false));
    }

    /// A writer that keeps what it is given and counts the writes that gave it; as a body's
    /// output, it notes what each write said of the next (`more`) and each push.
    #[derive(Default)]
    struct Recorder {
        bytes: Vec<u8>,
        writes: usize,
        /// Per write through [`BodyOutput`]: its length and `more`; a push is `(0, false)`.
        held: Vec<(usize, bool)>,
    }

    impl BodyOutput for Recorder {
        fn poll_write_held(
            &mut self,
            cx: &mut std::task::Context<'_>,
            bufs: &[io::IoSlice<'_>],
            more: bool,
        ) -> std::task::Poll<io::Result<usize>> {
            let n =
                std::task::ready!(std::pin::Pin::new(&mut *self).poll_write_vectored(cx, bufs))?;
            self.held.push((n, more));
            std::task::Poll::Ready(Ok(n))
        }

        fn push(&mut self) -> io::Result<()> {
            self.held.push((0, false));
            Ok(())
        }
    }

    impl BodyOutput for tokio::io::DuplexStream {
        fn poll_write_held(
            &mut self,
            cx: &mut std::task::Context<'_>,
            bufs: &[io::IoSlice<'_>],
            _: bool,
        ) -> std::task::Poll<io::Result<usize>> {
            std::pin::Pin::new(self).poll_write_vectored(cx, bufs)
        }

        fn push(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A reader that gives its parts one per read, and makes the reader wait (once) where a
    /// part is `None`.
    struct Parts(std::collections::VecDeque<Option<&'static [u8]>>);

    impl AsyncRead for Parts {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            match self.get_mut().0.pop_front() {
                Some(None) => {
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                }
                Some(Some(part)) => {
                    buf.put_slice(part);
                    std::task::Poll::Ready(Ok(()))
                }
                None => std::task::Poll::Ready(Ok(())),
            }
        }
    }

    /// A framing, the parts read after the head's read, and the writes and pushes expected
    /// (as [`Recorder::held`] notes them).
    type HeldCase = (BodyFraming, Vec<Option<&'static [u8]>>, Vec<(usize, bool)>);

    #[tokio::test]
    async fn a_body_coming_at_once_is_held_for_full_segments_and_pushed_before_a_wait() {
        let limits = Limits::default();
        // Reads of 10,000 bytes fill the relay's 10,000-byte buffer.
        let long = &[b'x'; 10_000][..];
        let mut chunk = b"2708\r\n".to_vec();
        chunk.extend_from_slice(&[b'y'; 0x2708]);
        chunk.extend_from_slice(b"\r\n");
        let cases: [HeldCase; 5] = [
            // Parts there at once: held until the last, which sends them all.
            (
                BodyFraming::ContentLength(30_000),
                vec![Some(long), Some(long)],
                vec![(10_005, true), (10_000, true), (10_000, false)],
            ),
            // The sender pauses: what was held leaves before the wait.
            (
                BodyFraming::ContentLength(30_000),
                vec![Some(long), None, Some(long)],
                vec![(10_005, true), (10_000, true), (0, false), (10_000, false)],
            ),
            // A read that left room found the sender with nothing more: not held.
            (
                BodyFraming::ContentLength(10_008),
                vec![Some(b"1234"), Some(b"5678")],
                vec![(10_005, true), (4, false), (4, false)],
            ),
            // A chunked body, re-chunked: held after the full read, not after the short one.
            (
                BodyFraming::Chunked,
                vec![None, Some(b"4\r\ndefg\r\n"), Some(b"0\r\n\r\n")],
                vec![(5 + 10_000, true), (0, false), (9, false), (5, false)],
            ),
            // Until the server's close: pushed at the end, when nothing is left to write.
            (
                BodyFraming::UntilClose,
                vec![Some(long)],
                vec![(10_005, true), (10_000, true), (0, false)],
            ),
        ];
        for (framing, parts, expected) in cases {
            let mut buf = InBuf::new(10_000);
            let first: &[u8] = match framing {
                BodyFraming::Chunked => &chunk,
                _ => long,
            };
            buf.read_more(&mut &first[..], None).await.unwrap();
            let mut input = Parts(parts.into_iter().collect());
            let mut out = Recorder::default();
            let spec = spec_after(framing, &limits, b"HEAD ");
            let result = forward_body(&mut buf, &mut input, &mut out, spec).await;
            assert_eq!(out.held, expected, "{framing:?}: {result:?}");
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            data: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.writes += 1;
            this.bytes.extend_from_slice(data);
            std::task::Poll::Ready(Ok(data.len()))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> std::task::Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.writes += 1;
            let before = this.bytes.len();
            bufs.iter().for_each(|b| this.bytes.extend_from_slice(b));
            std::task::Poll::Ready(Ok(this.bytes.len() - before))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn the_chunks_a_read_brought_leave_in_one_write() {
        // 40 chunks and the last one with a trailer, read at once: re-encoded, they leave in
        // one write (HAProxy sends a buffer at once), not three per chunk.
        let mut body = Vec::new();
        for n in 0..40u8 {
            body.extend_from_slice(b"3;ext=1\r\n");
            body.extend_from_slice(&[b'a' + n % 26; 3]);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"0\r\nx-sum: 1\r\n\r\nNEXT");
        let limits = Limits::default();
        let spec = |out| BodySpec {
            out,
            ..spec_after(BodyFraming::Chunked, &limits, &[])
        };
        let mut expected = Vec::new();
        for n in 0..40u8 {
            expected.extend_from_slice(b"3\r\n");
            expected.extend_from_slice(&[b'a' + n % 26; 3]);
            expected.extend_from_slice(b"\r\n");
        }
        expected.extend_from_slice(b"0\r\nx-sum: 1\r\n\r\n");
        let mut buf = InBuf::new(16384);
        let mut out = Recorder::default();
        let moved = forward_body(
            &mut buf,
            &mut &body[..],
            &mut out,
            spec(OutFraming::Chunked),
        )
        .await
        .unwrap();
        assert_eq!(moved, 120);
        assert_eq!(
            String::from_utf8_lossy(&out.bytes),
            String::from_utf8_lossy(&expected)
        );
        // 40 chunks make 121 pieces: two vectored writes of at most 64.
        assert_eq!(out.writes, 2);
        // What follows the body stays for the next message.
        assert_eq!(buf.filled(), b"NEXT");

        // Decoded for a receiver that does not take chunks: the payload, in one write.
        let mut buf = InBuf::new(16384);
        let mut out = Recorder::default();
        forward_body(&mut buf, &mut &body[..], &mut out, spec(OutFraming::Raw))
            .await
            .unwrap();
        assert_eq!(out.bytes.len(), 120);
        assert_eq!(out.writes, 1);
    }

    /// A body spec for `framing`, relayed as it came in (chunked stays chunked), after `lead`.
    fn spec_after<'a>(framing: BodyFraming, limits: &'a Limits, lead: &'a [u8]) -> BodySpec<'a> {
        BodySpec {
            framing,
            out: match framing {
                BodyFraming::Chunked => OutFraming::Chunked,
                _ => OutFraming::Raw,
            },
            timeouts: BodyTimeouts::default(),
            limits,
            side: Side::Response,
            case: None,
            live: None,
            trailers: None,
            lead,
        }
    }

    /// A framing, what the head's read brought, what the next read brings, what leaves first
    /// and in how many writes.
    type Case = (
        BodyFraming,
        &'static [u8],
        &'static [u8],
        &'static [u8],
        usize,
    );

    #[tokio::test]
    async fn a_head_leaves_with_the_body_bytes_that_came_with_it() {
        let limits = Limits::default();
        // The head and the body's first bytes share the first write.
        let cases: [Case; 4] = [
            (
                BodyFraming::ContentLength(10),
                b"01234",
                b"56789",
                b"01234",
                2,
            ),
            (
                BodyFraming::ContentLength(5),
                b"01234NEXT",
                b"",
                b"01234",
                1,
            ),
            (
                BodyFraming::Chunked,
                b"3\r\nabc\r\n0\r\n\r\n",
                b"",
                b"3\r\nabc\r\n0\r\n\r\n",
                1,
            ),
            (BodyFraming::UntilClose, b"abc", b"def", b"abc", 2),
        ];
        for (framing, first, rest, leaves_first, writes) in cases {
            let mut buf = InBuf::new(16384);
            buf.read_more(&mut &first[..], None).await.unwrap();
            let mut out = Recorder::default();
            forward_body(
                &mut buf,
                &mut &rest[..],
                &mut out,
                spec_after(framing, &limits, b"HEAD "),
            )
            .await
            .unwrap();
            assert_eq!(out.writes, writes, "{framing:?}");
            let mut expected = b"HEAD ".to_vec();
            expected.extend_from_slice(leaves_first);
            expected.extend_from_slice(rest);
            assert_eq!(out.bytes, expected, "{framing:?}");
        }
        // A body without bytes: the head alone, once.
        for framing in [BodyFraming::None, BodyFraming::ContentLength(0)] {
            let mut buf = InBuf::new(16384);
            buf.read_more(&mut &b"NEXT"[..], None).await.unwrap();
            let mut out = Recorder::default();
            forward_body(
                &mut buf,
                &mut &b""[..],
                &mut out,
                spec_after(framing, &limits, b"HEAD"),
            )
            .await
            .unwrap();
            assert_eq!((out.bytes.as_slice(), out.writes), (&b"HEAD"[..], 1));
            assert_eq!(buf.filled(), b"NEXT");
        }
    }

    #[tokio::test]
    async fn a_head_is_not_held_for_a_body_yet_to_come() {
        let limits = Limits::default();
        for framing in [
            BodyFraming::ContentLength(3),
            BodyFraming::Chunked,
            BodyFraming::UntilClose,
        ] {
            let (mut sender, mut input) = tokio::io::duplex(1024);
            let (mut output, mut receiver) = tokio::io::duplex(1024);
            let body: &[u8] = match framing {
                BodyFraming::Chunked => b"3\r\nabc\r\n0\r\n\r\n",
                _ => b"abc",
            };
            let relay = async {
                let mut buf = InBuf::new(16384);
                let spec = spec_after(framing, &limits, b"HEAD");
                let moved = forward_body(&mut buf, &mut input, &mut output, spec).await;
                drop(output);
                moved
            };
            let drive = async move {
                // The head arrives while the body has not been sent.
                let mut head = [0u8; 4];
                receiver.read_exact(&mut head).await.unwrap();
                sender.write_all(body).await.unwrap();
                drop(sender);
                let mut rest = Vec::new();
                receiver.read_to_end(&mut rest).await.unwrap();
                (head, rest)
            };
            let (moved, (head, rest)) = tokio::join!(relay, drive);
            assert_eq!(&head, b"HEAD", "{framing:?}");
            assert_eq!(moved.unwrap(), 3, "{framing:?}");
            assert_eq!(rest, body, "{framing:?}");
        }
    }

    async fn pair() -> (Stream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (Stream::Tcp(b.unwrap().0), a.unwrap())
    }

    #[tokio::test]
    async fn a_spliced_body_stops_at_its_length() {
        // sender → (input) proxy (output) → receiver
        let (mut input, mut sender) = pair().await;
        let (mut output, mut receiver) = pair().await;
        let body: Vec<u8> = (0..300_000u32).map(|n| (n % 251) as u8).collect();
        let mut buf = InBuf::new(16384);
        // The head's read brought the body's first bytes along.
        sender.write_all(&body[..1000]).await.unwrap();
        buf.read_more(&mut input, None).await.unwrap();
        let rest = body[1000..].to_vec();
        let sending = tokio::spawn(async move {
            sender.write_all(&rest).await.unwrap();
            // The next message, which must stay unread.
            sender.write_all(b"NEXT").await.unwrap();
            sender
        });
        let mut pipe = Pipe::new(None, &PipeBudget::new(None)).unwrap();
        // `option contstats`: the statistics see every byte, from the buffer and the pipe.
        let (traffic, trackers) = (Traffic::default(), Trackers::default());
        let counted = std::cell::Cell::new((0, 0));
        let live = LiveBytes::new([Some(&traffic), None, None, None], &trackers, &counted);
        let (_, mut writing) = output.split();
        let moved = splice_length(
            &mut buf,
            (&input, &mut writing),
            (b"HEAD\r\n", body.len() as u64),
            &mut pipe,
            BodyTimeouts::default(),
            Meter::new(Some(&live), Side::Response),
        )
        .await
        .unwrap();
        assert_eq!(moved, body.len() as u64);
        assert_eq!(counted.get(), (0, moved));
        assert_eq!(traffic.bytes_out.get(), moved);
        drop(output);
        let mut got = Vec::new();
        receiver.read_to_end(&mut got).await.unwrap();
        assert_eq!(&got[..6], b"HEAD\r\n", "the head went first");
        assert!(got[6..] == body, "the body arrived whole and in order");
        let _sender = sending.await.unwrap();
        let mut next = [0u8; 4];
        input.read_exact(&mut next).await.unwrap();
        assert_eq!(&next, b"NEXT");
    }

    #[tokio::test]
    async fn a_spliced_body_cut_short_is_truncated() {
        let (input, mut sender) = pair().await;
        let (mut output, _receiver) = pair().await;
        sender.write_all(b"only this").await.unwrap();
        drop(sender);
        let mut pipe = Pipe::new(None, &PipeBudget::new(None)).unwrap();
        let (_, mut writing) = output.split();
        let result = splice_length(
            &mut InBuf::new(16384),
            (&input, &mut writing),
            (&[], 100),
            &mut pipe,
            BodyTimeouts::default(),
            Meter::new(None, Side::Request),
        )
        .await;
        assert!(matches!(result, Err(BodyError::Truncated)), "{result:?}");
    }
}
