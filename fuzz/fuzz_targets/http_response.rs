//! A server's response head, as the HTTP/1 path reads and forwards it: parsed, framed for
//! the request it answers (HEAD or CONNECT, from the first byte), and re-encoded with our
//! framing field. The forwarded head must read back as exactly one head with the same status
//! and framing, so a client never sees a different response boundary than the proxy did.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::{
    BodyFraming, HeadEdits, Limits, MessageHead, Parse, connection_tokens, encode_response,
    parse_response, response_framing,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, buf)) = data.split_first() else {
        return;
    };
    let default = Limits::default();
    let limits = Limits {
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
    };
    let (head_request, connect_request) = (flags & 8 != 0, flags & 16 != 0);
    let Ok(Parse::Complete(head)) = parse_response(buf, &limits) else {
        return;
    };
    assert!(head.head_len <= buf.len());
    connection_tokens(buf, &head);
    head.reason_bytes(buf);
    let Ok(framing) = response_framing(buf, &head, head_request, connect_request) else {
        return;
    };
    let length = match framing {
        BodyFraming::ContentLength(n) => n.to_string().into_bytes(),
        _ => Vec::new(),
    };
    let added: Vec<(&str, &[u8])> = match framing {
        BodyFraming::ContentLength(_) => vec![("Content-Length", &length)],
        BodyFraming::Chunked => vec![("Transfer-Encoding", b"chunked")],
        BodyFraming::None | BodyFraming::UntilClose => Vec::new(),
    };
    let edits = HeadEdits {
        remove: &["content-length", "transfer-encoding"],
        hop_by_hop: Some(false),
        add: &added,
        ..HeadEdits::default()
    };
    let mut out = Vec::new();
    encode_response(buf, &head, &edits, &mut out);
    let again_limits = Limits {
        max_head: out.len().max(limits.max_head),
        max_headers: limits.max_headers.max(head.headers().len() + 2),
        accept_unsafe: limits.accept_unsafe,
    };
    let again = match parse_response(&out, &again_limits) {
        Ok(Parse::Complete(again)) => again,
        other => panic!("the forwarded head is not read back: {other:?}\n{out:?}"),
    };
    assert_eq!(
        again.head_len,
        out.len(),
        "the forwarded head hides more bytes"
    );
    assert_eq!(again.status, head.status);
    assert_eq!(
        response_framing(&out, &again, head_request, connect_request).ok(),
        Some(framing)
    );
});
