//! A chunked body as it streams in: decoded once from the whole input and once in pieces cut
//! where the fuzzer says (the second byte seeds the cuts). Both must give the same payload
//! and the same end (done, needs more, or the same error): a decoder whose answer depends on
//! how the network split the bytes would let a body end in one place for us and in another
//! for the server.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::error::{HttpErrorKind, Side};
use sluice_http::{ChunkedDecoder, Limits};

#[derive(Debug, PartialEq, Eq)]
enum End {
    Done { trailers: Option<Vec<u8>> },
    NeedsMore,
    Refused(HttpErrorKind),
}

fn decode(input: &[u8], cuts: &[usize], limits: &Limits, side: Side) -> (Vec<u8>, End) {
    let mut decoder = ChunkedDecoder::with_limits(limits).on_side(side);
    let mut pending: Vec<u8> = Vec::new();
    let mut payload = Vec::new();
    let mut fed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(fed, input.len());
        pending.extend_from_slice(&input[fed..cut]);
        fed = cut;
        loop {
            let step = match decoder.decode(&pending) {
                Ok(step) => step,
                Err(err) => return (payload, End::Refused(err.kind)),
            };
            assert!(step.consumed <= pending.len());
            assert!(step.data.end <= step.consumed || step.data.is_empty());
            payload.extend_from_slice(&pending[step.data.clone()]);
            if step.done {
                let trailers = step.trailers.map(|r| pending[r].to_vec());
                return (payload, End::Done { trailers });
            }
            pending.drain(..step.consumed);
            if step.consumed == 0 && step.data.is_empty() {
                break;
            }
        }
    }
    (payload, End::NeedsMore)
}

fuzz_target!(|data: &[u8]| {
    let [flags, seed, input @ ..] = data else {
        return;
    };
    let default = Limits::default();
    let limits = Limits {
        max_head: if flags & 1 != 0 { 64 } else { default.max_head },
        max_headers: if flags & 2 != 0 {
            3
        } else {
            default.max_headers
        },
        accept_unsafe: flags & 4 != 0,
    };
    let side = if flags & 8 != 0 {
        Side::Response
    } else {
        Side::Request
    };
    let step = usize::from(*seed % 7) + 1;
    let cuts: Vec<usize> = (step..input.len()).step_by(step).collect();
    let whole = decode(input, &[], &limits, side);
    let pieces = decode(input, &cuts, &limits, side);
    assert_eq!(whole, pieces, "cut every {step} bytes");
});
