//! Tests of body framing: every smuggling vector on Content-Length and Transfer-Encoding,
//! response special cases, pipelining after a body.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::error::HttpErrorKind::*;
use crate::head::{Limits, Parse, parse_request, parse_response};

fn request_head(buf: &[u8]) -> RequestHead {
    match parse_request(buf, &Limits::default()).unwrap() {
        Parse::Complete(h) => h,
        Parse::Partial => panic!("partial"),
    }
}

/// Framing of a request made of `fields` (CRLF-separated lines) on HTTP/1.1.
fn req_framing(fields: &str) -> Result<BodyFraming, HttpError> {
    req_framing_v("1.1", fields)
}

fn req_framing_v(version: &str, fields: &str) -> Result<BodyFraming, HttpError> {
    let buf = format!("POST / HTTP/{version}\r\nHost: h\r\n{fields}\r\n").into_bytes();
    request_framing(&buf, &request_head(&buf))
}

fn req_kind(fields: &str) -> HttpErrorKind {
    let e = req_framing(fields).unwrap_err();
    assert_eq!(e.side, crate::error::Side::Request);
    e.kind
}

fn resp_framing_full(
    status_line: &str,
    fields: &str,
    head_req: bool,
    connect: bool,
) -> Result<BodyFraming, HttpError> {
    let buf = format!("{status_line}\r\n{fields}\r\n").into_bytes();
    match parse_response(&buf, &Limits::default()).unwrap() {
        Parse::Complete(h) => response_framing(&buf, &h, head_req, connect),
        Parse::Partial => panic!("partial"),
    }
}

fn resp_framing(fields: &str) -> Result<BodyFraming, HttpError> {
    resp_framing_full("HTTP/1.1 200 OK", fields, false, false)
}

#[test]
fn content_length_values() {
    use BodyFraming::ContentLength;
    assert_eq!(req_framing("Content-Length: 5\r\n"), Ok(ContentLength(5)));
    assert_eq!(req_framing("Content-Length: 0\r\n"), Ok(ContentLength(0)));
    assert_eq!(req_framing("content-length: 007\r\n"), Ok(ContentLength(7)));
    // Whitespace around a field value is OWS (RFC 9110 §5.5), not part of it.
    assert_eq!(
        req_framing("Content-Length:   5 \t\r\n"),
        Ok(ContentLength(5))
    );
    assert_eq!(
        req_framing("Content-Length: 9223372036854775807\r\n"),
        Ok(ContentLength(MAX_BODY_LENGTH))
    );
    // Identical duplicates, on one line or several, are merged.
    assert_eq!(
        req_framing("Content-Length: 5, 5\r\n"),
        Ok(ContentLength(5))
    );
    assert_eq!(
        req_framing("Content-Length: 5\r\nContent-Length: 5\r\n"),
        Ok(ContentLength(5))
    );
    for bad in [
        "+5",
        "-5",
        "5 5",
        "5\t5",
        "0x5",
        "5a",
        "5.0",
        "",
        "5,",
        ",5",
        "5,,5",
        "1e3",
        "99999999999999999999",
        "18446744073709551616",
        "9223372036854775808",
        "00000000000000000001",
    ] {
        assert_eq!(
            req_kind(&format!("Content-Length: {bad}\r\n")),
            BadContentLength,
            "{bad:?}"
        );
    }
    assert_eq!(
        req_kind("Content-Length: 5\r\nContent-Length: 6\r\n"),
        ConflictingContentLength
    );
    assert_eq!(
        req_kind("Content-Length: 5, 6\r\n"),
        ConflictingContentLength
    );
    assert_eq!(
        req_kind("Content-Length: 5, 05\r\n"),
        ConflictingContentLength
    );
    assert_eq!(req_framing("X: y\r\n"), Ok(BodyFraming::None));
}

#[test]
fn transfer_encoding_in_requests() {
    use BodyFraming::Chunked;
    assert_eq!(req_framing("Transfer-Encoding: chunked\r\n"), Ok(Chunked));
    assert_eq!(req_framing("Transfer-Encoding: Chunked\r\n"), Ok(Chunked));
    assert_eq!(
        req_framing("Transfer-Encoding: gzip, chunked\r\n"),
        Ok(Chunked)
    );
    assert_eq!(
        req_framing("Transfer-Encoding: gzip;level=1 , chunked\r\n"),
        Ok(Chunked)
    );
    assert_eq!(
        req_framing("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
        Ok(Chunked)
    );
    assert_eq!(
        req_framing("Transfer-Encoding: , chunked,\r\n"),
        Ok(Chunked)
    );

    for bad in [
        "chunked, identity",
        "xchunked",
        "chunkedx",
        "chunked, chunked",
        "chunked, gzip",
        "gzip",
        "identity",
        "",
        " , ",
        "chunked;q=1",
        "gzip;x=\"a,b\", chunked",
        "gzip;x, chunked",
        "\"chunked\"",
    ] {
        assert_eq!(
            req_kind(&format!("Transfer-Encoding: {bad}\r\n")),
            BadTransferEncoding,
            "{bad:?}"
        );
    }
    assert_eq!(
        req_kind("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
        BadTransferEncoding
    );
    assert_eq!(
        req_kind("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"),
        BadTransferEncoding
    );
    let e = req_framing("Transfer-Encoding: foo, chunked\r\n").unwrap_err();
    assert_eq!((e.kind, e.status()), (UnknownTransferCoding, 501));
    assert_eq!(
        req_kind("Transfer-Encoding: identity, chunked\r\n"),
        UnknownTransferCoding
    );
}

#[test]
fn content_length_with_transfer_encoding_is_refused() {
    let e = req_framing("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n").unwrap_err();
    assert_eq!((e.kind, e.status()), (AmbiguousFraming, 400));
    assert_eq!(
        req_kind("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"),
        AmbiguousFraming
    );
    // A bad Content-Length is reported as such even next to Transfer-Encoding.
    assert_eq!(
        req_kind("Transfer-Encoding: chunked\r\nContent-Length: x\r\n"),
        BadContentLength
    );
    let e = resp_framing("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n").unwrap_err();
    assert_eq!((e.kind, e.status()), (AmbiguousFraming, 502));
}

#[test]
fn transfer_encoding_in_http10() {
    let e = req_framing_v("1.0", "Transfer-Encoding: chunked\r\n").unwrap_err();
    assert_eq!((e.kind, e.status()), (TransferEncodingInHttp10, 400));
    assert_eq!(
        req_framing_v("1.0", "Content-Length: 3\r\n"),
        Ok(BodyFraming::ContentLength(3))
    );
    let e = resp_framing_full(
        "HTTP/1.0 200 OK",
        "Transfer-Encoding: chunked\r\n",
        false,
        false,
    )
    .unwrap_err();
    assert_eq!((e.kind, e.status()), (TransferEncodingInHttp10, 502));
}

#[test]
fn responses_without_body() {
    let te = "Transfer-Encoding: chunked\r\n";
    let cl = "Content-Length: 10\r\n";
    for status in [
        "100 Continue",
        "101 Switching Protocols",
        "103 Early Hints",
        "204 No Content",
        "304 Not Modified",
    ] {
        for fields in [te, cl, ""] {
            assert_eq!(
                resp_framing_full(&format!("HTTP/1.1 {status}"), fields, false, false),
                Ok(BodyFraming::None),
                "{status} {fields}"
            );
        }
    }
    // A response to HEAD has no body, whatever its Content-Length says.
    assert_eq!(
        resp_framing_full("HTTP/1.1 200 OK", cl, true, false),
        Ok(BodyFraming::None)
    );
    // A 2xx to CONNECT starts a tunnel; other answers to CONNECT have bodies.
    assert_eq!(
        resp_framing_full("HTTP/1.1 200 OK", "", false, true),
        Ok(BodyFraming::None)
    );
    assert_eq!(
        resp_framing_full("HTTP/1.1 407 Auth", cl, false, true),
        Ok(BodyFraming::ContentLength(10))
    );
}

#[test]
fn response_bodies() {
    assert_eq!(
        resp_framing("Transfer-Encoding: chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        resp_framing("Transfer-Encoding: foo, chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        resp_framing("Transfer-Encoding: gzip\r\n"),
        Ok(BodyFraming::UntilClose)
    );
    assert_eq!(
        resp_framing("Transfer-Encoding: chunked, gzip\r\n"),
        Ok(BodyFraming::UntilClose)
    );
    assert_eq!(
        resp_framing("Content-Length: 42\r\n"),
        Ok(BodyFraming::ContentLength(42))
    );
    assert_eq!(resp_framing(""), Ok(BodyFraming::UntilClose));
    for bad in ["chunked, chunked", "", "chunked;x=y", "a b"] {
        let e = resp_framing(&format!("Transfer-Encoding: {bad}\r\n")).unwrap_err();
        assert_eq!((e.kind, e.status()), (BadTransferEncoding, 502), "{bad:?}");
    }
    let e = resp_framing("Content-Length: 1\r\nContent-Length: 2\r\n").unwrap_err();
    assert_eq!((e.kind, e.status()), (ConflictingContentLength, 502));
    assert_eq!(
        resp_framing("Content-Length: -1\r\n").unwrap_err().kind,
        BadContentLength
    );
}

#[test]
fn pipelined_request_after_a_body() {
    let buf = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    let first = request_head(buf);
    let BodyFraming::ContentLength(n) = request_framing(buf, &first).unwrap() else {
        panic!("framing");
    };
    let next = first.head_len + n as usize;
    assert_eq!(&buf[first.head_len..next], b"hello");
    let second = request_head(&buf[next..]);
    assert_eq!(second.target_bytes(&buf[next..]), b"/b");
    assert_eq!(
        request_framing(&buf[next..], &second),
        Ok(BodyFraming::None)
    );
}

#[test]
fn canonical_transfer_encoding() {
    let value = |fields: &str| {
        let buf = format!("POST / HTTP/1.1\r\nHost: h\r\n{fields}\r\n").into_bytes();
        transfer_encoding_value(&buf, &request_head(&buf))
    };
    assert_eq!(value("Transfer-Encoding: CHUNKED\r\n").unwrap(), b"chunked");
    assert_eq!(
        value("Transfer-Encoding: GZip ; level=1,\r\ntransfer-encoding: ,Chunked\r\n").unwrap(),
        b"gzip;level=1, chunked"
    );
    assert_eq!(value("X: y\r\n"), None);
    assert_eq!(value("Transfer-Encoding: chunked, chunked\r\n"), None);
}

#[test]
fn http10_bodies_on_get_head_delete_are_spotted() {
    let spotted = |method: &str, version: &str, fields: &str| {
        let buf = format!("{method} / HTTP/{version}\r\nHost: h\r\n{fields}\r\n").into_bytes();
        let head = request_head(&buf);
        http10_body_on_bodyless_method(&buf, &head, &request_framing(&buf, &head))
    };
    for method in ["GET", "HEAD", "DELETE"] {
        assert!(spotted(method, "1.0", "Content-Length: 5\r\n"), "{method}");
        assert!(
            spotted(method, "1.0", "Transfer-Encoding: chunked\r\n"),
            "{method}"
        );
        // An empty body, HTTP/1.1, or no body at all.
        assert!(!spotted(method, "1.0", "Content-Length: 0\r\n"), "{method}");
        assert!(!spotted(method, "1.1", "Content-Length: 5\r\n"), "{method}");
        assert!(!spotted(method, "1.0", ""), "{method}");
    }
    // Other methods may have a body; methods are case-sensitive (RFC 9110 §9.1).
    assert!(!spotted("POST", "1.0", "Content-Length: 5\r\n"));
    assert!(!spotted("OPTIONS", "1.0", "Content-Length: 5\r\n"));
    assert!(!spotted("get", "1.0", "Content-Length: 5\r\n"));
}

#[test]
fn only_an_empty_framing_certainly_has_no_payload() {
    assert!(!BodyFraming::None.has_payload());
    assert!(!BodyFraming::ContentLength(0).has_payload());
    assert!(BodyFraming::ContentLength(1).has_payload());
    assert!(BodyFraming::Chunked.has_payload());
    assert!(BodyFraming::UntilClose.has_payload());
}
