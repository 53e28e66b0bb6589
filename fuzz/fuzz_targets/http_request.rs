//! A client's request head, as the HTTP/1 path reads and forwards it: parsed, framed, and
//! re-encoded the way the proxy writes it for the server (received framing fields out, one of
//! ours in, hop-by-hop fields out). The first byte picks the limits.
//!
//! Beyond "no panic", the forwarded head is parsed again and must be exactly one head, for
//! the same method and target, with the same framing: a head the proxy would write but
//! read differently, or that hides a second message, is request smuggling.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::framing::http10_body_on_bodyless_method;
use sluice_http::{
    BodyFraming, HeadEdits, Limits, MessageHead, Parse, connection_tokens, encode_request,
    parse_request, request_framing, transfer_encoding_value,
};

fn limits(flags: u8) -> Limits {
    let default = Limits::default();
    Limits {
        max_head: if flags & 1 != 0 {
            200
        } else {
            default.max_head
        },
        max_headers: if flags & 2 != 0 {
            4
        } else {
            default.max_headers
        },
        accept_unsafe: flags & 4 != 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, buf)) = data.split_first() else {
        return;
    };
    let limits = limits(flags);
    let Ok(Parse::Complete(head)) = parse_request(buf, &limits) else {
        return;
    };
    assert!(head.head_len <= buf.len());
    let framing = request_framing(buf, &head);
    http10_body_on_bodyless_method(buf, &head, &framing);
    head.target_authority(buf);
    connection_tokens(buf, &head);
    let coding = transfer_encoding_value(buf, &head);
    let Ok(framing) = framing else {
        return;
    };
    let length = match framing {
        BodyFraming::ContentLength(n) => n.to_string().into_bytes(),
        _ => Vec::new(),
    };
    let chunked = coding
        .filter(|v| v.ends_with(b"chunked"))
        .unwrap_or_else(|| b"chunked".to_vec());
    let added: Vec<(&str, &[u8])> = match framing {
        BodyFraming::ContentLength(_) => vec![("Content-Length", &length)],
        BodyFraming::Chunked => vec![("Transfer-Encoding", &chunked)],
        BodyFraming::None | BodyFraming::UntilClose => Vec::new(),
    };
    let edits = HeadEdits {
        remove: &["content-length", "transfer-encoding"],
        hop_by_hop: Some(false),
        add: &added,
        ..HeadEdits::default()
    };
    let mut out = Vec::new();
    encode_request(buf, &head, &edits, &mut out);

    let again_limits = Limits {
        max_head: out.len().max(limits.max_head),
        max_headers: limits.max_headers.max(head.headers().len() + 2),
        accept_unsafe: limits.accept_unsafe,
    };
    let again = match parse_request(&out, &again_limits) {
        Ok(Parse::Complete(again)) => again,
        other => panic!("the forwarded head is not read back: {other:?}\n{out:?}"),
    };
    assert_eq!(
        again.head_len,
        out.len(),
        "the forwarded head hides more bytes"
    );
    assert_eq!(again.method_bytes(&out), head.method_bytes(buf));
    assert_eq!(again.target_bytes(&out), head.target_bytes(buf));
    assert_eq!(request_framing(&out, &again).ok(), Some(framing));
});
