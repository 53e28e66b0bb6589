//! Micro-benchmark of the codec's hot path: parsing a typical browser request head, a typical
//! response head, and decoding a chunked body. Run with `cargo bench -p sluice-http`; it prints
//! nanoseconds per operation (median of several rounds) and throughput. Numbers, not
//! assertions: the side-by-side proxy benchmarks live in `bench/`.

use sluice_http::chunked::ChunkedDecoder;
use sluice_http::head::{Limits, Parse, parse_request, parse_response};
use std::hint::black_box;
use std::time::Instant;

const REQUEST: &[u8] = b"GET /static/app.js?v=1732 HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n\
Accept: */*\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br\r\n\
Referer: https://www.example.com/\r\n\
Cookie: session=0123456789abcdef; theme=dark\r\n\
Connection: keep-alive\r\n\
Sec-Fetch-Dest: script\r\n\
Sec-Fetch-Mode: no-cors\r\n\
Sec-Fetch-Site: same-origin\r\n\r\n";

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
Date: Sun, 22 Nov 2026 03:00:00 GMT\r\n\
Content-Type: application/javascript\r\n\
Content-Length: 48213\r\n\
Cache-Control: public, max-age=31536000\r\n\
ETag: \"5f3a-1b2c3d\"\r\n\
Vary: Accept-Encoding\r\n\r\n";

fn measure(name: &str, bytes_per_op: usize, mut op: impl FnMut()) {
    const OPS: u32 = 200_000;
    let mut rounds = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        for _ in 0..OPS {
            op();
        }
        rounds.push(start.elapsed().as_nanos() as f64 / f64::from(OPS));
    }
    rounds.sort_by(f64::total_cmp);
    let ns = rounds[rounds.len() / 2];
    println!(
        "{name:<28} {ns:>8.1} ns/op  {:>8.1} MB/s  (min {:.1}, max {:.1})",
        bytes_per_op as f64 / ns * 1e3,
        rounds[0],
        rounds[rounds.len() - 1]
    );
}

fn main() {
    let limits = Limits::default();
    measure("parse_request (12 fields)", REQUEST.len(), || {
        let parsed = parse_request(black_box(REQUEST), &limits);
        assert!(matches!(parsed, Ok(Parse::Complete(_))));
    });
    measure("parse_response (6 fields)", RESPONSE.len(), || {
        let parsed = parse_response(black_box(RESPONSE), &limits);
        assert!(matches!(parsed, Ok(Parse::Complete(_))));
    });
    let mut body = Vec::new();
    for _ in 0..16 {
        body.extend_from_slice(b"400\r\n");
        body.extend_from_slice(&[b'x'; 0x400]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    measure("chunked decode (16 KiB)", body.len(), || {
        let mut decoder = ChunkedDecoder::new();
        let mut input = black_box(&body[..]);
        loop {
            let step = decoder.decode(input).unwrap_or_else(|e| panic!("{e}"));
            input = &input[step.consumed..];
            if step.done {
                break;
            }
        }
    });
}
