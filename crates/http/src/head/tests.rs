//! Tests of request and response head parsing: valid heads, every refused condition, limits,
//! pipelining and byte-by-byte input.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::error::HttpErrorKind::*;

fn req_with(input: &[u8], limits: &Limits) -> Result<Parse<RequestHead>, HttpError> {
    parse_request(input, limits)
}

fn req(input: &[u8]) -> Result<Parse<RequestHead>, HttpError> {
    req_with(input, &Limits::default())
}

fn req_ok(input: &[u8]) -> RequestHead {
    match req(input) {
        Ok(Parse::Complete(h)) => h,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

fn req_err(input: &[u8]) -> HttpErrorKind {
    match req(input) {
        Err(e) => {
            assert_eq!(e.side, Side::Request);
            e.kind
        }
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

fn resp(input: &[u8]) -> Result<Parse<ResponseHead>, HttpError> {
    parse_response(input, &Limits::default())
}

fn resp_ok(input: &[u8]) -> ResponseHead {
    match resp(input) {
        Ok(Parse::Complete(h)) => h,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

fn resp_err(input: &[u8]) -> HttpErrorKind {
    match resp(input) {
        Err(e) => {
            assert_eq!(e.status(), 502);
            e.kind
        }
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

/// Feeds `input` one more byte at a time and returns the first answer that is not `Partial`
/// (or `Partial` if none is).
fn first_verdict<T>(
    input: &[u8],
    parse: impl Fn(&[u8]) -> Result<Parse<T>, HttpError>,
) -> Result<Parse<T>, HttpError> {
    for end in 0..=input.len() {
        let r = parse(&input[..end]);
        if !matches!(r, Ok(Parse::Partial)) {
            return r;
        }
    }
    Ok(Parse::Partial)
}

#[test]
fn simple_get() {
    let buf =
        b"GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept:  */* \r\nX-Empty:\r\n\r\n";
    let h = req_ok(buf);
    assert_eq!(h.method_bytes(buf), b"GET");
    assert!(h.is_method(buf, "GET"));
    assert!(!h.is_method(buf, "get"));
    assert_eq!(h.target_bytes(buf), b"/index.html?x=1");
    assert_eq!(h.form, TargetForm::Origin);
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.head_len, buf.len());
    assert_eq!(h.headers.len(), 3);
    assert_eq!(header_name(buf, &h.headers[1]), b"Accept");
    assert_eq!(header_value(buf, &h.headers[1]), b"*/*");
    assert_eq!(header_value(buf, &h.headers[2]), b"");
    let hosts: Vec<_> = h.header_values(buf, "HOST").collect();
    assert_eq!(hosts, vec![&b"example.com"[..]]);
    assert!(h.has_header(buf, "x-empty"));
    assert!(!h.has_header(buf, "x-missing"));
    assert_eq!(h.target_authority(buf), None);
}

#[test]
fn http10_needs_no_host_and_lf_endings_are_accepted() {
    let buf = b"\r\n\nPOST /form HTTP/1.0\nContent-Length: 3\n\nabc";
    let h = req_ok(buf);
    assert_eq!(h.version, Version::Http10);
    assert_eq!(h.method_bytes(buf), b"POST");
    assert_eq!(&buf[h.head_len..], b"abc");
}

#[test]
fn pipelined_requests_start_after_head_len() {
    let buf = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\nGET /c";
    let first = req_ok(buf);
    let rest = &buf[first.head_len..];
    let second = req_ok(rest);
    assert_eq!(second.target_bytes(rest), b"/b");
    let rest = &rest[second.head_len..];
    assert_eq!(req(rest).unwrap(), Parse::Partial);
}

#[test]
fn byte_by_byte_gives_the_whole_input_answer() {
    let valid: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: h\r\nX: y\r\n\r\n",
        b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
        b"\r\nOPTIONS * HTTP/1.0\n\n",
        b"GET http://h/p HTTP/1.1\r\nHost: h\r\n\r\n",
    ];
    for input in valid {
        for end in 0..input.len() {
            assert_eq!(req(&input[..end]).unwrap(), Parse::Partial, "{end}");
        }
        assert_eq!(first_verdict(input, req), req(input));
        assert!(matches!(req(input), Ok(Parse::Complete(_))));
    }
    let invalid: [&[u8]; 12] = [
        b"GET / HTTP/2.0\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.2\r\n\r\n",
        b"GET / HTTP/1.10\r\n\r\n",
        b"GET / http/1.1\r\n\r\n",
        b"G@T / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nA\rB: c\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost : h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\0\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
    ];
    for input in invalid {
        let whole = req(input);
        assert!(whole.is_err(), "{:?}", String::from_utf8_lossy(input));
        assert_eq!(
            first_verdict(input, req),
            whole,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    let responses: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.0 404\r\n\r\n",
        b"HTTP/2.0 200 OK\r\n\r\n",
    ];
    for input in responses {
        assert_eq!(first_verdict(input, resp), resp(input));
    }
}

#[test]
fn versions() {
    assert_eq!(
        req_err(b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"),
        UnsupportedVersion
    );
    assert_eq!(req(b"GET / HTTP/2.0\r\n\r\n").unwrap_err().status(), 505);
    assert_eq!(req_err(b"GET / HTTP/1.2\r\n\r\n"), UnsupportedVersion);
    assert_eq!(req_err(b"GET / HTTP/0.9\r\n\r\n"), UnsupportedVersion);
    assert_eq!(req_err(b"GET / HTTP/1.10\r\n\r\n"), BadVersion);
    assert_eq!(req(b"GET / HTTP/1.10\r\n\r\n").unwrap_err().status(), 400);
    assert_eq!(req_err(b"GET / HTTP/11\r\n\r\n"), BadVersion);
    assert_eq!(req_err(b"GET / RTSP/1.0\r\n\r\n"), BadVersion);
    assert_eq!(req_err(b"GET / http/1.1\r\n\r\n"), BadVersion);
    assert_eq!(req_err(b"GET /\r\n\r\n"), BadRequestLine);
    assert_eq!(req_err(b"GET / HTTP/1.1 \r\n\r\n"), BadRequestLine);
    assert_eq!(req_err(b"GET  / HTTP/1.1\r\n\r\n"), BadRequestLine);
    // A prefix of a well-formed version waits for the rest of the line.
    assert_eq!(req(b"GET / HTTP/2").unwrap(), Parse::Partial);
    assert_eq!(resp_err(b"HTTP/2.0 200 OK\r\n\r\n"), UnsupportedVersion);
    assert_eq!(resp_err(b"HTTP/1.1x 200 OK\r\n\r\n"), BadVersion);
}

#[test]
fn methods_and_targets() {
    assert_eq!(req_err(b"G(ET / HTTP/1.1\r\nHost: h\r\n\r\n"), BadMethod);
    assert_eq!(req_err(b"GE\"T / HTTP/1.1\r\nHost: h\r\n\r\n"), BadMethod);
    assert_eq!(req_err(b"G\x01T / HTTP/1.1\r\nHost: h\r\n\r\n"), BadMethod);
    assert_eq!(req_err(b" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), BadMethod);
    assert_eq!(req_err(b"GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n"), BadMethod);
    // Odd but valid tokens are methods.
    let buf = b"M-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(req_err(buf), BadTarget);
    let buf = b"PURGE~ /x HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(req_ok(buf).method_bytes(buf), b"PURGE~");

    assert_eq!(req_err(b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);
    assert_eq!(
        req_err(b"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n"),
        BadTarget
    );
    assert_eq!(
        req_err(b"GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n"),
        BadTarget
    );
    assert_eq!(req_err(b"GET /a#f HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);
    assert_eq!(
        req_err("GET /é HTTP/1.1\r\nHost: h\r\n\r\n".as_bytes()),
        BadTarget
    );
    assert_eq!(req_err(b"GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);
    assert_eq!(req_err(b"GET * HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);
    assert_eq!(req_err(b"GET h:80 HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);
    assert_eq!(
        req_err(b"CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n"),
        BadTarget
    );
    assert_eq!(req_err(b"CONNECT h HTTP/1.1\r\nHost: h\r\n\r\n"), BadTarget);

    let buf = b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(req_ok(buf).form, TargetForm::Asterisk);
    let buf = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    let h = req_ok(buf);
    assert_eq!(h.form, TargetForm::Authority);
    assert_eq!(h.target_authority(buf), Some(&b"example.com:443"[..]));
}

#[test]
fn absolute_form_and_host() {
    let buf = b"GET http://example.com:80/p?q HTTP/1.1\r\nHost: Example.com\r\n\r\n";
    let h = req_ok(buf);
    assert_eq!(h.form, TargetForm::Absolute);
    assert_eq!(h.target_authority(buf), Some(&b"example.com:80"[..]));
    assert_eq!(
        req_err(b"GET http://a/p HTTP/1.1\r\nHost: b\r\n\r\n"),
        HostMismatch
    );
    let lenient = Limits {
        accept_unsafe: true,
        ..Limits::default()
    };
    assert!(matches!(
        req_with(b"GET http://a/p HTTP/1.1\r\nHost: b\r\n\r\n", &lenient),
        Ok(Parse::Complete(_))
    ));
    assert_eq!(
        req_err(b"GET http://u:p@a/p HTTP/1.1\r\nHost: a\r\n\r\n"),
        BadTarget
    );
    assert_eq!(req_err(b"GET / HTTP/1.1\r\n\r\n"), MissingHost);
    assert_eq!(req(b"GET / HTTP/1.1\r\n\r\n").unwrap_err().status(), 400);
    assert_eq!(req_err(b"GET http://a/ HTTP/1.1\r\n\r\n"), MissingHost);
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        DuplicateHost
    );
    // Identical copies are kept once, as HAProxy keeps the first.
    let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\nhost: A\r\n\r\n";
    let h = req_ok(buf);
    let names: Vec<&[u8]> = h.headers.iter().map(|f| header_name(buf, f)).collect();
    assert_eq!(names, [&b"Host"[..], b"X"]);
    req_ok(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
    assert_eq!(
        req_err(b"CONNECT h:443 HTTP/1.1\r\nHost: h:80\r\n\r\n"),
        HostMismatch
    );
    req_ok(b"CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(req_err(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), BadHost);
    assert_eq!(req_err(b"GET / HTTP/1.1\r\nHost: a, b\r\n\r\n"), BadHost);
    assert_eq!(req_err(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), BadHost);
    req_ok(b"GET / HTTP/1.0\r\n\r\n");
}

#[test]
fn field_line_violations() {
    let cases: [(&[u8], HttpErrorKind); 13] = [
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", BareCr),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX\rY: a\r\n\r\n", BareCr),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\r\n\r\n", BareCr),
        (b"GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", BareCr),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", NulByte),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX\0: a\r\n\r\n", NulByte),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", ObsFold),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", ObsFold),
        (b"GET / HTTP/1.1\r\n Host: h\r\n\r\n", ObsFold),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n",
            SpaceBeforeColon,
        ),
        (b"GET / HTTP/1.1\r\nHost: h\r\n: a\r\n\r\n", EmptyHeaderName),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nX[]: a\r\n\r\n",
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n",
            ControlChar,
        ),
    ];
    for (input, kind) in cases {
        assert_eq!(req_err(input), kind, "{:?}", String::from_utf8_lossy(input));
        let response = [
            b"HTTP/1.1 200 OK\r\n",
            input.splitn(2, |&b| b == b'\n').nth(1).unwrap(),
        ]
        .concat();
        if input.starts_with(b"GET / HTTP/1.1\r\n") {
            assert_eq!(
                resp_err(&response),
                kind,
                "{:?}",
                String::from_utf8_lossy(&response)
            );
        }
    }
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"),
        BadHeaderName
    );
}

#[test]
fn lenient_mode_drops_bad_names_but_not_folding() {
    let lenient = Limits {
        accept_unsafe: true,
        ..Limits::default()
    };
    let buf = b"GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\nBad Name: x\r\nX: y\r\n\r\n";
    match req_with(buf, &lenient).unwrap() {
        Parse::Complete(h) => {
            let names: Vec<_> = h.headers.iter().map(|s| header_name(buf, s)).collect();
            assert_eq!(names, vec![&b"Host"[..], b"X"]);
        }
        Parse::Partial => panic!("partial"),
    }
    let fold = b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n";
    assert_eq!(req_with(fold, &lenient).unwrap_err().kind, ObsFold);
    let bare_cr = b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n";
    assert!(req_with(bare_cr, &lenient).is_err());
    let nul = b"GET / HTTP/1.1\r\nHost: h\r\nX\0: a\r\n\r\n";
    assert!(req_with(nul, &lenient).is_err());
}

#[test]
fn size_limits() {
    let limits = Limits {
        max_head: 64,
        ..Limits::default()
    };
    // The request line alone does not fit: 414.
    let long_line = [b"GET /".as_slice(), &[b'a'; 100], b" HTTP/1.1\r\n\r\n"].concat();
    let e = req_with(&long_line, &limits).unwrap_err();
    assert_eq!((e.kind, e.status()), (UriTooLong, 414));
    // The line fits, the fields do not: 431.
    let long_fields = [
        b"GET / HTTP/1.1\r\nX: ".as_slice(),
        &[b'a'; 100],
        b"\r\n\r\n",
    ]
    .concat();
    let e = req_with(&long_fields, &limits).unwrap_err();
    assert_eq!((e.kind, e.status()), (HeaderTooLarge, 431));
    // Shorter than the limit but incomplete: wait.
    assert_eq!(
        req_with(&long_fields[..63], &limits).unwrap(),
        Parse::Partial
    );
    // A head of exactly max_head bytes is accepted, even with a body behind it.
    let exact = b"GET / HTTP/1.1\r\nHost: h\r\nX: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    assert_eq!(exact.len(), 64);
    let with_body = [exact.as_slice(), b"body"].concat();
    assert!(matches!(req_with(&with_body, &limits), Ok(Parse::Complete(h)) if h.head_len == 64));
    let mut one_more = exact.to_vec();
    one_more.insert(30, b'a');
    assert_eq!(
        req_with(&one_more, &limits).unwrap_err().kind,
        HeaderTooLarge
    );
    // Responses: 502.
    let long_resp = [
        b"HTTP/1.1 200 OK\r\nX: ".as_slice(),
        &[b'a'; 100],
        b"\r\n\r\n",
    ]
    .concat();
    let e = parse_response(&long_resp, &limits).unwrap_err();
    assert_eq!((e.kind, e.status()), (HeaderTooLarge, 502));
    // The default limit is tune.bufsize - tune.maxrewrite.
    assert_eq!(Limits::default().max_head, 15360);
    let big = [
        b"GET / HTTP/1.1\r\nHost: h\r\nX: ".as_slice(),
        &[b'a'; 15360],
        b"\r\n\r\n",
    ]
    .concat();
    assert_eq!(req_err(&big), HeaderTooLarge);
}

#[test]
fn header_count_limit_counts_the_start_line() {
    let head = |fields: usize| {
        let mut v = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
        for i in 1..fields {
            v.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        v.extend_from_slice(b"\r\n");
        v
    };
    assert_eq!(req_ok(&head(100)).headers.len(), 100);
    let e = req(&head(101)).unwrap_err();
    assert_eq!((e.kind, e.status()), (TooManyHeaders, 400));
    let small = Limits {
        max_headers: 2,
        ..Limits::default()
    };
    assert!(matches!(req_with(&head(1), &small), Ok(Parse::Complete(_))));
    assert_eq!(req_with(&head(2), &small).unwrap_err().kind, TooManyHeaders);
}

#[test]
fn responses() {
    let buf = b"HTTP/1.1 404 Not Found\r\nServer: x\r\nContent-Length: 0\r\n\r\n";
    let h = resp_ok(buf);
    assert_eq!(h.status, 404);
    assert_eq!(h.reason_bytes(buf), b"Not Found");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.headers.len(), 2);
    assert_eq!(h.head_len, buf.len());

    let buf = b"HTTP/1.0 200\r\n\r\n";
    let h = resp_ok(buf);
    assert_eq!((h.status, h.version), (200, Version::Http10));
    assert_eq!(h.reason_bytes(buf), b"");
    let buf = b"HTTP/1.1 200 \r\n\r\n";
    assert_eq!(resp_ok(buf).reason_bytes(buf), b"");
    let buf = b"\r\nHTTP/1.1 200 d\xe9j\xe0 vu\r\n\r\n";
    assert_eq!(resp_ok(buf).reason_bytes(buf), b"d\xe9j\xe0 vu");
    let buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
    let first = resp_ok(buf);
    assert_eq!(first.status, 100);
    assert_eq!(resp_ok(&buf[first.head_len..]).status, 200);

    assert_eq!(resp_err(b"HTTP/1.1 099 Low\r\n\r\n"), BadStatus);
    assert_eq!(resp_err(b"HTTP/1.1 20 OK\r\n\r\n"), BadStatus);
    assert_eq!(resp_err(b"HTTP/1.1 2000 OK\r\n\r\n"), BadStatus);
    assert_eq!(resp_err(b"HTTP/1.1 OK\r\n\r\n"), BadStatus);
    assert_eq!(resp_err(b"HTTP/1.1 200 O\x00K\r\n\r\n"), NulByte);
    assert_eq!(resp_err(b"HTTP/1.1 200 O\x01K\r\n\r\n"), ControlChar);
    assert_eq!(resp_err(b"ICY 200 OK\r\n\r\n"), BadVersion);
    assert_eq!(
        resp(b"HTTP/1.1 200 OK\r\nX: y\r\n").unwrap(),
        Parse::Partial
    );
}

#[test]
fn accessors_never_panic_on_a_foreign_buffer() {
    let buf = b"GET /long/path HTTP/1.1\r\nHost: example.com\r\n\r\n";
    let h = req_ok(buf);
    let other = b"GET";
    assert_eq!(h.target_bytes(other), b"");
    assert_eq!(header_value(other, &h.headers[0]), b"");
    assert_eq!(h.header_values(other, "host").count(), 0);
    assert_eq!(h.target_authority(other), None);
}

#[test]
fn empty_and_garbage_input() {
    assert_eq!(req(b"").unwrap(), Parse::Partial);
    assert_eq!(resp(b"").unwrap(), Parse::Partial);
    assert_eq!(req(b"\r\n\r\n").unwrap(), Parse::Partial);
    assert!(req(b"\x16\x03\x01\x02\x00").is_err());
    assert!(resp(b"\x16\x03\x01\x02\x00").is_err());
    let zero = Limits {
        max_head: 0,
        ..Limits::default()
    };
    assert_eq!(req_with(b"GET", &zero).unwrap_err().kind, UriTooLong);
    let no_fields = Limits {
        max_headers: 0,
        ..Limits::default()
    };
    assert_eq!(
        req_with(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", &no_fields)
            .unwrap_err()
            .kind,
        TooManyHeaders
    );
}
