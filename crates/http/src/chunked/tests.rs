//! Tests of the chunked decoder and encoder: valid bodies fed whole and byte by byte, every
//! framing violation, trailers, and encode/decode round trips.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::error::HttpErrorKind::*;
use crate::error::Side;

/// What a whole decoding produced.
#[derive(Debug, PartialEq, Eq)]
struct Body {
    payload: Vec<u8>,
    trailers: Option<Vec<u8>>,
    /// Bytes of the input that belonged to the body.
    used: usize,
}

/// Decodes `input` as the proxy would, receiving it in pieces of `step` bytes: keep the
/// unconsumed bytes, append what arrives, decode until more input is needed.
fn decode_in_steps(
    decoder: &mut ChunkedDecoder,
    input: &[u8],
    step: usize,
) -> Result<Body, HttpErrorKind> {
    let mut pending: Vec<u8> = Vec::new();
    let mut payload = Vec::new();
    let mut used = 0;
    let mut fed = 0;
    loop {
        let d = decoder.decode(&pending).map_err(|e| e.kind)?;
        assert!(d.consumed <= pending.len());
        assert!(d.data.start <= d.data.end && d.data.end <= d.consumed);
        payload.extend_from_slice(&pending[d.data.clone()]);
        if d.done {
            let trailers = d.trailers.map(|r| pending[r].to_vec());
            used += d.consumed;
            return Ok(Body {
                payload,
                trailers,
                used,
            });
        }
        let progress = d.consumed > 0 || !d.data.is_empty();
        used += d.consumed;
        pending.drain(..d.consumed);
        if !progress {
            if fed >= input.len() {
                return Err(HttpErrorKind::BadChunkSize); // stands for "truncated" in tests
            }
            let end = (fed + step).min(input.len());
            pending.extend_from_slice(&input[fed..end]);
            fed = end;
        }
    }
}

fn decode(input: &[u8]) -> Result<Body, HttpErrorKind> {
    decode_in_steps(&mut ChunkedDecoder::new(), input, input.len().max(1))
}

fn decode_lenient(input: &[u8]) -> Result<Body, HttpErrorKind> {
    let limits = Limits {
        accept_unsafe: true,
        ..Limits::default()
    };
    decode_in_steps(
        &mut ChunkedDecoder::with_limits(&limits),
        input,
        input.len().max(1),
    )
}

fn payload(input: &[u8]) -> Vec<u8> {
    decode(input).unwrap().payload
}

#[test]
fn valid_bodies() {
    let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let got = decode(body).unwrap();
    assert_eq!(got.payload, b"hello world");
    assert_eq!(got.trailers, None);
    assert_eq!(got.used, body.len());
    assert_eq!(payload(b"A\r\n0123456789\r\n0\r\n\r\n"), b"0123456789");
    assert_eq!(payload(b"a\r\n0123456789\r\n0\r\n\r\n"), b"0123456789");
    assert_eq!(payload(b"0005\r\nhello\r\n000\r\n\r\n"), b"hello");
    assert_eq!(
        payload(b"5;name=value\r\nhello\r\n0;last\r\n\r\n"),
        b"hello"
    );
    assert_eq!(
        payload(b"5; a=\"quoted ; string\" ;b\r\nhello\r\n0\r\n\r\n"),
        b"hello"
    );
    assert_eq!(payload(b"0\r\n\r\n"), b"");
}

#[test]
fn byte_by_byte_matches_whole() {
    let body = b"5;x=y\r\nhello\r\n1\r\n \r\n10\r\n0123456789abcdef\r\n0\r\nX-Sum: 12\r\n\r\n";
    let whole = decode(body).unwrap();
    for step in [1, 2, 3, 7, 16] {
        let pieces = decode_in_steps(&mut ChunkedDecoder::new(), body, step).unwrap();
        assert_eq!(pieces, whole, "step {step}");
    }
    assert_eq!(whole.payload, b"hello 0123456789abcdef");
    assert_eq!(whole.trailers.as_deref(), Some(&b"X-Sum: 12\r\n"[..]));
}

#[test]
fn bytes_after_the_body_are_left_alone() {
    let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
    let got = decode(input).unwrap();
    assert_eq!(got.used, 13);
    assert_eq!(&input[got.used..], b"GET / HTTP/1.1\r\n");
    // Once done, the decoder consumes nothing more.
    let mut d = ChunkedDecoder::new();
    let first = d.decode(b"0\r\n\r\nrest").unwrap();
    assert!(first.done && d.is_done());
    assert_eq!(first.consumed, 5);
    let again = d.decode(b"rest").unwrap();
    assert!(again.done);
    assert_eq!(again.consumed, 0);
}

#[test]
fn chunk_size_violations() {
    let cases: [(&[u8], HttpErrorKind); 15] = [
        (b"0x5\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b" 5\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"5 \r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"5 ;ext\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"5\t;ext\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"+5\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"-5\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b"\r\nhello\r\n0\r\n\r\n", BadChunkSize),
        (b";ext\r\n", BadChunkSize),
        (b"g\r\n", BadChunkSize),
        // 17 hex digits, even with leading zeros, and anything over 2^63 - 1.
        (b"00000000000000005\r\n", BadChunkSize),
        (b"ffffffffffffffffff\r\n", BadChunkSize),
        (b"8000000000000000\r\n", BadChunkSize),
        (b"5\rhello", BareCr),
        (b"5\0\r\n", BadChunkSize),
    ];
    for (input, kind) in cases {
        assert_eq!(
            decode(input),
            Err(kind),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    // The largest size is accepted (the body itself is not sent here).
    let mut d = ChunkedDecoder::new();
    let r = d.decode(b"7fffffffffffffff\r\nab").unwrap();
    assert_eq!(r.data, 18..20);
}

#[test]
fn extension_violations() {
    assert_eq!(
        decode(b"5;a\x01\r\nhello\r\n0\r\n\r\n"),
        Err(BadChunkExtension)
    );
    assert_eq!(
        decode(b"5;a\0\r\nhello\r\n0\r\n\r\n"),
        Err(BadChunkExtension)
    );
    assert_eq!(decode(b"5;a\rb\r\nhello\r\n0\r\n\r\n"), Err(BareCr));
    let long = [
        b"5;".as_slice(),
        &[b'a'; MAX_CHUNK_EXTENSION + 1],
        b"\r\nhello\r\n0\r\n\r\n",
    ]
    .concat();
    assert_eq!(decode(&long), Err(BadChunkExtension));
    let fits = [
        b"5;".as_slice(),
        &[b'a'; MAX_CHUNK_EXTENSION],
        b"\r\nhello\r\n0\r\n\r\n",
    ]
    .concat();
    assert_eq!(decode(&fits).unwrap().payload, b"hello");
}

#[test]
fn crlf_after_data_is_required() {
    assert_eq!(decode(b"5\r\nhelloX\r\n0\r\n\r\n"), Err(MissingChunkCrlf));
    assert_eq!(decode(b"5\r\nhello0\r\n\r\n"), Err(MissingChunkCrlf));
    assert_eq!(decode(b"5\r\nhello\rX0\r\n\r\n"), Err(MissingChunkCrlf));
    // A chunk longer than announced: its extra bytes are where the CRLF should be.
    assert_eq!(decode(b"3\r\nhello\r\n0\r\n\r\n"), Err(MissingChunkCrlf));
}

#[test]
fn bare_lf_is_refused_unless_lenient() {
    let cases: [&[u8]; 4] = [
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"5;e\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\n",
    ];
    for input in cases {
        assert_eq!(
            decode(input),
            Err(BareLf),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(decode_lenient(input).unwrap().payload, b"hello");
    }
    let lenient = decode_lenient(b"5\nhello\n0\nA: b\n\n").unwrap();
    assert_eq!(lenient.trailers.as_deref(), Some(&b"A: b\n"[..]));
    // Even lenient, a CR must be followed by LF.
    assert_eq!(decode_lenient(b"5\rhello"), Err(BareCr));
}

#[test]
fn trailers() {
    let body = b"3\r\nabc\r\n0\r\nX-Checksum: 42\r\nX-Other:  v \r\n\r\nnext";
    let got = decode(body).unwrap();
    assert_eq!(got.payload, b"abc");
    assert_eq!(
        got.trailers.as_deref(),
        Some(&b"X-Checksum: 42\r\nX-Other:  v \r\n"[..])
    );
    assert_eq!(&body[got.used..], b"next");

    let cases: [(&[u8], HttpErrorKind); 6] = [
        (b"0\r\nX: a\r\n folded\r\n\r\n", ObsFold),
        (b"0\r\nX : a\r\n\r\n", SpaceBeforeColon),
        (b"0\r\nX: a\rb\r\n\r\n", BareCr),
        (b"0\r\nX: a\0\r\n\r\n", NulByte),
        (b"0\r\n: a\r\n\r\n", EmptyHeaderName),
        (b"0\r\nno colon\r\n\r\n", BadHeaderName),
    ];
    for (input, kind) in cases {
        assert_eq!(
            decode(input),
            Err(kind),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn trailers_wait_until_complete_and_are_bounded() {
    let mut d = ChunkedDecoder::new();
    let r = d.decode(b"0\r\nX-A: 1\r\nX-B").unwrap();
    // Everything before the trailer section is consumed, the section is kept.
    assert_eq!((r.consumed, r.done), (3, false));
    let r = d.decode(b"X-A: 1\r\nX-B: 2\r\n\r\n").unwrap();
    assert!(r.done);
    assert_eq!(r.trailers, Some(0..16));

    let limits = Limits {
        max_head: 32,
        ..Limits::default()
    };
    let mut d = ChunkedDecoder::with_limits(&limits);
    let big = [b"0\r\nX: ".as_slice(), &[b'a'; 40]].concat();
    assert_eq!(
        d.decode(&big).map_err(|e| (e.kind, e.status())),
        Err((TrailersTooLarge, 431))
    );
    let limits = Limits {
        max_headers: 3,
        ..Limits::default()
    };
    let mut d = ChunkedDecoder::with_limits(&limits);
    assert_eq!(
        d.decode(b"0\r\nA: 1\r\nB: 2\r\n\r\n").unwrap().trailers,
        Some(3..15)
    );
    let mut d = ChunkedDecoder::with_limits(&limits);
    assert_eq!(
        d.decode(b"0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n")
            .unwrap_err()
            .kind,
        TrailersTooLarge
    );
}

#[test]
fn response_side_errors_are_502() {
    let mut d = ChunkedDecoder::with_limits(&Limits::default()).on_side(Side::Response);
    let e = d.decode(b"0x5\r\n").unwrap_err();
    assert_eq!(
        (e.kind, e.side, e.status()),
        (BadChunkSize, Side::Response, 502)
    );
    let e = ChunkedDecoder::new().decode(b"0x5\r\n").unwrap_err();
    assert_eq!((e.side, e.status()), (Side::Request, 400));
}

#[test]
fn encoder_writes_canonical_chunks() {
    let mut out = Vec::new();
    write_chunk_header(0, &mut out);
    assert!(out.is_empty());
    write_chunk_header(1, &mut out);
    write_chunk_header(255, &mut out);
    write_chunk_header(4096, &mut out);
    assert_eq!(out, b"1\r\nff\r\n1000\r\n");
    out.clear();
    write_chunk_header(usize::MAX, &mut out);
    assert_eq!(out.len(), usize::BITS as usize / 4 + 2);
    out.clear();
    write_chunk(b"", &mut out);
    assert!(out.is_empty());
    write_chunk(b"hello", &mut out);
    write_last_chunk(&mut out);
    assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");
}

#[test]
fn encoder_rewrites_trailers() {
    let mut out = Vec::new();
    write_last_chunk_with_trailers(
        b"X-Sum:  1 \nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nbad line\r\nHost: h\r\nY: 2\r\n",
        None,
        &mut out,
    );
    assert_eq!(out, b"0\r\nX-Sum: 1\r\nY: 2\r\n\r\n");
    // `h1-case-adjust` names are written as listed, whatever case they came in.
    let mut case = HeaderCase::default();
    case.add("x-sum", "X-SUM").unwrap();
    out.clear();
    write_last_chunk_with_trailers(b"x-Sum: 1\r\ny: 2\r\n", Some(&case), &mut out);
    assert_eq!(out, b"0\r\nX-SUM: 1\r\ny: 2\r\n\r\n");
    out.clear();
    write_last_chunk_with_trailers(b"", None, &mut out);
    assert_eq!(out, b"0\r\n\r\n");
}

#[test]
fn round_trip_through_decoder_and_encoder() {
    // Decode an odd-looking body, re-encode canonically, decode again: same payload.
    let odd = b"3;x=1\r\nabc\r\n00A\r\n0123456789\r\n0\r\nT: 1\r\n\r\n";
    let first = decode(odd).unwrap();
    let mut canonical = Vec::new();
    write_chunk(&first.payload[..3], &mut canonical);
    write_chunk(&first.payload[3..], &mut canonical);
    write_last_chunk_with_trailers(first.trailers.as_deref().unwrap(), None, &mut canonical);
    assert_eq!(
        canonical,
        b"3\r\nabc\r\na\r\n0123456789\r\n0\r\nT: 1\r\n\r\n"
    );
    let second = decode(&canonical).unwrap();
    assert_eq!(second.payload, first.payload);
    assert_eq!(second.trailers, first.trailers);
}
