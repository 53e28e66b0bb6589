//! The chunked transfer coding (RFC 9112 §7.1): a streaming decoder and a canonical encoder.
//!
//! When `framing` says `Chunked`, the proxy feeds the bytes after the head to
//! [`ChunkedDecoder::decode`] as they arrive. Each call walks the framing (size lines,
//! extensions, the CRLF after each chunk) byte by byte, and hands back the next run of
//! payload bytes as a range of the input; a body is never buffered whole. The proxy forwards
//! those payload bytes re-framed by the encoder ([`write_chunk_header`], [`write_chunk_end`],
//! [`write_last_chunk_with_trailers`]): canonical chunks, without extensions, so the framing
//! the server sees is exactly the one the decoder understood, whatever the client sent.
//!
//! Strictness: the size is 1 to 16 hex digits and at most 2^63 - 1, nothing before it, no
//! whitespace between it and `;` or CRLF; extensions are visible characters only (and then
//! dropped); every line ends with CRLF, a lone LF is refused unless `accept_unsafe`, a CR
//! must be followed by LF, the data must be followed by CRLF.
//!
//! Trailers are passed through, not dropped: RFC 9110 §6.5.1 lets a recipient discard them,
//! but some applications do rely on them and HAProxy forwards them. The trailer section is
//! read whole (it is bounded by the head limits), each field line validated like a header,
//! and returned as one range in [`Decoded::trailers`]; [`write_last_chunk_with_trailers`]
//! re-encodes it, dropping framing and connection fields that must never appear there.
//! Read [`ChunkedDecoder::decode`] first.

use std::ops::Range;

use crate::encode::HeaderCase;
use crate::error::{HttpError, HttpErrorKind, Side};
use crate::field;
use crate::framing::MAX_BODY_LENGTH;
use crate::head::Limits;

/// The longest run of chunk extensions accepted on one size line, in bytes.
pub const MAX_CHUNK_EXTENSION: usize = 4096;

/// Where the decoder stands in the chunked grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// Reading the hex digits of a chunk size; `digits` read so far.
    Size { value: u64, digits: u8 },
    /// Inside the extensions after `;`, `len` bytes so far.
    Ext { value: u64, len: usize },
    /// After the CR ending a size line: LF must follow.
    SizeLf { value: u64 },
    /// Inside chunk data.
    Data { remaining: u64 },
    /// After chunk data: CR must follow.
    DataCr,
    /// After the CR following chunk data: LF must follow.
    DataLf,
    /// After the last chunk: the trailer section, read whole.
    Trailers,
    /// The empty line closing the body was read.
    Done,
}

/// What one call to [`ChunkedDecoder::decode`] did with its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes of the input the decoder is finished with; the caller drops them and passes the
    /// rest (plus any new bytes) to the next call.
    pub consumed: usize,
    /// Payload bytes to forward, as a range of the input (empty when this call met only
    /// framing). It always ends at or before `consumed`.
    pub data: Range<usize>,
    /// With `done`: the field lines of the trailer section (terminators included, final
    /// empty line excluded) as a range of the input, or `None` if there were none.
    pub trailers: Option<Range<usize>>,
    /// The body is over: the empty line after the last chunk was consumed.
    pub done: bool,
}

/// An incremental decoder of one chunked body.
///
/// Call [`decode`](Self::decode) with the bytes received so far that it has not consumed yet,
/// forward `input[data]`, drop `input[..consumed]`, and call again (with more bytes once the
/// input is exhausted) until `done`. Returns `consumed == 0` with no data when it needs more
/// input; in the trailer section it keeps bytes unconsumed until the section is complete, so
/// the caller's buffer must hold the trailer limit (the head limit, which it does).
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: ChunkState,
    side: Side,
    accept_unsafe: bool,
    max_trailer_bytes: usize,
    max_trailer_fields: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A strict decoder of a request body, with the default head limits for the trailer
    /// section.
    pub fn new() -> Self {
        Self::with_limits(&Limits::default())
    }

    /// A decoder of a request body whose trailer section obeys `limits` (`max_head` bytes,
    /// `max_headers - 1` fields), and which tolerates a lone LF as line end when
    /// `limits.accept_unsafe` is set. For a response body, add [`on_side`](Self::on_side).
    pub fn with_limits(limits: &Limits) -> Self {
        ChunkedDecoder {
            state: ChunkState::Size {
                value: 0,
                digits: 0,
            },
            side: Side::Request,
            accept_unsafe: limits.accept_unsafe,
            max_trailer_bytes: limits.max_head,
            max_trailer_fields: limits.max_headers.saturating_sub(1),
        }
    }

    /// The same decoder for a body on `side`, which decides the status of its errors:
    /// 400/431 for a request, 502 for a response.
    pub fn on_side(mut self, side: Side) -> Self {
        self.side = side;
        self
    }

    /// True once the whole body, trailers included, has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes as much of `input` as possible, stopping after the first run of payload
    /// bytes, at the end of the body, or when more input is needed.
    ///
    /// Errors name the condition (`BadChunkSize`, `BadChunkExtension`, `MissingChunkCrlf`,
    /// `BareLf`, `BareCr`, `TrailersTooLarge`, or a field-line kind for a bad trailer), on
    /// the decoder's side. After an error the decoder must not be used again. After `done`, further calls consume nothing and report `done` again.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        let mut pos = 0usize;
        loop {
            match self.state {
                ChunkState::Done => return Ok(finished(pos, None)),
                ChunkState::Trailers => return self.trailers(input, pos),
                ChunkState::Data { remaining } => {
                    let available = input.len().saturating_sub(pos);
                    if available == 0 {
                        return Ok(more(pos));
                    }
                    // Both fit in usize after the min with `available`.
                    let take = usize::try_from(remaining).map_or(available, |r| r.min(available));
                    let end = pos.saturating_add(take);
                    let left = remaining.saturating_sub(take as u64);
                    self.state = if left == 0 {
                        ChunkState::DataCr
                    } else {
                        ChunkState::Data { remaining: left }
                    };
                    return Ok(Decoded {
                        consumed: end,
                        data: pos..end,
                        trailers: None,
                        done: false,
                    });
                }
                _ => {}
            }
            let Some(&b) = input.get(pos) else {
                return Ok(more(pos));
            };
            pos += 1;
            let side = self.side;
            self.state = self.step(b).map_err(|kind| HttpError::new(side, kind))?;
        }
    }

    /// The state after one framing byte `b`.
    fn step(&self, b: u8) -> Result<ChunkState, HttpErrorKind> {
        use ChunkState::*;
        let lf_ok = self.accept_unsafe;
        Ok(match self.state {
            Size { value, digits } => match (b, hex_value(b)) {
                (_, Some(d)) => {
                    if digits >= 16 {
                        return Err(HttpErrorKind::BadChunkSize);
                    }
                    let value = value
                        .checked_mul(16)
                        .and_then(|v| v.checked_add(u64::from(d)))
                        .filter(|&v| v <= MAX_BODY_LENGTH)
                        .ok_or(HttpErrorKind::BadChunkSize)?;
                    Size {
                        value,
                        digits: digits + 1,
                    }
                }
                _ if digits == 0 => return Err(HttpErrorKind::BadChunkSize),
                (b';', _) => Ext { value, len: 0 },
                (b'\r', _) => SizeLf { value },
                (b'\n', _) if lf_ok => after_size(value),
                (b'\n', _) => return Err(HttpErrorKind::BareLf),
                _ => return Err(HttpErrorKind::BadChunkSize),
            },
            Ext { value, len } => match b {
                b'\r' => SizeLf { value },
                b'\n' if lf_ok => after_size(value),
                b'\n' => return Err(HttpErrorKind::BareLf),
                _ if field::is_field_value_byte(b) && len < MAX_CHUNK_EXTENSION => Ext {
                    value,
                    len: len + 1,
                },
                _ => return Err(HttpErrorKind::BadChunkExtension),
            },
            SizeLf { value } => match b {
                b'\n' => after_size(value),
                _ => return Err(HttpErrorKind::BareCr),
            },
            DataCr => match b {
                b'\r' => DataLf,
                b'\n' if lf_ok => Size {
                    value: 0,
                    digits: 0,
                },
                b'\n' => return Err(HttpErrorKind::BareLf),
                _ => return Err(HttpErrorKind::MissingChunkCrlf),
            },
            DataLf => match b {
                b'\n' => Size {
                    value: 0,
                    digits: 0,
                },
                _ => return Err(HttpErrorKind::MissingChunkCrlf),
            },
            // Not reached: `decode` handles these states without reading single bytes.
            Data { .. } | Trailers | Done => self.state,
        })
    }

    /// Reads the trailer section starting at `start`: all of it, or nothing yet.
    fn trailers(&mut self, input: &[u8], start: usize) -> Result<Decoded, HttpError> {
        let section = input.get(start..).unwrap_or(&[]);
        let too_large = HttpError::new(self.side, HttpErrorKind::TrailersTooLarge);
        let mut at = 0usize;
        let mut fields = 0usize;
        loop {
            let line = field::line_at(section, at);
            if !line.complete {
                if section.len() >= self.max_trailer_bytes {
                    return Err(too_large);
                }
                return Ok(more(start));
            }
            if line.next > self.max_trailer_bytes {
                return Err(too_large);
            }
            if line.bare_lf && !self.accept_unsafe {
                return Err(HttpError::new(self.side, HttpErrorKind::BareLf));
            }
            if line.bytes.is_empty() {
                self.state = ChunkState::Done;
                let trailers = (at > 0).then(|| start..start.saturating_add(at));
                return Ok(finished(start.saturating_add(line.next), trailers));
            }
            if let Some(kind) = field::check_field_line(line.bytes, true) {
                return Err(HttpError::new(self.side, kind));
            }
            fields += 1;
            if fields > self.max_trailer_fields {
                return Err(too_large);
            }
            at = line.next;
        }
    }
}

/// The state after a complete size line: data, or the trailer section after the last chunk.
fn after_size(value: u64) -> ChunkState {
    if value == 0 {
        ChunkState::Trailers
    } else {
        ChunkState::Data { remaining: value }
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Everything up to `pos` consumed, no payload, more input needed.
fn more(pos: usize) -> Decoded {
    Decoded {
        consumed: pos,
        data: pos..pos,
        trailers: None,
        done: false,
    }
}

fn finished(pos: usize, trailers: Option<Range<usize>>) -> Decoded {
    Decoded {
        consumed: pos,
        data: pos..pos,
        trailers,
        done: true,
    }
}

/// Fields never forwarded in a trailer section: framing and routing fields (RFC 9110 §6.5.1
/// forbids them there; a server that merged them into its headers could be misled) and the
/// connection-level fields, which belong to one hop.
pub const FORBIDDEN_TRAILERS: [&str; 9] = [
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// Writes the size line of a chunk of `len` bytes: lowercase hex, CRLF, no extension. Writes
/// nothing for 0, which would end the body: callers skip empty data (or use [`write_chunk`]).
pub fn write_chunk_header(len: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let nibbles = (usize::BITS - len.leading_zeros()).div_ceil(4);
    for k in (0..nibbles).rev() {
        let digit = (len >> (4 * k)) & 0xf;
        out.push(HEX.get(digit).copied().unwrap_or(b'0'));
    }
    if nibbles > 0 {
        out.extend_from_slice(b"\r\n");
    }
}

/// Writes the CRLF that follows the data of a chunk.
pub fn write_chunk_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// Writes one whole chunk holding `data`; nothing if `data` is empty.
pub fn write_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    write_chunk_header(data.len(), out);
    out.extend_from_slice(data);
    write_chunk_end(out);
}

/// Writes the end of a chunked body without trailers: `0` CRLF CRLF.
pub fn write_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

/// Writes the end of a chunked body with the trailer section `trailers` (the bytes of
/// [`Decoded::trailers`]): `0` CRLF, each field line as `name: value` CRLF, CRLF.
///
/// Lines are re-encoded, so line ends are always CRLF. Fields in [`FORBIDDEN_TRAILERS`] are
/// dropped, and so is any line that is not a valid field line (none are, if `trailers` came
/// from the decoder).
/// Names found in `case` are written with its spelling (`h1-case-adjust`).
pub fn write_last_chunk_with_trailers(
    trailers: &[u8],
    case: Option<&HeaderCase>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"0\r\n");
    let mut at = 0;
    while at < trailers.len() {
        let line = field::line_at(trailers, at);
        at = line.next;
        if line.bytes.is_empty() || field::check_field_line(line.bytes, true).is_some() {
            continue;
        }
        let Some((name, value)) = field::split_field_line(line.bytes) else {
            continue;
        };
        if FORBIDDEN_TRAILERS
            .iter()
            .any(|f| name.eq_ignore_ascii_case(f.as_bytes()))
        {
            continue;
        }
        out.extend_from_slice(case.map_or(name, |case| case.adjust(name)));
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
