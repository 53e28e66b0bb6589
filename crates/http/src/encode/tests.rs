//! Tests of head re-encoding, Connection options and the hop-by-hop set.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::head::{Limits, Parse, parse_request, parse_response};

fn request(buf: &[u8]) -> RequestHead {
    match parse_request(buf, &Limits::default()).unwrap() {
        Parse::Complete(h) => h,
        Parse::Partial => panic!("partial"),
    }
}

fn response(buf: &[u8]) -> ResponseHead {
    match parse_response(buf, &Limits::default()).unwrap() {
        Parse::Complete(h) => h,
        Parse::Partial => panic!("partial"),
    }
}

#[test]
fn request_is_reencoded_canonically() {
    let buf = b"\r\nGET /p?q HTTP/1.1\nHost:h\nX-Mixed-Case:   a  b \r\nAccept: */*\n\n";
    let head = request(buf);
    let mut out = Vec::new();
    encode_request(buf, &head, &HeadEdits::default(), &mut out);
    assert_eq!(
        out,
        b"GET /p?q HTTP/1.1\r\nHost: h\r\nX-Mixed-Case: a  b\r\nAccept: */*\r\n\r\n"
    );
    // What we send parses back to the same message.
    let again = request(&out);
    assert_eq!(again.headers.len(), head.headers.len());
    assert_eq!(again.target_bytes(&out), head.target_bytes(buf));
}

#[test]
fn edits_remove_add_and_change_version() {
    let buf = b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nX-Keep: 1\r\nkeep-alive: timeout=5\r\nHost: h\r\n\r\n";
    let head = request(buf);
    let edits = HeadEdits {
        remove: &["CONNECTION", "Keep-Alive"],
        hop_by_hop: None,
        add: &[
            ("X-Forwarded-For", b"192.0.2.1"),
            ("Bad Name", b"x"),
            ("X-Injected", b"a\r\nEvil: 1"),
            ("X-Nul", b"a\0"),
        ],
        version: Some(Version::Http11),
        case: None,
    };
    let mut out = Vec::new();
    encode_request(buf, &head, &edits, &mut out);
    assert_eq!(
        out,
        b"GET / HTTP/1.1\r\nX-Keep: 1\r\nHost: h\r\nX-Forwarded-For: 192.0.2.1\r\n\r\n"
    );
    assert!(is_valid_field("X-Forwarded-For", b"192.0.2.1"));
    assert!(!is_valid_field("X-Injected", b"a\r\nEvil: 1"));
    assert!(!is_valid_field("", b"a"));
}

#[test]
fn case_adjustment_rewrites_listed_names_of_kept_and_added_fields() {
    let mut case = HeaderCase::default();
    case.add("content-length", "Content-Length").unwrap();
    case.add("x-forwarded-for", "X-FORWARDED-for").unwrap();
    let buf = b"POST / HTTP/1.1\r\nhost: h\r\ncontent-LENGTH: 2\r\nx-other: 1\r\n\r\n";
    let head = request(buf);
    let edits = HeadEdits {
        add: &[("x-forwarded-for", b"192.0.2.1")],
        case: Some(&case),
        ..HeadEdits::default()
    };
    let mut out = Vec::new();
    encode_request(buf, &head, &edits, &mut out);
    assert_eq!(
        out,
        b"POST / HTTP/1.1\r\nhost: h\r\nContent-Length: 2\r\nx-other: 1\r\nX-FORWARDED-for: 192.0.2.1\r\n\r\n"
    );
    // A name that only starts like a listed one is left alone.
    assert_eq!(case.adjust(b"content-len"), b"content-len");
    assert_eq!(case.adjust(b"CONTENT-LENGTH"), b"Content-Length");
}

#[test]
fn case_entries_are_checked_as_haproxy_documents_them() {
    let mut case = HeaderCase::default();
    assert!(case.is_empty());
    case.add("x-a", "X-A").unwrap();
    assert!(!case.is_empty());
    assert_eq!(case.add("x-a", "x-A").unwrap_err(), "duplicate entry 'x-a'");
    assert!(case.add("X-b", "X-B").unwrap_err().contains("lower case"));
    assert!(case.add("x-b", "X-C").unwrap_err().contains("only by case"));
    assert!(
        case.add("x b", "X B")
            .unwrap_err()
            .contains("not a header name")
    );
    // A file: blanks around the names, comments and empty lines are skipped.
    let text = "# names\n\n  \tx-b   X-B \r\n\tcontent-type\tContent-Type\n";
    case.add_lines(text).unwrap();
    assert_eq!(case.adjust(b"x-b"), b"X-B");
    assert_eq!(case.adjust(b"content-type"), b"Content-Type");
    // Errors name the line.
    let err = case.add_lines("# ok\nx-c\n").unwrap_err();
    assert_eq!(err, (2, "expects <from> and <to>".to_owned()));
    let err = case.add_lines("x-c X-C X-C\n").unwrap_err();
    assert_eq!(err.0, 1);
    assert_eq!(
        case.add_lines("x-a X-a").unwrap_err().1,
        "duplicate entry 'x-a'"
    );
}

#[test]
fn response_is_reencoded_canonically() {
    let buf = b"HTTP/1.1 200\r\nServer: x\r\nContent-Length: 0\r\n\r\n";
    let head = response(buf);
    let mut out = Vec::new();
    encode_response(buf, &head, &HeadEdits::default(), &mut out);
    assert_eq!(
        out,
        b"HTTP/1.1 200 \r\nServer: x\r\nContent-Length: 0\r\n\r\n"
    );
    assert_eq!(response(&out).status, 200);

    let buf = b"HTTP/1.0 404 Not Found\r\nConnection: close\r\n\r\n";
    let head = response(buf);
    let mut out = Vec::new();
    let edits = HeadEdits {
        remove: &HOP_BY_HOP,
        hop_by_hop: None,
        version: Some(Version::Http11),
        case: None,
        ..HeadEdits::default()
    };
    encode_response(buf, &head, &edits, &mut out);
    assert_eq!(out, b"HTTP/1.1 404 Not Found\r\n\r\n");
}

#[test]
fn connection_options() {
    let buf = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, Upgrade\r\nconnection: ,CLOSE\r\n\r\n";
    let head = request(buf);
    let options = connection_tokens(buf, &head);
    assert_eq!(
        options,
        ConnectionOptions {
            close: true,
            keep_alive: true,
            upgrade: true
        }
    );
    assert!(!options.persistent(Version::Http11));

    let none = ConnectionOptions::default();
    assert!(none.persistent(Version::Http11));
    assert!(!none.persistent(Version::Http10));
    let ka = ConnectionOptions {
        keep_alive: true,
        ..none
    };
    assert!(ka.persistent(Version::Http10));

    let buf = b"HTTP/1.1 200 OK\r\nConnection: closed\r\n\r\n";
    assert_eq!(connection_tokens(buf, &response(buf)), none);
}

#[test]
fn hop_by_hop_set() {
    // Every hop-by-hop field, those a Connection option names (in any case, once or twice),
    // and fields an option may not remove: framing, routing, or not a token.
    let buf = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Trace, close, Content-Length, HOST, transfer-encoding, te, Upgrade, x-trace, bad token\r\nUpgrade: websocket\r\nx-trace: 1\r\nTE: trailers\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nClose: kept\r\nX-Other: 2\r\n\r\n";
    let head = request(buf);
    let encoded = |keep_upgrade: bool, add: &[(&str, &[u8])]| {
        let mut out = Vec::new();
        let edits = HeadEdits {
            hop_by_hop: Some(keep_upgrade),
            add,
            ..HeadEdits::default()
        };
        encode_request(buf, &head, &edits, &mut out);
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        encoded(false, &[]),
        "GET / HTTP/1.1\r\nHost: h\r\nClose: kept\r\nX-Other: 2\r\n\r\n"
    );
    // A forwarded protocol switch keeps the Upgrade field.
    assert_eq!(
        encoded(true, &[("connection", b"upgrade")]),
        "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nClose: kept\r\nX-Other: 2\r\nconnection: upgrade\r\n\r\n"
    );
    // Without a Connection field naming others, only the fixed set goes.
    let plain = b"GET / HTTP/1.1\r\nHost: h\r\nTE: trailers\r\nX-Trace: 1\r\n\r\n";
    let plain_head = request(plain);
    let mut out = Vec::new();
    let edits = HeadEdits {
        hop_by_hop: Some(false),
        ..HeadEdits::default()
    };
    encode_request(plain, &plain_head, &edits, &mut out);
    assert_eq!(out, b"GET / HTTP/1.1\r\nHost: h\r\nX-Trace: 1\r\n\r\n");
}

#[test]
fn status_codes_are_written_in_decimal() {
    for status in [100u16, 200, 404, 999, 1000, 65535] {
        let mut out = Vec::new();
        write_decimal(status, &mut out);
        assert_eq!(out, status.to_string().as_bytes());
    }
}

#[test]
fn lines_kept_as_sent_and_rewritten_ones_keep_their_order_around_removed_ones() {
    // Lines already canonical, a removed one between them, lines that need rewriting (no
    // space, extra spaces, a bare LF) between canonical ones, and an empty value.
    let buf = b"GET / HTTP/1.1\r\nHost: h\r\nB: 2\r\nConnection: close\r\nC: 3\r\nD:4\r\nE: 5\r\nF:  6 \r\nG: 7\nH: \r\nI: 9\r\n\r\n";
    let head = request(buf);
    let mut out = Vec::new();
    let edits = HeadEdits {
        hop_by_hop: Some(false),
        add: &[("J", b"10")],
        ..HeadEdits::default()
    };
    encode_request(buf, &head, &edits, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET / HTTP/1.1\r\nHost: h\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: \r\nI: 9\r\nJ: 10\r\n\r\n"
    );
}
