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
    let buf = b"GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Trace, close, Content-Length, HOST, transfer-encoding, te, Upgrade, x-trace, bad token\r\nUpgrade: websocket\r\n\r\n";
    let head = request(buf);
    let names = hop_by_hop_names(buf, &head, false);
    assert_eq!(
        names,
        vec![
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "upgrade",
            "X-Trace"
        ]
    );
    let names = hop_by_hop_names(buf, &head, true);
    assert_eq!(
        names,
        vec![
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "X-Trace"
        ]
    );
    // Removing them keeps the Upgrade field for a forwarded protocol switch.
    let mut out = Vec::new();
    let edits = HeadEdits {
        remove: &names,
        hop_by_hop: None,
        add: &[("connection", b"upgrade")],
        version: None,
    };
    encode_request(buf, &head, &edits, &mut out);
    assert_eq!(
        out,
        b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nconnection: upgrade\r\n\r\n"
    );
    // The same fields go without building their list.
    for keep_upgrade in [false, true] {
        let names = hop_by_hop_names(buf, &head, keep_upgrade);
        let (mut listed, mut unlisted) = (Vec::new(), Vec::new());
        let listed_edits = HeadEdits {
            remove: &names,
            ..HeadEdits::default()
        };
        encode_request(buf, &head, &listed_edits, &mut listed);
        let unlisted_edits = HeadEdits {
            hop_by_hop: Some(keep_upgrade),
            ..HeadEdits::default()
        };
        encode_request(buf, &head, &unlisted_edits, &mut unlisted);
        assert_eq!(listed, unlisted);
    }
}

#[test]
fn status_codes_are_written_in_decimal() {
    for status in [100u16, 200, 404, 999, 1000, 65535] {
        let mut out = Vec::new();
        write_decimal(status, &mut out);
        assert_eq!(out, status.to_string().as_bytes());
    }
}
