//! The HTTP/1.1 codec of Sluice: heads, body framing, chunked coding, error answers.
//!
//! Pure code (layer 0: no I/O, no clock, no tokio). The proxy's HTTP data path calls it in
//! the order of a message's life:
//!
//! 1. [`head`]: [`parse_request`] / [`parse_response`] find a complete head in the
//!    connection's buffer and describe it with offsets ([`RequestHead`], [`ResponseHead`]).
//! 2. [`framing`]: [`request_framing`] / [`response_framing`] decide how the body is
//!    delimited ([`BodyFraming`], RFC 9112 §6.3), refusing anything ambiguous.
//! 3. [`chunked`]: [`ChunkedDecoder`] walks a chunked body as it streams through; the
//!    encoder functions re-frame it canonically.
//! 4. [`encode`]: [`encode_request`] / [`encode_response`] write the head for the next hop
//!    with the proxy's edits (hop-by-hop fields left out); [`connection_tokens`] reads
//!    Connection.
//! 5. [`error`]: every refusal is an [`HttpError`] whose kind names the condition and whose
//!    [`status`](HttpError::status) is the answer; [`error_response`] is that answer.
//!
//! Invariant: no input makes any function here panic, and no message whose length could be
//! read two ways gets past [`framing`].

pub mod chunked;
pub mod date;
mod diagnose;
pub mod encode;
pub mod error;
mod field;
pub mod framing;
pub mod head;
pub mod rfc7239;
pub mod spares;
pub mod status;
mod target;

pub use chunked::{
    ChunkedDecoder, Decoded, write_chunk, write_chunk_end, write_chunk_header, write_last_chunk,
    write_last_chunk_with_trailers,
};
pub use encode::{
    ConnectionOptions, HeadEdits, connection_tokens, encode_request, encode_response,
    is_valid_field,
};
pub use error::{HttpError, HttpErrorKind, Side, error_response};
pub use field::is_token;
pub use framing::{BodyFraming, request_framing, response_framing, transfer_encoding_value};
pub use head::{
    HeaderSpan, Limits, MessageHead, Parse, RequestHead, ResponseHead, Version, header_name,
    header_value, header_values, parse_request, parse_response,
};
pub use status::reason_phrase;
pub use target::TargetForm;
